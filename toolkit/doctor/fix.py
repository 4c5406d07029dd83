"""The fix: the newest batch a rollback into a new checkpoint can keep, and the command.

A rollback copies the logs up to batch B, the source logs up to B, the operator metadata and
schema files, and the state files that load version B + 1 — nothing else, and no checksum
file. So it leaves behind every problem in a file it does not copy (a newer log entry, a
newer state file, a stale checksum), and none in a file it copies. The doctor prints a
rollback only when every fatal problem is of the first kind and a batch B exists whose whole
restart — logs, source logs, every partition's state chain, decoded as Spark decodes it —
is sound; otherwise it says what is lost and that no statekit command helps.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.location import Location
from statekit.checkpoint.spark_reads import SparkReadError, source_log_entry
from statekit.doctor.plan import RestartPlan
from statekit.doctor.problems import FATAL, Problem
from statekit.doctor.sinks import sink_end_or_none
from statekit.doctor.sources import SourceLog, entries_read, list_sources
from statekit.doctor.state import StateCheck, join_problems
from statekit.state.verify import Progress, first_damaged
from statekit.support.errors import StatekitError
from statekit.writes.file_sink import sink_log_after
from statekit.writes.rollback import rollback_choices

DIVERGING = ("file-sink-behind", "source-log-behind", "log-changed", "state-files-disagree",
             "state-file-copied", "offsets-contradict-progress", "file-sink-log-damaged",
             "file-sink-log-duplicates", "state-counts-contradict-progress", "state-file-late",
             "join-rows-uncounted", "conf-changed", "source-log-mismatch")
"""Warnings whose restart runs but leaves the output or the state unlike the first run's (when
the problem names an outcome: a change that leaves them the same needs no fix): a rollback
that takes them away is printed too."""
ONLY_WITH_A_BATCH = ("log-changed", "state-files-disagree", "state-file-copied",
                     "offsets-contradict-progress", "file-sink-log-damaged",
                     "file-sink-log-duplicates", "state-counts-contradict-progress",
                     "state-file-late", "join-rows-uncounted", "conf-changed",
                     "source-log-mismatch")
"""Of those, the ones a rollback fixes only by dropping a batch they name (without one,
every rollback keeps the damage: they are only reported)."""


@dataclass
class Fix:
    batch: int | None = None
    command: str | None = None
    notes: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0


class _Decodes:
    """Whether state files decode as Spark reads them; each file read at most once."""

    def __init__(self, ckpt: Checkpoint, known_good: set[str]) -> None:
        self.ckpt = ckpt
        self.good = known_good
        self.bad: set[str] = set()
        self.files = self.bytes = 0

    def all(self, files: list[StateFile]) -> bool:
        for file in files:
            if file.path in self.bad:
                return False
            if file.path in self.good:
                continue
            self.files += 1
            self.bytes += file.size
            if first_damaged(self.ckpt, [file], as_spark=True) is not None:
                self.bad.add(file.path)
                return False
            self.good.add(file.path)
        return True


def _source_logs_ok(ckpt: Checkpoint, logs: dict[str, SourceLog], batch: int) -> bool:
    """Whether the file source logs a rollback to ``batch`` keeps (entries up to ``batch``)
    parse where a restart reads them."""
    for log in logs.values():
        kept = SourceLog(log.index, log.folder,
                         {b: p for b, p in log.entries.items() if b <= batch},
                         {b for b in log.compacts if b <= batch})
        for entry in entries_read(kept):
            path = kept.entries.get(entry)
            if path is None:
                return False
            try:
                source_log_entry(ckpt.read_bytes(path))
            except (SparkReadError, StatekitError):
                return False
    return True


def find_fix(ckpt: Checkpoint, plan: RestartPlan, check: StateCheck,
             problems: list[Problem], *, file_sink: Location | None,
             good_files: set[str], progress: Progress | None = None) -> Fix:
    fix = Fix()
    wanted = [p for p in problems if p.severity == FATAL or (
        p.code in DIVERGING and p.outcome is not None
        and (p.batch is not None or p.code not in ONLY_WITH_A_BATCH))]
    if not wanted or plan.last_committed is None:
        return fix
    if any(not p.rollback_fixes for p in wanted):
        return fix
    if progress:
        progress("looking for the newest batch a rollback can keep…")
    limits = [p.batch for p in wanted if p.batch is not None]
    limit = min([*limits, plan.last_committed])
    decodes = _Decodes(ckpt, good_files)
    logs = list_sources(ckpt)
    for choice in rollback_choices(ckpt):  # newest first
        if choice.batch > limit or not choice.possible:
            continue
        # the restart after the rollback re-plans with the kept entry's partition count
        expected = check.expected(_pinned_at(ckpt, choice.batch))
        chains = [check.files_at(key, choice.batch + 1) for key in expected]
        if any(c is None for c in chains):
            continue
        if not all(decodes.all(c or []) for c in chains):
            continue
        if not _source_logs_ok(ckpt, logs, choice.batch):
            continue
        if join_problems(ckpt, check, choice.batch + 1):
            continue
        fix.batch = choice.batch
        break
    fix.files, fix.bytes = decodes.files, decodes.bytes
    if fix.batch is None:
        return fix
    new_id = any(p.code in ("metadata-missing", "metadata-corrupt") for p in wanted)
    fix.command = shlex.join([
        "statekit", "rollback", ckpt.location.url, "--to-batch", str(fix.batch),
        "--out", fix_target(ckpt, fix.batch),
        *(["--file-sink", file_sink.url] if file_sink is not None and
          _sink_cut_needed(file_sink, fix.batch) else []),
        *(["--new-query-id"] if new_id else [])])
    last = plan.last_planned if plan.last_planned is not None else fix.batch
    if file_sink is None and fix.batch < last:
        rerun = (f"batch {last}" if fix.batch + 1 == last else
                 f"batches {fix.batch + 1}…{last}")
        fix.notes.append(
            f"if this query writes to a file sink, give its path first (statekit doctor … "
            f"--file-sink PATH) and run the fix it prints: a file sink skips {rerun} that its "
            "log already has without running them, so a stateful query writes no state for "
            "them and its next batch fails")
    return fix


def _sink_cut_needed(sink: Location | None, batch: int) -> bool:
    """Whether a rollback to ``batch`` must cut the file sink's log: entries after it, or
    checksum files entries after it left behind."""
    if sink is None:
        return False
    try:
        return bool(sink_log_after(sink, batch))
    except StatekitError:
        end = sink_end_or_none(sink)
        return end is not None and end > batch


def _pinned_at(ckpt: Checkpoint, batch: int) -> int | None:
    try:
        return ckpt.offset(batch).shuffle_partitions
    except StatekitError:
        return None


def fix_target(ckpt: Checkpoint, batch: int) -> str:
    url = ckpt.location.url.rstrip("/")
    candidate, n = f"{url}-at-{batch}", 2
    while ckpt.fs.exists(ckpt.location.fs._strip_protocol(candidate)):
        candidate, n = f"{url}-at-{batch}-{n}", n + 1
    return candidate
