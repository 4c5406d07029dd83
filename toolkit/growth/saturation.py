"""Will a growing state stop, and where? Finite populations told apart from leaks.

A stream keyed by user over a finite customer base grows for weeks and then levels off; a leak
never does. Both raise the key count, so the trend alone (:mod:`statekit.growth.trend`) calls both
"growing". What tells them apart is *who* the new keys are. Every version's change file says
how many distinct keys the batch touched (``T``) and how many of them were not live before
(``I``, inserts; the rest were updates of live keys). For a closed population of ``N`` keys
drawn uniformly, a batch is a capture–recapture sample: the share of new keys among those it
touches is the share of the population not yet seen, ``I/T = 1 − K/N`` with ``K`` the live
keys before it (Lincoln–Petersen, once per version). Real traffic is skewed: popular keys
come back more often than rare ones, so the share of new keys falls faster than the unseen
share. The closed model is a Zipf population (exponent ``s``, ``s = 0`` uniform): after ``E``
draws the keys seen are ``K(E) = Σ (1 − e^(−E·pᵢ))``, ``pᵢ ∝ i^(−s)``; a batch's draws ``m``
solve ``K(m) = T``, the draws before it ``E`` solve ``K(E) = K``, and its new keys are
``K(E + m) − K(E)`` — so neither the traffic before the retained history nor the batch
sizes need to be known. ``N`` and ``s`` are fitted by weighted least squares (weights: the
touches, the binomial precision of each share) on a grid, then refined (golden section).

A leak adds keys that were never part of any finite population: a share ``λ`` of every batch's
touches is new whatever ``K`` is. The open model,

    I/T = λ + (1 − λ)(1 − K/N) ** γ     (γ ≥ 1: skew, as gamma-distributed catchabilities),

is fitted beside it (an open population — new users every batch, old ones returning — is
that curve with ``N`` far beyond anything seen). The decision:

* **leak, by comebacks** — where the replay counted how many versions wrote each key, a
  closed population plus a leak explains the discovery counts and those touch counts
  significantly better than the closed population alone (:mod:`statekit.growth.recapture`): the
  leaked keys are seen once and never again, which the discovery curve alone cannot tell
  from a larger population;
* **leak** — the open model explains the shares significantly better (F against the closed
  fits and the binomial noise) with a material ``λ``: the new keys per batch that will never
  stop (the verdict stays ``growing``);
* **undecided** — too few versions, a new-key share that does not fall, traffic that grows
  with the keys seen (returning users in proportion to the user base make the share fall
  like a finite population's), or a plateau range reaching beyond ``MAX_PLATEAU_RATIO`` × the
  keys seen: the history cannot separate the two (the caller keeps ``growing``);
* **saturating** — otherwise: projected plateau with its range, fraction seen, batches until
  95 % of it.

Pure numpy; no Spark, no files.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from statekit.growth.population import (
    SKEWS,
    DiscoveryPoint,
    accumulation,
    batches_until,
    draws_for,
    golden,
    predicted_share,
)
from statekit.growth.recapture import LeakTest, leak_test

SATURATING = "saturating"
LEAK = "leak"
UNDECIDED = "undecided"

MIN_POINTS = 5
"""Versions with known churn below which the discovery curve is not fitted."""
MAX_POINTS = 120
"""Longer histories are merged into this many runs of consecutive versions."""
MIN_SHARE_DROP = 0.05
"""The new-key share must fall by this much (absolute) across the history — or by
``MIN_SHARE_FALL`` of itself: a flat share is no evidence of a limit."""
MIN_SHARE_FALL = 0.5
"""…or to at most this share of where it started: a population nearly all seen brings few new
keys (1 % of a batch's, then 0.4 %), a fall no absolute threshold sees."""
MIN_FRACTION_SEEN = 0.25
"""The share of the best fit's population that must be seen before it counts as one: below
it a larger population, or a leak behind a smaller one, fit the curve as well (the
benchmark's plateaus are within ±15 % from 30 % seen on). The yardstick of "how much more
history would settle it"."""
MAX_PLATEAU_RATIO = 50.0
"""A plateau range reaching beyond this many times the keys seen is no plateau (undecided)."""
LEAK_MIN_SHARE = 0.001
"""A fitted leak share below this is negligible (0.1 % of a batch's keys): a leak is a leak at
any size, but below this the shares' own noise can fit one."""
MAX_TRAFFIC_GROWTH = 1.5
"""The draws a batch needs to touch the keys it touches (under the fitted population) may
grow this much from the first quarter of the history to the last: traffic that grows with the
keys seen is what an open population whose users come back looks like (new users at a steady
rate, each returning): its share of new keys falls too, and a finite population fits it."""
TOUCH_LEAK_F = 10.0
"""How much better (F statistic, :mod:`statekit.growth.recapture`) a closed population plus a leak
must explain the discovery counts and the touch counts together to call a leak."""
TOUCH_LEAK_MIN_SHARE = 0.002
"""A leak the touch counts find below this share of a batch's keys is negligible."""
LEAK_F = 10.0
"""How much better (F statistic, one extra parameter) the open model must fit to call a
leak: the shares are precise (binomial over many keys), so model error, not noise, sets it."""
RANGE_F = 4.0
"""The plateau range: every N whose best fit (at its best skew) is within this F of the best."""
FIT_VERSION = 4
"""Bumped whenever the fits change: the decode cache keeps fits by their inputs alone."""
PLATEAU_REACHED = 0.95
"""The projected plateau counts as reached at this fraction of it."""

GAMMAS = np.array([1.0, 1.15, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0])
LAMBDAS = np.array([0.0, 0.001, 0.002, 0.003, 0.005, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.2,
                    0.3, 0.45, 0.6, 0.8])
_N_STEPS = 500
_N_BELOW, _N_SPAN = 0.02, 1e4
"""The N grid: from this share of the keys seen to this many times them (log-spaced)."""


@dataclass(frozen=True)
class Saturation:
    """The discovery-curve analysis of one store (or a total)."""

    outcome: str
    """``saturating``, ``leak`` or ``undecided``."""
    reason: str
    points: int
    keys: int
    """Live keys at the last version."""
    plateau: float | None = None
    plateau_low: float | None = None
    plateau_high: float | None = None
    fraction_seen: float | None = None
    skew: float | None = None
    """The Zipf exponent of the population's popularity (0: uniform draws)."""
    events_per_batch: float | None = None
    """Draws per batch (Poisson effort) that explain the keys a batch touches."""
    leak_share: float | None = None
    leak_keys_per_batch: float | None = None
    touched_per_batch: float | None = None
    """Distinct keys a recent batch touches (median): the pace of discovery."""
    batches_to_plateau: float | None = None
    """Batches until ``PLATEAU_REACHED`` of the plateau at the recent draws per batch."""
    first_share: float | None = None
    last_share: float | None = None
    method: str = "discovery curve"
    """What decided: ``discovery curve`` or ``touch counts`` (a leak found by how often keys
    come back)."""
    seen_once: int | None = None
    """Keys first seen inside the history and written in exactly one version."""
    seen_once_closed: float | None = None
    """What the best closed population predicts for them."""
    touch_f: float | None = None
    """How much a leak improves the fit to discovery and touch counts (F); ``None``: the
    touch counts were not tested."""
    touch_note: str | None = None
    """Why the touch counts were not tested, when they were not."""
    chao1_keys: float | None = None
    """Chao's lower bound on the population from the touch counts."""
    population: float | None = None
    """A leak's finite part: the population the rest of the new keys come from (fitted beside
    the leak); ``None`` when the fit put none beside it."""
    more_batches: float | None = None
    """Undecided because too little of the population is seen yet: the batches after which
    the best fit's population would be ``settle_at`` seen, at the recent pace."""
    settle_at: float | None = None
    """The share seen that would settle it (``Thresholds.min_fraction_seen``)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Fit:
    """The open (leak) model, and at ``λ = 0`` the closed gamma model the leak's F test also
    weighs: weighted least squares of ``share ≈ λ + (1 − λ)(1 − x/N)^γ``: a coarse grid over
    (γ, log N), then golden-section refinement of γ (with N re-fitted inside) around the
    best grid cell — a grid alone leaves an error that a model with one more parameter
    would 'explain'."""

    def __init__(self, x: np.ndarray, share: np.ndarray, weight: np.ndarray, top: float
                 ) -> None:
        self.x, self.share, self.weight, self.top = x, share, weight, top
        # a closed population holds every key seen (N > top); a leak's finite part may be
        # far smaller than the keys seen (the leaked keys are not part of it)
        self.n_grid = top * np.exp(np.linspace(math.log(_N_BELOW), math.log(_N_SPAN),
                                               _N_STEPS))
        self.closed_from = top * 1.0005
        remaining = np.clip(1.0 - x[None, :] / self.n_grid[:, None], 0.0, 1.0)
        self.curves = remaining[None, :, :] ** GAMMAS[:, None, None]       # (γ, N, points)

    def sse(self, lam: float, gamma: float, n: float) -> float:
        pred = lam + (1 - lam) * np.clip(1.0 - self.x / n, 0.0, 1.0) ** gamma
        return float(((pred - self.share) ** 2 * self.weight).sum())

    def _allowed(self, lam: float, table: np.ndarray) -> np.ndarray:
        if lam == 0.0:
            table[..., self.n_grid < self.closed_from] = np.inf
        return table

    def grid(self, lam: float) -> np.ndarray:
        """SSE over (γ, N)."""
        return self._allowed(lam, (((lam + (1 - lam) * self.curves) - self.share) ** 2
                                   * self.weight).sum(axis=-1))

    def _best_n(self, lam: float, gamma: float, near: int) -> tuple[float, float]:
        lo = math.log(self.n_grid[max(0, near - 2)])
        hi = math.log(self.n_grid[min(len(self.n_grid) - 1, near + 2)])
        if lam == 0.0:
            lo = max(lo, math.log(self.closed_from))
        value, log_n = golden(lambda v: self.sse(lam, gamma, math.exp(v)), lo, hi)
        return value, math.exp(log_n)

    def best(self, lam: float) -> tuple[float, float, float]:
        """(SSE, γ, N) of the best fit at leak share ``lam``."""
        table = self.grid(lam)
        gi, ni = np.unravel_index(int(np.argmin(table)), table.shape)
        g_lo, g_hi = GAMMAS[max(0, gi - 1)], GAMMAS[min(len(GAMMAS) - 1, gi + 1)]

        def at(gamma: float) -> float:
            near = int(np.argmin(self.grid_row(lam, gamma)))
            return self._best_n(lam, gamma, near)[0]

        _, gamma = golden(at, float(g_lo), float(g_hi), rounds=25)
        near = int(np.argmin(self.grid_row(lam, gamma)))
        value, n = self._best_n(lam, gamma, near)
        grid_value = float(table[gi, ni])
        if grid_value < value:  # refinement can only help; keep the grid point if not
            return grid_value, float(GAMMAS[gi]), float(self.n_grid[ni])
        return value, gamma, n

    def grid_row(self, lam: float, gamma: float) -> np.ndarray:
        remaining = np.clip(1.0 - self.x[None, :] / self.n_grid[:, None], 0.0, 1.0)
        pred = lam + (1 - lam) * remaining ** gamma
        return self._allowed(lam, ((pred - self.share) ** 2 * self.weight).sum(axis=-1))


class _Closed:
    """Weighted least squares of the shares on a closed Zipf population (N, skew): a grid,
    then golden-section refinement of N and the skew; the plateau's range by bisection on
    the profile (the best skew at each N)."""

    def __init__(self, x: np.ndarray, share: np.ndarray, weight: np.ndarray,
                 touched: np.ndarray, top: float) -> None:
        self.x, self.share, self.weight, self.touched = x, share, weight, touched
        self.low_n, self.high_n = top * 1.0005, top * _N_SPAN

    def sse(self, n: float, skew: float) -> float:
        pred = predicted_share(accumulation(n, skew), self.x, self.touched)
        return float(((pred - self.share) ** 2 * self.weight).sum())

    def _n_for(self, skew: float, lo: float, hi: float) -> tuple[float, float]:
        value, log_n = golden(lambda v: self.sse(math.exp(v), skew), math.log(lo),
                               math.log(hi), rounds=22)
        return value, math.exp(log_n)

    def best(self) -> tuple[float, float, float]:
        """(SSE, N, skew)."""
        grid = np.geomspace(self.low_n, self.high_n, 40)
        table = np.array([[self.sse(n, sk) for n in grid] for sk in SKEWS])
        si, ni = np.unravel_index(int(np.argmin(table)), table.shape)
        lo, hi = grid[max(0, ni - 2)], grid[min(len(grid) - 1, ni + 2)]
        s_lo, s_hi = float(SKEWS[max(0, si - 1)]), float(SKEWS[min(len(SKEWS) - 1, si + 1)])
        _, skew = golden(lambda sk: self._n_for(sk, lo, hi)[0], s_lo, s_hi, rounds=14)
        value, n = self._n_for(skew, lo, hi)
        if float(table[si, ni]) < value:
            return float(table[si, ni]), float(grid[ni]), float(SKEWS[si])
        return value, n, skew

    def profile(self, n: float, skew: float) -> float:
        """The best fit at ``N`` = ``n``, the skew searched near ``skew``."""
        lo, hi = max(0.0, skew - 0.35), min(float(SKEWS[-1]) + 0.25, skew + 0.35)
        return golden(lambda sk: self.sse(n, sk), lo, hi, rounds=10)[0]

    def range(self, limit: float, best: float, skew: float) -> tuple[float, float]:
        """The N (at their best skew) that fit within ``limit``, around ``best``."""
        ends = []
        for factor in (1 / 1.5, 1.5):
            inside, n = best, best
            while True:
                n = min(max(n * factor, self.low_n), self.high_n)
                if self.profile(n, skew) > limit:
                    break
                inside = n
                if n in (self.low_n, self.high_n):
                    break
            if inside != n:  # bisect (in log N) between the last inside and the first out
                a, b = math.log(inside), math.log(n)
                for _ in range(10):
                    mid = (a + b) / 2
                    a, b = (mid, b) if self.profile(math.exp(mid), skew) <= limit else (a, mid)
                inside = math.exp(a)
            ends.append(inside)
        return min(ends[0], best), max(ends[1], best)


def _merge(points: list[DiscoveryPoint], limit: int) -> list[DiscoveryPoint]:
    """At most ``limit`` points: runs of consecutive versions merged (their inserts and
    updates summed, the keys before the run's middle version kept) — the share of a run is
    still the share of new keys among those it touched."""
    if len(points) <= limit:
        return points
    size = -(-len(points) // limit)
    return [DiscoveryPoint(run[0].version, run[len(run) // 2].live_before,
                           sum(p.inserted for p in run), sum(p.updated for p in run))
            for run in (points[i:i + size] for i in range(0, len(points), size))]


@dataclass(frozen=True)
class Thresholds:
    """The decision's thresholds (fitted on half of ``benchmarks/bench_growth_verdicts.py``'s
    workloads; the defaults are that fit)."""

    leak_f: float = LEAK_F
    leak_min_share: float = LEAK_MIN_SHARE
    min_share_drop: float = MIN_SHARE_DROP
    max_plateau_ratio: float = MAX_PLATEAU_RATIO
    max_traffic_growth: float = MAX_TRAFFIC_GROWTH
    touch_leak_f: float = TOUCH_LEAK_F
    touch_leak_min_share: float = TOUCH_LEAK_MIN_SHARE
    min_fraction_seen: float = MIN_FRACTION_SEEN


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class DiscoveryFit:
    """Both models fitted to one history: what the decision needs, nothing re-fitted."""

    points: int
    keys: int
    top: float
    first_share: float
    last_share: float
    plateau: float
    plateau_low: float
    plateau_high: float
    skew: float
    grid_edge: float
    f_leak: float
    leak_share: float
    touched_per_batch: float
    events_per_batch: float
    traffic_growth: float
    """Median draws per batch over the last quarter ÷ over the first quarter."""
    leak_population: float = 0.0
    """The open model's ``N`` at its best leak share (the finite part beside a leak)."""
    touches: LeakTest | str | None = None
    """The touch-count test (:mod:`statekit.growth.recapture`); a string: why it could not run;
    ``None``: no touch counts."""


@functools.lru_cache(maxsize=256)
def fit_discovery(points: tuple[DiscoveryPoint, ...], keys: int,
                  touch_counts: tuple[int, ...] | None = None) -> DiscoveryFit | str:
    """Fit the closed (Zipf) and open (leak) models to ``points``, and with ``touch_counts``
    (:attr:`statekit.state.history.StoreHistory.touch_counts`) test for a leak by how often
    keys come back. A string: why there is no fit. Cached: deciding again under other
    thresholds (the benchmark's fit) costs nothing, and the fit of a history seen before is
    read from the decode cache (:func:`statekit.state.decode_cache.computed_once`): once
    the replay is cached, the fits are what a second run would spend its time on."""
    from statekit.state.decode_cache import computed_once

    inputs = [[[p.version, p.live_before, p.inserted, p.updated] for p in points], keys,
              list(touch_counts) if touch_counts is not None else None]
    return computed_once(f"growth-fit-{FIT_VERSION}", inputs,
                         lambda: _fit_discovery(points, keys, touch_counts),
                         dump=_fit_to_json, load=_fit_from_json)


def _fit_to_json(fit: DiscoveryFit | str) -> Any:
    return {"why": fit} if isinstance(fit, str) else {"fit": asdict(fit)}


def _fit_from_json(data: Any) -> DiscoveryFit | str:
    if "why" in data:
        return str(data["why"])
    fields = dict(data["fit"])
    touches = fields.get("touches")
    if isinstance(touches, dict):
        fields["touches"] = LeakTest(**touches)
    return DiscoveryFit(**fields)


def _fit_discovery(points: tuple[DiscoveryPoint, ...], keys: int,
                   touch_counts: tuple[int, ...] | None = None) -> DiscoveryFit | str:
    usable = _merge([p for p in points if p.touched > 0], MAX_POINTS)
    if len(usable) < MIN_POINTS:
        return f"only {len(usable)} versions with inserts and updates (need {MIN_POINTS})"
    x = np.array([p.live_before for p in usable], dtype=float)
    share = np.array([p.new_share for p in usable])
    touched = np.array([p.touched for p in usable], dtype=float)
    weight = touched / touched.mean()
    quarter = max(2, len(share) // 4)
    first, last = float(share[:quarter].mean()), float(share[-quarter:].mean())
    top = max(float(x.max()), float(keys), 1.0)
    closed = _Closed(x, share, weight, touched, top)
    sse_closed, plateau, skew = closed.best()
    fit = _Fit(x, share, weight, top)
    sse_closed_gamma = fit.best(0.0)[0]
    (sse_open, _, leak_population), leak_share = _best_leak(fit)
    # the shares' own noise (binomial, weighted as the fit weighs them): a better fit than
    # that is no evidence
    noise = float((share * (1 - share) / touched * weight).sum())
    dof = max(1, len(usable) - 3)
    f_leak = (min(sse_closed, sse_closed_gamma) - sse_open) / max(sse_open, noise, 1e-15) * dof
    limit = sse_closed + RANGE_F * 2 / max(1, len(usable) - 2) * max(sse_closed, noise)
    low, high = closed.range(limit, plateau, skew)
    draws = draws_for(accumulation(plateau, skew), touched)
    events = float(np.median(draws[-quarter:]))
    growth = events / max(float(np.median(draws[:quarter])), 1e-9)
    touches = None if touch_counts is None else leak_test(points, touch_counts, plateau, skew)
    return DiscoveryFit(len(usable), keys, top, first, last, plateau, low, high, skew,
                        closed.high_n / 1.01, f_leak, leak_share,
                        float(np.median(touched[-quarter:])), events, growth,
                        leak_population=leak_population, touches=touches)


def _best_leak(fit: _Fit) -> tuple[tuple[float, float, float], float]:
    """((SSE, γ, N), λ) of the open model: the three leak shares whose grid fits best, each
    refined, then λ itself refined (golden section) between the grid's neighbours of the
    best — the rate a leak is reported at is λ × the keys a batch touches, so the grid's
    steps would be its error."""
    coarse = sorted(LAMBDAS[1:], key=lambda lam: float(fit.grid(float(lam)).min()))[:3]
    opened = [(fit.best(float(lam)), float(lam)) for lam in coarse]
    best, lam = min(opened, key=lambda o: o[0][0])
    i = int(np.searchsorted(LAMBDAS, lam))
    low, high = float(LAMBDAS[max(1, i - 1)]), float(LAMBDAS[min(len(LAMBDAS) - 1, i + 1)])
    _, refined = golden(lambda v: fit.best(v)[0], low, high, rounds=12)
    better = fit.best(refined)
    return (better, refined) if better[0] < best[0] else (best, lam)


def decide(fit: DiscoveryFit, thresholds: Thresholds | None = None) -> Saturation:
    """Saturating, leak or undecided (see the module docstring)."""
    t = thresholds or DEFAULT_THRESHOLDS
    base: dict[str, Any] = {"points": fit.points, "keys": fit.keys, "first_share": fit.first_share,
            "last_share": fit.last_share}
    first, last = fit.first_share, fit.last_share
    touch = fit.touches
    checked: dict[str, Any] = {}
    if isinstance(touch, LeakTest):
        checked = {"seen_once": touch.seen_once, "seen_once_closed": touch.seen_once_closed,
                   "touch_f": touch.f, "chao1_keys": touch.chao1}
    elif isinstance(touch, str):
        checked = {"touch_note": touch}
    if fit.leak_share >= t.leak_min_share and fit.f_leak >= t.leak_f and \
            last >= fit.leak_share * 0.5:
        # the rate: the touch counts' leak where they measured one (their closed part is the
        # Zipf population itself, not the open model's approximation of it)
        if isinstance(touch, LeakTest) and touch.leak_keys_per_version > 0:
            rate, beside = touch.leak_keys_per_version, touch.population
        else:
            rate, beside = fit.leak_share * fit.touched_per_batch, fit.leak_population
        return Saturation(
            LEAK, f"a share {fit.leak_share:.1%} of every batch's keys is new whatever the "
            f"keys seen (F = {fit.f_leak:.0f} against a closed population)",
            leak_share=fit.leak_share, leak_keys_per_batch=rate,
            population=_beside(beside, fit), **checked, **base)
    if isinstance(touch, LeakTest) and touch.f >= t.touch_leak_f and \
            touch.leak_share >= t.touch_leak_min_share:
        return Saturation(
            LEAK, f"no closed population explains both the new keys per batch and the "
            f"{touch.seen_once:,} keys written in one version only; about "
            f"{touch.leak_share:.1%} of every batch's keys being new and never coming "
            f"back does (F = {touch.f:.0f})",
            leak_share=touch.leak_share, leak_keys_per_batch=touch.leak_keys_per_version,
            method="touch counts", population=_beside(touch.population, fit), **checked,
            **base)
    if first - last < t.min_share_drop and last > first * MIN_SHARE_FALL:
        return Saturation(UNDECIDED, f"the share of new keys per batch does not fall "
                          f"({first:.0%} → {last:.0%})", **base)
    if fit.traffic_growth > t.max_traffic_growth:
        return Saturation(UNDECIDED, f"the traffic that explains each batch's keys grows with "
                          f"the keys seen (×{fit.traffic_growth:.1f} over the history): users "
                          "arriving at a steady rate and coming back look like that too",
                          **base)
    plateau, low, high = fit.plateau, fit.plateau_low, fit.plateau_high
    if high >= fit.grid_edge or high > t.max_plateau_ratio * fit.top:
        more = _more_batches(fit, t.min_fraction_seen)
        return Saturation(UNDECIDED, f"the plateau's range reaches {high:,.0f} keys "
                          f"({high / fit.top:.0f}× those seen): no limit in sight yet",
                          plateau=plateau, plateau_low=low, plateau_high=high, skew=fit.skew,
                          more_batches=more, settle_at=t.min_fraction_seen, **base)
    if fit.keys < t.min_fraction_seen * plateau:
        return Saturation(UNDECIDED, f"only {fit.keys / plateau:.0%} of the population that "
                          f"fits best (about {plateau:,.0f} keys) is seen: a larger population "
                          "or a leak behind a smaller one fit as well",
                          plateau=plateau, plateau_low=low, plateau_high=high, skew=fit.skew,
                          more_batches=_more_batches(fit, t.min_fraction_seen),
                          settle_at=t.min_fraction_seen, **checked, **base)
    return Saturation(
        SATURATING, f"the share of new keys per batch falls from {first:.0%} to {last:.0%} as "
        f"the keys seen grow, as a population of about {plateau:,.0f} being discovered",
        plateau=plateau, plateau_low=low, plateau_high=high, fraction_seen=fit.keys / plateau,
        skew=fit.skew, events_per_batch=fit.events_per_batch,
        touched_per_batch=fit.touched_per_batch,
        batches_to_plateau=batches_until(fit.keys, PLATEAU_REACHED * plateau, plateau,
                                         fit.skew, fit.events_per_batch), **checked, **base)


def _beside(population: float, fit: DiscoveryFit) -> float | None:
    """A leak's finite part, when the fit found one short of its grid's edge."""
    return population if 0 < population < fit.grid_edge else None


def _more_batches(fit: DiscoveryFit, settled: float) -> float | None:
    """Batches until the best fit's population is ``settled`` seen at the recent pace: when
    a plateau would become measurable, if the population is what it looks like now.
    ``None`` when the best fit is itself no population (its N at the grid's edge)."""
    if fit.plateau >= fit.grid_edge or fit.events_per_batch <= 0:
        return None
    target = settled * fit.plateau
    if fit.keys >= target:
        return None
    return batches_until(fit.keys, target, fit.plateau, fit.skew, fit.events_per_batch)


def analyse_discovery(points: Sequence[DiscoveryPoint], keys: int, *,
                      thresholds: Thresholds | None = None,
                      touch_counts: Sequence[int] | None = None) -> Saturation:
    """Fit the discovery curve of ``points`` (versions with known churn, in order) and
    decide; ``keys``: live keys at the last version; ``touch_counts``: keys first seen in
    those versions by how many wrote them, when the replay counted them."""
    fit = fit_discovery(tuple(points), keys,
                        None if touch_counts is None else tuple(touch_counts))
    if isinstance(fit, str):
        # too few versions with churn behind a significant rise (6 versions or more) is churn
        # the files or the log do not say, not history more batches would bring
        return Saturation(UNDECIDED, fit, points=len(points), keys=keys)
    return decide(fit, thresholds or DEFAULT_THRESHOLDS)
