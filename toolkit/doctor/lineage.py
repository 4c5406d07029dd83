"""Checkpoint format v2: each changelog names the version it follows.

With ``checkpointFormatVersion`` 2 a RocksDB changelog starts with its lineage — the
``(version, unique id)`` of the versions before it back to a snapshot — and Spark loads a
version by following the lineage of the changelog the commit log names, then replays the
changelogs it lists. A changelog of version V ends its lineage at V - 1. One with another
version's bytes (copied over it with its checksum files, so it decodes and matches) names
other versions — a witness that needs no second file. Measured with pyspark 4.3: an older
version's (its lineage stops before V - 1) breaks the chain and Spark refuses it
(``CANNOT_LOAD_STATE_STORE.UNCATEGORIZED``); a newer version's names V - 1 too, and Spark
replays its changes on it: the restart runs on other state.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.doctor.problems import (
    FATAL,
    SPARK_LOAD_CORRUPT,
    Problem,
    rollback_before_version,
)
from statekit.doctor.twins import other_state_warning
from statekit.state.decode_cache import remembered
from statekit.writes.rollback import changelog_lineage


def lineage_problems(ckpt: Checkpoint, chains: Iterable[list[StateFile]]) -> list[Problem]:
    """For each format-v2 changelog on a restart chain whose lineage is not that of its
    version: fatal when it does not name the version before its own (Spark's chain breaks),
    a warning when it names versions after its own (a newer version's changelog: Spark
    follows the version before and replays the newer changes, silently)."""
    found = []
    for chain in chains:
        for file in chain:
            if file.kind != "changelog" or file.unique_id is None or file.version is None:
                continue
            named = remembered(ckpt, "lineage-versions", [file],
                               partial(_lineage_versions, ckpt, file))
            if named is None:
                continue
            before = file.version - 1
            ends = max(named, default=0)
            remedy, batch = rollback_before_version(file.version, "the copied version")
            if before in named or (before == 0 and not named):
                if ends <= before:
                    continue
                found.append(other_state_warning(
                    ckpt, "state-file-copied", file,
                    f"its lineage names version {ends}, after its own ({file.version}): the "
                    f"bytes of version {ends + 1}'s changelog (copied over it?)",
                    "Spark follows the version before it and replays the newer version's "
                    "changes: it restarts on other state, silently", "the copied version"))
                continue
            found.append(Problem(
                "state-file-copied", FATAL, ckpt.display(file.path),
                f"its lineage ends at version {ends}, not {before}: the bytes of version "
                f"{ends + 1}'s changelog, not version {file.version}'s (copied over it?)",
                "Spark follows the lineage and refuses a chain that skips versions",
                SPARK_LOAD_CORRUPT, remedy, batch))
    return found


def _lineage_versions(ckpt: Checkpoint, file: StateFile) -> list[int] | None:
    """The versions a v2 changelog's lineage names (``[]``: none, as version 1's);
    ``None``: no lineage to read (a header that does not read)."""
    lineage = changelog_lineage(ckpt, file)
    if not lineage and (file.version or 0) > 1:
        return None
    return sorted(lineage)
