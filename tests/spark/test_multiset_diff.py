"""The row-multiset comparison every write's verification makes, against Python's Counter.

A verification that cannot fail proves nothing: random multisets (duplicates, rows only on one
side, removed rows the source never had, null cells, binary columns, flags) are compared by
Spark in one job and by ``collections.Counter`` here; the counts must agree exactly.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from statekit.jobs.staged_writes import MISPLACED, StoreCheck, multiset_diff

pytestmark = pytest.mark.spark

SCHEMA = "k string, v binary"


def _rows(rng: random.Random, n: int) -> list[tuple]:
    keys = [None, "a", "b", "c", "d"]
    return [(rng.choice(keys), rng.choice([None, b"\x00", b"\x01\x02", b""])) for _ in range(n)]


def _expected(source, removed, target, flags):
    src, gone, tgt = Counter(source), Counter(removed), Counter(target)
    kept = src - gone  # Counter subtraction drops counts ≤ 0, as exceptAll does
    return (sum(src.values()), sum(gone.values()), sum(tgt.values()),
            sum((kept - tgt).values()), sum((tgt - kept).values()), sum(flags))


@pytest.mark.parametrize("seed", range(12))
def test_counts_match_counter(spark, seed):
    rng = random.Random(seed)
    source = _rows(rng, rng.randint(0, 40))
    # the target: most source rows, some dropped, some duplicated, some new
    target = [r for r in source if rng.random() > 0.2] + \
        [r for r in source if rng.random() < 0.1] + _rows(rng, rng.randint(0, 5))
    removed = rng.sample(source, k=min(len(source), rng.randint(0, 5))) + _rows(rng, 2)
    flags = [rng.random() < 0.3 for _ in target]
    src = spark.createDataFrame(source, SCHEMA)
    gone = spark.createDataFrame(removed, SCHEMA)
    tgt = spark.createDataFrame([(*r, f) for r, f in zip(target, flags, strict=True)],
                                SCHEMA + f", {MISPLACED} boolean")
    diff = multiset_diff(src, tgt, [MISPLACED], removed=gone)
    assert (diff.source_rows, diff.removed_rows, diff.target_rows, diff.missing, diff.extra,
            diff.flagged[MISPLACED]) == _expected(source, removed, target, flags)


def test_store_check_fails_on_any_difference(spark):
    rows = [("a", b"1"), ("a", b"1"), ("b", b"2")]
    src = spark.createDataFrame(rows, SCHEMA)
    same = StoreCheck.compare(0, "default", src, spark.createDataFrame(rows[::-1], SCHEMA))
    assert same.ok and same.source_rows == same.target_rows == 3
    one_copy_lost = StoreCheck.compare(0, "default", src,
                                       spark.createDataFrame(rows[1:], SCHEMA))
    assert not one_copy_lost.ok and (one_copy_lost.missing, one_copy_lost.extra) == (1, 0)
    misplaced = StoreCheck.compare(
        0, "default", src,
        spark.createDataFrame([(*r, i == 2) for i, r in enumerate(rows)],
                              SCHEMA + f", {MISPLACED} boolean"), MISPLACED)
    assert not misplaced.ok and (misplaced.missing, misplaced.extra, misplaced.misplaced) == \
        (0, 0, 1)
    empty = StoreCheck.compare(0, "default", src.limit(0), src.limit(0))
    assert empty.ok and empty.source_rows == 0
