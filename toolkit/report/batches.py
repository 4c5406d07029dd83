"""The batch timeline: one row per retained batch, from the offsets and commits logs.

"Is the query keeping up, did the watermark move, where did it stop?" is answered by the
sequence of batches: planned vs committed, event-time watermark, the wall-clock time each
batch was planned and the interval between them, and how far each source got. All offsets
entries are read in one call (concurrently on object stores).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.logs import SourceOffset
from statekit.formats.jsontext import loads_json
from statekit.formats.values import shorten


@dataclass(frozen=True)
class BatchRow:
    batch_id: int
    planned: bool
    committed: bool
    watermark_ms: int | None
    timestamp_ms: int | None
    interval_ms: int | None
    """Time since the previous retained batch was planned."""
    shuffle_partitions: int | None
    sources: tuple[str, ...]
    """One short summary per source offset."""
    problem: str | None = None
    """What is wrong with this batch's log files (then ``committed`` is False when the
    commit file cannot be read: Spark would not take it as committed either)."""


@dataclass(frozen=True)
class BatchTimeline:
    rows: tuple[BatchRow, ...]
    problems: tuple[tuple[str, str], ...] = ()
    """``(severity, one line)`` for every ledger problem (:mod:`statekit.checkpoint.ledger`)."""

    @property
    def last_committed(self) -> int | None:
        committed = [r.batch_id for r in self.rows if r.committed]
        return committed[-1] if committed else None

    def to_dict(self) -> dict[str, Any]:
        return {"batches": [asdict(r) for r in self.rows], "last_committed": self.last_committed,
                "problems": [{"severity": sev, "message": line} for sev, line in self.problems]}


def summarize_offset(offset: SourceOffset) -> str:
    """A short, human summary of one source's offset JSON.

    ``{"logOffset":7}`` → ``logOffset=7``; Kafka's ``{"topic":{"0":5,"1":7}}`` →
    ``topic: 2 partitions, Σ 12``; anything else is shortened JSON.
    """
    if offset.offset is None:
        return f"{offset.source}: -"
    try:
        value = loads_json(offset.offset)
    except json.JSONDecodeError:
        return f"{offset.source}: {shorten(offset.offset, 50)}"
    parts = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict) and item and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in item.values()):
                parts.append(f"{key}: {len(item)} partitions, Σ {sum(item.values())}")
            elif isinstance(item, (int, float, str)) and not isinstance(item, bool):
                parts.append(f"{key}={item}")
            else:
                parts.append(f"{key}={shorten(json.dumps(item, separators=(',', ':')), 40)}")
        text = ", ".join(parts)
    else:
        text = json.dumps(value, separators=(",", ":"))
    return shorten(text, 80)


def batch_timeline(ckpt: Checkpoint) -> BatchTimeline:
    ledger = ckpt.ledger
    planned = set(ckpt.planned_batches)
    committed = set(ledger.commits)
    entries = ledger.offsets
    by_batch: dict[int, list[str]] = {}
    for problem in ledger.problems:
        if problem.batch_id is not None:
            by_batch.setdefault(problem.batch_id, []).append(problem.message)
    rows: list[BatchRow] = []
    previous_ts: int | None = None
    for batch in sorted(planned | set(ckpt.committed_batches)):
        entry = entries.get(batch)
        ts = entry.timestamp_ms if entry else None
        rows.append(BatchRow(
            batch_id=batch,
            planned=batch in planned,
            committed=batch in committed,
            watermark_ms=entry.watermark_ms if entry else None,
            timestamp_ms=ts,
            interval_ms=(ts - previous_ts) if ts is not None and previous_ts is not None
            else None,
            shuffle_partitions=entry.shuffle_partitions if entry else None,
            sources=tuple(summarize_offset(s) for s in entry.sources) if entry else (),
            problem="; ".join(by_batch[batch]) if batch in by_batch else None,
        ))
        previous_ts = ts if ts is not None else previous_ts
    return BatchTimeline(tuple(rows), tuple((p.severity, p.line) for p in ledger.problems))
