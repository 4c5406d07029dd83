"""Input read a second time: whether it changes what the restart ends in.

A file source that loses track of files it read (an entry lost, emptied, rewritten) reads
them again in the restart's first batch. Whether that changes the state and the output
depends on the query (measured with pyspark 4.3 on every operator of the campaign):

* deduplication drops rows it has seen: when it is the stateful operator nearest the
  source (Spark numbers operators from the sink down: the highest id), the same state and
  output;
* rows older than the watermark the batch runs with are dropped as late by aggregations,
  deduplication, joins and session windows before they reach the state. The query's
  progress report of the batch that first read the files says how late they are: the
  newest event time it saw (``eventTime.max``); when even that is behind the restart's
  watermark (the commit log's ``nextBatchWatermarkMs``), every re-read row is dropped;
* otherwise the rows count twice (``repeats``): aggregates move, joins emit again.

transformWithState in ``timeMode`` EventTime drops them too (its operator metadata says so);
``[flatMap|applyInPandas]GroupsWithState`` only with event-time timeouts, which no conf in the
checkpoint records — but the timeouts in their state tell: event-time ones sit near the
watermark, processing-time ones near the time the batches ran. Without timeouts set, their
re-read input counts as repeated.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from functools import cached_property

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.progress_log import BatchRecord
from statekit.checkpoint.spark_reads import SparkReadError, file_source_offset
from statekit.checkpoint.state_data import file_records, store_schemas
from statekit.doctor.plan import RestartPlan
from statekit.doctor.problems import REPEATS
from statekit.state.timeouts import NO_TIMESTAMP, TIMEOUT_OPERATORS, TimeoutField, timeout_reader
from statekit.support.errors import StatekitError

DEDUPLICATING = frozenset({"dedupe", "dedupeWithinWatermark"})
DROPS_LATE_ROWS = frozenset({"stateStoreSave", "dedupe", "dedupeWithinWatermark",
                             "symmetricHashJoin", "sessionWindowStateStoreSaveExec"})
TIMEOUT_SAMPLE = 1000
"""The most timeouts read to tell event-time ones from processing-time ones."""
TRANSFORM_WITH_STATE = frozenset({"transformWithStateExec", "transformWithStateInPandasExec",
                                  "transformWithStateInPySparkExec"})


class Rereads:
    """The outcome of input a restart reads again, for one file source."""

    def __init__(self, ckpt: Checkpoint, plan: RestartPlan, source: int,
                 names: Mapping[int, str], records: Mapping[int, BatchRecord] | None
                 ) -> None:
        self.ckpt, self.plan, self.source = ckpt, plan, source
        self.names = dict(names)
        self.records = records or {}

    def outcome(self, source_batches: Iterable[int] | None) -> str | None:
        """``REPEATS``, or ``None`` when re-reading the files of these source-log batches
        leaves the state and the output as they were (``None`` batches: not known)."""
        operators = set(self.names.values())
        if self.names and self.names[max(self.names)] in DEDUPLICATING:
            return None  # the operator nearest the source (the highest id) drops them
        if not operators or not operators <= self._dropping or source_batches is None:
            return REPEATS
        watermark = self._restart_watermark()
        newest = [self._newest_event_ms(b) for b in source_batches]
        if watermark is None or not newest or any(n is None for n in newest):
            return REPEATS
        return None if max(n for n in newest if n is not None) < watermark else REPEATS

    @cached_property
    def _dropping(self) -> frozenset[str]:
        """The query's operators that drop input rows behind the watermark (read once: the
        timeouts come from state files)."""
        return DROPS_LATE_ROWS | self._event_time_tws() | self._event_time_timeouts()

    def _event_time_tws(self) -> set[str]:
        """The transformWithState operators whose metadata says ``timeMode`` EventTime: they
        drop input rows behind the watermark, as aggregations do."""
        try:
            operators = self.ckpt.operators
        except StatekitError:
            return set()
        return {meta.name for meta in operators.values()
                if meta.name in TRANSFORM_WITH_STATE and meta.time_mode == "EventTime"}

    def _event_time_timeouts(self) -> set[str]:
        """The GroupsWithState operators whose state holds event-time timeouts: with
        ``EventTimeTimeout`` they drop input rows behind the watermark. The conf is recorded
        nowhere, but the timeouts are: event-time ones sit near the watermark the query runs
        with, processing-time ones near the wall-clock time its batches ran at (a sample of
        the newest values, read in place)."""
        names = {op: name for op, name in self.names.items() if name in TIMEOUT_OPERATORS}
        if not names:
            return set()
        try:
            entry = self.ckpt.ledger.offsets.get(self.plan.last_planned) \
                if self.plan.last_planned is not None else None
        except StatekitError:
            return set()
        watermark = self._restart_watermark()
        if entry is None or entry.timestamp_ms is None or watermark is None:
            return set()
        try:
            schemas = store_schemas(self.ckpt)
        except StatekitError:
            return set()
        found = set()
        for op_id, name in names.items():
            _kind, where = timeout_reader(schemas.get((op_id, "default")), name)
            stamps = self._timeouts(op_id, where) if where is not None else []
            if stamps and statistics.median(abs(t - watermark) for t in stamps) < \
                    statistics.median(abs(t - entry.timestamp_ms) for t in stamps):
                found.add(name)
        return found

    def _timeouts(self, op_id: int, where: TimeoutField) -> list[int]:
        """Up to :data:`TIMEOUT_SAMPLE` timeouts set in the newest change files (and snapshots)
        of the operator's partitions."""
        stamps: list[int] = []
        version = self.plan.version or 0
        for key, instance in sorted(self.ckpt.inventory.instances.items()):
            if key[0] != op_id or len(stamps) >= TIMEOUT_SAMPLE:
                continue
            for file in reversed(instance.files_to_load(version)):
                try:
                    for record in file_records(self.ckpt, file, check_end=False):
                        value = record.value
                        if value is None or len(value) < where.offset + 8 or \
                                value[where.byte] >> where.bit & 1:
                            continue
                        stamp = int.from_bytes(value[where.offset:where.offset + 8], "little",
                                               signed=True)
                        if stamp != NO_TIMESTAMP:
                            stamps.append(stamp)
                except StatekitError:
                    break
                if stamps:
                    break
        return stamps[:TIMEOUT_SAMPLE]

    def _restart_watermark(self) -> int | None:
        committed = self.plan.last_committed
        if committed is None or committed != self.plan.last_planned:
            return None
        try:
            return self.ckpt.commit(committed).next_watermark_ms
        except StatekitError:
            return None

    def _newest_event_ms(self, source_batch: int) -> int | None:
        """``eventTime.max`` of the query batch that first read ``source_batch``."""
        reader = self._reading_batch(source_batch)
        record = self.records.get(reader) if reader is not None else None
        return record.event_max_ms if record is not None else None

    def _reading_batch(self, source_batch: int) -> int | None:
        return next((batch for batch, reached in self._positions if reached >= source_batch),
                    None)

    @cached_property
    def _positions(self) -> list[tuple[int, int]]:
        return file_source_positions(self.ckpt, self.source)


def file_source_positions(ckpt: Checkpoint, source: int) -> list[tuple[int, int]]:
    """``(query batch, the source log entry it read up to)`` of every planned batch, oldest
    first (-1: none yet; batches whose offset for the source does not parse are left out)."""
    try:
        offsets = ckpt.ledger.offsets
    except StatekitError:
        return []
    found = []
    for batch, entry in sorted(offsets.items()):
        if source < 0 or source >= len(entry.sources):
            continue
        raw = entry.sources[source].offset
        try:
            found.append((batch, file_source_offset(raw) if raw else -1))
        except SparkReadError:
            continue
    return found
