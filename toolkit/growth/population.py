"""A closed population of keys, drawn with Zipf-skewed popularity: how many are seen after
how much traffic.

The model both analyses of "will it stop?" share (:mod:`statekit.growth.saturation` fits it to the
discovery curve, :mod:`statekit.growth.recapture` to how often keys come back): ``N`` keys, the
``i``-th drawn with chance ``pᵢ ∝ i^(−s)`` (``s = 0``: uniform); after ``E`` draws (Poisson)
the keys seen are ``K(E) = Σ (1 − e^(−E·pᵢ))``. A batch that touched ``T`` distinct keys
made the ``m`` draws with ``K(m) = T`` — so neither the traffic nor the batch sizes need to
be known. The population is held as groups (the first ranks one by one, the tail in
log-spaced bins), which keeps every evaluation a few hundred numbers.

Pure numpy; no Spark, no files.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DiscoveryPoint:
    """One version's change: live keys before it, keys it inserted and updated."""

    version: int
    live_before: int
    inserted: int
    updated: int

    @property
    def touched(self) -> int:
        return self.inserted + self.updated

    @property
    def new_share(self) -> float:
        return self.inserted / self.touched if self.touched else 0.0


_GOLDEN = (math.sqrt(5) - 1) / 2


def golden(f: Callable[[float], float], low: float, high: float, rounds: int = 40
            ) -> tuple[float, float]:
    """The minimum of a unimodal ``f`` on [low, high]: (value, argument)."""
    a, b = low, high
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(rounds):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    return (fc, c) if fc <= fd else (fd, d)


SKEWS = np.array([0.0, 0.25, 0.5, 0.65, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5])
"""The Zipf exponents tried (0: uniform)."""
_HEAD_RANKS = 64
_TAIL_BINS = 64
_E_STEPS = 200


def catchability(n: float, skew: float) -> tuple[np.ndarray, np.ndarray]:
    """A Zipf population of ``n`` keys in groups: (keys in each group, the chance one draw
    hits one key of it); the first ranks one by one, the tail in log-spaced bins."""
    total = max(1, round(n))
    if skew == 0.0:
        return np.array([float(total)]), np.array([1.0 / total])
    head = min(total, _HEAD_RANKS)
    counts, weights = [np.ones(head)], [np.arange(1, head + 1, dtype=float) ** -skew]
    if total > head:
        edges = np.unique(np.round(np.geomspace(head + 1, total + 1, _TAIL_BINS + 1)))
        a, b = edges[:-1] - 0.5, edges[1:] - 0.5  # ranks a..b-1, as an integral
        mean = (np.log(b / a) if skew == 1.0
                else (b ** (1 - skew) - a ** (1 - skew)) / (1 - skew)) / (b - a)
        counts.append(edges[1:] - edges[:-1])
        weights.append(mean)
    c, w = np.concatenate(counts), np.concatenate(weights)
    return c, w / (c * w).sum()


def accumulation(n: float, skew: float) -> tuple[np.ndarray, np.ndarray]:
    """(log draws, expected keys seen) of a Zipf population: after ``E`` draws (Poisson),
    ``K(E) = Σ (1 − e^(−E·p_i))`` — from almost no key seen to all of them."""
    counts, p = catchability(n, skew)
    draws = np.geomspace(1e-3 / p.max(), 60.0 / p.min(), _E_STEPS)
    seen = (counts[None, :] * -np.expm1(-draws[:, None] * p[None, :])).sum(axis=1)
    return np.log(draws), seen


def draws_for(table: tuple[np.ndarray, np.ndarray], keys: np.ndarray | float) -> np.ndarray:
    """The draws after which ``keys`` are expected seen (K⁻¹)."""
    log_e, seen = table
    return np.asarray(np.exp(np.interp(np.minimum(keys, seen[-1]), seen, log_e)))


def predicted_share(table: tuple[np.ndarray, np.ndarray], before: np.ndarray,
                    touched: np.ndarray) -> np.ndarray:
    """The share of new keys among a batch's: the batch's own draws ``m`` (``K(m)`` = the
    keys it touched), the draws before it ``E`` (``K(E)`` = the keys seen), new keys
    ``K(E + m) − K(E)``."""
    log_e, seen = table
    after = np.interp(np.log(draws_for(table, before) + draws_for(table, touched)), log_e, seen)
    return np.asarray(np.clip((after - before) / np.maximum(touched, 1.0), 0.0, 1.0))


def batches_until(keys: float, target: float, plateau: float, skew: float,
                  events_per_batch: float) -> float | None:
    """Batches until ``keys`` reaches ``target`` at ``events_per_batch`` draws a batch from
    a population of ``plateau`` with popularity ``skew``. ``None``: never (the target at or
    above the plateau, or no traffic)."""
    if keys >= target:
        return 0.0
    if events_per_batch <= 0 or target >= plateau * (1 - 1e-9):
        return None
    table = accumulation(plateau, skew)
    gap = float(draws_for(table, target)) - float(draws_for(table, keys))
    return max(0.0, gap / events_per_batch)


def curve(keys: float, plateau: float, skew: float, events_per_batch: float, steps: int
          ) -> list[float]:
    """Expected live keys after each of the next ``steps`` batches."""
    table = accumulation(plateau, skew)
    start = float(draws_for(table, min(keys, plateau * (1 - 1e-9))))
    later = start + events_per_batch * np.arange(1, steps + 1)
    return [max(float(keys), float(k)) for k in np.interp(np.log(later), *table)]


def keys_after(keys: float, plateau: float, skew: float, events_per_batch: float,
               batches: float) -> float:
    """Expected live keys after ``batches`` more batches (any real number of them)."""
    if batches <= 0:
        return float(keys)
    table = accumulation(plateau, skew)
    start = float(draws_for(table, min(keys, plateau * (1 - 1e-9))))
    later = start + events_per_batch * batches
    return max(float(keys), float(np.interp(math.log(later), *table)))
