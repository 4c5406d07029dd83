"""One verdict per operator, whether it comes from the state files or the progress log.

``statekit growth`` reads two histories of the same operator: the replay of its retained
state files (exact keys, inserts and updates, how often keys come back, value sizes) and, when
given, the progress log (``numRowsTotal``, ``numRowsUpdated``, ``memoryUsedBytes`` for as many
batches as it kept). Two verdicts for one operator on one page would leave the reader to pick;
this module picks one and says why the other differs.

The state files' verdict stands — they see more of each batch — unless their history is too
short for a verdict or damaged; then the progress log's does. Where the two differ, the reason
names what one saw and the other could not: value sizes (the files hold them, the log's
memory per key is noisier), the batches each covers, comebacks (only the files count them),
or keys removed (the files see each version's deletes).

Pure Python; no Spark, no files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from statekit.growth.trend import INSUFFICIENT, severity

if TYPE_CHECKING:
    from statekit.growth.analysis import ProgressGrowth, StoreGrowth

STATE_FILES = "state files"
PROGRESS_LOG = "progress log"


@dataclass(frozen=True)
class SourceAgreement:
    """An operator seen by both sources: the verdict it gets and why the other differs."""

    operator_id: int
    label: str
    """The progress log's name for it (``index:name``)."""
    files_verdict: str
    progress_verdict: str
    verdict: str
    """The operator's one verdict."""
    source: str
    """Whose verdict it is: ``state files`` or ``progress log``."""
    agree: bool
    why: str | None
    """Why the two differ (``None`` when they agree)."""

    @property
    def sentence(self) -> str:
        if self.agree:
            return f"The state files and the progress log agree: {self.verdict}."
        whose = "state files'" if self.source == STATE_FILES else "progress log's"
        return (f"The state files say {self.files_verdict}, the progress log "
                f"{self.progress_verdict}; the {whose} verdict stands: {self.why}.")


def match(stores: Sequence[StoreGrowth], progress: Sequence[ProgressGrowth]
          ) -> dict[int, int]:
    """Progress-log operator (position in ``progress``) → operator id. By name when a name is
    on one operator on each side; otherwise by order (Spark lists ``stateOperators`` in plan
    order, which numbers operators the same way), when both sides have as many."""
    ids = sorted({s.operator_id for s in stores})
    names: dict[str, set[int]] = {}
    for s in stores:
        if s.operator_name:
            names.setdefault(s.operator_name, set()).add(s.operator_id)
    counted: dict[str, int] = {}
    for p in progress:
        counted[_name(p)] = counted.get(_name(p), 0) + 1
    out = {}
    for i, p in enumerate(progress):
        owners = names.get(_name(p), set())
        if len(owners) == 1 and counted[_name(p)] == 1:
            out[i] = next(iter(owners))
        elif len(ids) == len(progress):
            out[i] = ids[i]
    return out


def _name(p: ProgressGrowth) -> str:
    return p.label.split(":", 1)[-1]


def reconcile(stores: Sequence[StoreGrowth], progress: Sequence[ProgressGrowth]
              ) -> tuple[SourceAgreement, ...]:
    """Every operator both sources cover, with its one verdict."""
    out = []
    for i, operator in match(stores, progress).items():
        own = [s for s in stores if s.operator_id == operator]
        p = progress[i]
        files = max((s.verdict for s in own), key=severity)
        files_usable = files != INSUFFICIENT and not any(s.history.damaged for s in own)
        source = STATE_FILES if files_usable or p.verdict == INSUFFICIENT else PROGRESS_LOG
        verdict = files if source == STATE_FILES else p.verdict
        agree = files == p.verdict
        out.append(SourceAgreement(operator, p.label, files, p.verdict, verdict, source, agree,
                                   None if agree else _why(own, p)))
    return tuple(out)


def _why(stores: Sequence[StoreGrowth], p: ProgressGrowth) -> str:
    """What one source saw that the other did not."""
    reasons = []
    values = [s for s in stores if s.value_verdict is not None
              and s.verdict != s.key_verdict]
    if values:
        s = values[0]
        logged = "does not rise" if p.memory_per_key is None or not p.memory_per_key.is_growth \
            else "rises"
        reasons.append(f"the state files' value sizes grow ({s.value_verdict}) while their "
                       f"keys are {s.key_verdict}; the progress log's memory per key {logged}")
    keys = {s.key_verdict for s in stores}
    if p.verdict not in keys and not values:
        reasons.append(f"the keys: {', '.join(sorted(keys))} in the state files, "
                       f"{p.verdict} in the progress log")
    spans = [(s.history.versions[0].version, s.history.versions[-1].version)
             for s in stores if s.history.versions]
    if spans and p.keys.first_x is not None:
        first = min(a for a, _ in spans)
        last = max(b for _, b in spans)
        # version v is written by batch v − 1
        if (p.keys.first_x, p.keys.last_x) != (first - 1, last - 1):
            reasons.append(f"the progress log covers batches {p.keys.first_x}–{p.keys.last_x}, "
                           f"the state files versions {first}–{last} (batches {first - 1}–"
                           f"{last - 1})")
    if p.verdict not in keys and any(s.saturation is not None and s.saturation.touch_f
                                     is not None for s in stores):
        reasons.append("only the state files count how often keys come back")
    return "; ".join(reasons) or "their histories differ"
