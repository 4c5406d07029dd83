"""The assessment in words: the lines every surface prints, written once.

The CLI colours them, the TUI puts them in its status lines, the fleet list in its cells;
none of them words a verdict, a key count or an RTO judgement of its own, so the same
checkpoint reads the same everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statekit.support.presentation import human_bytes, human_duration

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment, LoadedVersion
    from statekit.recovery.estimate import RecoveryEstimate
    from statekit.recovery.rto import RtoJudgement

SUB_SECOND = 1.0
"""Estimates below this read as "under 1 s": the model's sub-second figures are within its
error of nothing, and a share of 0 ms reads as nonsense."""


def duration_words(seconds: float) -> str:
    """A restart time as a person reads it: "under 1 s" below a second."""
    return "under 1 s" if seconds < SUB_SECOND else human_duration(seconds)


def range_words(estimate: RecoveryEstimate) -> str:
    """``2.3 s (range 1.9 s – 3.1 s)``, or ``under 1 s`` when even the high end is."""
    if estimate.high_s < SUB_SECOND:
        return "under 1 s"
    return (f"{duration_words(estimate.estimate_s)} (range {duration_words(estimate.low_s)} – "
            f"{duration_words(estimate.high_s)})")


def rto_words(judgement: RtoJudgement) -> str:
    """``meets the RTO of 30.0 s`` / ``MISSES the RTO of 30.0 s (high end 41.2 s)``."""
    if judgement.meets:
        return f"meets the RTO of {human_duration(judgement.rto_s)}"
    return (f"MISSES the RTO of {human_duration(judgement.rto_s)} (high end of the range "
            f"{duration_words(judgement.high_s)})")


def loaded_words(loaded: LoadedVersion) -> str:
    """``loads version 37: 715 keys, 120 KB`` (or why the keys are unknown)."""
    if loaded.version is None:
        return "loads no state version"
    if loaded.keys is None:
        return f"loads version {loaded.version}: keys unknown ({loaded.why_unknown})"
    size = f", {human_bytes(loaded.bytes)} of keys and values" if loaded.bytes is not None \
        else ""
    return f"loads version {loaded.version}: {loaded.keys:,} keys{size}"


def estimate_words(assessment: Assessment) -> str:
    """The restart estimate in one phrase: it, "does not apply", or why there is none."""
    if not assessment.estimate_applies:
        return "does not apply (the checkpoint will not restart)"
    if assessment.estimate is None:
        return assessment.estimate_error or "not estimated"
    words = range_words(assessment.estimate)
    if assessment.rto is not None:
        words += f" — {rto_words(assessment.rto)}"
    return words


def restart_line(assessment: Assessment, *, with_estimate: bool = True) -> str:
    """``restart: restarts · loads version 37: 715 keys · estimate 2.3 s … · meets …``: the
    one line every command prints under what it printed."""
    parts = [f"restart: {assessment.verdict}"]
    if assessment.diagnosis.restarts:
        parts.append(loaded_words(assessment.loaded)
                     if "growth" in assessment.computed else
                     f"loads version {assessment.loaded.version}")
    if with_estimate and "estimate" in assessment.computed:
        parts.append(f"estimate {estimate_words(assessment)}")
    return " · ".join(parts)
