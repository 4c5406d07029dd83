"""Small streaming queries run on real Spark, by name, and the state they leave behind.

Lives here rather than in a test module because the migrate, evict and rollback tests all run
the same queries (``run_by_batch``, ``run_to_end``), compare the same final state
(``final_state``), use the same provider settings (``source_confs``) and build the same
sources (``Sources``: a query on three files, and its restart on a copy with the fourth).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from statekit.checkpoint import open_checkpoint
from tests.small_queries import count_until_quiet
from tests.support.shared_build import build_once

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def _query(spark, name: str, input_dir: Path):
    from pyspark.sql import functions as F

    from tests.small_queries import EVENT_DDL

    def events():
        return (spark.readStream.schema(EVENT_DDL + ", seq LONG")
                .option("maxFilesPerTrigger", 1).json(str(input_dir)))

    if name == "aggregation":
        return (events().withWatermark("ts", "1 day").groupBy("key", "bucket")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))), "update"
    if name == "multi":  # two stateful operators: dropDuplicates, then an aggregation
        return (events().withWatermark("ts", "1 day").dropDuplicates(["key", "seq"])
                .groupBy("key").agg(F.count(F.lit(1)).alias("n"),
                                    F.sum("value").alias("total"))), "update"
    if name == "dedup":  # no event time in the key: kept forever; 150 combinations
        return (events().withWatermark("ts", "1 day")
                .dropDuplicates(["key", "bucket", "day"])), "append"
    if name == "dedup-within-watermark":
        # 75 combinations: those first seen in the first file expire before the fourth
        # (whose rows then pass), those first seen later are still in state (theirs are
        # dropped only if the state was moved)
        return (events().withWatermark("ts", "10 minutes")
                .dropDuplicatesWithinWatermark(["key", "bucket"])), "append"
    if name == "fmgws":
        return (events().withWatermark("ts", "10 minutes").groupBy("key")
                .applyInPandasWithState(count_until_quiet(), "key string, n long",
                                        "n long, latest long", "update", "EventTimeTimeout"),
                "update")
    if name in ("tws", "tws-ttl"):
        from tests.small_queries import _counters_processor

        ttl = name == "tws-ttl"  # TTL needs processing-time mode, where timers would fire
        return (events().withWatermark("ts", "1 day").groupBy("key")
                .transformWithStateInPandas(
                    statefulProcessor=_counters_processor(ttl_ms=30 * 86_400_000 if ttl
                                                          else None),
                    outputStructType="key string, n long", outputMode="Update",
                    timeMode="ProcessingTime" if ttl else "EventTime"),
                "update")
    if name == "session-window":
        return (events().withWatermark("ts", "10 minutes")
                .groupBy(F.session_window("ts", "5 minutes"), "key")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))), "append"
    left = events().where("bucket = 0").withWatermark("ts", "30 minutes").alias("l")
    right = events().where("bucket = 1").withWatermark("ts", "30 minutes").alias("r")
    joined = left.join(right, F.expr(
        "l.key = r.key AND r.ts BETWEEN l.ts - INTERVAL 20 MINUTES AND l.ts"))
    return joined.select(F.col("l.seq").alias("left_seq"), F.col("r.seq").alias("right_seq"),
                         "l.key"), "append"


def run_by_batch(spark, name: str, input_dir: Path, checkpoint: Path, confs: dict
                 ) -> dict[int, list]:
    """Run query ``name`` on ``checkpoint`` to the end of its input; its output rows (sorted)
    per batch id."""
    from statekit.jobs.state_reader import session_confs
    from tests.conftest import quiesce

    emitted: dict[int, list] = {}

    def collect(batch_df, batch_id):
        emitted[batch_id] = sorted(tuple(str(v) for v in r) for r in batch_df.collect())

    df, mode = _query(spark, name, input_dir)
    with session_confs(spark, confs):
        query = (df.writeStream.outputMode(mode).foreachBatch(collect)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    quiesce(spark, str(checkpoint))
    return emitted


def run_to_end(spark, name: str, input_dir: Path, checkpoint: Path, confs: dict) -> list:
    """Run query ``name`` on ``checkpoint`` to the end of its input; its output rows, sorted."""
    by_batch = run_by_batch(spark, name, input_dir, checkpoint, confs)
    return sorted(row for rows in by_batch.values() for row in rows)


def final_state(spark, checkpoint: Path) -> Counter:
    """Every (operator, store, key, value) of the checkpoint's latest batch, as a multiset
    (transformWithState: Spark's raw rows of every column family, timers included)."""

    from statekit.jobs.state_reader import reader_confs, session_confs

    ckpt = open_checkpoint(str(checkpoint))
    with session_confs(spark, reader_confs(ckpt)):  # checkpoint format v2 needs its conf
        return _state_rows(spark, ckpt, checkpoint)


def _state_rows(spark, ckpt, checkpoint: Path) -> Counter:
    from pyspark.sql import functions as F

    from statekit.jobs.raw_rows import read_raw_rows
    from statekit.jobs.state_reader import StateTarget, read_state
    from statekit.writes.partition_key import SPARK_KEYED_OPERATORS

    rows: Counter = Counter()
    for op_id, meta in ckpt.operators.items():
        for store in ckpt.inventory.stores(op_id):
            if meta.name in SPARK_KEYED_OPERATORS:
                frame = read_raw_rows(spark, str(checkpoint), ckpt.last_committed_batch,
                                      op_id, store)
                for row in frame.select(F.to_json(F.struct(
                        "column_family_name", F.hex("key_bytes"),
                        F.hex("value_bytes")))).collect():
                    rows[(op_id, store, row[0])] += 1
                continue
            frame = read_state(spark, StateTarget(str(checkpoint), op_id, meta.name, store))
            for row in frame.select(F.to_json(F.struct("key", "value"))).collect():
                rows[(op_id, store, row[0])] += 1
    return rows


@dataclass
class Source:
    """A query run on three files; its restart (on a copy) with the fourth, as expected."""

    name: str
    provider: str
    checkpoint: Path
    input_dir: Path
    expected_output: list
    expected_state: Counter


class Sources:
    def __init__(self, spark, root: Path):
        self.spark, self.root = spark, root
        self.built: dict[tuple[str, str], Source] = {}

    def get(self, name: str, provider: str) -> Source:
        """Built once per test run (``build_once``: the workers share it)."""
        if (name, provider) not in self.built:
            self.built[(name, provider)] = build_once(
                self.root, f"{name}-{provider}", lambda base: self._build(name, provider, base))
        return self.built[(name, provider)]

    def _build(self, name: str, provider: str, base: Path) -> Source:
        from tests.small_queries import _write_input, make_rows

        files = make_rows(seed=11)
        input_dir = base / "input"  # the file source pins its path: the 4th file comes later
        _write_input(input_dir, files[:3])
        checkpoint = base / "checkpoint"
        run_to_end(self.spark, name, input_dir, checkpoint, source_confs(provider, name))
        copy = base / "copy"
        shutil.copytree(checkpoint, copy)
        (input_dir / "part-003.json").write_text("".join(json.dumps(r) + "\n" for r in files[3]))
        output = run_to_end(self.spark, name, input_dir, copy, source_confs(provider, name))
        return Source(name, provider, checkpoint, input_dir, output,
                      final_state(self.spark, copy))


def source_confs(provider: str, name: str) -> dict[str, str]:
    """``hdfs``, ``rocksdb`` (zips only), ``rocksdb-changelog`` or ``rocksdb-changelog-v2``
    (checkpoint format v2), for query ``name``."""
    from tests.small_queries import provider_confs

    rocksdb = provider.startswith("rocksdb")
    confs = {**provider_confs("rocksdb" if rocksdb else "hdfs", "lz4"),
             CHANGELOG: str("changelog" in provider).lower(), FORMAT_VERSION: "1"}
    if provider.endswith("-v2"):
        confs[FORMAT_VERSION] = "2"
    if name == "tws-ttl":  # processing-time mode would run no-data batches without end
        confs["spark.sql.streaming.noDataMicroBatches.enabled"] = "false"
    return confs


def landing_after(landing: Path, folder: Path) -> Path:
    """An empty landing folder at ``folder`` that continues ``landing``, a shared run's
    landing (read only: other tests read it at the same time): only the reference
    generator's manifest is copied, so ``generate(folder, …)`` writes the batches after
    ``landing``'s (same config, same modification-time base).

    A shared checkpoint restarted on ``folder`` reads those files as new input (its source
    log names the files it read by their path in ``landing``). That holds when its last
    committed batch read no file, as the reference pipeline's last (no-data) batch and a
    rewrite's batch: on restart Spark reads the last batch's files again, and a file outside
    the query's folder fails the restart ("Wrong basePath").
    """
    from statekit.reference_pipeline.generator import GENERATOR_FILE, read_manifest

    assert read_manifest(landing) is not None, f"{landing} is not a generated landing folder"
    folder.mkdir(parents=True)
    shutil.copy(landing / GENERATOR_FILE, folder / GENERATOR_FILE)
    return folder
