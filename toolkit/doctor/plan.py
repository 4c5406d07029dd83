"""Which batch a restart runs first, on which state version, and which files it reads and
writes next — the skeleton every rule of the doctor hangs on.

Spark (``MicroBatchExecution.populateStartOffsets``) lists ``offsets/`` and ``commits/``,
takes the newest entry of each (L and C) and reads them:

* C = L: batch L finished; the restart plans batch L + 1 (writing ``offsets/L+1``) on state
  version L + 1;
* C < L: batch L is run again with its logged offsets, on state version L (a warning in
  Spark's log when C < L - 1);
* no ``commits/`` at all: the same as C < L;
* C > L: the logs do not belong together (a commit for a batch never planned).

Every file Spark creates on the way (``offsets/R``, ``commits/R``, a source's next log
entry, an operator-metadata or schema file it finds missing) is renamed into place over
Hadoop's checksum file: a stale hidden ``.<name>.crc`` left behind by a hand-deleted file
makes that rename fail, so the plan names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from statekit.checkpoint.checkpoint import Checkpoint


@dataclass(frozen=True)
class RestartPlan:
    last_planned: int | None
    """L: the newest ``offsets/`` entry."""
    last_committed: int | None
    """C: the newest ``commits/`` entry."""
    batch: int | None
    """R: the batch the restart runs first."""
    version: int | None
    """The state version batch R loads (R when C < L: the state of batch R - 1)."""

    @property
    def replans(self) -> bool:
        """The restart plans a new batch (writes ``offsets/R``)."""
        return self.last_planned is not None and self.last_committed == self.last_planned


def restart_plan(ckpt: Checkpoint) -> RestartPlan:
    planned = ckpt.planned_batches
    committed = ckpt.committed_batches
    last_offset = planned[-1] if planned else None
    last_commit = committed[-1] if committed else None
    if last_offset is None:
        return RestartPlan(None, last_commit, None, None)
    if last_commit == last_offset:
        return RestartPlan(last_offset, last_commit, last_offset + 1, last_offset + 1)
    return RestartPlan(last_offset, last_commit, last_offset, last_offset)


def hidden_checksum(path: str) -> str:
    """Hadoop's checksum file of ``path``: ``<folder>/.<name>.crc``."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/.{name}.crc"
