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

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.doctor.problems import DIFFERS, WARNING, Problem
from statekit.formats.checksum_files import check_hadoop_crc
from statekit.support.errors import StatekitError


def changed_since_written(ckpt: Checkpoint, path: str, data: bytes,
                          listing: Container[str]) -> str | None:
    """How ``data`` (the bytes of ``path``) differs from what its hidden Hadoop checksum
    file says was written, or ``None`` when it agrees or there is nothing to compare.
    ``listing``: the names in the file's folder (to avoid a probe per file)."""
    folder, name = posixpath.split(path)
    crc_name = f".{name}.crc"
    if crc_name not in listing:
        return None
    crc_path = posixpath.join(folder, crc_name)
    try:
        mismatch = check_hadoop_crc(data, ckpt.read_bytes(crc_path), ckpt.display(crc_path))
    except StatekitError:  # a damaged checksum file says nothing about the entry
        return None
    return mismatch.message if mismatch is not None else None


def log_changed(ckpt: Checkpoint, path: str, message: str, *, reads: str,
                rollback_to: int | None) -> Problem:
    """The warning for a log entry that parses but is not what Spark wrote."""
    return Problem(
        "log-changed", WARNING, ckpt.display(path),
        f"{message}: the entry parses, but it (or its checksum file) changed after Spark "
        "wrote them",
        f"Spark does not check this checksum and restarts on the entry as it is now: "
        f"{reads}", None,
        ("roll back to the batch before it: the new checkpoint plans that batch again "
         "from the sources" if rollback_to is not None else
         "compare with a backup; Spark restarts on it as it is"),
        rollback_to, outcome=DIFFERS,
        affects=f"every batch from {rollback_to + 1} on" if rollback_to is not None else
        "every batch after the restart")
