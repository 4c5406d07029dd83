"""Robust trend verdicts for state-size series: bounded, growing, accelerating, or too short.

State sizes are noisy (bursty traffic, watermark sawtooth, a warm-up from an empty store), so a
least-squares slope would call a single burst "growth" and miss a slow leak under noise. This
module uses the two standard robust tools of hydrology and monitoring instead:

* the **Theil–Sen slope** — the median of all pairwise slopes: one outlier or burst moves it
  very little;
* the **Mann–Kendall test** — a rank test for a monotonic trend, with the tie-corrected
  variance and the normal approximation (one-sided, "increasing").

Every fresh stateful query *warms up* (its key count grows from zero to a steady level), so the
verdict looks at the recent half of the history: a pipeline that levelled off is ``bounded``
even though its whole history rises. A series is ``growing`` when that recent window rises
significantly (p ≤ ``alpha``) *and* the whole history rises significantly too (p ≤
``alpha_whole``; one upswing of noise, 5 % likely in any window, is not enough: on white noise
the false-alarm rate is below 1 %), and ``accelerating`` when, in addition, the newest third of
the history rises at least twice as fast as the oldest third. A rise is not discounted for
being small beside the series' level: a thousand new keys a batch on top of a hundred thousand
is a leak (what explains a rise — turnover, a finite population — is
:mod:`statekit.growth.analysis`'s to judge). Value sizes, whose every rise is not a problem,
pass ``min_relative`` to ask for a material one. Pure numpy; no Spark.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

BOUNDED = "bounded"
SATURATING = "saturating"
"""Not decided here: :mod:`statekit.growth.analysis` turns a ``growing`` key count into it when the
discovery curve (:mod:`statekit.growth.saturation`) shows a finite population levelling off."""
GROWING = "growing"
ACCELERATING = "accelerating"
INSUFFICIENT = "insufficient-history"
VERDICTS = (INSUFFICIENT, BOUNDED, SATURATING, GROWING, ACCELERATING)
"""In increasing order of severity."""

MIN_POINTS = 6
"""Fewer points than this cannot show a trend (the Mann–Kendall test needs them)."""
MAX_POINTS = 1500
"""Longer series are thinned evenly before the O(n²) pairwise statistics."""
ACCELERATION_RATIO = 2.0

_MS_PER_HOUR = 3_600_000


def severity(verdict: str) -> int:
    return VERDICTS.index(verdict)


def theil_sen(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Median of the slopes between every pair of points with distinct x."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    i, j = np.triu_indices(len(xs), k=1)
    dx = xs[j] - xs[i]
    ok = dx != 0
    if not ok.any():
        return 0.0
    return float(np.median((ys[j] - ys[i])[ok] / dx[ok]))


def mann_kendall(y: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """``(S, p)``: the Mann–Kendall statistic and the one-sided p-value of "increasing"."""
    ys = np.asarray(y, dtype=float)
    n = len(ys)
    if n < 3:
        return 0.0, 1.0
    i, j = np.triu_indices(n, k=1)
    s = float(np.sign(ys[j] - ys[i]).sum())
    _, ties = np.unique(ys, return_counts=True)
    variance = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18
    if variance <= 0 or s <= 0:
        return s, 1.0
    z = (s - 1) / math.sqrt(variance)
    return s, 0.5 * math.erfc(z / math.sqrt(2))


@dataclass(frozen=True)
class Trend:
    """The verdict on one series and the numbers behind it."""

    verdict: str
    points: int
    first_x: int | None
    last_x: int | None
    window_first_x: int | None
    """First x of the recent window the verdict is based on."""
    last_value: float | None
    slope: float | None
    """Units per x step (per batch / version) over the recent window (Theil–Sen)."""
    slope_per_hour: float | None
    """Units per hour of batch time over the recent window (when timestamps are known)."""
    p_value: float | None
    """Mann–Kendall one-sided p-value of an increase over the recent window."""
    relative_growth: float | None
    """Rise over the recent window as a share of its median level."""
    early_slope: float | None
    late_slope: float | None
    reason: str

    @property
    def is_growth(self) -> bool:
        return self.verdict in (GROWING, ACCELERATING)

    def time_to(self, limit: float) -> tuple[float | None, float | None] | None:
        """``(batches, hours)`` until the series reaches ``limit`` at the current rate;
        ``None`` when it is not growing; ``(0, 0)`` when already there."""
        if not self.is_growth or self.slope is None or self.last_value is None:
            return None
        if self.last_value >= limit:
            return 0.0, 0.0
        gap = limit - self.last_value
        batches = gap / self.slope if self.slope > 0 else None
        hours = gap / self.slope_per_hour if self.slope_per_hour and self.slope_per_hour > 0 \
            else None
        return batches, hours

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _thin(x: np.ndarray, y: np.ndarray, t: np.ndarray | None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    if len(x) <= MAX_POINTS:
        return x, y, t
    keep = np.unique(np.linspace(0, len(x) - 1, MAX_POINTS).round().astype(int))
    return x[keep], y[keep], None if t is None else t[keep]


def classify(x: Sequence[int], y: Sequence[float], timestamps_ms: Sequence[int | None] | None
             = None, *, alpha: float = 0.05, alpha_whole: float = 0.01, min_relative: float = 0.0,
             min_points: int = MIN_POINTS) -> Trend:
    """Classify the series ``y`` over ``x`` (versions or batch ids, increasing).

    ``timestamps_ms`` (batch times, same length; ``None`` entries allowed) turn the slope into a
    rate per hour.
    """
    if len(x) != len(y) or (timestamps_ms is not None and len(timestamps_ms) != len(x)):
        raise ValueError("x, y and timestamps must have the same length")
    n = len(x)
    first_x, last_x = (int(x[0]), int(x[-1])) if n else (None, None)
    last_value = float(y[-1]) if n else None
    if n < min_points:
        return Trend(INSUFFICIENT, n, first_x, last_x, None, last_value, None, None, None, None,
                     None, None, f"{n} point(s); at least {min_points} are needed for a trend")
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ts = None
    if timestamps_ms is not None:  # hours; NaN where a batch's time is unknown
        ts = np.asarray([np.nan if t is None else t for t in timestamps_ms],
                        dtype=float) / _MS_PER_HOUR
    xs, ys, ts = _thin(xs, ys, ts)
    n_used = len(xs)
    start = n_used - max(min_points, math.ceil(n_used / 2))
    rx, ry = xs[start:], ys[start:]
    slope = theil_sen(rx, ry)
    _, p_value = mann_kendall(ry)
    level = max(float(np.median(ry)), 1.0)
    relative = slope * float(rx[-1] - rx[0]) / level
    per_hour = None
    if ts is not None:
        known = ~np.isnan(ts[start:])
        if known.sum() >= 3 and np.ptp(ts[start:][known]) > 0:
            per_hour = theil_sen(ts[start:][known], ry[known])
    third = max(3, n_used // 3)
    early = theil_sen(xs[:third], ys[:third])
    late = theil_sen(xs[-third:], ys[-third:])
    window_first_x = int(rx[0])

    def trend(verdict: str, reason: str) -> Trend:
        return Trend(verdict, points=n, first_x=first_x, last_x=last_x,
                     window_first_x=window_first_x, last_value=last_value, slope=slope,
                     slope_per_hour=per_hour, p_value=p_value, relative_growth=relative,
                     early_slope=early, late_slope=late, reason=reason)

    window = f"the last {len(rx)} points"
    if float(ys.max()) <= 0:
        return trend(BOUNDED, reason="empty throughout")
    if slope <= 0 or p_value > alpha:
        return trend(BOUNDED, reason=f"no significant rise over {window} "
                     f"(Mann–Kendall p={p_value:.2g}, slope {slope:+.3g}/step)")
    _, p_whole = mann_kendall(ys)
    if p_whole > alpha_whole:
        return trend(BOUNDED, reason=f"the last {len(rx)} points rise (p={p_value:.2g}) but "
                     f"the whole history does not (p={p_whole:.2g}): a swing, not a trend")
    if min_relative and relative < min_relative:
        return trend(BOUNDED, reason=f"rises only {relative:+.1%} over {window}, below the "
                     f"{min_relative:.0%} that counts as growth")
    if n_used >= 9 and late > 0 and late >= ACCELERATION_RATIO * max(early, 0.0):
        return trend(ACCELERATING, reason=f"rises {relative:+.1%} over {window} "
                     f"(p={p_value:.2g}); the newest third rises {late:.3g}/step, the oldest "
                     f"{early:.3g}/step")
    return trend(GROWING, reason=f"rises {relative:+.1%} over {window} (Mann–Kendall "
                 f"p={p_value:.2g}), {slope:+.3g}/step")
