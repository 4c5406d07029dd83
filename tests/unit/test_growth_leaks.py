"""A leak is a leak at any size; a verdict says when it will hurt; one verdict per operator.

Simulated key streams (``tests.support.histories``) turned into replayed histories: no JVM,
no files. The real checkpoints' side is ``benchmarks/bench_growth_verdicts.py`` and
``tests/spark/test_growth.py``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from statekit.checkpoint.progress_log import OperatorProgress, ProgressPoint
from statekit.growth.analysis import analyse_progress, analyse_store, one_verdict
from statekit.growth.outlook import StorePath, executor_share, outlook
from statekit.growth.saturation import LEAK
from statekit.growth.sources import PROGRESS_LOG, STATE_FILES, reconcile
from statekit.growth.trend import (
    ACCELERATING,
    BOUNDED,
    GROWING,
    INSUFFICIENT,
    SATURATING,
    classify,
)
from statekit.state.memory import RESERVED_HEAP_BYTES, bytes_per_row
from tests.support.histories import (
    MINUTE_MS,
    finite,
    history_of,
    one_a_minute,
    saturated_with_leak,
)


def test_the_issues_leak_behind_a_large_saturated_store_is_growing_with_its_rate():
    """The issue's aggregation: ~100,000 keys, +1,000 a batch, nothing removed — under 5 %
    over the recent window, which a relative threshold called bounded."""
    history = history_of(saturated_with_leak(1_000))
    store = analyse_store(history, one_a_minute(16))
    assert store.keys.relative_growth < 0.10  # small beside the store …
    assert store.verdict in (GROWING, ACCELERATING)  # … and still a leak
    sat = store.saturation
    assert sat is not None and sat.outcome == LEAK
    assert sat.leak_keys_per_batch == pytest.approx(1_000, rel=0.2)
    assert sat.population == pytest.approx(100_000, rel=0.2)  # the population beside it
    text = " ".join(store.evidence)
    assert "Leak:" in text and "a day at the recent pace" in text
    # one batch a minute: 1,440 batches a day
    assert "1,4" in text.split("keys per batch that will never stop")[1][:40]


@pytest.mark.parametrize("leak", [100, 500, 2_000])
def test_leaks_of_a_tenth_to_two_percent_of_the_population_per_batch(leak):
    store = analyse_store(history_of(saturated_with_leak(leak, seed=leak)), {})
    assert store.verdict in (GROWING, ACCELERATING)
    assert store.saturation is not None and store.saturation.outcome == LEAK
    assert store.saturation.leak_keys_per_batch == pytest.approx(leak, rel=0.2)


def test_a_saturated_population_without_a_leak_is_never_growing():
    store = analyse_store(history_of(saturated_with_leak(0)), one_a_minute(16))
    assert store.verdict in (SATURATING, BOUNDED), store.evidence


def test_too_early_to_tell_says_how_many_more_batches_would():
    """A tenth of a 200k population seen: a larger population, or a leak behind a smaller
    one, fit the curve as well."""
    store = analyse_store(history_of(finite(200_000, 1_500)), one_a_minute(16))
    assert store.verdict == INSUFFICIENT
    sat = store.saturation
    assert sat is not None and sat.more_batches is not None and sat.more_batches > 16
    text = " ".join(store.evidence)
    assert "Too early to tell" in text and "more batches" in text


def test_the_verdict_names_keys_and_values_when_values_make_it():
    """Keys saturate but every key's state grows: the verdict is the values', and the
    evidence says so first."""
    history = history_of(finite(100_000, 10_000))
    grown = tuple(replace(v, value_mean=100.0 + 8 * v.version) for v in history.versions)
    store = analyse_store(replace(history, versions=grown), {})
    assert store.key_verdict == SATURATING
    assert store.value_verdict in (GROWING, ACCELERATING)
    assert store.verdict == store.value_verdict
    assert store.evidence[0].startswith(f"Verdict {store.verdict.upper()} from the values")


# -- the outlook --------------------------------------------------------------------------------

def path(keys: float, verdict: str, rate: float, row_bytes: float | None = 100.0,
         partitions: dict[int, float] | None = None) -> StorePath:
    x = list(range(1, 13))
    trend = classify(x, [keys - rate * (12 - v) for v in x])
    return StorePath(keys, verdict, trend, None, row_bytes, 0.0,
                     partitions if partitions is not None else {0: keys})


def test_a_linear_rise_projects_at_its_rate_over_a_day_a_week_a_month():
    grows = path(100_000, GROWING, 1_000)
    ahead = outlook([grows], provider="rocksdb", hours_per_batch=1 / 60, last_ms=0)
    assert ahead is not None and ahead.basis == "trend"
    assert ahead.keys_per_batch == pytest.approx(1_000, rel=0.01)
    assert ahead.keys_per_day == pytest.approx(1_440_000, rel=0.01)
    assert [h.days for h in ahead.horizons] == [1, 7, 30]
    for h in ahead.horizons:
        assert h.keys == pytest.approx(100_000 + 1_440_000 * h.days, rel=0.01)
        assert h.bytes_per_executor == pytest.approx(h.keys * 100.0, rel=0.01)  # RocksDB


def test_the_time_to_executor_memory_is_where_the_line_crosses_it():
    grows = path(100_000, GROWING, 1_000)
    limit = 4 << 30
    ahead = outlook([grows], provider="hdfs", hours_per_batch=1 / 60, last_ms=0,
                    limit_bytes=limit)
    assert ahead is not None and ahead.memory == "heap"
    per_key = bytes_per_row("hdfs", 100.0)
    usable = limit - RESERVED_HEAP_BYTES
    expected_batches = (usable / per_key - 100_000) / 1_000
    assert ahead.limit_batches == pytest.approx(expected_batches, rel=0.001)
    assert ahead.limit_days == pytest.approx(expected_batches / 1_440, rel=0.001)
    assert ahead.limit_at is not None and ahead.limit_at.startswith("1970-01-0")
    assert ahead.limit_keys == pytest.approx(usable / per_key, rel=0.001)


def test_a_state_that_levels_off_below_the_memory_never_reaches_it():
    flat = path(100_000, BOUNDED, 0)
    ahead = outlook([flat], provider="rocksdb", hours_per_batch=1.0, last_ms=None,
                    limit_bytes=1 << 40)
    assert ahead is not None and ahead.limit_days is None
    assert ahead.limit_note == "levels off below it"
    over = outlook([flat], provider="rocksdb", hours_per_batch=1.0, last_ms=None,
                   limit_bytes=1 << 20)
    assert over is not None and over.limit_days == 0 and over.limit_note


def test_the_busiest_executor_holds_the_largest_partitions():
    skewed = {0: 700.0, 1: 100.0, 2: 100.0, 3: 100.0}
    assert executor_share(skewed, 1) == 1.0
    assert executor_share(skewed, 2) == pytest.approx(0.8)  # 2 partitions each: 700 + 100
    assert executor_share(skewed, 4) == pytest.approx(0.7)
    ahead = outlook([path(1_000, BOUNDED, 0, partitions=skewed)], provider="rocksdb",
                    hours_per_batch=None, last_ms=None, executors=4)
    assert ahead is not None and ahead.executor_share == pytest.approx(0.7)
    assert ahead.horizons[0].keys_per_executor == pytest.approx(700)
    assert ahead.horizons[0].batches is None  # no pace: no day is a number of batches


# -- one verdict per operator ----------------------------------------------------------------------

def progress_of(keys: list[int], removed: list[int] | None = None,
                name: str = "aggregate") -> OperatorProgress:
    removed = removed or [0] * len(keys)
    points = tuple(ProgressPoint(b, 1_700_000_000_000 + b * MINUTE_MS, k, None, r, None, None)
                   for b, (k, r) in enumerate(zip(keys, removed, strict=True)))
    return OperatorProgress(0, name, points)


def test_the_progress_log_and_the_state_files_agree_or_say_why_not():
    store = analyse_store(history_of(saturated_with_leak(1_000)), one_a_minute(16))
    rising = progress_of([100_000 + 1_000 * b for b in range(16)])
    grown = analyse_progress(rising)
    agreement, = reconcile([store], [grown])
    assert agreement.operator_id == 0 and agreement.source == STATE_FILES
    if grown.verdict == store.verdict:
        assert agreement.agree and agreement.why is None
    else:
        assert not agreement.agree and agreement.why
    assert one_verdict([store], [grown], [agreement]) == store.verdict


def test_a_short_state_history_yields_to_the_progress_log():
    short = analyse_store(history_of(saturated_with_leak(1_000, batches=4)), {})
    assert short.verdict == INSUFFICIENT
    grown = analyse_progress(progress_of([100_000 + 1_000 * b for b in range(30)]))
    assert grown.verdict in (GROWING, ACCELERATING)
    agreement, = reconcile([short], [grown])
    assert agreement.source == PROGRESS_LOG and agreement.verdict == grown.verdict
    assert "covers batches 0–29" in (agreement.why or "")
    assert one_verdict([short], [grown], [agreement]) == grown.verdict


def test_a_progress_log_whose_rows_turn_over_is_bounded():
    """Sessions: rows rise with traffic, but as many are removed as come in."""
    keys = [1_000 + 40 * b for b in range(20)]
    removed = [0] + [400] * 19
    grown = analyse_progress(progress_of(keys, removed))
    assert grown.keys.verdict in (GROWING, ACCELERATING)
    assert grown.verdict == BOUNDED
    assert any("turn over" in e for e in grown.evidence)



def test_the_summary_of_a_rise_too_early_to_tell_says_when_it_will_tell():
    from statekit.growth.analysis import _summary

    store = analyse_store(history_of(finite(200_000, 1_500)), one_a_minute(16))
    assert store.verdict == INSUFFICIENT
    (line,) = _summary(INSUFFICIENT, [store], [], [])
    assert "too early to tell" in line
    assert f"~{store.saturation.more_batches:,.0f} more batches" in line


def test_too_few_versions_say_how_many_more_would_give_a_verdict():
    store = analyse_store(history_of(finite(50_000, 5_000, batches=4)), {})
    assert store.verdict == INSUFFICIENT
    assert any("Only 4 retained version(s)" in e and "2 more batches would give a verdict" in e
               for e in store.evidence), store.evidence


def test_too_short_a_history_is_not_said_to_level_off():
    short = path(1_000, INSUFFICIENT, 0)
    ahead = outlook([short], provider="rocksdb", hours_per_batch=1.0, last_ms=None,
                    limit_bytes=1 << 30)
    assert ahead is not None and ahead.basis == "unknown" and ahead.limit_days is None
    assert "too little history" in (ahead.limit_note or "")
    leaking = path(100_000, GROWING, 1_000)
    both = outlook([short, leaking], provider="rocksdb", hours_per_batch=1.0, last_ms=None)
    assert both is not None and both.basis == "trend"  # what is known to grow, grows
