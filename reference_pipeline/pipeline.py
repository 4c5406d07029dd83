"""The reference fraud/session streaming query: file source → applyInPandasWithState → Parquet.

This is the query every statekit test and the demo run, so it is written the way a careful
team would run it in production:

* events are read with an explicit schema, one file per micro-batch (``maxFilesPerTrigger``);
* a 5-minute event-time watermark and ``GroupStateTimeout.EventTimeTimeout`` — bounded runs
  (``availableNow``) finish, and Spark drops events behind the watermark;
* the per-user logic is the pure state machine in ``state_machine.py``; this module only
  adapts it to ``applyInPandasWithState`` (rows in, rows out, update/remove/timeout);
* alerts and session summaries go to an exactly-once Parquet sink.

The ``leaky`` variant swaps in ``leaky.py``: no timeout, no remove, a growing list in state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pandas as pd

from statekit.reference_pipeline.generator import EVENTS_DIR
from statekit.reference_pipeline.leaky import LEAKY_STATE_SCHEMA_DDL, LeakyState, process_leaky
from statekit.reference_pipeline.state_machine import (
    STATE_SCHEMA_DDL,
    Alert,
    Event,
    EventType,
    Output,
    SessionSummary,
    UserSession,
    expire,
    process,
)
from statekit.support.errors import StatekitError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
PARTITIONS_CONF = "spark.sql.shuffle.partitions"
MIN_DELTAS_CONF = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
MAINTENANCE_CONF = "spark.sql.streaming.stateStore.maintenanceInterval"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"

EVENT_SCHEMA_DDL = (
    "event_id STRING, event_type STRING, user_id STRING, card_id STRING, amount DOUBLE, "
    "currency STRING, merchant_category STRING, country STRING, event_time TIMESTAMP"
)
OUTPUT_COLUMNS = ("kind", "user_id", "event_ms", "session_start_ms", "last_event_ms",
                  "txn_count", "total_amount", "phase", "reason", "detail")
OUTPUT_SCHEMA_DDL = (
    "kind STRING, user_id STRING, event_ms LONG, session_start_ms LONG, last_event_ms LONG, "
    "txn_count LONG, total_amount DOUBLE, phase STRING, reason STRING, detail STRING"
)


@dataclass(frozen=True)
class RunOptions:
    """How to run the reference query. Mirrors ``python -m reference_pipeline run``."""

    landing: Path
    checkpoint: str
    output: str
    provider: str = "hdfs"
    partitions: int = 8
    min_deltas_for_snapshot: int | None = None
    maintenance_interval: str | None = None
    changelog: bool = False
    watermark_delay: str = "5 minutes"
    leaky: bool = False
    trigger: str = "available-now"
    """``available-now`` (process what is there, then stop) or ``processing-time``."""
    interval: str = "10 seconds"
    """Trigger interval for ``processing-time``."""
    max_files_per_trigger: int = 1
    timeout_s: float | None = None
    """Stop a processing-time run after this many seconds (None: until interrupted)."""
    progress_log: Path | None = None
    """Append every StreamingQueryProgress as one JSON line here."""
    extra_confs: tuple[tuple[str, str], ...] = ()
    """More SQL confs to set before the start (e.g. checkpointFormatVersion=2)."""

    def sql_confs(self) -> dict[str, str]:
        """SQL confs to set before the query starts (Spark pins most in the offset log)."""
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {sorted(PROVIDERS)}, not {self.provider!r}")
        confs = {PROVIDER_CONF: PROVIDERS[self.provider], PARTITIONS_CONF: str(self.partitions)}
        if self.min_deltas_for_snapshot is not None:
            confs[MIN_DELTAS_CONF] = str(self.min_deltas_for_snapshot)
        if self.maintenance_interval is not None:
            confs[MAINTENANCE_CONF] = self.maintenance_interval
        if self.provider == "rocksdb":
            confs[CHANGELOG_CONF] = str(self.changelog).lower()
        confs.update(self.extra_confs)
        return confs


@dataclass
class RunResult:
    """What one invocation did, plus the totals found in the sink afterwards."""

    progress: list[dict] = field(default_factory=list)
    alerts_total: int = 0
    sessions_total: int = 0
    output_rows: int = 0

    @property
    def batches(self) -> list[int]:
        return [p["batchId"] for p in self.progress]

    @property
    def input_rows(self) -> int:
        return sum(p.get("numInputRows", 0) for p in self.progress)

    def state_keys(self) -> int | None:
        """Rows in state after the last batch of this run (None if no batch ran)."""
        for p in reversed(self.progress):
            if p.get("stateOperators"):
                return int(p["stateOperators"][0]["numRowsTotal"])
        return None

    def keys_per_batch(self) -> list[tuple[int, int, int]]:
        """(batchId, numInputRows, state rows after it) for every batch of this run."""
        return [(p["batchId"], p.get("numInputRows", 0),
                 int(p["stateOperators"][0]["numRowsTotal"]))
                for p in self.progress if p.get("stateOperators")]


# -- the applyInPandasWithState adapters (run in Python workers) ------------------------------

def _events(frames: Iterable[pd.DataFrame]) -> list[Event]:
    events = []
    for frame in frames:
        for row in frame.itertuples(index=False):
            amount = 0.0 if pd.isna(row.amount) else float(row.amount)
            country = "" if pd.isna(row.country) else str(row.country)
            events.append(Event(EventType(row.event_type), int(row.event_ms), str(row.event_id),
                                amount, country))
    return events


def output_record(output: Output) -> dict:
    """One sink row for an alert or a session summary."""
    if isinstance(output, Alert):
        detail = {"window_txns": output.window_txns, "window_amount": output.window_amount,
                  "from_country": output.from_country, "to_country": output.to_country}
        return {"kind": "alert", "user_id": output.user_id, "event_ms": output.alert_ms,
                "session_start_ms": output.session_start_ms, "last_event_ms": output.alert_ms,
                "txn_count": None, "total_amount": None, "phase": "Flagged",
                "reason": output.reason, "detail": json.dumps(detail, sort_keys=True)}
    assert isinstance(output, SessionSummary)
    return {"kind": "session", "user_id": output.user_id, "event_ms": output.closed_ms,
            "session_start_ms": output.session_start_ms, "last_event_ms": output.last_event_ms,
            "txn_count": output.txn_count, "total_amount": output.total_amount,
            "phase": output.final_phase.value, "reason": output.close_reason.value,
            "detail": json.dumps({"alerted": output.alerted})}


def _frame(outputs: Iterable[Output]) -> Iterator[pd.DataFrame]:
    records = [output_record(o) for o in outputs]
    if records:
        yield pd.DataFrame.from_records(records, columns=list(OUTPUT_COLUMNS))


def fraud_session_fn(key, frames, state) -> Iterator[pd.DataFrame]:
    """applyInPandasWithState function of the normal (bounded) pipeline."""
    user = str(key[0])
    current = UserSession.from_row(state.get) if state.exists else None
    if state.hasTimedOut:
        assert current is not None  # Spark times out only keys that hold state
        step = expire(user, current)
    else:
        step = process(user, current, _events(frames))
    if step.state is None:
        if state.exists:
            state.remove()
    else:
        state.update(step.state.to_row())
        state.setTimeoutTimestamp(step.timeout_ms)
    yield from _frame(step.outputs)


def leaky_fn(key, frames, state) -> Iterator[pd.DataFrame]:
    """applyInPandasWithState function of the leaky variant: never removes, never times out."""
    user = str(key[0])
    current = LeakyState.from_row(state.get) if state.exists else None
    updated, alerts = process_leaky(user, current, _events(frames))
    state.update(updated.to_row())
    yield from _frame(alerts)


# -- building and running the query ----------------------------------------------------------

def events_stream(spark: SparkSession, opts: RunOptions) -> DataFrame:
    from pyspark.sql import functions as F

    source = str(Path(opts.landing) / EVENTS_DIR)
    return (
        spark.readStream.schema(EVENT_SCHEMA_DDL)
        .option("maxFilesPerTrigger", opts.max_files_per_trigger)
        .json(source)
        .where(F.col("user_id").isNotNull() & F.col("event_time").isNotNull()
               & F.col("event_type").isin([t.value for t in EventType]))
        .select("user_id", "event_id", "event_type", "amount", "country", "event_time",
                F.unix_millis("event_time").alias("event_ms"))
    )


def alerts_and_sessions(spark: SparkSession, opts: RunOptions) -> DataFrame:
    """The streaming DataFrame of sink rows (alerts and session summaries)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    events = events_stream(spark, opts).withWatermark("event_time", opts.watermark_delay)
    grouped = events.groupBy("user_id")
    if opts.leaky:
        rows = grouped.applyInPandasWithState(leaky_fn, OUTPUT_SCHEMA_DDL, LEAKY_STATE_SCHEMA_DDL,
                                              "append", GroupStateTimeout.NoTimeout)
    else:
        rows = grouped.applyInPandasWithState(fraud_session_fn, OUTPUT_SCHEMA_DDL,
                                              STATE_SCHEMA_DDL, "append",
                                              GroupStateTimeout.EventTimeTimeout)
    return rows.select(
        *OUTPUT_COLUMNS,
        F.timestamp_millis("event_ms").alias("event_time"),
        F.timestamp_millis("session_start_ms").alias("session_start"),
    )


@contextmanager
def _code_by_value(spark: SparkSession) -> Iterator[None]:
    """Over Spark Connect, pickle statekit's code into the query's functions.

    Observed with Spark 4.3's Connect server: the Python workers of a *streaming* query do
    not import the session's Python artifacts (batch jobs do), so a function that refers to
    statekit's modules fails there with ``No module named 'statekit'``. Pickled by value,
    the pipeline's functions carry the statekit code they use."""
    from statekit.jobs.connect import is_connect

    if not is_connect(spark):
        yield
        return
    from pyspark import cloudpickle

    import statekit

    cloudpickle.register_pickle_by_value(statekit)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(statekit)


def start_query(spark: SparkSession, opts: RunOptions) -> StreamingQuery:
    with _code_by_value(spark):
        return _start_query(spark, opts)


def _start_query(spark: SparkSession, opts: RunOptions) -> StreamingQuery:
    for key, value in opts.sql_confs().items():
        spark.conf.set(key, value)
    writer = (
        alerts_and_sessions(spark, opts).writeStream.format("parquet")
        .option("path", opts.output)
        .option("checkpointLocation", opts.checkpoint)
        .outputMode("append")
        .queryName("reference_fraud_sessions" + ("_leaky" if opts.leaky else ""))
    )
    if opts.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    elif opts.trigger == "processing-time":
        writer = writer.trigger(processingTime=opts.interval)
    else:
        raise ValueError(f"trigger must be available-now or processing-time, not {opts.trigger!r}")
    return writer.start()


def _executed_batches(query: StreamingQuery) -> list[dict]:
    """Progress of batches that ran. Spark also reports *idle* progress (the next batch id,
    nothing executed) when a trigger finds no data; those are not batches."""
    out = []
    for p in query.recentProgress:
        progress = json.loads(p.json) if hasattr(p, "json") else dict(p)
        if "addBatch" in progress.get("durationMs", {}):
            out.append(with_totals(progress))
    return out


ROW_TOTALS = ("numInputRows", "inputRowsPerSecond", "processedRowsPerSecond")


def with_totals(progress: dict) -> dict:
    """``progress`` with the query-wide row totals the JVM's ``StreamingQueryProgress.json``
    has: the sums over its sources. A Spark Connect client's progress leaves them out, and the
    progress log is read by statekit's recovery and growth estimates."""
    sources = progress.get("sources") or []
    for name in ROW_TOTALS:
        values = [s[name] for s in sources if isinstance(s.get(name), (int, float))]
        if name not in progress and values:
            progress[name] = sum(values)
    return progress


def _open_progress_log(path: Path) -> TextIO:
    """Append to the progress log, creating its folder; unusable paths are bad input."""
    from statekit.support.errors import BadInput

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a", encoding="utf-8")
    except OSError as error:
        raise BadInput(f"cannot write the progress log: {error.strerror or error}",
                       path=str(path)) from None


def run(
    spark: SparkSession,
    opts: RunOptions,
    on_batch: Callable[[dict], None] | None = None,
) -> RunResult:
    """Run the query until the input is drained (availableNow) or the timeout; collect
    progress. Raises ``statekit.support.errors.JobFailed`` (one line) when the query fails."""
    from statekit.jobs.errors import job_failed

    result = RunResult()
    seen: set[int] = set()
    log = _open_progress_log(opts.progress_log) if opts.progress_log else None
    started = time.monotonic()

    def drain() -> None:
        for progress in _executed_batches(query):
            if progress["batchId"] in seen:
                continue
            seen.add(progress["batchId"])
            result.progress.append(progress)
            if log:
                log.write(json.dumps(progress, separators=(",", ":")) + "\n")
                log.flush()
            if on_batch:
                on_batch(progress)

    try:
        query = start_query(spark, opts)
        try:
            # pyspark annotates the timeout as int but takes float seconds (int(timeout * 1000))
            while not query.awaitTermination(0.5):  # type: ignore[arg-type]
                drain()
                if opts.timeout_s is not None and time.monotonic() - started > opts.timeout_s:
                    query.stop()
                    break
        except KeyboardInterrupt:
            query.stop()
            raise
        finally:
            drain()
        failure = query.exception()
        if failure is not None:
            raise job_failed("the reference pipeline query", failure)
    except StatekitError:
        raise
    except Exception as exc:  # analysis errors, py4j errors: one line, not a JVM trace
        raise job_failed("the reference pipeline query", exc) from exc
    finally:
        if log:
            log.close()
    totals = read_output(spark, opts.output).groupBy("kind").count().collect()
    counts = {row["kind"]: row["count"] for row in totals}
    result.alerts_total = counts.get("alert", 0)
    result.sessions_total = counts.get("session", 0)
    result.output_rows = sum(counts.values())
    return result


def read_output(spark: SparkSession, output: str) -> DataFrame:
    """The sink's committed rows (through its ``_spark_metadata`` log: exactly-once)."""
    from pyspark.sql.types import StructType

    if not _has_files(output):
        schema = StructType.fromDDL(OUTPUT_SCHEMA_DDL)
        assert isinstance(schema, StructType)  # annotated DataType; a column list is a struct
        no_rows: list[tuple[Any, ...]] = []
        return spark.createDataFrame(no_rows, schema)
    return spark.read.parquet(output)


def local_path(location: str) -> Path | None:
    """The local path of a plain path or ``file:`` URL; None for any other URL (s3://, …)."""
    if location.startswith("file:"):
        return Path("/" + location.removeprefix("file:").lstrip("/"))
    if "://" in location:
        return None
    return Path(location)


def _has_files(location: str) -> bool:
    local = local_path(location)
    if local is None:
        return True  # remote: let Spark decide
    return local.exists() and any(local.glob("*.parquet"))
