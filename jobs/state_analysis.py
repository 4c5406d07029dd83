"""Spark-side analyses of state rows: statistics, change-feed summary, export, metadata check.

Everything here runs as Spark aggregations over :mod:`statekit.jobs.state_reader` DataFrames, so it
works for state far larger than the driver's memory and on a cluster; only small summaries
come back to Python as frozen dataclasses (``to_dict()`` for ``--json``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.jobs.connect import is_connect
from statekit.jobs.state_reader import (
    FMGWS_OPERATORS,
    StateTarget,
    collect,
    flatten,
    read_metadata,
    read_state,
    target_batch,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TIMEOUT_FIELD = "timeoutTimestamp"
NO_TIMEOUT = -1


@dataclass(frozen=True)
class StateStats:
    target: str
    batch_id: int
    rows: int
    rows_per_partition: dict[int, int]
    skew: float | None
    """Largest partition's rows over the mean."""
    value_bytes: dict[str, float | None]
    """Percentiles (p50, p90, p99, max, mean) of each value's size as JSON, in bytes."""
    largest: list[dict[str, Any]]
    """The N largest values: key (as JSON) and size."""
    watermark_ms: int | None
    no_timeout_share: float | None
    """flatMapGroupsWithState/applyInPandasWithState: share of keys without a timeout (1.0
    when the query uses NoTimeout: its value rows have no timeout field at all)."""
    timeout_minus_watermark_s: dict[str, float | None] | None
    """Percentiles of (timeout − watermark) in seconds, over keys with a timeout."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _percentiles(df: DataFrame, column: str) -> dict[str, float | None]:
    row = df.agg(F.percentile_approx(column, [0.5, 0.9, 0.99]).alias("p"),
                 F.max(column).alias("max"), F.avg(column).alias("mean")).first()
    assert row is not None  # an aggregate without grouping always has exactly one row
    p = row["p"] or [None, None, None]
    return {"p50": p[0], "p90": p[1], "p99": p[2], "max": row["max"],
            "mean": round(row["mean"], 2) if row["mean"] is not None else None}


def state_stats(spark: SparkSession, ckpt: Checkpoint, target: StateTarget, top: int = 10
                ) -> StateStats:
    batch = target_batch(ckpt, target)
    df = read_state(spark, target).cache()
    try:
        def compute():
            per_part = {r.partition_id: r["count"]
                        for r in df.groupBy("partition_id").count().collect()}
            total = sum(per_part.values())
            mean = total / len(per_part) if per_part else 0
            sized = df.select(F.to_json("key").alias("key"),
                              F.octet_length(F.to_json("value")).alias("size"))
            ranked = sized.orderBy(F.desc("size"), F.asc("key"))  # ties: the same order always
            largest = [r.asDict() for r in ranked.limit(top).collect()]
            watermark = ckpt.commit(batch).next_watermark_ms
            share = timeouts = None
            value_type = df.schema["value"].dataType
            if TIMEOUT_FIELD in getattr(value_type, "fieldNames", list)():
                timeout = F.col(f"value.{TIMEOUT_FIELD}")
                unset = df.where(timeout == NO_TIMEOUT).count()
                share = round(unset / total, 4) if total else None
                relative = df.where(timeout != NO_TIMEOUT).select(
                    ((timeout - F.lit(watermark or 0)) / 1000.0).alias("s"))
                timeouts = _percentiles(relative, "s")
            elif target.operator_name in FMGWS_OPERATORS:
                share = 1.0 if total else None  # NoTimeout: Spark does not even store one
            return StateStats(
                target=target.label, batch_id=batch, rows=total,
                rows_per_partition=dict(sorted(per_part.items())),
                skew=round(max(per_part.values()) / mean, 2) if mean else None,
                value_bytes=_percentiles(sized, "size"), largest=largest,
                watermark_ms=watermark, no_timeout_share=share,
                timeout_minus_watermark_s=timeouts)
        return collect(compute, f"computing statistics of {target.label}")
    finally:
        df.unpersist()


@dataclass(frozen=True)
class BatchChanges:
    batch_id: int
    upserts: int
    deletes: int


def summarize_changes(changes: DataFrame) -> list[BatchChanges]:
    """Per batch: upserts (``update``) and deletes, from a change-feed DataFrame."""

    def compute():
        rows = changes.groupBy("batch_id").agg(
            F.sum(F.when(F.col("change_type") == "delete", 0).otherwise(1)).alias("upserts"),
            F.sum(F.when(F.col("change_type") == "delete", 1).otherwise(0)).alias("deletes"),
        ).orderBy("batch_id").collect()
        return [BatchChanges(r.batch_id, int(r.upserts), int(r.deletes)) for r in rows]
    return collect(compute, "summarising the change feed")


@dataclass(frozen=True)
class OperatorRow:
    operator_id: int
    store: str
    spark: dict[str, Any] | None
    """What ``state-metadata`` returned (None: nothing)."""
    statekit: dict[str, Any] | None
    """What the pure-Python model says (None: nothing)."""

    @property
    def agree(self) -> bool:
        return self.spark == self.statekit

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agree": self.agree}


def compare_operators(spark: SparkSession, ckpt: Checkpoint, path: str) -> list[OperatorRow]:
    """Spark's ``state-metadata`` reader beside the model, one row per operator/store."""
    theirs = {}
    for r in collect(lambda: read_metadata(spark, path).collect(), "reading state-metadata"):
        theirs[(r.operatorId, r.stateStoreName)] = {
            "operator_name": r.operatorName, "num_partitions": r.numPartitions,
            "min_batch_id": r.minBatchId, "max_batch_id": r.maxBatchId}
    committed = ckpt.committed_batches
    ours = {}
    for op in ckpt.operators.values():
        for store in op.stores:
            ours[(op.operator_id, store.name)] = {
                "operator_name": op.name, "num_partitions": store.num_partitions,
                "min_batch_id": committed[0] if committed else None,
                "max_batch_id": committed[-1] if committed else None}
    return [OperatorRow(op, store, theirs.get((op, store)), ours.get((op, store)))
            for op, store in sorted(set(theirs) | set(ours))]


@dataclass(frozen=True)
class ExportResult:
    out: str
    format: str
    rows: int
    seconds: float


def export_rows(spark: SparkSession, target: StateTarget, batch: int, out: str, fmt: str,
                on_progress: Callable[[int, int], None] | None = None) -> ExportResult:
    """Write every row of ``target`` with Spark (no collect): flattened key/value columns
    plus ``partition_id`` and ``batch_id``. ``fmt``: parquet, jsonl or csv."""

    df = flatten(read_state(spark, target)).withColumn("batch_id", F.lit(batch))
    if fmt == "csv":  # CSV has no nested types: nested values become JSON text
        df = df.select(*[F.to_json(F.col(f"`{f.name}`")).alias(f.name)
                         if f.dataType.typeName() in ("struct", "array", "map")
                         else F.col(f"`{f.name}`") for f in df.schema.fields])
    writer = df.write.format({"jsonl": "json"}.get(fmt, fmt)).mode("error")
    if fmt == "csv":
        writer = writer.option("header", "true")
    if not is_connect(spark):  # a Connect session has no SparkContext; its jobs are tagged
        spark.sparkContext.setJobGroup("statekit-export", f"export {target.label}")
    started = time.perf_counter()
    run_with_progress(spark, lambda: collect(lambda: writer.save(out),
                                             f"exporting {target.label}"), on_progress)
    elapsed = time.perf_counter() - started
    rows = collect(lambda: _count_written(spark, out, fmt, df.columns), "counting exported rows")
    return ExportResult(out, fmt, rows, round(elapsed, 3))


def _count_written(spark: SparkSession, out: str, fmt: str, columns: list[str]) -> int:
    """Rows in what was just written, cheaply: Parquet from its footers; JSON lines and CSV
    as lines of text (no schema inference), minus one header line per CSV file."""

    if fmt == "parquet":
        return spark.read.parquet(out).count()
    lines = spark.read.text(out)
    if fmt == "csv":
        header = ",".join(columns)
        return lines.where(F.col("value") != F.lit(header)).count()
    return lines.count()


def run_with_progress(spark: SparkSession, action: Callable[[], Any],
                      on_progress: Callable[[int, int], None] | None) -> Any:
    """Run ``action`` in a thread; report (finished tasks, known tasks) of its active stages
    every 0.2 s through ``on_progress`` (Spark's status tracker; no UI needed)."""
    if on_progress is None:
        return action()
    if is_connect(spark):
        return _run_with_connect_progress(spark, action, on_progress)
    result: dict[str, Any] = {}
    group = f"statekit-{uuid.uuid4().hex}"
    context = spark.sparkContext

    def work():
        try:
            context.setJobGroup(group, "statekit", interruptOnCancel=False)
            result["value"] = action()
        except BaseException as error:  # re-raised in the caller's thread
            result["error"] = error

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    tracker = context.statusTracker()
    seen: dict[int, tuple[int, int]] = {}

    def poll() -> tuple[int, int]:
        """The group's stages, including finished ones (a quick job may start and end
        between two polls)."""
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    seen[stage_id] = (info.numCompletedTasks, info.numTasks)
        return sum(d for d, _ in seen.values()), sum(t for _, t in seen.values())

    while thread.is_alive():
        on_progress(*poll())
        thread.join(0.2)
    _, total = poll()
    on_progress(total, total)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _run_with_connect_progress(spark: SparkSession, action: Callable[[], Any],
                               on_progress: Callable[[int, int], None]) -> Any:
    """Over Spark Connect the server streams each query's stages as it runs: (finished
    tasks, known tasks) from them, as :func:`run_with_progress` reports from the tracker."""
    from pyspark.sql.connect.shell.progress import ProgressHandler

    class TaskCounts(ProgressHandler):
        seen = (0, 0)

        def __call__(self, stages: Any, inflight_tasks: int, operation_id: str | None,
                     done: bool) -> None:
            stages = list(stages or ())
            self.seen = (sum(s.num_completed_tasks for s in stages),
                         sum(s.num_tasks for s in stages))
            on_progress(*self.seen)

    handler = TaskCounts()
    spark.registerProgressHandler(handler)
    try:
        value = action()
    finally:
        spark.removeProgressHandler(handler)
    on_progress(handler.seen[1], handler.seen[1])
    return value
