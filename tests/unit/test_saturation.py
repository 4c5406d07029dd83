"""The discovery curve on simulated key streams: finite populations (uniform, skewed),
open populations and leaks, drawn the way a keyed aggregation writes its change files (each
batch touches a set of distinct keys; those not live before are inserts)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from statekit.growth.population import curve
from statekit.growth.saturation import (
    LEAK,
    SATURATING,
    UNDECIDED,
    DiscoveryPoint,
    Thresholds,
    analyse_discovery,
    batches_until,
    decide,
    fit_discovery,
)


def _points(batches: list[np.ndarray]) -> tuple[list[DiscoveryPoint], int]:
    """The change files of a keyed aggregation fed these batches of key ids."""
    seen: set[int] = set()
    points = []
    for version, keys in enumerate(batches, start=2):
        touched = set(np.unique(keys).tolist())
        new = touched - seen
        points.append(DiscoveryPoint(version, len(seen), len(new), len(touched) - len(new)))
        seen |= touched
    return points, len(seen)


def _finite(population: int, per_batch: int, batches: int, *, zipf: float = 0.0,
            seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if not zipf:
        return [rng.integers(0, population, per_batch) for _ in range(batches)]
    weights = 1.0 / np.arange(1, population + 1) ** zipf
    weights /= weights.sum()
    return [rng.choice(population, per_batch, p=weights) for _ in range(batches)]


def _open(returning: int, new_per_batch: int, batches: int, seed: int = 2
          ) -> list[np.ndarray]:
    """New users every batch; the events of old ones spread over everyone seen so far."""
    rng = np.random.default_rng(seed)
    out, known = [], 10_000
    for _ in range(batches):
        fresh = np.arange(known, known + new_per_batch)
        out.append(np.concatenate([fresh, rng.integers(0, known, returning)]))
        known += new_per_batch
    return out


@pytest.mark.parametrize(("population", "per_batch", "batches"),
                         [(200_000, 20_000, 16), (50_000, 10_000, 12), (400_000, 20_000, 24)])
def test_uniform_population_is_saturating_at_its_size(population, per_batch, batches):
    points, seen = _points(_finite(population, per_batch, batches))
    sat = analyse_discovery(points, seen)
    assert sat.outcome == SATURATING, sat.reason
    assert sat.plateau == pytest.approx(population, rel=0.05)
    assert sat.plateau_low <= population * 1.02 and sat.plateau_high >= population * 0.98
    assert sat.fraction_seen == pytest.approx(seen / population, rel=0.05)
    assert sat.skew is not None and sat.skew <= 0.35  # uniform: (almost) no skew needed
    assert sat.batches_to_plateau is not None and sat.batches_to_plateau > 0


@pytest.mark.parametrize(("zipf", "per_batch"), [(0.7, 30_000), (1.0, 20_000), (1.2, 60_000)])
def test_skewed_population_is_saturating_within_its_range(zipf, per_batch):
    points, seen = _points(_finite(100_000, per_batch, 16, zipf=zipf))
    assert seen > 0.3 * 100_000
    sat = analyse_discovery(points, seen)
    assert sat.outcome == SATURATING, sat.reason
    assert sat.plateau == pytest.approx(100_000, rel=0.30)
    assert sat.plateau_low <= 100_000 <= sat.plateau_high
    assert sat.skew == pytest.approx(zipf, abs=0.2)


@pytest.mark.parametrize(("returning", "new_per_batch"), [(20_000, 5_000), (5_000, 2_000),
                                                          (30_000, 500)])
def test_open_population_is_never_saturating(returning, new_per_batch):
    points, seen = _points(_open(returning, new_per_batch, 16))
    sat = analyse_discovery(points, seen)
    assert sat.outcome in (LEAK, UNDECIDED), (sat.outcome, sat.reason, sat.plateau)


def test_finite_population_with_a_slow_leak_reports_the_leak():
    finite = _finite(60_000, 20_000, 20)
    leaked = [np.concatenate([b, np.arange(10_000_000 + 1000 * i, 10_000_000 + 1000 * (i + 1))])
              for i, b in enumerate(finite)]
    points, seen = _points(leaked)
    sat = analyse_discovery(points, seen)
    assert sat.outcome == LEAK, (sat.outcome, sat.reason)
    assert sat.leak_keys_per_batch == pytest.approx(1000, rel=0.6)


def test_too_short_a_history_is_undecided():
    points, seen = _points(_finite(10_000, 2_000, 3))
    assert analyse_discovery(points, seen).outcome == UNDECIDED


def test_a_flat_new_key_share_is_undecided_not_saturating():
    # every batch: 1,000 brand-new keys and 1,000 re-touched: the share never falls
    points = [DiscoveryPoint(v, 1000 * v, 1000, 1000) for v in range(2, 20)]
    assert analyse_discovery(points, 20_000).outcome in (UNDECIDED, LEAK)


@pytest.mark.parametrize("skew", [0.0, 0.8, 1.1])
def test_batches_until_agrees_with_the_curve(skew):
    plateau, start, pace = 100_000.0, 20_000.0, 5_000.0
    batches = batches_until(start, 90_000.0, plateau, skew, pace)
    assert batches is not None and batches > 0
    steps = curve(start, plateau, skew, pace, int(batches * 2) + 10)
    reached = next(i for i, k in enumerate(steps, start=1) if k >= 90_000.0)
    assert abs(reached - batches) <= 1.0
    assert all(a <= b for a, b in itertools.pairwise(steps))
    assert batches_until(start, plateau, plateau, skew, pace) is None
    assert batches_until(95_000.0, 90_000.0, plateau, skew, pace) == 0.0


def test_uniform_curve_matches_the_closed_form():
    # uniform draws: K(b) = N (1 − e^(−m b / N)) from no key seen
    keys = curve(0.0, 50_000.0, 0.0, 10_000.0, 8)
    expected = [50_000 * (1 - np.exp(-10_000 * b / 50_000)) for b in range(1, 9)]
    assert keys == pytest.approx(expected, rel=0.01)


def test_deciding_again_under_other_thresholds_reuses_the_fit():
    points, seen = _points(_finite(80_000, 8_000, 14))
    fit = fit_discovery(tuple(points), seen)
    assert not isinstance(fit, str)
    assert decide(fit).outcome == SATURATING  # the built-in thresholds
    strict = Thresholds(max_plateau_ratio=1.0)  # no plateau above the keys seen is allowed
    assert decide(fit, strict).outcome == UNDECIDED
    assert fit_discovery(tuple(points), seen) is fit  # cached: no second fit


def test_users_coming_back_in_proportion_to_the_user_base_are_not_a_finite_population():
    """10,000 new users a batch and 10 % of everyone seen so far coming back: the share of new
    keys falls as a finite population's would (a population of ~650k fits), but the traffic
    needed to explain each batch grows with the keys seen — an open population: either the
    new keys no population explains (a leak of the 10,000 new users a batch) or no verdict
    on a population, never a plateau."""
    rng = np.random.default_rng(4)
    batches, known = [], 0
    for _ in range(30):
        fresh = np.arange(known, known + 10_000)
        back = rng.integers(0, known, known // 10) if known else np.array([], dtype=int)
        batches.append(np.concatenate([fresh, back]))
        known += 10_000
    points, seen = _points(batches)
    sat = analyse_discovery(points, seen)
    assert sat.outcome in (UNDECIDED, LEAK), (sat.outcome, sat.reason)
    if sat.outcome == LEAK:
        assert sat.leak_keys_per_batch == pytest.approx(10_000, rel=0.2)
    else:
        assert "traffic" in sat.reason
