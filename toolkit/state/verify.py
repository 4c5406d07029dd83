"""Read every file a restart would load, the way Spark reads it, and name the damaged ones.

Listings and metadata (``statekit report``) cannot see a truncated delta, a flipped bit in a
snapshot or a zip whose SSTs do not decode: only reading them can, and that is exactly what a
restart does first. This module does the same reads without a JVM — for each store instance
the newest snapshot (or zip and the SSTs it lists) at the committed version and every change
file after it — decoding every record (lz4 block checksums, record framing, SST block
checksums) and comparing each file with its checksum file when one exists (Hadoop's hidden
``.crc``, Spark 4.1's JSON ``.crc``). Partitions are shared among worker processes
(:mod:`statekit.state.workers`), so the cost is one parallel read of the restart path — and
only once per file: each verdict is kept in the decode cache
(:mod:`statekit.state.decode_cache`) under the identity of everything it read (the file, its
checksum files, a zip's SSTs), and a healthy restart path as one entry, so the next run (the
exporter's next scrape) decodes only new or changed files. Keeping and finding them is
:mod:`statekit.state.verify_cache`'s job, handed this module's reader; what a verification
reports, :class:`DamagedFile` and :class:`Verification`, is :mod:`statekit.state.verification`
(both below this module, exported from here too).

Damage is then judged as Spark meets it (measured with pyspark 4.3): Spark does not check
Hadoop's checksum files when it reads, decodes a change file only up to its end marker
(:func:`statekit.formats.records.spark_read_failure`), unpacks a zip front to back
(:mod:`statekit.formats.zip_stream`) and refuses an SST whose size is not the one the zip
lists. A file damaged only where Spark does not look is reported, flagged ``beyond_spark``:
the restart still runs.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import file_records
from statekit.formats.checksum_files import check_hadoop_crc, check_spark_crc
from statekit.formats.rocksdb_zip import metadata_from_zip
from statekit.state.decode_cache import DecodeCache
from statekit.state.verification import DamagedFile, Verification, restart_reads_past
from statekit.state.verify_cache import checked, path_key
from statekit.state.workers import GroupRunner, map_groups
from statekit.support.errors import EXIT_CORRUPT, CorruptFile, StatekitError

__all__ = ["DamagedFile", "Progress", "Verification", "first_damaged", "verify_restart_path"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class _VerifyGroup:
    """Picklable work for :func:`map_groups`: verify these instances at ``version``, each
    item an instance key and the files that load it."""

    version: int
    cache_root: str | None = None
    """The decode cache's folder, when verdicts are taken from (and kept in) it: the
    caller's, whatever environment the worker process started with."""

    def __call__(self, ckpt: Checkpoint,
                 items: list[tuple[tuple[int, str, int], list[StateFile]]],
                 progress: Progress | None) -> tuple[int, int, list[DamagedFile]]:
        cache = DecodeCache.of(ckpt, self.cache_root) if self.cache_root else None
        files = size = 0
        damaged: list[DamagedFile] = []
        for key, chain in items:
            done = _verify_instance(ckpt, ckpt.inventory.instances[key], chain, self.version,
                                    cache)
            assert done is not None  # (only a cache-only pass leaves an instance undone)
            files, size = files + done[0], size + done[1]
            damaged.extend(done[2])
        return files, size, damaged


def _verify_instance(ckpt: Checkpoint, instance: StoreInstance, chain: list[StateFile],
                     version: int, cache: DecodeCache | None, *, only_cached: bool = False
                     ) -> tuple[int, int, list[DamagedFile]] | None:
    """(files, bytes, damaged) of what a restart reads of one instance (SSTs through their
    zip; nothing when the version cannot be rebuilt — the report says so). ``only_cached``:
    ``None`` as soon as something would have to be decoded."""
    files = size = 0
    damaged: list[DamagedFile] = []
    for file in chain:
        files += 1
        size += file.size
        verdict = checked(ckpt, file, cache, _verify_file, only_cached=only_cached)
        if verdict is None:
            return None
        problem, sst_files, sst_bytes = verdict
        if problem is None or restart_reads_past(problem):
            files += sst_files  # a zip's SSTs were read too
            size += sst_bytes
            if problem is not None:
                damaged.append(problem)
            continue
        if file.kind in ("snapshot", "zip") and file.version is not None and \
                not problem.after_load:
            if only_cached:  # the older chains are decoded where the work runs
                return None
            fallback = _fallback(ckpt, instance, version, file.version)
            if fallback is not None:
                problem = replace(problem, repaired_from=fallback)
        damaged.append(problem)
        break  # the rest of this chain cannot be applied anyway
    return files, size, damaged


def _fallback(ckpt: Checkpoint, instance: StoreInstance, version: int, bad: int
              ) -> int | None:
    """The older base version (0: empty) a restart can load instead of the damaged base at
    ``bad``, when it and every change file up to ``version`` are present and decode."""
    families = bool(ckpt.inventory.meta("schema-v3", instance.operator_id))
    for base, files in instance.older_chains(version, bad):
        if base == 0 and families:
            # measured with pyspark 4.3: a store with column families (transformWithState)
            # is not rebuilt from empty — the changelogs name column families only a zip
            # records
            continue
        if all(_spark_damage(ckpt, f) is None for f in files):
            return base
    return None


def _verify_file(ckpt: Checkpoint, file: StateFile, data: bytes | None = None
                 ) -> DamagedFile | None:
    """The damage Spark's load meets in ``file`` (its bytes: ``data`` when read already);
    else any damage statekit's full check finds (checksum files, bytes after the end
    marker), flagged ``beyond_spark``."""
    shown = ckpt.display(file.path)
    try:
        if data is None:
            data = ckpt.read_bytes(file.path)
    except StatekitError as error:
        return DamagedFile(error.path or shown, error.message, error.exit_code,
                           file.operator_id, file.partition)
    spark = _spark_damage(ckpt, file, data)
    if spark is not None:
        return spark
    try:
        for crc in ckpt.inventory.checksums_of(file.path):
            check = check_hadoop_crc if crc.hadoop else check_spark_crc
            try:
                mismatch = check(data, ckpt.read_bytes(crc.path), ckpt.display(crc.path))
            except CorruptFile as bad_checksum_file:
                return DamagedFile(ckpt.display(crc.path), bad_checksum_file.message,
                                   EXIT_CORRUPT, file.operator_id, file.partition,
                                   checksum_only=True)
            if mismatch is not None:
                return DamagedFile(shown, f"{mismatch.message}; Spark does not check it "
                                   "and reads the file", EXIT_CORRUPT, file.operator_id,
                                   file.partition, beyond_spark=True)
        if file.kind == "zip":  # its SSTs were decoded as Spark reads them; the rest of it
            metadata_from_zip(io.BytesIO(data), path=shown)  # (central directory) too
        else:
            _decode_all(ckpt, file, data)
    except StatekitError as error:
        path = error.path or shown
        message = error.message if error.path else str(error)
        return DamagedFile(path, f"{message}; Spark's reader stops before it",
                           error.exit_code, file.operator_id, file.partition,
                           beyond_spark=True)
    return None


def _spark_damage(ckpt: Checkpoint, file: StateFile, data: bytes | None = None
                  ) -> DamagedFile | None:
    """What Spark's own load of ``file`` fails on (``None``: it reads it)."""
    from statekit.checkpoint.state_data import file_codec
    from statekit.formats.records import spark_read_failure

    shown = ckpt.display(file.path)
    try:
        if data is None:
            data = ckpt.read_bytes(file.path)
        _spark_checksum(ckpt, file, data)
        if file.kind in ("delta", "snapshot", "changelog"):
            codec = file_codec(ckpt, data[:8], shown)
            failure = spark_read_failure(data, codec, file.kind, shown=shown)
            if failure is not None:
                raise failure
        elif file.kind == "zip":
            _spark_zip(ckpt, file, data)
        else:
            _decode_all(ckpt, file, data)
    except StatekitError as error:
        path = error.path or shown
        return DamagedFile(path, error.message if error.path else str(error),
                           error.exit_code, file.operator_id, file.partition,
                           spark_error=getattr(error, "spark_error", None),
                           after_load=bool(getattr(error, "after_load", False)))
    return None


def _spark_checksum(ckpt: Checkpoint, file: StateFile, data: bytes) -> None:
    """Spark 4.1+'s own checksum file (``<name>.crc``, JSON), which its checkpoint file
    manager reads with the file and checks: one it cannot parse, or whose size or CRC32C
    disagrees with the file, fails the read (measured with pyspark 4.3)."""
    from statekit.checkpoint.spark_reads import SparkReadError, jackson_value

    for crc in ckpt.inventory.checksums_of(file.path):
        if crc.hadoop:
            continue
        shown = ckpt.display(crc.path)
        try:
            meta = jackson_value(ckpt.read_bytes(crc.path).decode("utf-8", "replace"))
        except SparkReadError as error:
            raise CorruptFile(f"Spark's checksum file does not parse ({error})",
                              path=shown) from None
        if not isinstance(meta, dict):
            raise CorruptFile("Spark's checksum file is not a JSON object", path=shown)
        missing = _checksum_fields_missing(meta)
        if missing:
            raise CorruptFile(f"Spark's checksum file has no {missing} (Spark reads it into "
                              "its Checksum record and fails)", path=shown)
        try:
            mismatch = check_spark_crc(data, json.dumps(meta).encode(), shown)
        except CorruptFile:
            mismatch = None
        if mismatch is not None:
            raise CorruptFile(f"{mismatch.message} (Spark checks it on read)",
                              path=ckpt.display(file.path))


# Spark's Checksum record (json4s, every field required; unknown fields are ignored)
_CHECKSUM_FIELDS = {"algorithm": str, "value": int, "mainFileSize": int, "timestampMs": int,
                    "creator": dict}
_CREATOR_FIELDS = {"executorId": str, "taskInfo": str}


def _checksum_fields_missing(meta: dict[str, Any]) -> str | None:
    """The first field of Spark's checksum record that is absent or of another type."""
    for fields, value, prefix in ((_CHECKSUM_FIELDS, meta, ""),
                                  (_CREATOR_FIELDS, meta.get("creator"), "creator.")):
        if not isinstance(value, dict):
            return None  # reported as the missing "creator" above
        for name, kind in fields.items():
            field = value.get(name)
            if not isinstance(field, kind) or isinstance(field, bool):
                return f"{kind.__name__} field '{prefix}{name}'"
    return None


def _hadoop_checked(ckpt: Checkpoint, path: str, data: bytes) -> None:
    """RocksDB's files (the zip, its SSTs) come to the executor through Hadoop's
    checksummed filesystem, which checks them against their hidden ``.crc`` (measured: a
    changed checksum value fails the load; a checksum file whose header is damaged is
    ignored)."""
    for crc in ckpt.inventory.checksums_of(path):
        if not crc.hadoop:
            continue
        try:
            mismatch = check_hadoop_crc(data, ckpt.read_bytes(crc.path), ckpt.display(crc.path))
        except CorruptFile:
            mismatch = None
        if mismatch is not None:
            raise CorruptFile(f"{mismatch.message}; RocksDB's files come through Hadoop's "
                              "checksummed filesystem, which checks it",
                              path=ckpt.display(path))


def _spark_zip(ckpt: Checkpoint, file: StateFile, data: bytes) -> None:
    """A RocksDB checkpoint zip as Spark loads it: unpacked front to back, its ``metadata``
    parsed, every SST it lists present with the size it lists, then RocksDB opens the
    version (every SST decoded here, block checksums checked)."""
    import posixpath

    from statekit.formats.rocksdb_sst import live_state
    from statekit.formats.rocksdb_zip import METADATA_MEMBER, parse_metadata_bytes
    from statekit.formats.zip_stream import java_zip_entries

    shown = ckpt.display(file.path)
    _hadoop_checked(ckpt, file.path, data)
    entries = java_zip_entries(data, path=shown)
    if METADATA_MEMBER not in entries:
        raise CorruptFile("the zip has no 'metadata' entry (as Java unpacks it)", path=shown)
    metadata = parse_metadata_bytes(entries[METADATA_MEMBER], path=shown)
    current = entries.get("CURRENT")
    manifest = current.decode("utf-8", "replace").strip() if current is not None else ""
    if not manifest or manifest not in entries:
        raise CorruptFile("RocksDB cannot open the version: CURRENT names no MANIFEST in "
                          "the zip", path=shown)
    folder = posixpath.dirname(file.path)
    instance = ckpt.inventory.instances.get((file.operator_id, file.store, file.partition))
    listed = {f.name: f for f in instance.of_kind("sst")} if instance is not None else {}
    paths = []
    held = _ReadOnce()  # each SST read in one request, however many blocks are decoded
    for sst in metadata.sst_files:
        found = listed.get(sst.dfs_name)
        path = posixpath.join(folder, "SSTs", sst.dfs_name)
        if found is None:
            raise CorruptFile(f"SST {sst.dfs_name} that the zip lists is missing",
                              path=ckpt.display(path))
        if sst.size_bytes is not None and found.size != sst.size_bytes:
            error = CorruptFile(f"is {found.size} bytes, the zip lists {sst.size_bytes} "
                                "(UNEXPECTED_FILE_SIZE)", path=ckpt.display(path))
            error.spark_error = "CANNOT_LOAD_STATE_STORE.UNEXPECTED_FILE_SIZE"  # type: ignore[attr-defined]
            raise error
        held.files[path] = ckpt.read_bytes(found.path)
        if ckpt.inventory.checksums_of(found.path):
            _hadoop_checked(ckpt, found.path, held.files[path])
        paths.append(path)
    try:
        live_state(held, paths, shown=[ckpt.display(p) for p in paths], merge_delimiter=b"")
    except CorruptFile as error:
        # opening a version, RocksDB reads each SST's footer, metaindex, properties, index
        # and filter blocks — data blocks only when a batch reads keys (pyspark 4.3: a
        # damaged data block loads, and the batch then fails)
        error.after_load = "data block" in error.message  # type: ignore[attr-defined]
        raise


class _ReadOnce:
    """The one ``open`` the SST reader needs, over bytes read once: on an object store every
    block the reader seeks to would otherwise be a request of its own."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def open(self, path: str, mode: str = "rb") -> io.BytesIO:
        return io.BytesIO(self.files[path])


def _decode_all(ckpt: Checkpoint, file: StateFile, data: bytes) -> None:
    """Decode every record of ``file`` (its SSTs too, for a zip); raises where it breaks."""
    for _ in file_records(ckpt, file, data):
        pass


def verify_restart_path(ckpt: Checkpoint, *, operator: int | None = None,
                        partitions: set[int] | None = None,
                        progress: Progress | None = None,
                        runner: GroupRunner | None = None,
                        version: int | None = None,
                        chain: Callable[[StoreInstance, int], list[StateFile] | None]
                        | None = None) -> Verification:
    """Read and decode every file a restart loads (optionally one operator / some
    partitions); damaged files come back named, in instance order. ``version``: the state
    version the restart loads, when not the last committed batch + 1 (``statekit doctor``
    knows when Spark re-runs an uncommitted batch instead). ``chain``: which files load a
    version of an instance (checkpoint format v2: those the commit log names; default: by
    versions)."""
    started = time.perf_counter()
    last = ckpt.last_committed_batch
    if version is None:
        if last is None:
            return Verification(None, 0, 0, (), 0.0)
        version = last + 1
    keys = [key for key in sorted(ckpt.inventory.instances)
            if (operator is None or key[0] == operator)
            and (partitions is None or key[2] in partitions)]
    items = []
    for key in keys:
        instance = ckpt.inventory.instances[key]
        files = chain(instance, version) if chain is not None else \
            instance.files_to_load(version)
        items.append((key, files or []))
    if progress:
        progress(f"verifying the restart path of {len(keys)} store instances…")
    # a healthy restart path read before is one entry of the decode cache; instances whose
    # every verdict is in it are done here, without a worker; on Spark (a runner) everything
    # is read there
    cache = DecodeCache.of(ckpt) if runner is None else None
    whole = path_key(cache, ckpt, version, items) if cache is not None else None
    held = cache.get(whole) if cache is not None and whole is not None else None
    if isinstance(held, list) and len(held) == 2 and all(isinstance(n, int) for n in held):
        return Verification(version, held[0], held[1], (),
                            round(time.perf_counter() - started, 3))
    results: list[tuple[int, int, list[DamagedFile]]] = []
    pending = items
    if cache is not None:
        pending = []
        for key, files in items:
            done = _verify_instance(ckpt, ckpt.inventory.instances[key], files, version,
                                    cache, only_cached=True)
            if done is None:
                pending.append((key, files))
            else:
                results.append(done)
    if pending:
        data_bytes = sum(f.size for _, files in pending for f in files)
        work = _VerifyGroup(version, cache.root if cache is not None else None)
        results += map_groups(ckpt, pending, data_bytes, work, progress, runner)
    damaged = sorted((d for _, _, found in results for d in found),
                     key=lambda d: (d.operator_id or 0, d.partition or 0, d.path))
    verification = Verification(version, sum(r[0] for r in results),
                                sum(r[1] for r in results), tuple(damaged),
                                round(time.perf_counter() - started, 3))
    if cache is not None and whole is not None and not damaged:
        cache.put(whole, [verification.files, verification.bytes])
    return verification


def first_damaged(ckpt: Checkpoint, files: list[StateFile], *, as_spark: bool = False
                  ) -> DamagedFile | None:
    """The first of ``files`` that does not read back whole (a zip's SSTs included), or
    ``None``: one chain checked in this process (``statekit doctor`` asks it of the few
    files an older version needs beyond the restart path already read). ``as_spark``: only
    damage Spark's load meets counts."""
    cache = None if as_spark else DecodeCache.of(ckpt)
    for file in files:
        if as_spark:
            problem = _spark_damage(ckpt, file)
        elif cache is None:
            problem = _verify_file(ckpt, file)
        else:
            verdict = checked(ckpt, file, cache, _verify_file)
            problem = verdict[0] if verdict is not None else None
        if problem is not None:
            return problem
    return None
