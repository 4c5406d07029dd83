"""StreamingQueryProgress history: state size per operator beyond what the checkpoint retains.

A checkpoint keeps only the last ``minBatchesToRetain`` versions (100 by default), often a few
minutes of history — too little to see a slow leak. Teams usually have more: a
StreamingQueryListener that logs every ``QueryProgressEvent`` as one JSON line, or a dump of
``query.recentProgress``. Each progress object carries, per stateful operator, ``numRowsTotal``
(live keys), ``numRowsUpdated``, ``numRowsRemoved`` and ``memoryUsedBytes``.

Accepted input: JSON lines (one progress object per line; other lines, e.g. log noise without
a ``batchId``, are skipped) or one JSON array of progress objects. Progress events of idle
triggers (no ``addBatch`` duration: nothing ran) are dropped, and a batch reported twice (a
restart re-running it) keeps its last report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from statekit.formats.jsontext import loads_json
from statekit.support.errors import BadInput, CorruptFile


def read_text(path: str, storage_options: dict[str, Any] | None = None) -> str:
    """The text of a progress log (any fsspec URL); one-line errors naming the file."""
    import fsspec

    try:
        opened = fsspec.open(path, "rt", encoding="utf-8", **(storage_options or {}))
        kind = opened.fs.info(opened.path).get("type")
        if kind not in ("file", "directory"):  # a FIFO would block the read forever
            raise BadInput("is not a regular file (a FIFO or device?)", path=path)
        with opened as handle:
            text: str = handle.read()
    except FileNotFoundError:
        raise BadInput("no such file", path=path) from None
    except PermissionError:
        raise BadInput("permission denied", path=path) from None
    except IsADirectoryError:
        raise BadInput("is a folder, not a progress log file", path=path) from None
    except UnicodeDecodeError:
        raise BadInput("is not a text file (expected JSON lines)", path=path) from None
    except (OSError, ValueError) as error:
        raise BadInput(f"cannot read: {error}", path=path) from None
    return text


@dataclass(frozen=True)
class ProgressPoint:
    batch_id: int
    timestamp_ms: int | None
    rows_total: int | None
    rows_updated: int | None
    rows_removed: int | None
    memory_bytes: int | None
    input_rows: int | None
    duration_ms: int | None = None
    """The batch's ``durationMs.triggerExecution``."""


@dataclass(frozen=True)
class OperatorProgress:
    """One stateful operator's metrics over the batches of the log."""

    index: int
    """Position in ``stateOperators`` (Spark lists them in plan order, not by operator id)."""
    name: str
    points: tuple[ProgressPoint, ...]

    @property
    def label(self) -> str:
        return f"{self.index}:{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name,
                "points": [asdict(p) for p in self.points]}


def _timestamp_ms(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _objects(text: str, shown: str) -> list[dict[str, Any]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = loads_json(stripped)
        except json.JSONDecodeError as bad:
            raise CorruptFile(f"invalid JSON array: {bad.msg} (line {bad.lineno})",
                              path=shown) from None
        return [d for d in data if isinstance(d, dict)]
    objects: list[dict[str, Any]] = []  # a line starting with "{" parses to an object
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            objects.append(loads_json(line))
        except json.JSONDecodeError as bad:
            raise CorruptFile(f"line {number} is not valid JSON ({bad.msg})",
                              path=shown) from None
    return objects


def _batches(text: str, shown: str) -> dict[int, dict[str, Any]]:
    """The progress object of every batch that ran, by batch id (its last report)."""
    by_batch: dict[int, dict[str, Any]] = {}
    for obj in _objects(text, shown):
        batch = obj.get("batchId")
        if not isinstance(batch, int) or not isinstance(obj.get("stateOperators"), list):
            continue
        if "addBatch" not in (obj.get("durationMs") or {}):
            continue  # an idle trigger: no batch ran
        by_batch[batch] = obj
    if not by_batch:
        raise BadInput("holds no StreamingQueryProgress objects of batches that ran "
                       "(JSON with batchId, durationMs.addBatch and stateOperators)", path=shown)
    return by_batch


@dataclass(frozen=True)
class BatchTiming:
    """One finished batch's durations, for estimating a re-run."""

    batch_id: int
    trigger_s: float
    """``durationMs.triggerExecution``: the whole batch."""
    add_batch_s: float
    """``durationMs.addBatch``: running the plan and writing the sink."""
    run_id: str | None = None
    """``runId``: a new one at every (re)start of the query."""
    input_rows: int | None = None
    """``numInputRows``: what the batch processed (a restart's first batch is measured
    against the run's batches of similar input)."""
    state_rows: int | None = None
    """Every stateful operator's ``numRowsTotal`` after the batch, summed: the rows the next
    batch's restart would load."""
    state_bytes: int | None = None
    """Every stateful operator's ``memoryUsedBytes`` after the batch, summed."""


def runs(timings: Sequence[BatchTiming]) -> list[list[BatchTiming]]:
    """The log's batches split at every (re)start of the query (a new ``runId``)."""
    split: list[list[BatchTiming]] = []
    for timing in timings:
        if not split or timing.run_id != split[-1][-1].run_id:
            split.append([])
        split[-1].append(timing)
    return split


_FILE_SINK = re.compile(r"^FileSink\[(.+)\]$")


def parse_timings(text: str, *, shown: str) -> tuple[list[BatchTiming], str | None]:
    """Batch durations from a progress log, and the file sink's path when the query
    writes to one (``sink.description`` ``FileSink[<path>]``)."""
    timings = []
    sink = None
    for batch, obj in sorted(_batches(text, shown).items()):
        durations = obj["durationMs"]
        trigger, add = _int(durations.get("triggerExecution")), _int(durations.get("addBatch"))
        if trigger is not None and add is not None:
            run = obj.get("runId")
            operators = [op for op in obj["stateOperators"] if isinstance(op, dict)]
            timings.append(BatchTiming(batch, trigger / 1000, add / 1000,
                                       run if isinstance(run, str) else None,
                                       _int(obj.get("numInputRows")),
                                       _summed(operators, "numRowsTotal"),
                                       _summed(operators, "memoryUsedBytes")))
        description = (obj.get("sink") or {}).get("description")
        match = _FILE_SINK.match(description) if isinstance(description, str) else None
        sink = match.group(1) if match else sink
    return timings, sink


def parse_progress(text: str, *, shown: str) -> list[OperatorProgress]:
    """Per-operator series from a progress log's text (see the module docstring)."""
    by_batch = _batches(text, shown)
    series: dict[tuple[int, str], list[ProgressPoint]] = {}
    for batch in sorted(by_batch):
        obj = by_batch[batch]
        for index, op in enumerate(obj["stateOperators"]):
            if not isinstance(op, dict):
                continue
            name = str(op.get("operatorName") or "stateful operator")
            series.setdefault((index, name), []).append(ProgressPoint(
                batch, _timestamp_ms(obj.get("timestamp")), _int(op.get("numRowsTotal")),
                _int(op.get("numRowsUpdated")), _int(op.get("numRowsRemoved")),
                _int(op.get("memoryUsedBytes")), _int(obj.get("numInputRows")),
                _int(obj["durationMs"].get("triggerExecution"))))
    if not series:
        raise BadInput("its progress objects report no stateful operators", path=shown)
    return [OperatorProgress(index, name, tuple(points))
            for (index, name), points in sorted(series.items())]


@dataclass(frozen=True)
class BatchRecord:
    """What the query itself reported about one batch it ran: a witness, independent of
    the checkpoint's files, of where each source ended and which watermark it ran with."""

    batch: int
    query_id: str | None
    run_id: str | None
    end_offsets: tuple[Any, ...]
    """Each source's ``endOffset`` as parsed JSON (``None`` where it has none)."""
    watermark_ms: int | None
    """``eventTime.watermark``: the watermark the batch ran with."""
    operators: tuple[tuple[str, int | None, int | None], ...] = ()
    """Each stateful operator's ``(operatorName, numRowsUpdated, numRowsRemoved)``."""
    totals: tuple[int | None, ...] = ()
    """Each stateful operator's ``numRowsTotal`` after the batch."""
    event_max_ms: int | None = None
    """``eventTime.max``: the newest event time among the batch's input rows."""


def batch_records(text: str, *, shown: str) -> dict[int, BatchRecord]:
    """Every batch's record in a progress log, by batch id (its last report)."""
    records = {}
    for batch, obj in _batches(text, shown).items():
        sources = obj.get("sources")
        ends = tuple(s.get("endOffset") if isinstance(s, dict) else None
                     for s in (sources if isinstance(sources, list) else []))
        event = obj.get("eventTime")
        event = event if isinstance(event, dict) else {}
        query, run = obj.get("id"), obj.get("runId")
        operators = tuple(
            (str(op.get("operatorName") or ""), _int(op.get("numRowsUpdated")),
             _int(op.get("numRowsRemoved")))
            for op in obj["stateOperators"] if isinstance(op, dict))
        records[batch] = BatchRecord(batch, query if isinstance(query, str) else None,
                                     run if isinstance(run, str) else None, ends,
                                     _timestamp_ms(event.get("watermark")), operators,
                                     tuple(_int(op.get("numRowsTotal"))
                                           for op in obj["stateOperators"]
                                           if isinstance(op, dict)),
                                     _timestamp_ms(event.get("max")))
    return records


def sink_kind(text: str, *, shown: str) -> str | None:
    """The query's sink as its newest batch describes it (``sink.description``): ``file``
    (``FileSink[…]``), ``foreachBatch``, ``noop``, ``other`` (Kafka, console, …); ``None``
    when the log does not say. What a batch run again does to the output depends on it."""
    by_batch = _batches(text, shown)
    description = (by_batch[max(by_batch)].get("sink") or {}).get("description")
    if not isinstance(description, str) or not description:
        return None
    if _FILE_SINK.match(description):
        return "file"
    if "ForeachBatchSink" in description:
        return "foreachBatch"
    if "noop" in description.lower():
        return "noop"
    return "other"


def stateful_operator_count(text: str, *, shown: str) -> int:
    """How many stateful operators the query runs: ``stateOperators`` of the log's newest
    batch (a checkpoint cannot say how many there were once an operator's folder is gone)."""
    by_batch = _batches(text, shown)
    return len(by_batch[max(by_batch)]["stateOperators"])


#: ``durationMs`` phases in the order Spark's UI stacks them ("Operation Duration");
#: ``triggerExecution`` is their whole and is not a phase.
PHASES = ("latestOffset", "getOffset", "getBatch", "setOffsetRange", "queryPlanning",
          "addBatch", "walCommit", "commitOffsets", "commitBatch")


@dataclass(frozen=True)
class QueryBatch:
    """One batch of a query as Spark's UI charts it (Structured Streaming tab)."""

    batch_id: int
    timestamp_ms: int | None
    input_rows: int | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    trigger_ms: int | None
    phases_ms: dict[str, int]
    """``durationMs`` by phase (:data:`PHASES` first, then any other Spark reports)."""
    state_rows: int | None
    """``numRowsTotal`` summed over the stateful operators."""
    state_memory_bytes: int | None
    """``memoryUsedBytes`` summed over the stateful operators."""
    state_rows_updated: int | None
    state_rows_removed: int | None
    """``numRowsUpdated`` and ``numRowsRemoved`` summed over the stateful operators."""
    watermark_gap_ms: int | None
    """The batch's start minus its event-time watermark (Spark UI's "global watermark
    gap"); None before a watermark exists."""


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None  # NaN: Spark's 0/0 rate


def _summed(ops: list[Any], name: str) -> int | None:
    values = [_int(op.get(name)) for op in ops if isinstance(op, dict)]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def parse_query(text: str, *, shown: str) -> list[QueryBatch]:
    """Per-batch query metrics from a progress log's text, oldest first."""
    batches = []
    for batch, obj in sorted(_batches(text, shown).items()):
        durations = obj.get("durationMs") or {}
        phases = {name: value for name in (*PHASES, *sorted(durations))
                  if name != "triggerExecution" and (value := _int(durations.get(name)))
                  is not None}
        started = _timestamp_ms(obj.get("timestamp"))
        watermark = _timestamp_ms((obj.get("eventTime") or {}).get("watermark"))
        gap = started - watermark if started is not None and watermark else None
        ops = obj.get("stateOperators") or []
        batches.append(QueryBatch(
            batch, started, _int(obj.get("numInputRows")), _float(obj.get("inputRowsPerSecond")),
            _float(obj.get("processedRowsPerSecond")), _int(durations.get("triggerExecution")),
            phases, _summed(ops, "numRowsTotal"), _summed(ops, "memoryUsedBytes"),
            _summed(ops, "numRowsUpdated"), _summed(ops, "numRowsRemoved"), gap))
    return batches
