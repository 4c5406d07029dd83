"""The query's own progress reports as a witness of the offsets log.

An offsets entry that was rewritten — hand-edited to re-read or skip input, copied from
another batch, bit rot that still parses, its hidden checksum gone with it — restarts
without a word from Spark: the next batch starts where the entry says the last one ended,
and runs with the watermark it names. Nothing else in the checkpoint says where the batch
really ended. The query itself does: every batch it ran reported its sources' ``endOffset``
and the watermark it ran with (``StreamingQueryProgress``, what ``--progress-log`` reads).
So each offsets entry a restart reads is held against the query's report of the same
batch — when the log is this query's (its id) and has that batch.

A file source's position that the entry puts earlier than the batch reported makes the next
batch read the entries in between again (``repeats``); a later one skips them (``loses``);
any other difference, and another watermark, runs on other input or state (``differs``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.progress_log import BatchRecord
from statekit.checkpoint.spark_reads import SparkReadError
from statekit.checkpoint.spark_reads import query_id as spark_query_id
from statekit.doctor.problems import DIFFERS, LOSES, REPEATS, WARNING, Problem
from statekit.doctor.query_files import QueryFiles
from statekit.support.errors import StatekitError


def progress_problems(ckpt: Checkpoint, files: QueryFiles,
                      records: Mapping[int, BatchRecord]) -> tuple[list[Problem], list[str]]:
    """Warnings for offsets entries the query's report of their batch contradicts, and
    what could not be checked (why)."""
    plan = files.plan
    try:
        query_id: str | None = spark_query_id(ckpt.read_bytes(ckpt.location.path("metadata")))
    except (SparkReadError, StatekitError):
        query_id = None
    mine = {b: r for b, r in records.items() if query_id is None or r.query_id in
            (None, query_id)}
    if records and not mine:
        other = next(iter(records.values())).query_id
        return [], [f"the offsets log against the query's progress reports: the progress log "
                    f"is another query's (id {other}, this checkpoint's {query_id})"]
    found: list[Problem] = []
    last = plan.last_planned
    rerun = last is not None and plan.last_committed != last
    # what the restart reads of the entries: the newest one's source ends (where the next
    # batch starts); a batch it runs again also its start (the entry before) and its
    # watermark. A committed batch's watermark is not read again: the commit log's
    # nextBatchWatermarkMs is.
    for batch in (last, (last or 0) - 1 if rerun else None):
        if batch is None or batch < 0 or batch not in mine:
            continue
        entry = files.offsets_of(batch)
        if entry is None:
            continue
        found += _offset_problems(files, batch, entry.sources, mine[batch])
        watermark = (entry.metadata or {}).get("batchWatermarkMs")
        reported = mine[batch].watermark_ms
        if batch == last and rerun and isinstance(watermark, int) and reported is not None \
                and watermark != reported:
            found.append(_problem(
                files, batch, f"batch {batch} ran with watermark {reported} (the query's "
                f"progress report), the entry says {watermark}",
                "the restart's next batch evicts and emits by the entry's watermark, not the "
                "one the query ran with", DIFFERS, f"every batch from {batch + 1} on"))
    return found, []


def _offset_problems(files: QueryFiles, batch: int, raw: tuple[str | None, ...],
                     record: BatchRecord) -> list[Problem]:
    found = []
    for index, (text, reported) in enumerate(zip(raw, record.end_offsets, strict=False)):
        if text is None or reported is None:
            continue
        try:
            logged: Any = json.loads(text)
        except ValueError:  # the offsets rules name an offset that does not parse
            continue
        if logged == reported:
            continue
        before, after = _log_offset(reported), _log_offset(logged)
        if before is not None and after is not None and after < before:
            outcome, affects = REPEATS, (
                f"source {index}: its log entries {after + 1}…{before} are read a second time")
        elif before is not None and after is not None:
            outcome, affects = LOSES, (
                f"source {index}: the input of its log entries {before + 1}…{after} is "
                "skipped")
        else:
            outcome, affects = DIFFERS, f"source {index}: the input after batch {batch}"
        found.append(_problem(
            files, batch, f"source {index} ended batch {batch} at {json.dumps(reported)} (the "
            f"query's progress report), the entry says {text}",
            "the restart's next batch starts where the entry says", outcome, affects))
    return found


def _log_offset(value: Any) -> int | None:
    """A file source's position (``{"logOffset": N}``), else ``None``."""
    if isinstance(value, dict) and isinstance(value.get("logOffset"), int):
        return int(value["logOffset"])
    return None


def _problem(files: QueryFiles, batch: int, what: str, spark: str, outcome: str,
             affects: str) -> Problem:
    return Problem(
        "offsets-contradict-progress", WARNING, files.path("offsets", batch),
        f"{what}: the entry was changed after the batch ran (edited, copied from another "
        "batch?)", f"Spark does not know: {spark}", None,
        "roll back to the batch before it: the new checkpoint plans that batch again from "
        "the sources" if batch > 0 else "compare with a backup of the checkpoint",
        batch - 1 if batch > 0 else None, outcome=outcome, affects=affects)
