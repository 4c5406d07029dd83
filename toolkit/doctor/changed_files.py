"""Log files whose bytes changed after Spark wrote them.

Spark writes every log entry (``offsets/N``, ``commits/N``, a file source's ``sources/0/N``,
``metadata``) through Hadoop's checksummed file system, which leaves a hidden ``.N.crc``
beside it — and reads them back without checking it (measured with pyspark 4.3: a flipped
bit in ``commits/N`` whose entry still parses restarts the query on the changed value, e.g.
another watermark, and the state it ends in is not the first run's). So a checksum file that
disagrees with an entry that parses is the only sign of bit rot or a partial overwrite the
restart would run on silently: the doctor warns, and where a rollback drops the entry it
prints one (the rolled-back query plans that batch again from its sources).
"""

from __future__ import annotations

import posixpath
from collections.abc import Container
from dataclasses import dataclass

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.doctor.problems import DIFFERS, INFO, WARNING, Problem
from statekit.formats.checksum_files import check_hadoop_crc, single_flip
from statekit.support.errors import StatekitError


@dataclass(frozen=True)
class Change:
    """How a log entry differs from what its checksum file says was written."""

    message: str
    current: bytes
    """The entry as it is now (what Spark reads)."""
    original: bytes | None = None
    """The entry as Spark wrote it, when one flipped bit explains the difference (bit rot
    flips one): what the doctor compares the entry with to say what the restart changes."""
    checksum_only: bool = False
    """The checksum file rotted, not the entry (one stored CRC is one bit off)."""


def changed_since_written(ckpt: Checkpoint, path: str, data: bytes,
                          listing: Container[str]) -> Change | None:
    """How ``data`` (the bytes of ``path``) differs from what its hidden Hadoop checksum
    file says was written, or ``None`` when it agrees or there is nothing to compare.
    ``listing``: the names in the file's folder (to avoid a probe per file)."""
    folder, name = posixpath.split(path)
    crc_name = f".{name}.crc"
    if crc_name not in listing:
        return None
    crc_path = posixpath.join(folder, crc_name)
    try:
        crc = ckpt.read_bytes(crc_path)
        mismatch = check_hadoop_crc(data, crc, ckpt.display(crc_path))
    except StatekitError:  # a damaged checksum file says nothing about the entry
        return None
    if mismatch is None:
        return None
    flip = single_flip(data, crc)
    if flip is not None and flip[0] == "checksum":
        return Change(mismatch.message, data, data, checksum_only=True)
    return Change(mismatch.message, data, flip[1] if flip is not None else None)


def log_changed(ckpt: Checkpoint, path: str, change: Change, *, reads: str,
                rollback_to: int | None, outcome: str | None = DIFFERS,
                affects: str | None = None) -> Problem:
    """The problem for a log entry that parses but is not what Spark wrote: a warning with
    ``outcome`` (what the changed entry makes the restart do; ``None``: nothing, as when
    only its checksum file rotted)."""
    if change.checksum_only:
        return Problem(
            "checksum-mismatch", INFO, ckpt.display(path),
            f"{change.message}: its checksum file rotted (one bit off), the entry is as "
            "Spark wrote it", "Spark does not check this checksum: it restarts on the entry",
            None, "nothing needed")
    return Problem(
        "log-changed", WARNING, ckpt.display(path),
        f"{change.message}: the entry parses, but it (or its checksum file) changed after "
        "Spark wrote them",
        f"Spark does not check this checksum and restarts on the entry as it is now: "
        f"{reads}", None,
        ("roll back to the batch before it: the new checkpoint plans that batch again "
         "from the sources" if rollback_to is not None else
         "compare with a backup; Spark restarts on it as it is"),
        rollback_to, outcome=outcome,
        affects=(affects if affects is not None else
                 f"every batch from {rollback_to + 1} on" if rollback_to is not None else
                 "every batch after the restart") if outcome else "")
