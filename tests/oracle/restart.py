"""The restart harness: start the query that wrote a checkpoint again and see what Spark does.

``run_query`` runs a kind's query on a checkpoint (``trigger(availableNow=True)``: every input
file not yet processed, then it stops) into its file sink and returns an :class:`Outcome`:
Spark's error, or ``None`` when the query ran to the end. ``end_state`` reads every store of a
checkpoint through Spark's own ``statestore`` reader (transformWithState: its raw rows of every
column family, timers included) as a multiset, so two restarts can be compared row for row.

Everything runs in the caller's (shared) session; state-store providers a run loaded are
unloaded after it, so their maintenance never writes into a checkpoint after the run.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass
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
    """Run ``kind``'s query on ``checkpoint`` to the end of ``input_dir`` (its progress
    reports, as JSON lines, into ``progress_log`` when given)."""
    from statekit.jobs.state_reader import session_confs
    from tests.oracle.kinds import stream

    started = time.perf_counter()
    df, mode = stream(spark, kind, input_dir)
    query = None
    try:
        with session_confs(spark, kind.confs):
            query = (df.writeStream.format("parquet").option("path", str(sink))
                     .outputMode(mode).option("checkpointLocation", str(checkpoint))
                     .trigger(availableNow=True).start())
            if not query.awaitTermination(timeout_s):
                query.stop()
                return Outcome(f"hang: still running after {timeout_s:.0f} s",
                               time.perf_counter() - started)
    except Exception as error:  # Spark's failure is the observation
        return Outcome(_with_causes(error), time.perf_counter() - started, _batches(query))
    finally:
        unload_state_stores(spark)
    if progress_log is not None:
        progress_log.write_text("".join(p.json.replace("\n", " ") + "\n"
                                        for p in query.recentProgress))
    return Outcome(None, time.perf_counter() - started, _batches(query))


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


def end_state(spark, checkpoint: Path, layout: Path | None = None) -> Counter:
    """Every (operator, store, row) of the checkpoint's last committed batch, as Spark's
    state data source reads it, as a multiset: keys and values as JSON (transformWithState:
    the raw rows of every column family, hex). Which operators and stores to read, and the
    confs to read them with, come from ``layout`` (the undamaged original) when given, so a
    damaged file statekit itself cannot parse does not stand between Spark and its state."""
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
    committed = [int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()]
    batch = max(committed)
    rows: Counter = Counter()
    with session_confs(spark, reader_confs(ckpt)):
        for op_id, meta in ckpt.operators.items():
            for store in ckpt.inventory.stores(op_id):
                if meta.name in SPARK_KEYED_OPERATORS:
                    frame = read_raw_rows(spark, str(checkpoint), batch, op_id, store).select(
                        F.to_json(F.struct("column_family_name", F.hex("key_bytes"),
                                           F.hex("value_bytes"))))
                else:
                    frame = read_state(spark, StateTarget(
                        str(checkpoint), op_id, meta.name, store, batch_id=batch))
                    key = F.col("key")
                    if store.endswith("keyWithIndexToValue"):
                        # a join key's values sit at indexes 0..n-1 in arrival order, which
                        # the shuffle does not fix from run to run: compare them as a multiset
                        key = key.dropFields("index")
                    frame = frame.select(F.to_json(F.struct(key.alias("key"), "value")))
                for (row,) in frame.collect():
                    rows[(op_id, store, row)] += 1
    unload_state_stores(spark)
    return rows


def digest(state: Counter) -> str:
    """A short fingerprint of an end state (equal states, equal digests)."""
    text = "\n".join(f"{op}|{store}|{row}|{n}" for (op, store, row), n in sorted(state.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
