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

from collections.abc import Iterable

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.modified import modified_seconds
from statekit.doctor.problems import Problem
from statekit.doctor.twins import other_state_warning

CHANGE_KINDS = ("delta", "changelog")
SLACK_SECONDS = 1.0
"""A change file counts as later than its commit only beyond this (stores that keep whole
seconds; clocks of the writers)."""
MIN_IN_ORDER = 3
"""Change files that must keep the order before the ones that break it are believed."""
ENOUGH = 40
"""Change files on the restart paths that make a sample of the checkpoint's order on their
own (fewer: their instances' other retained change files are judged too)."""
MAX_SHARE_LATE = 0.25
"""At most this share of the judged change files may be late (else the times say nothing)."""


def late_file_problems(ckpt: Checkpoint, chains: Iterable[list[StateFile]],
                       named: set[str]) -> list[Problem]:
    """A warning for each change file on a restart chain written after its batch's commit,
    when the other change files judged keep the order: the chains' own, and when they are
    fewer than :data:`ENOUGH`, their instances' newest other ones up to that many.
    ``named``: paths (as displayed) another rule already names."""
    chains = list(chains)
    on_path = [f for chain in chains for f in chain if _judged(f)]
    files = list(on_path)
    if len(files) < ENOUGH:  # the newest other change files of the chains' instances
        instances = {(f.operator_id, f.store, f.partition) for chain in chains for f in chain}
        seen = {f.path for f in files}
        others = [f for key in sorted(instances)
                  for instance in [ckpt.inventory.instances.get(key)] if instance is not None
                  for kind in CHANGE_KINDS for f in instance.of_kind(kind)
                  if _judged(f) and f.path not in seen]
        others.sort(key=lambda f: -(f.version or 0))
        files += others[:ENOUGH - len(files)]
    commits: dict[int, float | None] = {}
    judged: list[tuple[StateFile, bool]] = []
    for file in files:
        batch = (file.version or 0) - 1
        if batch not in commits:
            commits[batch] = modified_seconds(ckpt.fs, ckpt.location.path("commits", str(batch)))
        committed = commits[batch]
        modified = modified_seconds(ckpt.fs, file.path) if committed is not None else None
        if modified is not None and committed is not None:
            judged.append((file, modified > committed + SLACK_SECONDS))
    late = [f for f, is_late in judged if is_late]
    in_order = len(judged) - len(late)
    if not late or in_order < MIN_IN_ORDER or len(late) > MAX_SHARE_LATE * len(judged):
        return []
    path_set = {f.path for f in on_path}
    return [_problem(ckpt, f, in_order) for f in sorted(late, key=lambda f: f.version or 0)
            if f.path in path_set and ckpt.display(f.path) not in named]


def _judged(file: StateFile) -> bool:
    return file.kind in CHANGE_KINDS and file.version is not None and file.version >= 1


def _problem(ckpt: Checkpoint, file: StateFile, in_order: int) -> Problem:
    version = file.version or 0
    return other_state_warning(
        ckpt, "state-file-late", file,
        f"was written after the commit of batch {version - 1}, the batch that wrote it, "
        f"while the checkpoint's other {in_order} change files on the restart path were "
        "written before theirs: a file put there later (another version's or run's, "
        "restored or copied?)",
        f"Spark loads it as version {version}'s and restarts on whatever state it holds, "
        "silently", "the late file's version")
