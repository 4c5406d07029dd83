"""File sources on restart: their logs under ``sources/<i>/``, read the way Spark reads them.

A file source keeps its own log of the files each of its batches read (``FileStreamSourceLog``,
one entry per source batch, a ``.compact`` entry every ``compactInterval`` batches listing
every file up to it). On restart it reads the newest compact entry and every entry after it
to know which files it has seen — each must be there and parse, or the query fails. What the
log says also decides what the restart reads again: an entry lost at the end of the log (or a
damaged path in one) makes its files look new, so they are read and counted twice; Spark
restarts and nobody notices, so the doctor warns.

The offsets log's ``{"logOffset": N}`` of a file source is the log entry the batch read up to;
on restart Spark calls ``getBatch(offsets/L-1, offsets/L)``, which reads the entries between.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.logs import batch_id_of
from statekit.checkpoint.modified import modified_seconds
from statekit.checkpoint.progress_log import BatchRecord
from statekit.checkpoint.spark_reads import (
    SourceFileEntry,
    SparkReadError,
    file_source_offset,
    source_log_entry,
)
from statekit.doctor.changed_files import Change, changed_since_written, log_changed
from statekit.doctor.entry_changes import source_entry_outcome
from statekit.doctor.input_files import list_input, local_path
from statekit.doctor.plan import RestartPlan
from statekit.doctor.problems import (
    FATAL,
    LOSES,
    REPEATS,
    SPARK_CONCURRENT_LOG,
    WARNING,
    Problem,
)
from statekit.doctor.query_files import QueryFiles
from statekit.doctor.relogged import relogged_outcome
from statekit.doctor.rereads import Rereads, file_source_positions
from statekit.doctor.state import operator_names
from statekit.support.errors import StatekitError

DEFAULT_COMPACT_INTERVAL = 10
"""``spark.sql.streaming.fileSource.log.compactInterval``'s default."""


@dataclass
class SourceLog:
    """One source's log folder, listed once."""

    index: str
    folder: str
    entries: dict[int, str] = field(default_factory=dict)
    """``{batch: path}`` of every entry (plain or ``.compact``)."""
    compacts: set[int] = field(default_factory=set)
    others: set[str] = field(default_factory=set)
    """Every other name in the folder (checksum files among them)."""

    @property
    def newest(self) -> int | None:
        return max(self.entries) if self.entries else None


def list_sources(ckpt: Checkpoint) -> dict[str, SourceLog]:
    """``{source index: its log}`` from one recursive listing of ``sources/``."""
    logs: dict[str, SourceLog] = {}
    if not ckpt.has_folder("sources"):
        return logs
    root = ckpt.location.path("sources")
    try:
        found = ckpt.fs.find(root, detail=True, withdirs=True)
    except (FileNotFoundError, OSError):
        return logs
    strip = ckpt.fs._strip_protocol
    base = strip(root).rstrip("/") + "/"
    for path, info in found.items():
        rel = strip(path)[len(base):] if strip(path).startswith(base) else ""
        parts = rel.split("/")
        if not rel or len(parts) > 2:
            continue
        index = parts[0]
        log = logs.setdefault(index, SourceLog(index, posixpath.join(root, index)))
        if len(parts) == 1:
            continue
        name = parts[1]
        batch = batch_id_of(name)
        if batch is not None and info.get("type") == "file":
            log.entries[batch] = path
            if name.endswith(".compact"):
                log.compacts.add(batch)
        else:
            log.others.add(name)
    return logs


def _compact_interval(log: SourceLog) -> int:
    """``CompactibleFileStreamLog.deriveCompactInterval`` from the newest compact entry."""
    if not log.compacts:
        return DEFAULT_COMPACT_INTERVAL
    latest = max(log.compacts)
    if latest + 1 <= DEFAULT_COMPACT_INTERVAL:
        return latest + 1
    if (latest + 1) // 2 > DEFAULT_COMPACT_INTERVAL:
        n = latest + 1
        divisor: int = next(i for i in [*range(DEFAULT_COMPACT_INTERVAL, n // 2 + 1), n]
                            if n % i == 0)
        return divisor
    return latest + 1


def entries_read(log: SourceLog) -> list[int]:
    """The entries a restart reads: from the newest compaction at or below the newest
    entry (by the compact interval, as Spark computes it) to the newest entry."""
    newest = log.newest
    if newest is None:
        return []
    interval = _compact_interval(log)
    start = max(0, (newest + 1) // interval * interval - 1)
    return list(range(start, newest + 1))


def _name(batch: int, log: SourceLog) -> str:
    interval = _compact_interval(log)
    return f"{batch}.compact" if (batch + 1) % interval == 0 and batch > 0 else str(batch)


def source_problems(ckpt: Checkpoint, plan: RestartPlan, files: QueryFiles,
                    records: Mapping[int, BatchRecord] | None = None) -> list[Problem]:
    """``records``: the query's progress reports, which say whether input read again
    changes anything (:mod:`statekit.doctor.rereads`)."""
    last = plan.last_planned
    newest = files.offsets_of(last) if last is not None else None
    previous = files.offsets_of(last - 1) if last is not None and last > 0 else None
    logs = list_sources(ckpt)
    found: list[Problem] = []
    for index, raw in enumerate(newest.sources if newest is not None else ()):
        if raw is None:
            continue
        try:
            end = file_source_offset(raw)
        except SparkReadError:
            continue  # not a file source (or reported by the ledger rules)
        start = None
        if previous is not None and index < len(previous.sources) and \
                previous.sources[index] is not None:
            try:
                start = file_source_offset(previous.sources[index] or "")
            except SparkReadError:
                start = None
        log = logs.get(str(index)) or SourceLog(
            str(index), ckpt.location.path("sources", str(index)))
        names = operator_names(ckpt) if ckpt.has_state else {}
        found += _log_problems(ckpt, plan, log, end, start,
                               Rereads(ckpt, plan, index, names, records))
    return found


def _log_problems(ckpt: Checkpoint, plan: RestartPlan, log: SourceLog, end: int,
                  start: int | None, rereads: Rereads) -> list[Problem]:
    shown_folder = ckpt.display(log.folder)
    found: list[Problem] = []
    parsed: dict[int, list[SourceFileEntry]] = {}
    changed: dict[int, tuple[str, Change]] = {}
    read = entries_read(log)
    for batch in read:
        path = log.entries.get(batch)
        shown = ckpt.display(posixpath.join(log.folder, _name(batch, log)))
        if path is None:
            found.append(Problem(
                "source-log-gap", FATAL, shown,
                f"missing: the file source reads its log from its newest compaction "
                f"({read[0]}) to its newest entry ({read[-1]}) on restart",
                "Spark fails initialising the file source",
                f"{_name(batch, log)} doesn't exist",
                "roll back to a batch before the gap", _query_batch_before(plan, batch)))
            continue
        try:
            data = ckpt.read_bytes(path)
            parsed[batch] = source_log_entry(data)
            how = changed_since_written(ckpt, path, data, log.others)
            if how is not None:
                changed[batch] = (path, how)
        except (SparkReadError, StatekitError) as error:
            message = error.message if isinstance(error, StatekitError) else str(error)
            found.append(Problem(
                "source-log-corrupt", FATAL, shown,
                f"the file source's log entry does not parse as Spark reads it: {message}",
                "Spark fails initialising the file source", message,
                "roll back to a batch before it", _query_batch_before(plan, batch)))
    if any(p.severity == FATAL for p in found):
        return found
    newest = log.newest if log.newest is not None else -1
    committed = plan.last_committed == plan.last_planned
    if start is not None and start < end:
        gone = [b for b in range(start + 1, end + 1) if b not in log.entries]
        if gone:  # the re-run batch, or getBatch(L-1, L) for a committed one, reads them
            why = (f"the uncommitted batch {plan.last_planned} reads" if not committed else
                   f"on restart Spark asks the file source for batch {plan.last_planned}'s "
                   "files again (getBatch from the entry before the newest to the newest), "
                   "which reads")
            found.append(Problem(
                "source-log-gap", FATAL, shown_folder,
                f"{why} the file source's entries {start + 1}…{end}, and entry {gone[0]} is "
                "gone (lost, or the offsets entry points past the log)",
                f"Spark fails listing batch {plan.last_planned}'s files",
                f"batch {gone[0]} doesn't exist", "roll back to the batch before it",
                (plan.last_planned or 0) - 1))
    if newest < end - 1:
        found.append(Problem(
            "source-log-behind", FATAL, shown_folder,
            f"the file source's log ends at entry {newest}, but the offsets log says the "
            f"query read up to entry {end} (entries lost, or the folder deleted)",
            f"the file source resumes numbering after entry {newest}: the first batch with "
            f"new files asks for entries {end + 1}…{newest + 1}, and the source asserts "
            "start <= end", "assertion failed",
            "roll back to a batch whose source log entries are all there" if newest >= 0
            else "none from statekit: the file source's log is gone, so which input files "
                 "were read is unknown. Restore sources/ from a backup, or start the query "
                 "on a new checkpoint", _query_batch_before(plan, newest + 1),
            rollback_fixes=newest >= 0,
            lost="" if newest >= 0 else "the record of which input files were read"))
    elif newest == end - 1:
        found.append(_newest_entry_lost(ckpt, log, parsed, end))
    warned = len(found)
    found += _entry_content_warnings(ckpt, log, parsed, rereads)
    named = {p.path for p in found[warned:]}
    for batch, (path, how) in sorted(changed.items()):
        if ckpt.display(path) not in named:
            outcome, affects, again = source_entry_outcome(how.original, how.current)
            if outcome == REPEATS:
                outcome = rereads.outcome(again or [batch])
            found.append(log_changed(ckpt, path, how, reads="the input files it lists",
                                     rollback_to=_query_batch_before(plan, batch),
                                     outcome=outcome, affects=affects))
    next_batch = newest + 1
    for name in (str(next_batch), f"{next_batch}.compact"):
        if f".{name}.crc" in log.others and name not in log.others:
            found.append(Problem(
                "stale-checksum", FATAL,
                ckpt.display(posixpath.join(log.folder, f".{name}.crc")),
                f"the file source's next log entry ({name}) was deleted but its hidden "
                "checksum file is still there",
                "the first batch with new input files fails writing that entry: the rename "
                "into place finds the checksum file", SPARK_CONCURRENT_LOG,
                "roll back into a new checkpoint (it has no stale checksum files); or delete "
                "the checksum file by hand", None))
    return found


def _entry_content_warnings(ckpt: Checkpoint, log: SourceLog,
                            parsed: dict[int, list[SourceFileEntry]], rereads: Rereads
                            ) -> list[Problem]:
    """Entries that parse but do not say what they should: a plain entry listing another
    batch's files, or a path that no longer names a file while the others still do (a
    damaged path; input deleted by retention takes them all, and says nothing)."""
    found: list[Problem] = []
    plain = {b: e for b, e in sorted(parsed.items()) if b not in log.compacts}
    listings: dict[str, int] = {}
    for entries in parsed.values():
        for entry in {e.path for e in entries}:
            listings[entry] = listings.get(entry, 0) + 1
    for batch, entries in plain.items():
        others = sorted({e.batch_id for e in entries if e.batch_id != batch})
        # Spark reads an entry's files by the entry's name and knows files by path: a
        # batch id that rotted in an entry whose files no other entry lists changes nothing
        if others and any(listings.get(e.path, 0) > 1 for e in entries):
            found.append(Problem(
                "source-log-mismatch", WARNING, ckpt.display(log.entries[batch]),
                f"entry {batch} lists files of batch {', '.join(map(str, others))} (copied "
                "from another entry?)",
                "Spark restarts; the files this entry should list look new and are read "
                "again, and the ones it lists are skipped if they come again", None,
                "roll back to a batch before it", _batch_reading_up_to(ckpt, log, batch - 1),
                outcome=rereads.outcome([batch]),
                affects=f"the input files entry {batch} should list are read again"))
    for batch, entries in plain.items():
        if not entries:  # Spark logs an entry only for a batch that found new files
            found.append(Problem(
                "source-log-mismatch", WARNING, ckpt.display(log.entries[batch]),
                f"entry {batch} lists no file (Spark writes an entry only for new files: "
                "its files were taken out of it)",
                "Spark restarts; the files the entry listed look new and are read again",
                None, "roll back to a batch before it", _batch_reading_up_to(
                    ckpt, log, batch - 1), outcome=rereads.outcome([batch]),
                affects=f"the input files of entry {batch} are read a second time"))
    found += input_witnesses(ckpt, log, parsed, rereads)
    paths = {(b, e.path) for b, entries in plain.items() for e in entries}
    exists = {path: _exists(path) for _, path in paths}
    if sum(exists.values()) * 2 <= len(exists):
        return found  # the input is gone (retention, a move): nothing to compare with
    for batch, entries in plain.items():
        missing = [e.path for e in entries if not exists[e.path]]
        if missing:
            found.append(Problem(
                "source-log-mismatch", WARNING, ckpt.display(log.entries[batch]),
                f"entry {batch} names {len(missing)} file(s) that do not exist while the "
                f"other entries' files do, first {missing[0]} (a damaged path?)",
                "Spark restarts; the file the path should name looks new and is read again",
                None, "roll back to a batch before it", _batch_reading_up_to(
                    ckpt, log, batch - 1), outcome=rereads.outcome([batch]),
                affects=f"{len(missing)} input file(s) of entry {batch} are read again"))
    return found


def input_witnesses(ckpt: Checkpoint, log: SourceLog,
                    parsed: dict[int, list[SourceFileEntry]], rereads: Rereads | None = None
                    ) -> list[Problem]:
    """The input files against the entries that list them (local input only: elsewhere a
    listing per input folder is not what a doctor's run should cost).

    * A file source takes new files oldest first and logs each once, so an input file
      beside the listed ones, older than the newest listed file and listed by no entry,
      was taken out of an entry: the restart reads it again (``repeats``) — or it arrived
      late with an old modification time, and is read once.
    * An entry cannot list a file modified after the batch that read it committed: that
      file was added to the entry afterwards, so no batch will ever read it (``loses``).
    """
    found: list[Problem] = []
    listed = {e.path: (b, e) for b, entries in sorted(parsed.items()) for e in entries}
    local = {path: local_path(path) for path in listed}
    if not listed or any(p is None for p in local.values()):
        return found
    newest = max(e.timestamp for _b, e in listed.values())
    known = {p for p in local.values() if p is not None}
    folders = {os.path.dirname(p) for p in known}
    listing = list_input(known)
    present = listing.present
    candidates = {path: stamp * 1000 for path, stamp in listing.unlisted}
    # a listed path that is not there, with the time of an unlisted file, rotted from its
    # name: that file is in no entry, even the newest one
    rotted = [e.timestamp for path, (_b, e) in listed.items() if local[path] not in present
              and os.path.dirname(local[path] or "") in folders]
    unlisted = [path for path, stamp in candidates.items()
                if stamp < newest or any(abs(stamp - t) < 1000 for t in rotted)]
    if unlisted:
        # which source batches read them: the ones no entry lists a file of any more (one
        # file per batch taken out), else no later than the next file the source read
        read = {e.batch_id for _b, e in listed.values()}
        emptied = [b for b in range(min(read), max(read) + 1) if b not in read]
        stamps = [candidates[p] for p in unlisted]
        after = [e for _b, e in listed.values() if e.timestamp >= max(stamps)]
        # an entry whose path changed (bit rot) lists a file that is not there with the
        # time of the one that is: that entry's batch read it
        renamed = sorted({e.batch_id for path, (_b, e) in listed.items()
                          if os.path.dirname(local[path] or "") in folders
                          and local[path] not in present
                          and any(abs(e.timestamp - stamp) < 1000 for stamp in stamps)})
        batches = renamed or emptied or ([min(after, key=lambda e: e.timestamp).batch_id]
                                         if after else None)
        outcome = rereads.outcome(batches) if rereads is not None else REPEATS
        found.append(Problem(
            "source-log-mismatch", WARNING, ckpt.display(log.folder),
            f"{len(unlisted)} input file(s) beside the logged ones, older than the newest "
            f"logged file or with the time of a logged path that is not there, are in no "
            f"entry, first {unlisted[0]} (taken out of an entry, or its path in one rotted?)",
            "Spark restarts; the file source takes them for new files and reads them (again, "
            "unless they arrived late with an old modification time)", None,
            "roll back to a batch before the entry that listed them",
            _batch_reading_up_to(ckpt, log, min(batches or [min(parsed)]) - 1),
            outcome=outcome,
            affects=f"{len(unlisted)} input file(s) read a second time"))
    commits = _commit_times(ckpt, log, {e.batch_id for _b, e in listed.values()})
    for path, (batch, entry) in listed.items():
        committed = commits.get(entry.batch_id)
        if committed is not None and entry.timestamp > committed * 1000 + 1000:
            found.append(Problem(
                "source-log-mismatch", WARNING, ckpt.display(log.entries[batch]),
                f"entry {batch} lists {os.path.basename(local[path] or path)}, modified "
                "after the batch that read the entry committed (added to the entry "
                "afterwards?)", "Spark restarts and takes the file for one it has read: no "
                "batch reads it", None, "roll back to a batch before the entry",
                _batch_reading_up_to(ckpt, log, batch - 1), outcome=LOSES,
                affects=f"the rows of {os.path.basename(local[path] or path)}"))
            break
    return found


def _newest_entry_lost(ckpt: Checkpoint, log: SourceLog,
                       parsed: dict[int, list[SourceFileEntry]], end: int) -> Problem:
    """The newest entry, which the query ran, is gone: the restart logs the files no entry
    lists in its place and reads none of them (:mod:`.relogged`)."""
    local = {e.path: local_path(e.path) for entries in parsed.values() for e in entries}
    index = int(log.index) if log.index.isdigit() else -1
    outcome, affects, known = relogged_outcome(ckpt, index, parsed, end, local)
    return Problem(
        "source-log-behind", WARNING, ckpt.display(log.folder),
        f"the file source's log ends at entry {end - 1}, but the offsets log says the "
        f"query read up to entry {end}: entry {end} is lost",
        f"Spark restarts; its first planning logs the files no entry lists (oldest first, up "
        f"to maxFilesPerTrigger) as entry {end} again, and no batch reads them: the lost "
        "entry's files were read once; "
        + ("files it takes beyond them are never read" if outcome == LOSES else
           "it takes the same files" if known else
           "whether it takes more than the lost entry had is not known (input not local)"),
        None, "roll back to the newest batch that read no further than the entries left: "
        "the query plans the lost entry's files again, once", _batch_reading_up_to(
            ckpt, log, end - 1), outcome=outcome, affects=affects)


def _commit_times(ckpt: Checkpoint, log: SourceLog, batches: set[int]) -> dict[int, float]:
    """``{source batch: modification time of the commit of the query batch that read up to
    it}`` for the source batches given (each file entry names its own, in a compact entry
    too)."""
    times: dict[int, float] = {}
    for batch in batches:
        query_batch = _batch_reading_up_to(ckpt, log, batch)
        if query_batch is None:
            continue
        stamp = modified_seconds(ckpt.fs, ckpt.location.path("commits", str(query_batch)))
        if stamp is not None:
            times[batch] = stamp
    return times


def _exists(path: str) -> bool:
    """Whether an input file the source log names exists (local paths only: elsewhere the
    question costs a request per file, and the answer is assumed yes)."""
    local = local_path(path)
    return local is None or os.path.exists(local)


def _batch_reading_up_to(ckpt: Checkpoint, log: SourceLog, entry: int) -> int | None:
    """The newest planned batch whose offsets reach no further than ``entry`` of this
    source's log (``None``: none does)."""
    index = int(log.index) if log.index.isdigit() else -1
    return max((batch for batch, reached in file_source_positions(ckpt, index)
                if reached <= entry), default=None)


def _query_batch_before(plan: RestartPlan, source_batch: int) -> int | None:
    """The newest query batch a rollback may keep so that the source log is cut before
    ``source_batch`` (the file source's batches follow the query's while every batch reads
    files; a rollback keeps the entries its batch's offsets reach)."""
    if plan.last_planned is None:
        return None
    return min(plan.last_planned, source_batch) - 1
