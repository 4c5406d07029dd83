"""Read every file a restart would load, the way Spark reads it, and name the damaged ones.

Listings and metadata (``statekit report``) cannot see a truncated delta, a flipped bit in a
snapshot or a zip whose SSTs do not decode: only reading them can, and that is exactly what a
restart does first. This module does the same reads without a JVM — for each store instance
the newest snapshot (or zip and the SSTs it lists) at the committed version and every change
file after it — decoding every record (lz4 block checksums, record framing, SST block
checksums) and comparing each file with its checksum file when one exists (Hadoop's hidden
``.crc``, Spark 4.1's JSON ``.crc``). Partitions are shared among worker processes
(:mod:`statekit.partition_workers`), so the cost is one parallel read of the restart path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import file_records, zip_metadata
from statekit.errors import EXIT_CORRUPT, CorruptFile, StatekitError, error_for
from statekit.formats.checksum_files import check_hadoop_crc, check_spark_crc
from statekit.partition_workers import GroupRunner, map_groups

Progress = Callable[[str], None]


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
                     if d.repaired_from is None and not d.checksum_only)

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "files": self.files, "bytes": self.bytes,
                "damaged": [{"path": d.path, "message": d.message,
                             "repaired_from": d.repaired_from} for d in self.damaged],
                "elapsed_s": self.elapsed_s}


@dataclass(frozen=True)
class _VerifyGroup:
    """Picklable work for :func:`map_groups`: verify these instances at ``version``."""

    version: int

    def __call__(self, ckpt: Checkpoint, keys: list[tuple[int, str, int]],
                 progress: Progress | None) -> tuple[int, int, list[DamagedFile]]:
        files = size = 0
        damaged: list[DamagedFile] = []
        for key in keys:
            instance = ckpt.inventory.instances[key]
            # what a restart reads (SSTs through their zip); nothing when the version cannot
            # be rebuilt (the report says so)
            for file in instance.files_to_load(self.version):
                files += 1
                size += file.size
                problem = _verify_file(ckpt, file)
                if problem is None:
                    if file.kind == "zip":  # its SSTs were read too
                        ssts = _ssts_of(ckpt, instance, file)
                        files += len(ssts)
                        size += sum(s.size for s in ssts)
                    continue
                if file.kind in ("snapshot", "zip") and file.version is not None:
                    fallback = _fallback(ckpt, instance, self.version, file.version)
                    if fallback is not None:
                        problem = replace(problem, repaired_from=fallback)
                damaged.append(problem)
                break  # the rest of this chain cannot be applied anyway
        return files, size, damaged


def _ssts_of(ckpt: Checkpoint, instance: StoreInstance, file: StateFile) -> list[StateFile]:
    names = {s.dfs_name for s in zip_metadata(ckpt, [file])[file.path].sst_files}
    return instance.ssts_named(names)


def _fallback(ckpt: Checkpoint, instance: StoreInstance, version: int, bad: int
              ) -> int | None:
    """The older base version (0: empty) a restart can load instead of the damaged base at
    ``bad``, when it and every change file up to ``version`` are present and decode."""
    for base, files in instance.older_chains(version, bad):
        if all(_verify_file(ckpt, f) is None for f in files):
            return base
    return None


def _verify_file(ckpt: Checkpoint, file: StateFile) -> DamagedFile | None:
    shown = ckpt.display(file.path)
    try:
        data = ckpt.read_bytes(file.path)
        for crc in ckpt.inventory.checksums_of(file.path):
            check = check_hadoop_crc if crc.hadoop else check_spark_crc
            try:
                mismatch = check(data, ckpt.read_bytes(crc.path), ckpt.display(crc.path))
            except CorruptFile as bad_checksum_file:
                _decode_all(ckpt, file, data)  # a damaged data file is the worse news
                return DamagedFile(ckpt.display(crc.path), bad_checksum_file.message,
                                   EXIT_CORRUPT, file.operator_id, file.partition,
                                   checksum_only=True)
            if mismatch is not None:
                return DamagedFile(shown, mismatch.message, EXIT_CORRUPT, file.operator_id,
                                   file.partition)
        _decode_all(ckpt, file, data)
    except StatekitError as error:
        path = error.path or shown
        return DamagedFile(path, error.message if error.path else str(error),
                           error.exit_code, file.operator_id, file.partition)
    return None


def _decode_all(ckpt: Checkpoint, file: StateFile, data: bytes) -> None:
    """Decode every record of ``file`` (its SSTs too, for a zip); raises where it breaks."""
    for _ in file_records(ckpt, file, data):
        pass


def verify_restart_path(ckpt: Checkpoint, *, operator: int | None = None,
                        partitions: set[int] | None = None,
                        progress: Progress | None = None,
                        runner: GroupRunner | None = None,
                        version: int | None = None) -> Verification:
    """Read and decode every file a restart loads (optionally one operator / some
    partitions); damaged files come back named, in instance order. ``version``: the state
    version the restart loads, when not the last committed batch + 1 (``statekit doctor``
    knows when Spark re-runs an uncommitted batch instead)."""
    started = time.perf_counter()
    last = ckpt.last_committed_batch
    if version is None:
        if last is None:
            return Verification(None, 0, 0, (), 0.0)
        version = last + 1
    keys = [key for key in sorted(ckpt.inventory.instances)
            if (operator is None or key[0] == operator)
            and (partitions is None or key[2] in partitions)]
    data_bytes = sum(f.size for key in keys
                     for f in ckpt.inventory.instances[key].files_to_load(version))
    if progress:
        progress(f"verifying the restart path of {len(keys)} store instances…")
    results = map_groups(ckpt, keys, data_bytes, _VerifyGroup(version), progress, runner)
    damaged = sorted((d for _, _, found in results for d in found),
                     key=lambda d: (d.operator_id or 0, d.partition or 0, d.path))
    return Verification(version, sum(r[0] for r in results), sum(r[1] for r in results),
                        tuple(damaged), round(time.perf_counter() - started, 3))


def first_damaged(ckpt: Checkpoint, files: list[StateFile]) -> DamagedFile | None:
    """The first of ``files`` that does not read back whole (a zip's SSTs included), or
    ``None``: one chain checked in this process (``statekit doctor`` asks it of the few
    files an older version needs beyond the restart path already read)."""
    for file in files:
        problem = _verify_file(ckpt, file)
        if problem is not None:
            return problem
    return None
