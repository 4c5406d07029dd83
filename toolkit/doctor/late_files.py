"""A change file written after its batch's commit, against the checkpoint's own order.

Spark writes a batch's change files (HDFS deltas, RocksDB changelogs) while the batch runs
and its commit entry last, so every change file is older than the commit of its batch — the
checkpoint's own record of the order, kept by any copy that keeps modification times. A
change file on the restart path that is newer than its commit, in a checkpoint whose other
change files all keep that order, was put there later: a file of another version or run
copied over it (a restore from the wrong backup, a sync script, a hand repair). It decodes,
matches the checksum file copied with it, and names no version, so no other witness may see
it when its record counts happen to match (a join's or a transformWithState's store, whose
reports count otherwise; a batch that changed as many rows as its neighbours); Spark loads
it and restarts on the state of another version, silently.

Only a few files out of order in a checkpoint whose other files keep it are a witness: a
copy that set every time anew (``cp -r``, an object-store sync) puts many files out of order
at random, and then the times say nothing. Snapshots and zips are written by maintenance, at
any time after their batch, and are not held to it; a file another rule already names (a
twin, damage Spark skips) is left to it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.modified import info_seconds
from statekit.doctor.problems import DIFFERS, WARNING, Problem, rollback_before_version
from statekit.doctor.twins import partition_share

CHANGE_KINDS = ("delta", "changelog")
SLACK_SECONDS = 1.0
"""A change file counts as later than its commit only beyond this (stores that keep whole
seconds; clocks of the writers)."""
MIN_IN_ORDER = 3
"""Change files that must keep the order before the ones that break it are believed."""
MAX_SHARE_LATE = 0.25
"""At most this share of the judged change files may be late (else the times say nothing)."""


def late_file_problems(ckpt: Checkpoint, chains: Iterable[list[StateFile]],
                       named: set[str]) -> list[Problem]:
    """A warning for each change file on a restart chain written after its batch's commit,
    when the other change files of the chains' store instances keep the order. ``named``:
    paths (as displayed) another rule already names."""
    commits = _times(ckpt, ckpt.location.path("commits"))
    if not commits:
        return []
    on_path = {f.path for chain in chains for f in chain}
    instances = {(f.operator_id, f.store, f.partition) for chain in chains for f in chain}
    judged: list[tuple[StateFile, bool]] = []
    for key in sorted(instances):
        instance = ckpt.inventory.instances.get(key)
        if instance is None:
            continue
        files = [f for kind in CHANGE_KINDS for f in instance.of_kind(kind)
                 if f.version is not None and str(f.version - 1) in commits]
        if not files:
            continue
        times = _times(ckpt, posixpath.dirname(files[0].path))
        for file in files:
            modified = times.get(file.name)
            if modified is not None:
                judged.append((file, modified > commits[str((file.version or 0) - 1)]
                               + SLACK_SECONDS))
    late = [f for f, is_late in judged if is_late]
    in_order = len(judged) - len(late)
    if not late or in_order < MIN_IN_ORDER or len(late) > MAX_SHARE_LATE * len(judged):
        return []
    return [_problem(ckpt, f, in_order) for f in sorted(late, key=lambda f: f.version or 0)
            if f.path in on_path and ckpt.display(f.path) not in named]


def _times(ckpt: Checkpoint, folder: str) -> dict[str, float]:
    """``{name: modified seconds}`` of a folder's files (one listing)."""
    try:
        entries = ckpt.fs.ls(folder, detail=True)
    except OSError:
        return {}
    found = {}
    for entry in entries:
        seconds = info_seconds(entry)
        if seconds is not None:
            found[posixpath.basename(str(entry["name"]).rstrip("/"))] = seconds
    return found


def _problem(ckpt: Checkpoint, file: StateFile, in_order: int) -> Problem:
    version = file.version or 0
    remedy, batch = rollback_before_version(version, "the late file's version")
    return Problem(
        "state-file-late", WARNING, ckpt.display(file.path),
        f"was written after the commit of batch {version - 1}, the batch that wrote it, "
        f"while the checkpoint's other {in_order} change files on the restart path were "
        "written before theirs: a file put there later (another version's or run's, "
        "restored or copied?)",
        f"Spark loads it as version {version}'s and restarts on whatever state it holds, "
        "silently", None, remedy, batch, outcome=DIFFERS,
        affects=partition_share(ckpt, file))
