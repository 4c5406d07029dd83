"""The read side of a checkpoint: logs, operators, schemas and state files, without a JVM.

Start with :func:`open_checkpoint`; see :class:`Checkpoint` for what it exposes.
"""

from statekit.checkpoint.checkpoint import Checkpoint, open_checkpoint

__all__ = ["Checkpoint", "open_checkpoint"]
