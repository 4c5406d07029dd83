"""What reading a restart path found: the damaged files, named, and what was read.

The doctor and ``statekit report`` carry these objects as they are rather than recompute a
verdict. They live below the reading itself (:mod:`statekit.state.verify`) because a file's
verdict is also kept in and rebuilt from the decode cache (:mod:`statekit.state.verify_cache`):
both need the records, and neither may import the other round a loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from statekit.support.errors import EXIT_CORRUPT, StatekitError, error_for


@dataclass(frozen=True)
class DamagedFile:
    """One file a restart reads and fails on."""

    path: str
    """As the user names it."""
    message: str
    exit_code: int = EXIT_CORRUPT
    operator_id: int | None = None
    partition: int | None = None
    checksum_only: bool = False
    """Only the checksum file is damaged (not its header): Hadoop ignores such a checksum
    file when Spark reads, so the restart works — measured with pyspark 4.3."""
    repaired_from: int | None = None
    """A damaged snapshot/zip with an intact older chain: the version Spark's automatic
    snapshot repair (``autoSnapshotRepair``) loads instead, replaying the change files after
    it — as measured with pyspark 4.3. Spark versions without that repair fail."""
    beyond_spark: bool = False
    """The damage is where Spark's reader never looks (a checksum file Spark does not check,
    bytes after the end marker): the restart reads the file without noticing."""
    spark_error: str | None = None
    """The error class Spark's load fails with, where statekit knows it."""
    after_load: bool = False
    """Damage RocksDB does not see when it opens the version (an SST data block whose
    checksum file does not give it away): the load succeeds, so no snapshot repair starts,
    and the batch fails when it reads the block."""

    @property
    def line(self) -> str:
        return f"{self.path}: {self.message}"

    def to_error(self) -> StatekitError:
        return error_for(self.exit_code, self.message, path=self.path)


@dataclass(frozen=True)
class Verification:
    """What reading the restart path found."""

    version: int | None
    """The state version a restart loads (last committed batch + 1)."""
    files: int
    bytes: int
    damaged: tuple[DamagedFile, ...]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return not self.damaged

    @property
    def fatal(self) -> tuple[DamagedFile, ...]:
        """The damaged files no older chain stands in for: a restart fails on them."""
        return tuple(d for d in self.damaged
                     if d.repaired_from is None and not d.checksum_only
                     and not d.beyond_spark)

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "files": self.files, "bytes": self.bytes,
                "damaged": [{"path": d.path, "message": d.message,
                             "repaired_from": d.repaired_from} for d in self.damaged],
                "elapsed_s": self.elapsed_s}


def restart_reads_past(problem: DamagedFile | None) -> bool:
    """Whether the restart reads past ``problem`` (a zip's SSTs then count as read)."""
    return problem is None or problem.beyond_spark or problem.checksum_only
