"""A leak inside a finite population, found by how often keys come back.

The discovery curve (:mod:`statekit.growth.saturation`) sees only how many new keys each batch
brings. A finite population plus a slow leak (1 % of every batch's keys brand-new and never
seen again) bends that curve almost exactly like a somewhat larger finite population: within
a few dozen versions no fit of the curve alone tells them apart. What does is *who comes
back*. The replay counts, for every key first inserted inside the history, the versions that
wrote it (:attr:`statekit.state.history.StoreHistory.touch_counts`). In a closed population
a key drawn once is likely drawn again; a leaked key never is. So the keys written in exactly
one version (capture–recapture's ``f1``) outnumber what any closed population that also
explains the discovery curve predicts.

The test fits the closed Zipf population (``N``, skew ``s``) to both at once — each
version's new keys (binomial counts) and the touch-count histogram (its first bins and a
tail) — and the same with ``L`` leaked keys per version (each touched once: they add ``L``
to every version's inserts and touches and ``L`` × versions to ``f1``). The touch
distribution of a key with per-draw chance ``p`` is a Poisson-binomial over the versions
(per-version draws from the fitted population, as the discovery curve solves them); versions
are grouped into a few classes of similar traffic, each a binomial, convolved and cut at the
last bin. The leak is the improvement in Pearson χ² scaled by the leak fit's own χ² per
degree of freedom (an F statistic: model error, not only noise, sets the scale).

Fitted by Nelder–Mead from the discovery curve's solution; pure numpy; about a second for a
history of a few hundred versions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from statekit.growth.population import (
    DiscoveryPoint,
    accumulation,
    catchability,
    draws_for,
    predicted_share,
)

BINS = 6
"""Touch-count bins: exactly 1 … ``BINS - 1`` versions, then ``BINS`` or more."""
CLASSES = 6
"""Versions grouped into this many classes of similar traffic (keys touched)."""
MIN_KEYS = 500
"""Fewer keys first seen inside the history than this: too few to count comebacks."""
MAX_DELETE_SHARE = 0.01
"""Deleted keys take their touch counts with them: above this share of the inserts the
histogram is not the population's."""
_MAX_LEAK_SHARE = 0.5


@dataclass(frozen=True)
class LeakTest:
    """The closed population against the one with a leak, on discovery and comebacks."""

    f: float
    """Improvement of χ² with a leak, over the leak fit's χ² per degree of freedom."""
    leak_keys_per_version: float
    leak_share: float
    """Leaked keys over the keys a recent version touches."""
    seen_once: int
    """Keys first seen inside the history and written in exactly one version."""
    seen_once_closed: float
    """What the best closed population predicts for them."""
    chi2_closed: float
    chi2_leak: float
    dof: int
    chao1: float
    """Chao's lower bound on the population from the same counts: the keys live before the
    history, those first seen in it, and ``f1² / (2·f2)`` never seen (bias-corrected) —
    model-free, a floor under the plateau (exact for uniform draws, low under skew)."""
    population: float = 0.0
    """The finite population beside the leak (the leak fit's ``N``)."""


def _binomial_head(n: int, q: np.ndarray) -> np.ndarray:
    """P(exactly k of ``n`` trials) for k = 0 … BINS − 1, one row per chance in ``q``."""
    k = np.arange(min(BINS, n + 1))
    q = np.clip(q, 1e-300, 1 - 1e-15)
    log_c = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                      for i in k])
    out = np.zeros((q.shape[0], BINS))
    out[:, :len(k)] = np.exp(log_c + np.log(q)[:, None] * k + np.log1p(-q)[:, None] * (n - k))
    return out


_PAIRS = np.zeros((BINS, BINS, BINS))
for _i in range(BINS):
    for _j in range(BINS - _i):
        _PAIRS[_i, _j, _i + _j] = 1.0


class _Model:
    """χ² of a closed population (plus ``L`` leaked keys per version) against one history."""

    def __init__(self, points: Sequence[DiscoveryPoint], touch_counts: Sequence[int]) -> None:
        self.x = np.array([p.live_before for p in points], dtype=float)
        self.inserted = np.array([p.inserted for p in points], dtype=float)
        self.touched = np.array([p.touched for p in points], dtype=float)
        self.before = np.arange(len(points), dtype=float)  # leaked keys before each version
        counts = list(touch_counts)
        self.freq = np.array([*counts[:BINS - 1], sum(counts[BINS - 1:])], dtype=float)
        order = np.argsort(self.touched, kind="stable")
        self.classes = [c for c in np.array_split(order, min(CLASSES, len(order))) if len(c)]
        self.top = max(float(self.x.max() + self.inserted[-1]), 1.0)

    def parts(self, n: float, skew: float, leak: float) -> tuple[float, float] | None:
        """(χ² of the discovery counts, χ² of the touch histogram); ``None``: impossible."""
        touched, inserted = self.touched - leak, self.inserted - leak
        x = self.x - leak * self.before
        freq = self.freq.copy()
        freq[0] -= leak * len(self.x)
        if touched.min() <= 0 or inserted.min() < 0 or freq[0] < 0 or x.min() < 0 \
                or n <= x.max() + inserted[-1]:
            return None
        table = accumulation(n, skew)
        share = predicted_share(table, x, touched)
        expected = share * touched
        discovery = float(((inserted - expected) ** 2
                           / np.maximum(expected * (1 - share), 1.0)).sum())
        counts, p = catchability(n, skew)
        draws = draws_for(table, touched)
        dist = None
        for cls in self.classes:
            q = -np.expm1(-np.outer(draws[cls], p)).mean(axis=0)
            head = _binomial_head(len(cls), q)
            dist = head if dist is None else np.einsum("gi,gj,ijs->gs", dist, head, _PAIRS)
        assert dist is not None
        unseen_before = counts * self._unseen(table, p, x[0])
        head_mass = (unseen_before[:, None] * dist).sum(axis=0)          # k = 0 … BINS − 1
        seen = float((unseen_before * (1 - dist[:, 0])).sum())
        if seen <= 0:
            return None
        probs = np.append(head_mass[1:], seen - head_mass[1:].sum()) / seen
        expected_freq = freq.sum() * probs
        touches = float(((freq - expected_freq) ** 2 / np.maximum(expected_freq, 1.0)).sum())
        return discovery, touches

    def chi2(self, n: float, skew: float, leak: float) -> float:
        parts = self.parts(n, skew, leak)
        return math.inf if parts is None else parts[0] + parts[1]

    def seen_once(self, n: float, skew: float) -> float:
        """Keys written in exactly one version, as the population predicts."""
        table = accumulation(n, skew)
        counts, p = catchability(n, skew)
        draws = draws_for(table, self.touched)
        total = draws.sum()
        # Σ_v (1 − e^(−m_v·p)) e^(−(M − m_v)·p), written without overflow
        once = np.exp(-(total - draws[:, None]) * p[None, :]).sum(axis=0) \
            - len(draws) * np.exp(-total * p)
        return float((counts * self._unseen(table, p, self.x[0]) * once).sum())

    @staticmethod
    def _unseen(table: tuple[np.ndarray, np.ndarray], p: np.ndarray, before: float
                ) -> np.ndarray:
        """The chance that each group's key was not seen before the history (``before``
        keys live at its start)."""
        return np.exp(-float(draws_for(table, before)) * p) if before > 0 else np.ones_like(p)


def _nelder_mead(f: Callable[[np.ndarray], float], start: np.ndarray, step: np.ndarray,
                 rounds: int = 160, tolerance: float = 1e-4) -> tuple[float, np.ndarray]:
    """Minimise ``f`` (``inf`` outside its domain) from ``start``: (value, argument)."""
    simplex = [start] + [start + np.eye(len(start))[i] * step[i] for i in range(len(start))]
    values = [f(v) for v in simplex]
    for _ in range(rounds):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if math.isfinite(values[-1]) and values[-1] - values[0] <= tolerance * (
                1 + abs(values[0])):
            break
        centre = np.mean(simplex[:-1], axis=0)
        reflected = centre + (centre - simplex[-1])
        value = f(reflected)
        if value < values[0]:
            expanded = centre + 2 * (centre - simplex[-1])
            grown = f(expanded)
            simplex[-1], values[-1] = (expanded, grown) if grown < value else (reflected, value)
        elif value < values[-2]:
            simplex[-1], values[-1] = reflected, value
        else:
            contracted = centre + 0.5 * (simplex[-1] - centre)
            shrunk = f(contracted)
            if shrunk < values[-1]:
                simplex[-1], values[-1] = contracted, shrunk
            else:  # shrink towards the best
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (v - simplex[0])
                                          for v in simplex[1:]]
                values = [values[0]] + [f(v) for v in simplex[1:]]
    best = int(np.argmin(values))
    return values[best], simplex[best]


def leak_test(points: Sequence[DiscoveryPoint], touch_counts: Sequence[int], plateau: float,
              skew: float) -> LeakTest | str:
    """Fit the closed population with and without a leak to the discovery counts and the
    touch histogram, from the discovery curve's ``plateau`` and ``skew``. A string: why the
    test cannot run."""
    usable = [p for p in points if p.touched > 0]
    first_seen = sum(touch_counts)
    if first_seen < MIN_KEYS:
        return f"only {first_seen:,} keys were first seen inside the history"
    if len(usable) < 3:
        return "too few versions"
    model = _Model(usable, touch_counts)
    recent = float(np.median(model.touched[-max(2, len(usable) // 4):]))

    def closed(v: np.ndarray) -> float:
        return model.chi2(model.top * (1 + math.exp(v[0])), max(0.0, v[1]), 0.0)

    def opened(v: np.ndarray) -> float:
        leak = min(max(0.0, v[2]), _MAX_LEAK_SHARE) * recent
        room = model.top - leak * len(usable)
        return model.chi2(room * (1 + math.exp(v[0])), max(0.0, v[1]), leak)

    start_n = math.log(max(plateau / model.top - 1, 1e-3))
    starts = [np.array([start_n, skew]), np.array([start_n, 0.0])]
    step = np.array([0.5, 0.25])
    chi2_closed, best_closed = min((_nelder_mead(closed, s, step) for s in starts),
                                   key=lambda r: r[0])
    # a leak cannot exceed any version's inserts: start inside that bound (a start outside
    # it is an impossible model, where the simplex learns nothing)
    room = float(model.inserted.min()) / max(recent, 1.0)
    shares = sorted({*(f * room for f in (0.3, 0.8)), *(s for s in (0.01, 0.05) if s < room)})
    leak_starts = [np.append(best_closed, share) for share in shares]
    chi2_leak, best_leak = min((_nelder_mead(opened, s, np.append(step, 0.02))
                                for s in leak_starts), key=lambda r: r[0])
    chi2_leak = min(chi2_leak, chi2_closed)  # a leak of 0 is the closed fit
    dof = max(1, len(usable) + BINS - 1 - 3)
    f = (chi2_closed - chi2_leak) / max(chi2_leak / dof, 1.0)
    share = min(max(0.0, float(best_leak[2])), _MAX_LEAK_SHARE)
    n_closed = model.top * (1 + math.exp(best_closed[0]))
    n_open = (model.top - share * recent * len(usable)) * (1 + math.exp(float(best_leak[0])))
    once, twice = touch_counts[0], touch_counts[1] if len(touch_counts) > 1 else 0
    chao1 = float(usable[0].live_before + first_seen + once * (once - 1) / (2 * (twice + 1)))
    return LeakTest(f, share * recent, share, int(once),
                    model.seen_once(n_closed, max(0.0, float(best_closed[1]))),
                    chi2_closed, chi2_leak, dof, chao1, n_open)
