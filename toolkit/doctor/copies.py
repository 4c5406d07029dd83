"""A state file on the restart path that holds another version's bytes.

A file copied over another version's — a restore from the wrong backup, a sync script, a
hand repair — decodes cleanly and matches its own checksum file (the copy takes it along),
so Spark loads it and restarts on the state of another version, silently (measured with
pyspark 4.3: the query runs on and ends in another state than its first run). Nothing in
a delta, a changelog or a zip names its version, but the checkpoint keeps the versions
before it (100 by default): a copy is byte for byte one of them. Two files of one store
instance and one kind with the same bytes are one batch's changes written twice — which
Spark does not do for a batch that changed anything (an aggregate's value moves, a new key
arrives once; a RocksDB zip stamps its entries with the time it was made) — so one of the
pair is a copy, told by its modification time: a change file is written before its batch's
commit entry and a copy after it (two batches that did make the same changes wrote two
equal files, both before their commits: no warning). When the copy is on the restart path,
the restart loads other state.

Only files of the same size are compared, and each comparison is remembered in the decode
cache, so a checkpoint pays for it once. A file with no record in it (a batch that changed
nothing in that partition) is equal to every other empty one and says nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import partial

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.modified import modified_seconds
from statekit.checkpoint.state_data import file_records
from statekit.doctor.problems import Problem
from statekit.doctor.twins import other_state_warning
from statekit.state.decode_cache import remembered
from statekit.support.errors import StatekitError

COMPARED_KINDS = ("delta", "changelog", "zip")
"""SST files are named after their content's RocksDB file number and checked against the
size their zip records; an HDFS snapshot is checked against the delta of its version
(:mod:`statekit.doctor.twins`: maintenance writes it at any time after its batch, so its
modification time says nothing)."""


def copy_problems(ckpt: Checkpoint, chains: Iterable[list[StateFile]]) -> list[Problem]:
    """A warning for each file on a restart chain that is byte for byte another version's
    file of its store instance, and was written after it."""
    found: list[Problem] = []
    for chain in chains:
        on_path = {f.path for f in chain}
        for file in chain:
            twin = _same_bytes(ckpt, file)
            if twin is None:
                continue
            pair = _which_is_the_copy(ckpt, file, twin, on_path)
            if pair is None:
                continue
            copy, original = pair
            if copy.path in on_path and not (copy.kind == "changelog" and copy.unique_id):
                # (a format-v2 changelog names the version it follows: lineage.py)
                found.append(_problem(ckpt, copy, original))
    return found


def _same_bytes(ckpt: Checkpoint, file: StateFile) -> StateFile | None:
    """Another version's file of the same instance and kind with the same bytes (and at
    least one record), if there is one."""
    if file.kind not in COMPARED_KINDS or file.version is None:
        return None
    instance = ckpt.inventory.instances.get((file.operator_id, file.store, file.partition))
    if instance is None:
        return None
    others = [f for f in instance.of_kind(file.kind)
              if f.size == file.size and f.version is not None and f.version != file.version]
    if not others:
        return None
    twin_path = remembered(ckpt, "same-bytes", [file, *others],
                           partial(_first_equal, ckpt, file, others))
    return next((f for f in others if f.path == twin_path), None)


def _first_equal(ckpt: Checkpoint, file: StateFile, others: list[StateFile]) -> str | None:
    try:
        digest = _digest(ckpt, file)
        for other in others:
            # two equal zips are a copy whatever they hold (each stamps its entries with
            # the time it was made); two equal empty change files say nothing
            if _digest(ckpt, other) == digest and (file.kind == "zip" or
                                                    _has_records(ckpt, file)):
                return other.path
    except StatekitError:  # unreadable: the verification names it
        return None
    return None


def _digest(ckpt: Checkpoint, file: StateFile) -> bytes:
    return hashlib.sha256(ckpt.read_bytes(file.path)).digest()


def _has_records(ckpt: Checkpoint, file: StateFile) -> bool:
    return next(iter(file_records(ckpt, file, check_end=False)), None) is not None


def _which_is_the_copy(ckpt: Checkpoint, file: StateFile, twin: StateFile,
                       on_path: set[str]) -> tuple[StateFile, StateFile] | None:
    """``(copy, original)``, or ``None`` when both are what Spark wrote.

    A batch's change file (delta, changelog) is written while the batch runs, before its
    commit entry; a copy is made after. So a change file modified after its batch's commit is
    the copy (two batches that made exactly the same changes wrote two equal files, both in
    order). A zip stamps its entries with the time it was made, so two equal zips are a copy:
    the one modified later. Without modification times nothing is said.
    """
    if file.kind == "zip":
        mine = modified_seconds(ckpt.fs, file.path)
        theirs = modified_seconds(ckpt.fs, twin.path)
        if mine is None or theirs is None or mine == theirs:
            return None
        return (file, twin) if mine > theirs else (twin, file)
    late = [f for f in (file, twin) if _after_its_commit(ckpt, f)]
    if not late:
        return None
    copy = max(late, key=lambda f: (modified_seconds(ckpt.fs, f.path) or 0.0, f.version or 0))
    return copy, (twin if copy is file else file)


def _after_its_commit(ckpt: Checkpoint, file: StateFile) -> bool:
    """Whether the change file of version V was modified after batch V-1's commit entry."""
    if file.version is None or file.version < 1:
        return False
    modified = modified_seconds(ckpt.fs, file.path)
    committed = modified_seconds(ckpt.fs,
                                 ckpt.location.path("commits", str(file.version - 1)))
    return modified is not None and committed is not None and modified > committed


def _problem(ckpt: Checkpoint, copy: StateFile, original: StateFile) -> Problem:
    return other_state_warning(
        ckpt, "state-file-copied", copy,
        f"has the same bytes as {original.name}, version {original.version}'s {original.kind} "
        f"of the same partition, and was written after it: a copy of another version's "
        "file (a restore from the wrong backup, a sync script?)",
        f"Spark loads it as version {copy.version or 0}'s and restarts on the state of "
        "another version, silently", "the copied version")
