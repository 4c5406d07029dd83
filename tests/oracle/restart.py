"""The restart harness: start the query that wrote a checkpoint again and see what Spark does.

``run_query`` runs a kind's query on a checkpoint (``trigger(availableNow=True)``: every input
file not yet processed, then it stops) into its sink — a Parquet file sink, a ``foreachBatch``
function that appends each batch's rows under ``<sink>/batch=<id>/``, or ``noop`` — and
returns an :class:`Outcome`: Spark's error, or ``None`` when the query ran to the end, and the
batches it ran. ``end_state`` reads every store of a checkpoint through Spark's own
``statestore`` reader (transformWithState: its raw rows of every column family, timers
included) as a multiset of (key, value) rows, and ``sink_rows`` reads what the sink holds, so
two restarts can be compared row for row: :func:`state_diff` and :func:`sink_diff` say which
rows were lost, changed, added or written twice — the *outcome* of a restart that ran.

Everything runs in the caller's (shared) session; state-store providers a run loaded are
unloaded after it, so their maintenance never writes into a checkpoint after the run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

RESTART_TIMEOUT_S = 240
"""A restart still running after this long is stopped and reported as hanging."""


@dataclass(frozen=True)
class Outcome:
    error: str | None
    """Spark's error (``None``: the query ran to the end of its input)."""
    seconds: float
    batches: int = 0
    """Batches the run completed."""
    batch_ids: tuple[int, ...] = ()
    """The ids of the batches the run executed (its progress reports that ran a batch; a run
    that failed: none known)."""

    @property
    def restarted(self) -> bool:
        return self.error is None

    @property
    def error_line(self) -> str | None:
        """The most telling line of the error: the first ``[ERROR_CLASS]`` one, else the
        first line naming an exception."""
        if self.error is None:
            return None
        from statekit.jobs.state_reader import _spark_error_line

        return _spark_error_line(Exception(self.error))[:400]


def unload_state_stores(spark) -> None:
    """Stop every loaded state store provider and its maintenance (local mode: the driver
    is the executor), so nothing writes into a checkpoint after its query stopped."""
    getattr(spark._jvm, "org.apache.spark.sql.execution.streaming.state.StateStore").stop()


def run_query(spark, kind, checkpoint: Path, sink: Path, input_dir: Path,
              timeout_s: float = RESTART_TIMEOUT_S, progress_log: Path | None = None
              ) -> Outcome:
    """Run ``kind``'s query on ``checkpoint`` to the end of ``input_dir`` into its sink at
    ``sink`` (its progress reports, as JSON lines, into ``progress_log`` when given).

    An ``availableNow`` run stops at its first batch without new data: a restart whose
    first planning re-logs files a lost source entry had (the entry id the query already
    ran) stops there and leaves the newer files to the next run, which a query that keeps
    running reaches on its next trigger. A run that ran no batch is therefore run once
    more, and the two count as one restart."""
    first = _run_once(spark, kind, checkpoint, sink, input_dir, timeout_s, progress_log)
    if first.error is not None or first.batch_ids:
        return first
    again = _run_once(spark, kind, checkpoint, sink, input_dir, timeout_s, progress_log)
    return Outcome(again.error, first.seconds + again.seconds,
                   first.batches + again.batches, again.batch_ids)


def _run_once(spark, kind, checkpoint: Path, sink: Path, input_dir: Path, timeout_s: float,
              progress_log: Path | None) -> Outcome:
    from statekit.jobs.state_reader import session_confs
    from tests.oracle.kinds import stream

    started = time.perf_counter()
    df, mode = stream(spark, kind, input_dir)
    query = None
    try:
        with session_confs(spark, kind.confs):
            writer = df.writeStream.outputMode(mode).option("checkpointLocation",
                                                            str(checkpoint))
            if kind.sink == "file":
                writer = writer.format("parquet").option("path", str(sink))
            elif kind.sink == "foreach-batch":
                writer = writer.foreachBatch(append_batch(sink))
            elif kind.sink == "noop":
                writer = writer.format("noop")
            else:
                raise ValueError(kind.sink)
            query = writer.trigger(availableNow=True).start()
            if not query.awaitTermination(timeout_s):
                query.stop()
                return Outcome(f"hang: still running after {timeout_s:.0f} s",
                               time.perf_counter() - started)
    except Exception as error:  # Spark's failure is the observation
        return Outcome(_with_causes(error), time.perf_counter() - started, _batches(query))
    finally:
        unload_state_stores(spark)
    progress = [p.json for p in query.recentProgress]
    if progress_log is not None:
        progress_log.write_text("".join(p.replace("\n", " ") + "\n" for p in progress))
    return Outcome(None, time.perf_counter() - started, len(progress), ran_batches(progress))


def append_batch(sink: Path):  # type: ignore[no-untyped-def]
    """The ``foreachBatch`` function of the ``foreach-batch`` kinds: each call appends the
    batch's rows as Parquet under ``<sink>/batch=<id>/`` and writes nothing else, so a batch
    that reaches the sink twice leaves its rows there twice (at-least-once, as most
    hand-written foreachBatch sinks are)."""
    def write(frame, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        (frame.write.mode("append")
         .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
         .parquet(str(sink / f"batch={batch_id}")))
    return write


def ran_batches(progress: list[str]) -> tuple[int, ...]:
    """The ids of the batches that ran, from progress reports (JSON): a report whose
    ``durationMs`` has ``addBatch`` ran its batch (an idle report has none)."""
    ids = []
    for text in progress:
        report = json.loads(text)
        if "addBatch" in (report.get("durationMs") or {}):
            ids.append(int(report["batchId"]))
    return tuple(sorted(set(ids)))


def progress_batches(progress_log: Path) -> tuple[int, ...]:
    """:func:`ran_batches` of a progress log written by :func:`run_query`."""
    return ran_batches([line for line in progress_log.read_text().splitlines() if line])


def _with_causes(error: BaseException) -> str:
    """Spark's message and the messages of its JVM causes (pyspark's captured exceptions
    keep them apart from ``str()``)."""
    parts = [str(error) or type(error).__name__]
    cause = getattr(error, "cause", None)
    for _ in range(8):
        if cause is None:
            break
        parts.append(f"Caused by: {cause}")
        cause = getattr(cause, "cause", None)
    trace = getattr(error, "_stackTrace", None) or getattr(error, "stackTrace", None)
    if isinstance(trace, str):
        parts.append(trace[:3000])
    return "\n".join(parts)


def _batches(query) -> int:
    if query is None:
        return 0
    try:
        return len(query.recentProgress)
    except Exception:
        return 0


State = Counter
"""An end state: ``(operator, store, key, value) -> count``, key and value as JSON."""


def end_state(spark, checkpoint: Path, layout: Path | None = None, batch: int | None = None
              ) -> State:
    """Every (operator, store, key, value) of the checkpoint's state at ``batch`` (default:
    its last committed batch), as Spark's state data source reads it, as a multiset: key and
    value as JSON, apart (transformWithState: the raw rows of every column family, the key as
    ``{column family, key bytes}`` and the value as hex). Which operators and stores to read,
    and the confs to read them with, come from ``layout`` (the undamaged original) when
    given, so a damaged file statekit itself cannot parse does not stand between Spark and
    its state."""
    from pyspark.sql import functions as F

    from statekit.checkpoint import open_checkpoint
    from statekit.jobs.raw_rows import read_raw_rows
    from statekit.jobs.state_reader import (
        StateTarget,
        read_state,
        reader_confs,
        session_confs,
    )
    from statekit.writes.partition_key import SPARK_KEYED_OPERATORS

    ckpt = open_checkpoint(str(layout or checkpoint))
    if batch is None:
        batch = newest_commit(checkpoint)
    rows: Counter = Counter()
    try:
        with session_confs(spark, reader_confs(ckpt)):
            for op_id, meta in ckpt.operators.items():
                for store in ckpt.inventory.stores(op_id):
                    if meta.name in SPARK_KEYED_OPERATORS:
                        frame = read_raw_rows(spark, str(checkpoint), batch, op_id,
                                              store).select(
                            F.to_json(F.struct("column_family_name", F.hex("key_bytes"))),
                            F.hex("value_bytes"))
                    else:
                        frame = read_state(spark, StateTarget(
                            str(checkpoint), op_id, meta.name, store, batch_id=batch))
                        key = F.col("key")
                        if store.endswith("keyWithIndexToValue"):
                            # a join key's values sit at indexes 0..n-1 in arrival order,
                            # which the shuffle does not fix from run to run: compare them as
                            # a multiset
                            key = key.dropFields("index")
                        frame = frame.select(F.to_json(F.struct(key.alias("key"))),
                                             F.to_json(F.struct("value")))
                    for key_json, value_json in frame.collect():
                        rows[(op_id, store, _unnamed(key_json), _unnamed(value_json))] += 1
    finally:
        unload_state_stores(spark)
    return rows


def _unnamed(text: str | None) -> str | None:
    """A row as JSON with its field names left out (values in field order): the reader
    names fields after the checkpoint's schema file, which the query does not read its
    state by — a name that rotted there is not other state."""
    if text is None:
        return None

    def values(node: object) -> object:
        if isinstance(node, dict):
            return [values(v) for v in node.values()]
        if isinstance(node, list):
            return [values(v) for v in node]
        return node

    try:
        return json.dumps(values(json.loads(text)), separators=(",", ":"))
    except ValueError:
        return text


def newest_commit(checkpoint: Path) -> int | None:
    """The newest batch in ``commits/`` (``None``: none)."""
    folder = checkpoint / "commits"
    committed = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] \
        if folder.is_dir() else []
    return max(committed, default=None)


def digest(state: State) -> str:
    """A short fingerprint of an end state (equal states, equal digests)."""
    text = "\n".join(f"{op}|{store}|{key}|{value}|{n}"
                     for (op, store, key, value), n in sorted(state.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------ outcomes, measured
@dataclass(frozen=True)
class StateDiff:
    """A damaged restart's state against the healthy one's, in keys and values."""

    lost_keys: int
    """Keys (per operator and store, counted as a multiset) the healthy state has and this
    one lacks."""
    extra_keys: int
    """Keys this state has and the healthy one lacks."""
    changed_values: int
    """Rows whose key both have but whose value differs."""

    @property
    def same(self) -> bool:
        return not (self.lost_keys or self.extra_keys or self.changed_values)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def state_diff(healthy: State, damaged: State) -> StateDiff:
    """How ``damaged`` differs from ``healthy``: keys lost, keys added, values changed."""
    healthy_keys, damaged_keys = _keys_of(healthy), _keys_of(damaged)
    lost = healthy_keys - damaged_keys
    rows_gone = healthy - damaged
    # a healthy row gone while its key stayed had its value changed (per key, the rows gone
    # beyond the key's lost count)
    changed = sum(rows_gone.values()) - sum(lost.values())
    return StateDiff(sum(lost.values()), sum((damaged_keys - healthy_keys).values()), changed)


def _keys_of(state: State) -> Counter:
    keys: Counter = Counter()
    for (op, store, key, _value), n in state.items():
        keys[(op, store, key)] += n
    return keys


Rows = Counter
"""A sink's rows: ``(key, row) -> count``, both JSON; ``key`` is the row's
:data:`tests.oracle.kinds.OUTPUT_KEYS` columns."""


def sink_rows(spark, kind, sink: Path, input_dir: Path) -> Rows:
    """The rows the sink at ``sink`` holds, as a multiset. A file sink is read the way every
    reader of it reads it: through its ``_spark_metadata`` log (files it does not list are
    not there; a damaged log fails the read). A ``foreach-batch`` sink: every row appended
    under ``batch=<id>/`` (the batch id left out: a row written by two batches is there
    twice). ``noop``: nothing, ever."""
    from pyspark.sql import functions as F

    from tests.oracle.kinds import OUTPUT_KEYS, stream

    if kind.sink == "noop" or not sink.exists():
        return Counter()
    schema = stream(spark, kind, input_dir)[0].schema
    if kind.sink == "foreach-batch":
        paths = [str(p) for p in sorted(sink.glob("batch=*")) if p.is_dir()]
        if not paths:
            return Counter()
        frame = spark.read.schema(schema).parquet(*paths)
    else:
        frame = spark.read.schema(schema).parquet(str(sink))
    names = [f.name for f in schema.fields]
    keys = [k for k in OUTPUT_KEYS.get(kind.query, ()) if k in names] or names
    rows: Counter = Counter()
    for key_json, row_json in frame.select(F.to_json(F.struct(*keys)),
                                           F.to_json(F.struct(*names))).collect():
        rows[(key_json, row_json)] += 1
    return rows


@dataclass(frozen=True)
class SinkDiff:
    """A damaged restart's sink output against the healthy restart's, in rows."""

    missing: int
    """Healthy rows gone, their key nowhere else in the extra rows: lost."""
    changed: int
    """Healthy rows gone whose key is in an extra row (the same row, other values)."""
    duplicates: int
    """Extra rows equal to a healthy row: written again."""
    other: int
    """Extra rows no healthy row equals, and not a changed row."""

    @property
    def same(self) -> bool:
        return not (self.missing or self.changed or self.duplicates or self.other)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def sink_diff(healthy: Rows, damaged: Rows) -> SinkDiff:
    """How ``damaged`` differs from ``healthy``: rows lost, changed, repeated or new. Rows
    gone and rows added with the same key are paired as changed, per key."""
    gone, added = healthy - damaged, damaged - healthy
    gone_per_key: Counter = Counter()
    for (key, _row), n in gone.items():
        gone_per_key[key] += n
    added_per_key: Counter = Counter()
    duplicates = 0
    for (key, row), n in added.items():
        if healthy[(key, row)] > 0:
            duplicates += n
        else:
            added_per_key[key] += n
    changed = sum(min(n, added_per_key[key]) for key, n in gone_per_key.items())
    missing = sum(gone_per_key.values()) - changed
    other = sum(added_per_key.values()) - changed
    return SinkDiff(missing, changed, duplicates, other)
