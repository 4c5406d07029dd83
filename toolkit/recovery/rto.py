"""Does a restart meet the recovery-time objective? One rule, asked by every surface.

An estimate is a range, and an RTO is a promise: a restart meets it only when even the high
end of the range (re-run batches included) is within it. Judging by the middle would print
*meets* for a restart that misses the RTO as often as not; judging by the low end, worse.
The CLI's headline, the what-if table's recommendation, the TUI, the fleet list and the
metrics all ask :func:`within_rto` — so no two of them can disagree on the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


def within_rto(high_s: float, rto_s: float) -> bool:
    """The rule: the high end of the estimate's range (re-runs included) is within the RTO."""
    return high_s <= rto_s


@dataclass(frozen=True)
class RtoJudgement:
    """A restart estimate held against an RTO."""

    rto_s: float
    high_s: float
    """The high end of the estimate's range, re-run batches included: what is judged."""
    meets: bool

    @property
    def word(self) -> str:
        """``meets`` or ``misses``."""
        return "meets" if self.meets else "misses"

    def to_dict(self) -> dict[str, object]:
        return {"rto_s": self.rto_s, "high_s": self.high_s, "meets": self.meets,
                "rule": "the high end of the estimate's range is within the RTO"}


def judge_rto(high_s: float | None, rto_s: float | None) -> RtoJudgement | None:
    """The judgement of an estimate whose range ends at ``high_s`` (``None`` when there is no
    RTO or no estimate: a checkpoint that will not restart meets no RTO, and says so by its
    verdict, not by a number)."""
    if rto_s is None or high_s is None:
        return None
    return RtoJudgement(rto_s, high_s, within_rto(high_s, rto_s))
