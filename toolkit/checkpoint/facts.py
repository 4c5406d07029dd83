"""Derived facts about one state store instance: snapshot lag, loadability, orphan files.

These are the judgements an SRE makes by staring at a directory listing — "when was the last
snapshot, how many deltas must a restart replay, which files are left over" — made once, from
the inventory alone, so the report, the recovery model and the TUI agree.

Definitions (state version = batch id + 1):

* **committed version** — the version written by the last committed batch; a restart loads it.
* **retained range** — from the version the first retained batch started from up to the
  committed version. Spark's state reader can read any batch in it.
* **snapshot lag** — committed version minus the newest snapshot (HDFS ``.snapshot`` / RocksDB
  ``.zip``) at or below it: the change files a restart replays. Without any snapshot, every
  version since the first.
* **orphan** — a data file no retained version needs: older than the earliest file needed to
  load the start of the retained range (Spark's maintenance deletes those eventually), or
  newer than the committed version (written by a batch that never committed; Spark overwrites
  it when it re-runs the batch).
"""

from __future__ import annotations

from dataclasses import dataclass

from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile

ORPHAN_STALE = "stale"
ORPHAN_UNCOMMITTED = "beyond-last-commit"


@dataclass(frozen=True)
class Orphan:
    file: StateFile
    reason: str


@dataclass(frozen=True)
class InstanceFacts:
    """What the files of one store instance say about its health."""

    committed_version: int | None
    latest_snapshot: int | None
    """Newest snapshot/zip version ≤ the committed version."""
    snapshot_lag: int | None
    """Versions since that snapshot (``None`` when nothing is committed)."""
    loadable: bool
    """Whether the committed version can be rebuilt from the files present."""
    files_to_load: tuple[StateFile, ...]
    orphans: tuple[Orphan, ...]


def loadable(instance: StoreInstance, committed_version: int | None) -> bool:
    """Whether the files present rebuild ``committed_version`` (nothing committed: yes)."""
    if committed_version is None or committed_version == 0 or not instance.files:
        return True
    return bool(instance.files_to_load(committed_version))


def instance_facts(instance: StoreInstance, first_batch: int | None,
                   last_committed_batch: int | None) -> InstanceFacts:
    """Judge one store instance against the retained batch range.

    Parameters
    ----------
    first_batch, last_committed_batch:
        The first retained and the last committed batch ids (``None``: nothing committed).
    """
    if last_committed_batch is None:
        orphans = tuple(Orphan(f, ORPHAN_UNCOMMITTED) for f in instance.files
                        if f.version is not None)
        return InstanceFacts(None, None, None, True, (), orphans)
    committed = last_committed_batch + 1
    latest_snapshot = instance.latest_snapshot(committed)
    lag = committed - (latest_snapshot if latest_snapshot is not None else 0)
    to_load = tuple(instance.files_to_load(committed))
    loadable = bool(to_load) or committed == 0 or not instance.files
    start = max(first_batch if first_batch is not None else committed, 0)
    low_snapshot = instance.latest_snapshot(start)
    low = low_snapshot if low_snapshot is not None else 0
    found: list[Orphan] = []
    for file in instance.files:
        if file.version is None:
            continue
        if file.version > committed:
            found.append(Orphan(file, ORPHAN_UNCOMMITTED))
        elif file.version < low:
            found.append(Orphan(file, ORPHAN_STALE))
    return InstanceFacts(committed, latest_snapshot, lag, loadable, to_load, tuple(found))
