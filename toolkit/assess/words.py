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
    """``2.3 s (range 1.9 s – 3.1 s)``; when even the high end is under a second, "about a
    second or less" with how much a cold first batch varies (measured on the query's own
    restarts where its progress log gave them): below that, a figure would be precise about
    noise."""
    if estimate.high_s < SUB_SECOND:
        noise = estimate.cold_noise_s
        return f"about a second or less (a cold first batch varies by ±{human_duration(noise)})"
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


def learning_lines(estimate: RecoveryEstimate) -> list[str]:
    """What the estimate learned from the query's own restarts, or how to calibrate it:
    the first line says which, the others list each restart beside the uncalibrated model."""
    from statekit.recovery.history import HOW_TO_CALIBRATE

    learning = estimate.learning
    speed = estimate.model.machine.describe() if estimate.model.machine else \
        f"model {estimate.model.source}"
    if learning is None:
        return [f"uncalibrated ({speed}): {HOW_TO_CALIBRATE}"]
    lines = []
    if learning.scale is None:
        lines.append(f"uncalibrated: {learning.why_uncalibrated}")
    else:
        cold = (f"; a cold first batch there costs {human_duration(learning.cold_start_s)} "
                "without state (the query's first start), so the restart's first batch "
                f"runs about {human_duration(learning.first_batch_s(estimate.restart_s))} "
                "over a steady batch") if learning.cold_start_s is not None else ""
        scale = (f"the model × {learning.scale:.2f}" if learning.scale_fitted else
                 "the model (its scale kept: their states differ too little to fit one)")
        lines.append(f"learned from {len(learning.used)} restart(s) of this query in its "
                     f"progress log: {scale} {'+' if learning.fixed_s >= 0 else '−'} "
                     f"{human_duration(abs(learning.fixed_s))} a restart costs there beyond "
                     f"it{cold}")
    for used in learning.used:
        restart = used.restart
        state = restart.cost_s - (learning.cold_start_s or 0.0)
        rows = f", {restart.state_rows:,} rows" if restart.state_rows is not None else ""
        lines.append(f"  batch {restart.batch}{rows}: first batch {human_duration(restart.first_s)}"
                     f" over a steady {human_duration(restart.steady_s)}, the state's part "
                     f"{human_duration(state)}; uncalibrated, the model said "
                     f"{human_duration(used.modelled_s)} ({learning.error(used):+.0%}; "
                     f"from {used.basis}; weight {used.weight:.2f})")
    for check in learning.partitions:
        named = "the same" if check.model_slowest == check.partition else \
            f"partition {check.model_slowest}"
        lines.append(f"  batch {check.batch}, stateful stage {check.stage_order}: Spark's "
                     f"event log: partition {check.partition}'s task ran "
                     f"{human_duration(check.measured_s)} over its steady tasks, the slowest; "
                     f"the model said {human_duration(check.modelled_s)} for it and named "
                     f"{named} slowest")
    if learning.slowest_today is not None and learning.partitions:
        order, partition, _ = learning.slowest_today
        lines.append(f"  slowest partition today: stateful stage {order} partition "
                     f"{partition}, about {human_duration(learning.slowest_today_s or 0.0)} "
                     f"(the model × {learning.partition_scale or 0.0:.2f}, what the event log "
                     "measured of the slowest partitions)")
    for batch, why in learning.skipped:
        lines.append(f"  run from batch {batch} not used: {why}")
    lines += [f"  {note}" for note in learning.notes]
    return lines
