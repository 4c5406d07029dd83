"""The touch-count leak test on simulated key streams: a keyed aggregation's change files
(each batch writes the distinct keys it touched), closed populations with and without a slow
leak of keys that are seen once and never again."""

from __future__ import annotations

import math

import numpy as np
import pytest

from statekit.growth.population import DiscoveryPoint, accumulation, draws_for
from statekit.growth.recapture import leak_test
from statekit.growth.saturation import fit_discovery

BATCHES = 16


def stream(population: int, seen: float, *, skew: float = 0.0, leak: float = 0.0,
           seed: int = 1) -> tuple[list[DiscoveryPoint], list[int], int]:
    """Discovery points (from the second version), touch counts (keys first written
    then), as the replay keeps them, and the keys leaked per version."""
    rng = np.random.default_rng(seed)
    if skew:
        weights = 1.0 / np.arange(1, population + 1) ** skew
        weights /= weights.sum()
        per_batch = int(float(draws_for(accumulation(population, skew), seen * population))
                        / BATCHES)
    else:
        per_batch = int(-population * math.log(1 - seen) / BATCHES)
    live: set[int] = set()
    touches: dict[int, int] = {}
    points = []
    for version in range(1, BATCHES + 1):
        keys = (rng.choice(population, per_batch, p=weights) if skew
                else rng.integers(0, population, per_batch))
        extra = int(leak * per_batch)
        keys = np.concatenate([keys, 10**9 + version * 10**6 + np.arange(extra)])
        touched = set(np.unique(keys).tolist())
        new = touched - live
        if version > 1:
            points.append(DiscoveryPoint(version, len(live), len(new), len(touched - new)))
        for key in touched:
            if key in touches:
                touches[key] += 1
            elif version > 1 and key in new:
                touches[key] = 1
        live |= touched
    counts = [0] * 15
    for count in touches.values():
        counts[min(count, 15) - 1] += 1
    return points, counts, int(leak * per_batch)


def run(points: list[DiscoveryPoint], counts: list[int]):
    fit = fit_discovery(tuple(points), points[-1].live_before + points[-1].inserted)
    assert not isinstance(fit, str)
    result = leak_test(points, counts, fit.plateau, fit.skew)
    assert not isinstance(result, str)
    return result


@pytest.mark.parametrize(("population", "seen", "skew"), [
    (40_000, 0.3, 0.0), (40_000, 0.9, 0.0), (200_000, 0.6, 0.0),
    (100_000, 0.3, 0.8), (100_000, 0.9, 1.1)])
def test_a_closed_population_shows_no_leak_and_predicts_its_single_touches(
        population, seen, skew):
    points, counts, _ = stream(population, seen, skew=skew, seed=5)
    result = run(points, counts)
    assert result.f < 10
    assert result.seen_once == counts[0]
    assert result.seen_once_closed == pytest.approx(counts[0], rel=0.03)
    # Chao's bound: a floor under the population, close to it for uniform draws once
    # keys are seen twice often enough
    assert result.chao1 <= population * 1.1  # a bound in expectation; noisy at 30 % seen
    if not skew:
        assert result.chao1 >= population * (0.85 if seen >= 0.6 else 0.5)


@pytest.mark.parametrize(("population", "seen", "skew", "leak"), [
    (40_000, 0.95, 0.0, 0.01), (40_000, 0.95, 0.0, 0.04), (100_000, 0.9, 0.8, 0.02),
    (100_000, 0.6, 1.1, 0.01)])
def test_a_slow_leak_inside_a_finite_population_is_found(population, seen, skew, leak):
    points, counts, leaked = stream(population, seen, skew=skew, leak=leak, seed=6)
    result = run(points, counts)
    assert result.f >= 10
    assert result.leak_keys_per_version == pytest.approx(leaked, rel=0.5)
    assert result.chi2_leak < result.chi2_closed


def test_too_few_keys_first_seen_is_no_test():
    points, counts, _ = stream(1_000, 0.3, seed=2)
    assert sum(counts) < 500
    assert "keys were first seen" in str(leak_test(points, counts, 3_000.0, 0.0))
