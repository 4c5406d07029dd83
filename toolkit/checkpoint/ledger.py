"""Audit of the checkpoint's ledger: every retained ``offsets/`` and ``commits/`` entry.

statekit's answers (last committed batch, the confs the query restarts with, the version a
restart loads) all come from these small files, and Spark itself refuses to restart when the
newest of them is damaged. Reading only the entries an answer needs would make a damaged
ledger invisible ("exit 0, no warnings" on a checkpoint that cannot restart), so the audit
reads and parses every retained entry once — they are tiny, and on object stores they come in
one concurrent read — and says what is wrong, per file, in two grades:

``error``
    Spark fails on it when the query restarts (the newest offsets or commit entry, the
    offsets of the batch before an uncommitted one, a missing ``offsets/`` or ``commits/``),
    or statekit would give a wrong answer from it.
``warning``
    History only: an older entry Spark no longer reads, a gap, clocks going backwards.

``report`` and ``batches`` show every problem; the commands that compute from the ledger
(growth, recovery, ls, state, repartition) refuse to run on an ``error``
(:meth:`Ledger.raise_first_error`) with that problem's one-line message and exit code.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.logs import (
    CONF_CODEC,
    CONF_SHUFFLE_PARTITIONS,
    CommitEntry,
    OffsetEntry,
    batch_id_of,
    parse_commit_entry,
    parse_offset_entry,
)
from statekit.formats.compression import CODECS_SUPPORTED, normalize_codec
from statekit.support.errors import StatekitError, error_for

if TYPE_CHECKING:
    from statekit.checkpoint.checkpoint import Checkpoint

_FUTURE_SLACK_MS = 24 * 3600 * 1000
"""Batch timestamps further in the future than this (vs. this machine's clock) are flagged."""


@dataclass(frozen=True)
class LogProblem:
    """One thing wrong with one ledger file (or folder)."""

    code: str
    severity: str
    """``error`` (a restart fails, or answers would be wrong) or ``warning`` (history only)."""
    path: str
    """The file as the user names it (URL or path)."""
    message: str
    exit_code: int
    batch_id: int | None = None

    @property
    def line(self) -> str:
        return f"{self.path}: {self.message}"

    def to_error(self) -> StatekitError:
        return error_for(self.exit_code, f"{self.message} (statekit report lists every "
                         "problem)", path=self.path)


@dataclass(frozen=True)
class Ledger:
    """The parsed, audited ledger: the entries that parse, and the problems found."""

    offsets: Mapping[int, OffsetEntry]
    commits: Mapping[int, CommitEntry]
    problems: tuple[LogProblem, ...]

    @property
    def errors(self) -> list[LogProblem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def newest_readable_offset(self) -> OffsetEntry | None:
        return self.offsets[max(self.offsets)] if self.offsets else None

    def raise_first_error(self) -> None:
        """Raise the first ``error`` problem as its one-line ``StatekitError``."""
        errors = self.errors
        if errors:
            raise errors[0].to_error()


def _kind_of(entry: Mapping[str, Any]) -> str:
    if entry.get("islink") and entry.get("type") != "file":
        return "a dangling or looping symlink"
    if entry.get("type") == "directory":
        return "a folder"
    return "not a regular file (FIFO, socket or device?)"


def audit_ledger(ckpt: Checkpoint) -> Ledger:
    """Read and check every retained ``offsets/`` and ``commits/`` entry of ``ckpt``."""
    problems: list[LogProblem] = []

    def add(code: str, severity: str, path: str, message: str, exit_code: int = 4,
            batch: int | None = None) -> None:
        problems.append(LogProblem(code, severity, path, message, exit_code, batch))

    offset_paths = ckpt.log_paths("offsets")
    commit_paths = ckpt.log_paths("commits")
    def has_state_data() -> bool:  # lists state/ only when a log folder is missing
        return ckpt.has_state and any(True for _ in ckpt.inventory.all_files())

    for folder, paths in (("offsets", offset_paths), ("commits", commit_paths)):
        shown = ckpt.display(ckpt.location.path(folder))
        if not ckpt.has_folder(folder):
            if folder == "offsets" and (commit_paths or has_state_data()):
                add("missing-log", "error", shown,
                    "folder missing: no batch can be restarted without the offsets log "
                    "(deleted or copied incompletely?)", 3)
            elif folder == "commits" and has_state_data():
                add("missing-log", "error", shown,
                    "folder missing while state files exist: statekit cannot tell which "
                    "state version is committed (deleted or copied incompletely?)", 3)
        for name, entry in ckpt.odd_log_entries(folder).items():
            batch = batch_id_of(name)
            newest = batch is not None and (not paths or batch > max(paths))
            add("odd-log-entry", "error" if newest else "warning",
                ckpt.display(entry["name"]),
                f"is {_kind_of(entry)}, expected the {folder} log file of batch "
                f"{batch}" + (" — Spark fails reading it on restart" if newest else ""),
                4, batch)
        for name in ckpt.unparsable_log_names(folder):
            add("not-a-batch", "warning", ckpt.display(ckpt.location.path(folder, name)),
                "name is not a 64-bit batch id; Spark ignores it (statekit too)", 4)

    offsets, offset_problems = _parse_all(ckpt, offset_paths, parse_offset_entry)
    commits, commit_problems = _parse_all(ckpt, commit_paths, parse_commit_entry)
    last_offset = max(offset_paths) if offset_paths else None
    last_commit = max(commit_paths) if commit_paths else None
    # Spark reads the newest offsets entry, the one before it (always: measured with
    # pyspark 4.3, "batch N-1 doesn't exist" otherwise) and the newest commit
    restart_reads = {("offsets", last_offset), ("commits", last_commit)}
    if last_offset:
        restart_reads.add(("offsets", last_offset - 1))
    for folder, found in (("offsets", offset_problems), ("commits", commit_problems)):
        for batch, (path, error) in found.items():
            fatal = (folder, batch) in restart_reads
            add("corrupt-log", "error" if fatal else "warning", path,
                error.message + ("; a restart reads this file and fails" if fatal else
                                 "; Spark no longer reads it, but this batch's history is lost"),
                error.exit_code, batch)
    problems.extend(_consistency(ckpt, offsets, commits, offset_paths, commit_paths))
    return Ledger(offsets=offsets, commits=commits, problems=tuple(problems))


def _parse_all(ckpt: Checkpoint, paths: dict[int, str], parse: Any
               ) -> tuple[dict[int, Any], dict[int, tuple[str, StatekitError]]]:
    data, read_errors = ckpt.read_many_lenient(paths.values())
    parsed: dict[int, Any] = {}
    bad: dict[int, tuple[str, StatekitError]] = {}
    for batch, path in paths.items():
        shown = ckpt.display(path)
        if path in read_errors:
            bad[batch] = (shown, read_errors[path])
            continue
        try:
            parsed[batch] = parse(batch, data[path], shown)
        except StatekitError as error:
            bad[batch] = (shown, error)
    return parsed, bad


def _consistency(ckpt: Checkpoint, offsets: dict[int, OffsetEntry],
                 commits: dict[int, CommitEntry], offset_paths: dict[int, str],
                 commit_paths: dict[int, str]) -> list[LogProblem]:
    problems: list[LogProblem] = []
    offsets_shown = ckpt.display(ckpt.location.path("offsets"))
    commits_shown = ckpt.display(ckpt.location.path("commits"))
    if offset_paths:
        batches = sorted(offset_paths)
        gaps = [b for b in range(batches[0], batches[-1]) if b not in offset_paths]
        if batches[-1] - 1 in gaps:
            problems.append(LogProblem(
                "missing-previous-offsets", "error",
                ckpt.display(ckpt.location.path("offsets", str(batches[-1] - 1))),
                f"missing: a restart reads the offsets of the batch before the newest "
                f"({batches[-1]}) and fails (\"batch {batches[-1] - 1} doesn't exist\")", 4,
                batches[-1] - 1))
            gaps.remove(batches[-1] - 1)
        if gaps:
            problems.append(LogProblem(
                "log-gap", "warning", offsets_shown,
                f"no offsets entry for batch{'es' if len(gaps) > 1 else ''} "
                f"{_list(gaps)} between retained batches {batches[0]} and {batches[-1]} "
                "(deleted by hand?)", 4, gaps[0]))
    if commit_paths and offset_paths:
        beyond = [b for b in commit_paths if b > max(offset_paths)]
        if beyond:
            problems.append(LogProblem(
                "commit-without-offsets", "error",
                ckpt.display(commit_paths[beyond[0]]),
                f"batch {beyond[0]} is committed but was never planned (newest offsets entry: "
                f"{max(offset_paths)}); the logs do not belong together", 4, beyond[0]))
        first = min(offset_paths)
        gaps = [b for b in range(max(first, min(commit_paths)), max(commit_paths))
                if b not in commit_paths]
        if gaps:
            problems.append(LogProblem(
                "log-gap", "warning", commits_shown,
                f"no commit for batch{'es' if len(gaps) > 1 else ''} {_list(gaps)} although "
                f"batch {max(commit_paths)} committed (deleted by hand?)", 4, gaps[0]))
    ordered = [offsets[b] for b in sorted(offsets)]
    now_ms = int(time.time() * 1000)
    for previous, current in pairwise(ordered):
        shown = ckpt.display(offset_paths[current.batch_id])
        if (previous.timestamp_ms is not None and current.timestamp_ms is not None
                and current.timestamp_ms < previous.timestamp_ms):
            problems.append(LogProblem(
                "clock-skew", "warning", shown,
                f"batch {current.batch_id} started {previous.timestamp_ms - current.timestamp_ms}"
                f" ms before batch {previous.batch_id} (driver clocks disagree?); intervals and "
                "rates from these timestamps are unreliable", 4, current.batch_id))
        if (previous.watermark_ms is not None and current.watermark_ms is not None
                and current.watermark_ms < previous.watermark_ms):
            problems.append(LogProblem(
                "watermark-backwards", "warning", shown,
                f"the watermark of batch {current.batch_id} is older than batch "
                f"{previous.batch_id}'s; Spark never moves it back (edited by hand?)",
                4, current.batch_id))
        if len(current.sources) < len(previous.sources):
            fatal = current.batch_id == max(offsets)
            problems.append(LogProblem(
                "missing-sources", "error" if fatal else "warning", shown,
                f"{len(current.sources)} source offsets where batch {previous.batch_id} has "
                f"{len(previous.sources)} (truncated?)", 4, current.batch_id))
    for entry in ordered:
        if entry.timestamp_ms is not None and entry.timestamp_ms > now_ms + _FUTURE_SLACK_MS:
            problems.append(LogProblem(
                "clock-skew", "warning", ckpt.display(offset_paths[entry.batch_id]),
                f"batch {entry.batch_id}'s timestamp is in the future "
                f"({(entry.timestamp_ms - now_ms) // 3_600_000} h ahead of this machine)",
                4, entry.batch_id))
    if ordered:
        newest = ordered[-1]
        problems.extend(_conf_problems(newest, ckpt.display(offset_paths[newest.batch_id])))
    return problems


def _conf_problems(entry: OffsetEntry, shown: str) -> list[LogProblem]:
    """The pinned confs statekit depends on, checked on the entry a restart uses."""
    problems: list[LogProblem] = []
    raw_parts = entry.conf.get(CONF_SHUFFLE_PARTITIONS)
    if raw_parts is not None and (entry.shuffle_partitions is None
                                  or entry.shuffle_partitions < 1):
        problems.append(LogProblem(
            "bad-conf", "error", shown,
            f"{CONF_SHUFFLE_PARTITIONS} is {raw_parts!r}, not a positive integer", 4,
            entry.batch_id))
    codec = entry.conf.get(CONF_CODEC)
    if codec is not None and normalize_codec(codec) not in CODECS_SUPPORTED:
        problems.append(LogProblem(
            "unsupported-codec", "error", shown,
            f"the query pins state store codec {codec!r}; statekit decodes "
            f"{', '.join(CODECS_SUPPORTED)} ({CONF_CODEC})", 5, entry.batch_id))
    return problems


def _list(batches: list[int]) -> str:
    shown = ", ".join(map(str, batches[:6]))
    return shown + (f" and {len(batches) - 6} more" if len(batches) > 6 else "")

