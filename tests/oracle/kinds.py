"""The checkpoint kinds the oracle judges on: every stateful operator × provider × format, and
the three kinds of sink.

Each kind is one real streaming query over small JSON files (one file per micro-batch,
event time advancing ten minutes per file) into a sink, so its checkpoint has everything a
production one has: offsets and commits, a file source's log (with a compact file: the
compact interval is lowered), operator metadata and schema files, state files of its
provider on two shuffle partitions, Hadoop checksum files. Most kinds write a Parquet file
sink with its own log (``_spark_metadata``: exactly-once, it skips batches it already has);
one writes through ``foreachBatch`` (at-least-once: a re-run batch reaches it again) and one
into the ``noop`` sink (no output at all) — what a restart does to the output depends on the
sink, so the outcome a restart has is judged on each. ``build`` runs the query over
``FILES`` files; ``restart`` (tests.oracle.restart) runs it again with one more.

The queries are deterministic: the same input files processed in the same order end in the
same state whatever batch they were first processed in, so a checkpoint rolled back and
re-run must end where a healthy restart ends.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.small_queries import count_until_quiet

EVENT_DDL = "key STRING, bucket INT, ts TIMESTAMP, value LONG, seq LONG"
FILES = 6
"""Input files of the pristine run (one micro-batch each)."""
ROWS_PER_FILE = 40
START = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)
PARTITIONS = 2
SOURCE_COMPACT_INTERVAL = 4
"""The file source log compacts every 4 batches: ``sources/0/3.compact`` then ``4``, ``5``."""

_PREFIX = "spark.sql.streaming.stateStore."
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@dataclass(frozen=True)
class Kind:
    """One checkpoint kind: a query, a provider and the format settings."""

    name: str
    query: str
    """``aggregation``, ``dedup``, ``dedup-rows``, ``join``, ``session``, ``pandas``, ``tws``,
    ``two-ops``."""
    provider: str = "hdfs"
    changelog: bool = False
    format_version: int = 1
    description: str = ""
    deterministic: bool = True
    extra_confs: tuple[tuple[str, str], ...] = field(default=())
    sink: str = "file"
    """``file`` (Parquet with its ``_spark_metadata`` log), ``foreach-batch`` (a Python
    function appends each batch's rows as Parquet under ``<sink>/batch=<id>/``) or ``noop``."""

    @property
    def confs(self) -> dict[str, str]:
        confs = {
            "spark.sql.shuffle.partitions": str(PARTITIONS),
            f"{_PREFIX}providerClass": ROCKSDB if self.provider == "rocksdb" else HDFS,
            f"{_PREFIX}compression.codec": "lz4",
            f"{_PREFIX}minDeltasForSnapshot": "2",
            f"{_PREFIX}rocksdb.changelogCheckpointing.enabled": str(self.changelog).lower(),
            f"{_PREFIX}checkpointFormatVersion": str(self.format_version),
            "spark.sql.streaming.fileSource.log.compactInterval": str(SOURCE_COMPACT_INTERVAL),
        }
        confs.update(dict(self.extra_confs))
        return confs


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("agg-hdfs", "aggregation", description="windowed aggregation, HDFS provider"),
    Kind("agg-rocksdb", "aggregation", "rocksdb",
         description="windowed aggregation, RocksDB, a zip per version"),
    Kind("agg-changelog", "aggregation", "rocksdb", changelog=True,
         description="windowed aggregation, RocksDB with changelog checkpointing"),
    Kind("agg-v2", "aggregation", "rocksdb", changelog=True, format_version=2,
         description="windowed aggregation, RocksDB + changelog, checkpoint format v2"),
    Kind("dedup-hdfs", "dedup", description="dropDuplicates with a watermark, HDFS"),
    Kind("join-hdfs", "join", description="stream-stream join (four stores), HDFS"),
    Kind("session-rocksdb", "session", "rocksdb",
         description="session window aggregation, RocksDB zips"),
    Kind("pandas-hdfs", "pandas",
         description="applyInPandasWithState with event-time timeouts, HDFS"),
    Kind("tws-rocksdb", "tws", "rocksdb", changelog=True,
         description="transformWithStateInPandas (value, list, map state, timers), RocksDB "
                     "+ changelog"),
    Kind("two-ops-hdfs", "two-ops",
         description="dropDuplicatesWithinWatermark then a windowed aggregation, HDFS"),
    Kind("agg-foreach-hdfs", "aggregation", sink="foreach-batch",
         description="windowed aggregation, HDFS, into a foreachBatch sink"),
    Kind("dedup-noop-changelog", "dedup-rows", "rocksdb", changelog=True, sink="noop",
         description="dropDuplicates of every event (keys evicted by the watermark), RocksDB "
                     "+ changelog, noop sink"),
)}

SINKS = ("file", "foreach-batch", "noop")
"""The values of :attr:`Kind.sink`."""

OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "aggregation": ("window", "key"),
    "dedup": ("key", "bucket"),
    "dedup-rows": ("key", "seq"),
    "session": ("key",),
    "two-ops": ("window", "key"),
    "pandas": ("key",),
    "tws": ("key",),
    "join": ("left_seq", "right_seq"),
}
"""The output columns that name what a row is about, per query: a healthy row and a damaged
restart's row with the same key are one row *changed* (``differs``), not one lost and one
extra. Keys may repeat (a session, a timeout emits a key again): rows are paired per key."""


def make_files(seed: int, count: int = FILES + 1) -> list[list[dict]]:
    """``count`` files of rows with keys k00..k11 (buckets advancing every other file),
    event time advancing per file."""
    rng = random.Random(seed)
    files = []
    for f in range(count):
        rows = []
        for i in range(ROWS_PER_FILE):
            ts = START + timedelta(minutes=10 * f, seconds=rng.randrange(600))
            # the buckets move on every other file: deduplication on (key, bucket) keeps
            # meeting new keys, so input lost or read again shows in its state and output
            rows.append({"key": f"k{rng.randrange(12):02d}",
                         "bucket": rng.randrange(2) + 2 * (f // 2),
                         "ts": ts.isoformat().replace("+00:00", "Z"),
                         "value": rng.randrange(-100, 100), "seq": f * ROWS_PER_FILE + i})
        files.append(rows)
    return files


def write_file(folder: Path, index: int, rows: list[dict], mtime: float) -> Path:
    """``part-<index>.json`` with the given modification time: the file source takes files
    in modification-time order, which must not depend on the clock's resolution."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{index:03d}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(path, (mtime, mtime))
    return path


def stream(spark, kind: Kind, input_dir: Path):
    """The query of ``kind`` over ``input_dir``: ``(streaming DataFrame, output mode)``."""
    from pyspark.sql import functions as F

    def events():
        return (spark.readStream.schema(EVENT_DDL).option("maxFilesPerTrigger", 1)
                .json(str(input_dir)))

    query = kind.query
    if query == "aggregation":
        return (events().withWatermark("ts", "10 minutes")
                .groupBy(F.window("ts", "10 minutes"), "key")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))), "append"
    if query == "dedup":
        return (events().withWatermark("ts", "30 minutes")
                .dropDuplicates(["key", "bucket"])), "append"
    if query == "dedup-rows":
        # every event is a key until the watermark passes it: with no output (a noop sink),
        # the state alone shows an input file lost or read twice
        return (events().withWatermark("ts", "30 minutes")
                .dropDuplicates(["key", "seq", "ts"])), "append"
    if query == "session":
        return (events().withWatermark("ts", "10 minutes")
                .groupBy(F.session_window("ts", "5 minutes"), "key")
                .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))), "append"
    if query == "two-ops":
        return (events().withWatermark("ts", "10 minutes")
                .dropDuplicatesWithinWatermark(["key", "seq"])
                .groupBy(F.window("ts", "10 minutes"), "key")
                .agg(F.count(F.lit(1)).alias("n"))), "append"
    if query == "pandas":
        return (events().withWatermark("ts", "10 minutes").groupBy("key")
                .applyInPandasWithState(count_until_quiet(), "key string, n long",
                                        "n long, latest long", "append",
                                        "EventTimeTimeout")), "append"
    if query == "tws":
        from tests.small_queries import _counters_processor

        return (events().withWatermark("ts", "10 minutes").groupBy("key")
                .transformWithStateInPandas(
                    statefulProcessor=_counters_processor(),
                    outputStructType="key string, n long", outputMode="Append",
                    timeMode="EventTime")), "append"
    if query == "join":
        left = events().where("bucket % 2 = 0").withWatermark("ts", "30 minutes").alias("l")
        right = events().where("bucket % 2 = 1").withWatermark("ts", "30 minutes").alias("r")
        joined = left.join(right, F.expr(
            "l.key = r.key AND r.ts BETWEEN l.ts - INTERVAL 20 MINUTES AND l.ts"))
        return joined.select(F.col("l.seq").alias("left_seq"),
                             F.col("r.seq").alias("right_seq"), "l.key"), "append"
    raise ValueError(query)


@dataclass(frozen=True)
class Pristine:
    """A kind's checkpoint as its query wrote it, with the query's input and sink."""

    kind: Kind
    root: Path
    """Holds ``checkpoint/``, ``sink/`` (copied together for each fault) and the query's
    ``progress.jsonl``."""
    input_dir: Path
    """The pristine run's files and the restart's one more (newest modification time)."""

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def sink(self) -> Path:
        return self.root / "sink"


def build(spark, kind: Kind, base: Path, seed: int = 17, run_in: Path | None = None
          ) -> Pristine:
    """Run ``kind``'s query over ``FILES`` files (in ``base/input``) into ``run_in`` (default
    ``base/pristine``): ``checkpoint/`` and ``sink/``; then add the restart's file to the
    input folder."""
    from tests.oracle.restart import run_query

    files = make_files(seed)
    input_dir = base / "input"
    if input_dir.exists():  # left by an earlier build: its extra file would be read now
        shutil.rmtree(input_dir)
    start = time.time() - 3600
    for index, rows in enumerate(files[:FILES]):
        write_file(input_dir, index, rows, start + index)
    root = run_in or base / "pristine"
    outcome = run_query(spark, kind, root / "checkpoint", root / "sink", input_dir,
                        progress_log=root / "progress.jsonl")
    if outcome.error is not None:
        raise AssertionError(f"{kind.name}: the pristine run failed: {outcome.error}")
    # the restart's file arrives after the run stopped, as new input does: modified after
    # every commit of the run (the doctor tells a file added to an old log entry by that)
    write_file(input_dir, FILES, files[FILES], max(start + FILES, time.time() + 1))
    return Pristine(kind, root, input_dir)
