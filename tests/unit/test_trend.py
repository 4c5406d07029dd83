"""The robust trend statistics and the verdicts built on them (pure numpy, no JVM)."""

from __future__ import annotations

import math
import random

import pytest

from statekit.growth.trend import (
    ACCELERATING,
    BOUNDED,
    GROWING,
    INSUFFICIENT,
    classify,
    mann_kendall,
    severity,
    theil_sen,
)


def test_theil_sen_ignores_an_outlier_that_moves_least_squares():
    x = list(range(10))
    y = [2 * v + 1 for v in x]
    y[7] = 500
    assert theil_sen(x, y) == pytest.approx(2.0)


def test_mann_kendall_matches_the_textbook_value():
    # strictly increasing n=6: S = 15, var = 6*5*17/18 = 28.33, z = 14/5.32 = 2.63
    s, p = mann_kendall([1, 2, 3, 4, 5, 6])
    assert s == 15
    assert p == pytest.approx(0.5 * math.erfc((14 / math.sqrt(6 * 5 * 17 / 18)) / math.sqrt(2)))
    assert mann_kendall([6, 5, 4, 3, 2, 1]) == (-15, 1.0)
    assert mann_kendall([3, 3, 3, 3]) == (0, 1.0)


def test_short_history_is_insufficient():
    trend = classify([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    assert trend.verdict == INSUFFICIENT and trend.time_to(100) is None


def test_linear_growth_with_noise_is_growing_with_its_rate():
    rng = random.Random(1)
    x = list(range(1, 41))
    y = [1000 + 25 * v + rng.gauss(0, 30) for v in x]
    stamps = [1_700_000_000_000 + v * 60_000 for v in x]  # one batch a minute
    trend = classify(x, y, stamps)
    assert trend.verdict == GROWING
    assert trend.slope == pytest.approx(25, rel=0.15)
    assert trend.slope_per_hour == pytest.approx(25 * 60, rel=0.15)
    batches, hours = trend.time_to(y[-1] + 2500)
    assert batches == pytest.approx(100, rel=0.2) and hours == pytest.approx(100 / 60, rel=0.2)


def test_quadratic_growth_is_accelerating():
    x = list(range(1, 31))
    assert classify(x, [v * v for v in x]).verdict == ACCELERATING


def test_warm_up_then_plateau_is_bounded():
    x = list(range(1, 41))
    y = [min(900, 150 * v) + (v * 7919) % 23 for v in x]  # fills in 6 batches, then noise
    trend = classify(x, y)
    assert trend.verdict == BOUNDED and trend.early_slope > 40


def test_noise_around_a_level_is_bounded_for_many_seeds():
    for seed in range(30):
        rng = random.Random(seed)
        x = list(range(1, 31))
        assert classify(x, [500 + rng.gauss(0, 40) for _ in x]).verdict in (BOUNDED,), seed


def test_a_small_steady_rise_on_a_large_level_is_growth():
    """A leak is a leak at any size: +1,000 keys a batch on top of 100,000 (+1 % a batch,
    under 5 % over the window) rises significantly, so the keys' trend is growing — what
    explains the rise (turnover, a finite population) is the analysis' to weigh."""
    x = list(range(1, 13))
    noise = random.Random(58)
    keys = [100_000 + 1_000 * v + noise.gauss(0, 300) for v in x]
    trend = classify(x, keys)
    assert trend.verdict == GROWING and trend.relative_growth < 0.06
    assert trend.slope == pytest.approx(1_000, rel=0.2)


def test_a_material_rise_is_asked_for_only_when_the_caller_says_so():
    """Value sizes (a few bytes more per key) pass ``min_relative``: their drift of 0.1 %
    is significant but no accumulation."""
    x = list(range(1, 21))
    values = [10_000 + v for v in x]  # +0.1 % over the window
    assert classify(x, values).verdict == GROWING
    trend = classify(x, values, min_relative=0.10)
    assert trend.verdict == BOUNDED and trend.p_value < 0.01
    assert "below" in trend.reason


def test_zero_throughout_is_bounded_and_unknown_times_give_no_hourly_rate():
    trend = classify(list(range(10)), [0] * 10, [None] * 10)
    assert trend.verdict == BOUNDED and trend.slope_per_hour is None


def test_partial_timestamps_still_give_an_hourly_rate():
    x = list(range(1, 21))
    stamps = [None] * 8 + [v * 3_600_000 for v in x[8:]]
    trend = classify(x, [10 * v for v in x], stamps)
    assert trend.slope_per_hour == pytest.approx(10)


def test_long_series_are_thinned_but_judged():
    x = list(range(20_000))
    trend = classify(x, [v * 0.5 for v in x])
    assert trend.verdict in (GROWING, ACCELERATING) and trend.points == 20_000
    assert trend.slope == pytest.approx(0.5)


def test_severity_orders_verdicts():
    assert severity(INSUFFICIENT) < severity(BOUNDED) < severity(GROWING) < severity(ACCELERATING)
    with pytest.raises(ValueError):
        classify([1, 2], [1])
