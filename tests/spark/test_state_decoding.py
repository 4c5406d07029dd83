"""Decoded state files hold exactly the rows Spark's own ``statestore`` reader returns."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import decode_records, replay, store_schemas
from statekit.formats.records import StateRecord
from tests.spark.real_checkpoints import checkpoint_for

pytestmark = [pytest.mark.spark]

FORMAT_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"
DECODABLE = ["hdfs", "hdfs-no-snapshot", "hdfs-purged", "rocksdb-changelog-v2", "aggregation",
             "aggregation-zstd", "dedup", "join", "session-window", "dedup-within-watermark"]


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


@pytest.mark.parametrize("name", DECODABLE)
def test_replayed_state_equals_the_statestore_reader(spark, name, reference_checkpoints,
                                                     small_queries):
    checkpoint = checkpoint_for(name, reference_checkpoints, small_queries)
    ckpt = open_checkpoint(str(checkpoint))
    version = ckpt.last_committed_batch + 1
    schemas = store_schemas(ckpt)
    # Spark's reader must be told the checkpoint format; a v2 checkpoint shows it in its names.
    format_v2 = any(f.unique_id for f in ckpt.inventory.all_files())
    if format_v2:
        spark.conf.set(FORMAT_CONF, "2")
    try:
        _compare(spark, name, checkpoint, ckpt, version, schemas)
    finally:
        if format_v2:
            spark.conf.unset(FORMAT_CONF)


def _compare(spark, name, checkpoint, ckpt, version, schemas):
    for store in ckpt.inventory.stores(0):
        reader = spark.read.format("statestore")
        if store != "default":
            reader = reader.option("storeName", store)
        rows = reader.load(str(checkpoint)).collect()
        theirs: dict[int, set] = {}
        for row in rows:
            theirs.setdefault(row.partition_id, set()).add((normal(row.key), normal(row.value)))
        ours: dict[int, set] = {}
        for instance in ckpt.inventory.instances_of(0, store):
            state = replay(ckpt, instance, version)
            records = (StateRecord("put", k, v) for k, v in state.items())
            decoded = decode_records(records, schemas[(0, store)], "test")
            rows_here = {(normal(r.key), normal(r.value)) for r in decoded}
            assert len(rows_here) == len(state)
            if rows_here:
                ours[instance.partition] = rows_here
        assert ours == theirs, f"{name} store {store}"
        assert sum(map(len, ours.values())) > 0, f"{name}: empty state proves nothing"
