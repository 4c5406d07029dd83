"""Checkpoint format v2: each changelog names the version it follows.

With ``checkpointFormatVersion`` 2 a RocksDB changelog starts with its lineage — the
``(version, unique id)`` of the versions before it back to a snapshot — and Spark loads a
version by following the lineage of the changelog the commit log names, then replays the
changelogs it lists. A changelog of version V always ends its lineage at V - 1. One with
another version's bytes (copied over it, with its checksum files, so it decodes and
matches) ends elsewhere, and Spark refuses it (measured with pyspark 4.3:
``CANNOT_LOAD_STATE_STORE.UNCATEGORIZED``) — a witness that needs no second file.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.doctor.problems import FATAL, SPARK_LOAD_CORRUPT, Problem
from statekit.state.decode_cache import remembered
from statekit.writes.rollback import changelog_lineage


def lineage_problems(ckpt: Checkpoint, chains: Iterable[list[StateFile]]) -> list[Problem]:
    """A fatal problem for each format-v2 changelog on a restart chain whose lineage does
    not end at the version before its own."""
    found = []
    for chain in chains:
        for file in chain:
            if file.kind != "changelog" or file.unique_id is None or file.version is None:
                continue
            ends = remembered(ckpt, "lineage-end", [file], partial(_lineage_end, ckpt, file))
            if ends is None or ends == file.version - 1:
                continue
            found.append(Problem(
                "state-file-copied", FATAL, ckpt.display(file.path),
                f"its lineage ends at version {ends}, not {file.version - 1}: the bytes of "
                f"version {ends + 1}'s changelog, not version {file.version}'s (copied over "
                "it?)", "Spark follows the lineage and refuses a chain that skips versions",
                SPARK_LOAD_CORRUPT,
                "roll back to a batch before the copied version",
                file.version - 2 if file.version >= 2 else None))
    return found


def _lineage_end(ckpt: Checkpoint, file: StateFile) -> int | None:
    """The newest version a v2 changelog's lineage names (0: none), ``None``: no header."""
    lineage = changelog_lineage(ckpt, file)
    if not lineage:
        return 0 if (file.version or 0) <= 1 else None
    return max(lineage)
