"""statekit's JVM-free reading of the state files against Spark's own ``statestore`` reader.

One comparison per real checkpoint, each Spark read made once for all it proves: the rows the
reader returns for a store at a batch are the ones the replay decodes (``ROWS``); their count
per partition is the history's key count (at the last batch always, at every retained batch
with ``EVERY_BATCH``) and, for RocksDB without changelogs, the zips' ``numKeys`` the report
shows (``REPORT_KEYS``). ``DEEP``: ``statekit growth --deep`` (:func:`deep_check`) agrees
with the files as well — its row counts are the very reads checked here per partition; its
change feed is a read of its own.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import decode_records, replay, store_schemas
from statekit.formats.records import StateRecord
from statekit.jobs import growth_deep
from statekit.jobs.state_reader import reader_confs, session_confs, spark_path
from statekit.report.checkpoint_report import build_report
from statekit.state.history import all_histories
from tests.spark.real_checkpoints import checkpoint_for

pytestmark = [pytest.mark.spark]

ROWS, EVERY_BATCH, REPORT_KEYS, DEEP = "rows", "every-batch", "report-keys", "deep"
#: checkpoint → what is compared besides every store's key count per partition at the last
#: batch
CASES: dict[str, tuple[str, ...]] = {
    # the reference pipeline (applyInPandasWithState)
    "hdfs": (ROWS, EVERY_BATCH, DEEP),
    "hdfs-no-snapshot": (ROWS,),
    "hdfs-purged": (ROWS,),
    "hdfs-leaky": (EVERY_BATCH,),
    "rocksdb": (EVERY_BATCH, REPORT_KEYS, DEEP),
    "rocksdb-changelog": (EVERY_BATCH, DEEP),
    "rocksdb-changelog-purged": (EVERY_BATCH,),
    "rocksdb-changelog-v2": (ROWS,),
    # small queries: aggregation, dropDuplicates, a join's four stores, session windows
    "aggregation": (ROWS,),
    "aggregation-zstd": (ROWS,),
    "aggregation-rocksdb": (REPORT_KEYS,),
    "dedup": (ROWS,),
    "join": (ROWS,),
    "session-window": (ROWS,),
    "dedup-within-watermark": (ROWS,),
    # a windowed count without a watermark (growth_queries)
    "agg-no-watermark": (EVERY_BATCH,),
}
MORE_REFERENCE = {
    "hdfs-leaky": dict(provider="hdfs", leaky=True),
    "rocksdb-changelog-purged": dict(provider="rocksdb", changelog=True, variant="purged"),
}


def normal(value):
    """Spark's Python rows and statekit's decoded dicts in one comparable shape: positional
    tuples (aggregation buffers repeat field names, so names cannot be the key)."""
    if isinstance(value, dict):
        return tuple(normal(v) for v in value.values())
    if isinstance(value, tuple):  # pyspark Row
        return tuple(normal(v) for v in value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    if isinstance(value, list):
        return tuple(normal(v) for v in value)
    return value


def statestore(spark, ckpt, operator: int, store: str, batch: int):
    reader = spark.read.format("statestore").option("operatorId", operator) \
        .option("batchId", batch)
    if store != "default":
        reader = reader.option("storeName", store)
    return reader.load(spark_path(ckpt))


def per_partition(frame) -> Counter:
    return Counter({r.partition_id: r["count"]
                    for r in frame.groupBy("partition_id").count().collect()})


def share_deep_row_counts(monkeypatch, spark_counts: dict) -> None:
    """deep_check's row count of a batch, grouped by partition on the way: one Spark job
    for its check and this test's (its reads, resolve_target's targets, stay its own)."""
    read_state = growth_deep.read_state

    def counted(spark, target):
        frame = read_state(spark, target)
        key = (target.operator_id, target.store or "default", target.batch_id)

        def count() -> int:
            spark_counts[key] = per_partition(frame)
            return spark_counts[key].total()
        return SimpleNamespace(count=count)

    monkeypatch.setattr(growth_deep, "read_state", counted)


@pytest.mark.parametrize("name", list(CASES))
def test_file_reads_equal_the_statestore_reader(name, spark, reference_checkpoints,
                                                small_queries, growth_queries, monkeypatch):
    checks = CASES[name]
    if name in MORE_REFERENCE:
        checkpoint = reference_checkpoints.get(**MORE_REFERENCE[name]).checkpoint
    elif name == "agg-no-watermark":
        checkpoint = growth_queries.get(name).checkpoint
    else:
        checkpoint = checkpoint_for(name, reference_checkpoints, small_queries)
    ckpt = open_checkpoint(str(checkpoint))
    last = ckpt.last_committed_batch
    histories = all_histories(ckpt)
    assert [(h.operator_id, h.store) for h in histories] == [
        (op, store) for op in ckpt.inventory.operator_ids for store in ckpt.inventory.stores(op)]
    spark_counts: dict[tuple[int, str, int], Counter] = {}  # (operator, store, batch): read once
    if DEEP in checks:
        share_deep_row_counts(monkeypatch, spark_counts)
    with session_confs(spark, reader_confs(ckpt)):  # format v2 and changelogs need theirs
        for history in histories:
            _compare_store(spark, name, checks, ckpt, history, spark_counts)
    assert sum(spark_counts[(h.operator_id, h.store, last)].total() for h in histories) > 0, \
        f"{name}: empty state proves nothing"
    if REPORT_KEYS in checks:
        for store in build_report(ckpt).stores:
            ours = {p.partition: p.keys for p in store.partitions if p.keys}
            theirs = spark_counts[(store.operator_id, store.store, last)]
            assert ours == {p: n for p, n in theirs.items() if n}, (name, store.store)
            assert all(p.missing_ssts == 0 for p in store.partitions), (name, store.store)


def _compare_store(spark, name, checks, ckpt, history, spark_counts) -> None:
    op, store, last = history.operator_id, history.store, ckpt.last_committed_batch
    where = f"{name} operator {op} store {store}"
    if DEEP in checks:
        check = growth_deep.deep_check(spark, ckpt, history)
        row_count = name == "rocksdb"  # RocksDB without changelogs has no change feed
        assert check.method == ("row-count" if row_count else "change-feed"), where
        assert len(check.batches) >= 10 and check.agree, (where, check.mismatches)
        if row_count:  # its reads, grouped by partition, are checked below
            assert {(op, store, b.batch_id) for b in check.batches} <= set(spark_counts)
        else:
            assert sum(b.spark["deletes"] for b in check.batches) > 0, where
    if ROWS in checks:
        spark_counts[(op, store, last)] = _compare_rows(spark, where, ckpt, op, store)
    assert history.versions[-1].version == last + 1, where
    if EVERY_BATCH in checks:
        assert len(history.versions) >= (3 if name.endswith("purged") else 10), where
        versions = list(enumerate(history.versions))
    else:
        versions = [(len(history.versions) - 1, history.versions[-1])]
    if name == "rocksdb-changelog-purged":
        # old changelogs are gone: the replay starts from a zip whose SSTs it reads
        assert history.method == "replay" and history.history_starts_at > 1
        assert not any(f.version == 1 for i in ckpt.inventory.instances.values()
                       for f in i.of_kind("changelog"))
    for index, stats in versions:
        batch = stats.version - 1
        if (op, store, batch) not in spark_counts:
            spark_counts[(op, store, batch)] = per_partition(
                statestore(spark, ckpt, op, store, batch))
        counts = spark_counts[(op, store, batch)]
        assert stats.keys == counts.total(), (where, stats.version)
        assert set(counts) <= set(history.partition_keys), (where, stats.version)
        assert {p: keys[index] for p, keys in history.partition_keys.items()} == \
            {p: counts.get(p, 0) for p in history.partition_keys}, (where, stats.version)


def _compare_rows(spark, where, ckpt, op, store) -> Counter:
    """The replay's decoded rows at the last batch equal Spark's, partition by partition;
    Spark's row count per partition, for the other checks."""
    rows = statestore(spark, ckpt, op, store, ckpt.last_committed_batch).collect()
    theirs: dict[int, set] = {}
    for row in rows:
        theirs.setdefault(row.partition_id, set()).add((normal(row.key), normal(row.value)))
    schema = store_schemas(ckpt)[(op, store)]
    ours: dict[int, set] = {}
    for instance in ckpt.inventory.instances_of(op, store):
        state = replay(ckpt, instance, ckpt.last_committed_batch + 1)
        records = (StateRecord("put", k, v) for k, v in state.items())
        rows_here = {(normal(r.key), normal(r.value))
                     for r in decode_records(records, schema, "test")}
        assert len(rows_here) == len(state), where
        if rows_here:
            ours[instance.partition] = rows_here
    assert ours == theirs, where
    return Counter(row.partition_id for row in rows)
