"""What a log entry changed after it was written does to the restart's outcome.

Bit rot flips one bit, and Hadoop's checksum file (a CRC per 512 bytes) then finds the
entry as Spark wrote it (:func:`statekit.formats.checksum_files.single_flip`). With the
original beside the entry as it is now, the doctor says what the restart reads
differently, the way Spark reads it:

* ``offsets/L``: where the next batch starts (a file source moved back reads entries again,
  moved on skips them); a batch run again also runs with the entry's watermark. A committed
  batch's watermark and timestamp are not read again (the commit log's watermark is), and a
  changed conf is the conf rules' to judge;
* ``commits/L``: the watermark the next batch runs with. A lower one evicts later and
  drops fewer late rows, and the following batch catches up; a higher one evicts and emits
  windows before their time and drops rows as late: other output;
* a file source's entry: a file added is taken for one already read (its rows are lost),
  a file taken out (or a path changed) is read again.

Without the original (more than one bit changed) nothing is known of the change: the
outcome is ``differs``.
"""

from __future__ import annotations

from statekit.checkpoint.spark_reads import (
    SparkReadError,
    commit_entry,
    file_source_offset,
    offsets_entry,
    source_log_entry,
)
from statekit.doctor.problems import DIFFERS, LOSES, REPEATS
from statekit.doctor.rereads import TRANSFORM_WITH_STATE
from statekit.state.timeouts import TIMEOUT_OPERATORS

TIMER_OPERATORS = frozenset({*TIMEOUT_OPERATORS, *TRANSFORM_WITH_STATE})
"""Operators whose timers (event-time timeouts) fire when the watermark passes them."""


def offsets_outcome(original: bytes | None, now: bytes, *, rerun: bool
                    ) -> tuple[str | None, str | None]:
    """``(outcome, affects)`` of ``offsets/L`` changed; ``rerun``: the restart runs batch L
    again (it is not committed)."""
    try:
        if original is None:
            return DIFFERS, None
        before, after = offsets_entry(original), offsets_entry(now)
    except SparkReadError:
        return DIFFERS, None
    for index, (was, is_) in enumerate(zip(before.sources, after.sources, strict=False)):
        if was == is_:
            continue
        try:
            start, moved = file_source_offset(was or ""), file_source_offset(is_ or "")
        except SparkReadError:
            return DIFFERS, f"source {index}: the input after this batch"
        if moved < start:
            return REPEATS, f"source {index}: its log entries {moved + 1}…{start} are read again"
        return LOSES, f"source {index}: the input of its log entries {start + 1}…{moved}"
    if rerun:
        was_mark = (before.metadata or {}).get("batchWatermarkMs")
        now_mark = (after.metadata or {}).get("batchWatermarkMs")
        if was_mark != now_mark:
            return DIFFERS, "the batch run again, with another watermark"
    return None, None


def commit_outcome(original: bytes | None, now: bytes, *, newest_event_ms: int | None = None,
                   timers: bool = False) -> tuple[str | None, str | None]:
    """``(outcome, affects)`` of ``commits/L`` changed. A later watermark drops input rows
    with event times between the two as late (windows closed, keys evicted early are what
    the healthy restart emits too once its input moves the watermark past them): when it is
    still behind the newest event time batch L saw (``newest_event_ms``, its progress
    report), only rows arriving out of order that far behind are — input in order is not.
    Operators with timers (``timers``: GroupsWithState, transformWithState) fire every
    timer behind it early: other output."""
    try:
        if original is None:
            return DIFFERS, None
        was = commit_entry(original).get("nextBatchWatermarkMs")
        is_ = commit_entry(now).get("nextBatchWatermarkMs")
    except SparkReadError:
        return DIFFERS, None
    if not isinstance(was, int) or not isinstance(is_, int) or is_ <= was:
        return None, None
    if not timers and newest_event_ms is not None and is_ <= newest_event_ms:
        return None, None
    return DIFFERS, (f"the next batch runs with a watermark {is_ - was} ms later: windows "
                     "emitted early, rows dropped as late")


def source_entry_outcome(original: bytes | None, now: bytes
                         ) -> tuple[str | None, str | None, list[int]]:
    """``(outcome, affects, source batches read again)`` of a file source log entry changed
    (the batches its lost files were first logged in: how late their rows are decides
    whether reading them again changes anything, :mod:`.rereads`)."""
    try:
        if original is None:
            return DIFFERS, None, []
        was = {e.path: e.batch_id for e in source_log_entry(original)}
        is_ = {e.path for e in source_log_entry(now)}
    except SparkReadError:
        return DIFFERS, None, []
    gone = sorted({batch for path, batch in was.items() if path not in is_})
    if is_ - set(was) and not gone:
        return LOSES, f"{len(is_ - set(was))} input file(s) taken for read: never read", []
    if gone:
        count = sum(path not in is_ for path in was)
        return REPEATS, f"{count} input file(s) read a second time", gone
    return None, None, []
