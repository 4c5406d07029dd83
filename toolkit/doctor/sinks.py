"""A file sink beside the checkpoint: its log (``_spark_metadata``) against the commits.

A file sink logs the batches it wrote; on restart it skips a batch its log already has
without running it, so a log ahead of the checkpoint's state makes the query skip writing
state for those batches and fail later, and a log behind it hides the output of batches the
checkpoint committed from every reader of the sink.
"""

from __future__ import annotations

import posixpath

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.doctor.plan import RestartPlan
from statekit.doctor.problems import (
    FATAL,
    INFO,
    LOSES,
    SPARK_CONCURRENT_LOG,
    SPARK_LOAD_MISSING_HDFS,
    SPARK_LOAD_MISSING_ROCKSDB,
    WARNING,
    Problem,
)


def sink_log_end(sink: Location) -> int | None:
    """The newest batch in the file sink's log (``None``: no entries)."""
    log = posixpath.join(sink.root, "_spark_metadata")
    names = [posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(log, detail=False)]
    batches = [int(n.removesuffix(".compact")) for n in names
               if n.removesuffix(".compact").isdigit()]
    return max(batches, default=None)


def sink_end_or_none(sink: Location | None) -> int | None:
    if sink is None:
        return None
    try:
        return sink_log_end(sink)
    except FileNotFoundError:
        return None


def sink_problems(ckpt: Checkpoint, sink: Location, plan: RestartPlan) -> list[Problem]:
    log = posixpath.join(sink.root, "_spark_metadata")
    shown = sink.display(log)
    try:
        end = sink_log_end(sink)
    except FileNotFoundError:
        return [Problem("file-sink-not-found", WARNING, shown,
                        "no _spark_metadata folder: not a file sink's output",
                        "nothing to predict for this path", None)]
    last_offset, last_commit = plan.last_planned, plan.last_committed
    found = _stale_sink_checksum(sink, plan)
    if end is None or last_commit is None:
        return found
    newest = end
    first_run = last_commit + 1
    unloadable = [i for i in ckpt.inventory.instances.values()
                  if newest >= first_run and not i.files_to_load(newest + 1)]
    if unloadable:
        rocks = any(f.kind in ("zip", "changelog") for f in unloadable[0].files)
        return [*found, Problem(
            "file-sink-ahead", FATAL, shown,
            f"the file sink's log has batches up to {newest}, the checkpoint committed only "
            f"up to {last_commit} (rolled back without --file-sink?)",
            f"Spark skips batches {first_run}…{newest} without running them (the sink has "
            f"them), so no state is written for them; batch {newest + 1} then fails loading "
            f"state version {newest + 1}",
            SPARK_LOAD_MISSING_ROCKSDB if rocks else SPARK_LOAD_MISSING_HDFS,
            "roll back with --file-sink: the sink's log entries after the batch move aside "
            "and the re-run batches write again", last_commit)]
    if newest < last_commit:
        lost = f"{newest + 1}…{last_commit}" if newest + 1 < last_commit else str(last_commit)
        return [*found, Problem(
            "file-sink-behind", WARNING, shown,
            f"the file sink's log ends at batch {newest}, the checkpoint's commits at "
            f"{last_commit}",
            f"Spark restarts at batch {last_commit + 1}; the files batches {lost} wrote are "
            "not in the sink's log, so every reader of the sink (Spark reads through "
            "_spark_metadata) misses their rows", None,
            f"roll back to batch {newest}: the query re-runs batches {lost} and the sink logs "
            "them", newest, outcome=LOSES,
            affects=f"the output of batch{'es' * (newest + 1 < last_commit)} {lost} "
                    f"({last_commit - newest} of {last_commit + 1} batches)")]
    planned = last_offset if last_offset is not None else last_commit
    if newest > planned:
        return [*found, Problem(
            "file-sink-ahead", WARNING, shown,
            f"the file sink's log has batches up to {newest}, the checkpoint planned only up "
            f"to {planned} (rolled back, or another query writes to this sink)",
            f"Spark restarts, and the file sink skips writing batches {planned + 1}…{newest} "
            "(already in its log): their new output is dropped, the old stays", None,
            "fine when the re-run reads the same input as before; otherwise write to a new "
            "output path")]
    if newest > last_commit:
        return [*found, Problem(
            "file-sink-ahead", INFO, shown,
            f"the file sink committed batch {newest}, the checkpoint did not (a crash between "
            "the two)",
            f"Spark re-runs batch {newest} and the file sink skips it: exactly once", None)]
    return found


def _stale_sink_checksum(sink: Location, plan: RestartPlan) -> list[Problem]:
    if plan.batch is None:
        return []
    log = posixpath.join(sink.root, "_spark_metadata")
    names = {posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(log, detail=False)}
    batch = plan.batch
    if str(batch) in names or f".{batch}.crc" not in names:
        return []
    return [Problem(
        "stale-checksum", FATAL, sink.display(posixpath.join(log, f".{batch}.crc")),
        f"the sink's log entry for batch {batch} is gone but its hidden checksum file is "
        "still there", f"Spark fails writing the sink's log entry for batch {batch}",
        SPARK_CONCURRENT_LOG, "delete the checksum file by hand", None)]
