"""What the TUI shows, loaded from the checkpoint without Textual (so it is testable alone).

Every screen reads the same snapshot: the opened checkpoint, its file-level report and its
batch timeline — one listing of ``state/``, no JVM. A refresh (``r``, or ``--watch``) builds a
new snapshot from a freshly opened checkpoint, so new batches and files appear.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from statekit.batches import BatchTimeline, batch_timeline
from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.checkpoint import Checkpoint
from statekit.report import CheckpointReport, build_report

#: The clock behind "read in … s" (the snapshot tests hold it still).
clock = time.perf_counter


@dataclass(frozen=True)
class Snapshot:
    ckpt: Checkpoint
    report: CheckpointReport
    timeline: BatchTimeline
    loaded_at: float
    seconds: float


def load_snapshot(url: str, storage_options: dict[str, Any] | None = None, *,
                  opened: Checkpoint | None = None) -> Snapshot:
    """Open ``url`` afresh (or take ``opened``, just opened by the caller) and build the
    report and batch timeline (raises StatekitError)."""
    started = clock()
    ckpt = opened if opened is not None else open_checkpoint(url, storage_options)
    report = build_report(ckpt)
    timeline = batch_timeline(ckpt)
    return Snapshot(ckpt, report, timeline, time.time(), clock() - started)


def snapshot_in_background(url: str, storage_options: dict[str, Any] | None = None, *,
                           opened: Checkpoint | None = None) -> Future[Snapshot]:
    """Start building the first snapshot at once, in a thread, before Textual is even
    imported: on an object store the listing's first levels mostly wait on the network,
    which is when importing and starting the app can run (the app takes the result as its
    first load)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekit-first-load")
    try:
        return pool.submit(load_snapshot, url, storage_options, opened=opened)
    finally:
        pool.shutdown(wait=False)


#: One-line explanations of the report's finding codes, for the Overview screen.
FINDING_HELP = {
    "snapshot-lag": "a restart replays every delta since the last snapshot: slower recovery",
    "no-snapshot": "a restart replays every delta from version 1",
    "missing-partitions": "Spark cannot load the stores of those partitions",
    "cannot-load": "the files cannot rebuild the committed version: a restart would fail",
    "orphan-files": "state files beyond the committed version (a crash or a running batch)",
    "uncommitted-batch": "a planned batch has no commit: the restart re-runs it",
    "unfinished-repartition": "a repartition batch was planned but not committed: Spark "
                              "refuses to restart until it is finished or removed",
    "corrupt-log": "an offsets or commit entry does not parse",
    "odd-log-entry": "a log entry is a folder, symlink or FIFO instead of a file",
    "missing-log": "the offsets or commits folder is gone",
    "extra-partitions": "state partitions beyond the query's partition count",
    "partition-mismatch": "operator metadata and the pinned partition count disagree",
    "damaged-file": "a state file does not decode (statekit report --verify)",
    "size-mismatch": "a state file's size disagrees with its checksum file",
    "not-a-file": "an entry under state/ is not a regular file",
    "clock-skew": "batch timestamps go backwards or lie in the future",
}


def explain(code: str, message: str) -> str:
    """The finding's message plus what it means, when statekit knows."""
    hint = FINDING_HELP.get(code)
    return f"{message} — {hint}" if hint and hint not in message else message
