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
from statekit.checkpoint.spark_reads import SparkReadError, sink_log_entry
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
        return _no_sink_log(sink, plan, shown)
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
    found += sink_log_problems(sink)
    if newest > last_commit:
        return [*found, Problem(
            "file-sink-ahead", INFO, shown,
            f"the file sink committed batch {newest}, the checkpoint did not (a crash between "
            "the two)",
            f"Spark re-runs batch {newest} and the file sink skips it: exactly once", None)]
    return found


def _no_sink_log(sink: Location, plan: RestartPlan, shown: str) -> list[Problem]:
    """No ``_spark_metadata``: not a file sink's output — or its log was deleted."""
    try:
        names = [posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(sink.root,
                                                                         detail=False)]
    except FileNotFoundError:
        names = []
    data = [n for n in names if not n.startswith(("_", "."))]
    if not data or plan.last_committed is None:
        return [Problem("file-sink-not-found", WARNING, shown,
                        "no _spark_metadata folder: not a file sink's output",
                        "nothing to predict for this path", None)]
    return [Problem(
        "file-sink-log-missing", WARNING, shown,
        f"the file sink's log is gone while {len(data)} output file(s) or folder(s) and "
        f"{plan.last_committed + 1} committed batches are there",
        "Spark restarts and starts a new sink log with the next batch: every reader of the "
        "sink (Spark reads through _spark_metadata) then sees only the batches written after "
        "the restart", None,
        "restore _spark_metadata from a backup, or write the query's output again to a new "
        "path", outcome=LOSES,
        affects=f"the output of batches 0…{plan.last_committed} (every batch before the "
                "restart)")]


def sink_log_problems(sink: Location) -> list[Problem]:
    """The entries a reader of the sink reads (the newest compact file and every entry
    after it), read as Spark reads them: one that is gone or does not parse makes every
    reader fail; a listed file that is gone fails the read; an entry listing another's
    files hides its own (a file listed twice is read once)."""
    log = posixpath.join(sink.root, "_spark_metadata")
    names = {posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(log, detail=False)}
    batches = sorted(int(n.removesuffix(".compact")) for n in names
                     if n.removesuffix(".compact").isdigit())
    compacts = [b for b in batches if f"{b}.compact" in names]
    start = compacts[-1] if compacts else 0
    found: list[Problem] = []
    seen: dict[str, int] = {}
    duplicate: tuple[int, str, int, str] | None = None
    for batch in range(start, batches[-1] + 1):
        name = f"{batch}.compact" if batch in compacts else str(batch)
        path = posixpath.join(log, name)
        if name not in names:
            found.append(_sink_log_problem(
                sink, path, f"entry {batch} of the file sink's log is gone (entries "
                f"{start}…{batches[-1]} are read by every reader)",
                "every reader of the sink fails (the batch doesn't exist)", batch,
                "every batch's output, for every reader"))
            continue
        try:
            paths = sink_log_entry(sink.fs.cat_file(path))
        except SparkReadError as error:
            found.append(_sink_log_problem(
                sink, path, f"entry {batch} of the file sink's log does not parse as Spark "
                f"reads it: {error}", "every reader of the sink fails reading its log", batch,
                "every batch's output, for every reader"))
            continue
        except OSError as error:
            found.append(_sink_log_problem(
                sink, path, f"entry {batch} of the file sink's log cannot be read: {error}",
                "every reader of the sink fails reading its log", batch,
                "every batch's output, for every reader"))
            continue
        for file in paths:
            if file in seen and batch not in compacts and duplicate is None:
                duplicate = (batch, file, seen[file], path)
            seen.setdefault(file, batch)
    if not found:
        found += _listed_files_gone(sink, seen)
    if duplicate is not None and not found:
        found += _duplicated_entry(sink, duplicate, seen)
    return found[:1]


def _duplicated_entry(sink: Location, duplicate: tuple[int, str, int, str],
                      listed: dict[str, int]) -> list[Problem]:
    """An entry that lists a file an earlier entry lists: another entry's content copied
    over it. Readers keep one status per path, so the file is not read twice; what is lost is
    the output the entry should list — the data files on disk no entry lists. None: the
    batch wrote no output (an empty batch's entry lists nothing), and readers read the same
    rows as before."""
    batch, file, first, path = duplicate
    unlisted = _unlisted_output(sink, listed)
    said = (f"entry {batch} of the file sink's log lists {posixpath.basename(file)}, which "
            f"entry {first} lists too (an entry copied over another?)")
    if not unlisted:
        return [Problem(
            "file-sink-log-duplicates", INFO, sink.display(path),
            f"{said}; every output file on disk is listed, so the batch's own entry listed "
            "none", "Spark restarts; every reader of the sink reads each file once (Spark's "
            "file index keeps one status per path): the same rows as before", None,
            "nothing to do", None)]
    return [Problem(
        "file-sink-log-duplicates", WARNING, sink.display(path),
        f"{said}; {len(unlisted)} output file(s) on disk no entry lists, first "
        f"{posixpath.basename(unlisted[0])}",
        "Spark restarts; every reader of the sink reads the file once (Spark's file index "
        "keeps one status per path) and none of the files the entry should list", None,
        f"roll back to batch {batch - 1} with --file-sink: the batches after it run again "
        "and the sink logs them afresh", batch - 1 if batch else None,
        outcome=LOSES, affects=f"the output of batch {batch}, for every reader")]


def _unlisted_output(sink: Location, listed: dict[str, int]) -> list[str]:
    """The sink's data files (not hidden, not under ``_spark_metadata``) no entry lists."""
    names = {sink.fs._strip_protocol(p) for p in listed}
    root = sink.fs._strip_protocol(sink.root).rstrip("/")
    found = []
    for path in sorted(sink.fs.find(root)):
        rel = path[len(root):].lstrip("/")
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue
        if path not in names:
            found.append(path)
    return found


def _listed_files_gone(sink: Location, listed: dict[str, int]) -> list[Problem]:
    """A listed output file that no longer exists fails every reader. ``listed``: ``{path:
    the entry listing it}``."""
    folders: dict[str, dict[str, int]] = {}
    for path, entry in listed.items():
        plain = sink.fs._strip_protocol(path)
        folders.setdefault(posixpath.dirname(plain), {})[plain] = entry
    for folder, entries in sorted(folders.items())[:200]:
        try:
            present = {sink.fs._strip_protocol(p) for p in sink.fs.ls(folder, detail=False)}
        except (FileNotFoundError, NotADirectoryError):
            present = set()
        gone = [p for p in entries if p not in present]
        if gone:
            batch = min(entries[p] for p in gone)
            return [_sink_log_problem(
                sink, posixpath.join(sink.root, "_spark_metadata", str(batch)),
                f"{len(gone)} file(s) the file sink's log lists are gone, first {gone[0]} "
                f"(entry {batch})", "every reader of the sink fails on the missing file",
                batch, f"the output of batch {batch} on, for every reader")]
    return []


def _sink_log_problem(sink: Location, path: str, what: str, readers: str, batch: int,
                      affects: str) -> Problem:
    return Problem(
        "file-sink-log-damaged", WARNING, sink.display(path), what,
        f"Spark restarts (the sink only writes its log); {readers}", None,
        f"roll back to batch {batch - 1} with --file-sink: the batches after it run again "
        "and the sink logs them afresh" if batch > 0 else
        "restore the sink's log from a backup, or write the output again to a new path",
        batch - 1 if batch > 0 else None, outcome=LOSES, affects=affects)


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
