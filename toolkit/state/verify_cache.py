"""The restart-path verdicts kept in the decode cache, and the keys they are kept under.

Verifying a restart path (:mod:`statekit.state.verify`) decodes every file a restart loads;
the exporter asks again at every scrape, and a checkpoint mostly gains a few new files
between two asks. So a file's verdict is kept in the decode cache
(:mod:`statekit.state.decode_cache`) under the identity of everything it read — the file,
its checksum files and, for a zip, the SSTs its metadata lists (named by the zip's bytes, so
taken before they are read) — and a healthy restart path as one entry, so that the next run
decodes only new or changed files. A verdict is kept only for what the bytes say, never for a
read that failed.

The decoding itself stays in :mod:`statekit.state.verify`, which hands its reader in
(:func:`checked`'s ``verify_file``): this module sits below it and imports nothing of it.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import zip_metadata
from statekit.formats.rocksdb_zip import metadata_from_zip
from statekit.state.decode_cache import DecodeCache
from statekit.state.verification import DamagedFile, restart_reads_past
from statekit.support.errors import EXIT_CORRUPT, EXIT_UNSUPPORTED, StatekitError

VerifyFile = Callable[[Checkpoint, StateFile, bytes | None], DamagedFile | None]
"""How a file is verified when no verdict is kept: :func:`statekit.state.verify._verify_file`
(its bytes when read already)."""


def checked(ckpt: Checkpoint, file: StateFile, cache: DecodeCache | None,
            verify_file: VerifyFile, *, only_cached: bool = False
            ) -> tuple[DamagedFile | None, int, int] | None:
    """``verify_file``'s verdict on ``file`` and, for a zip a restart loads, the files and
    bytes of its SSTs — from the decode cache when these very bytes (and checksum files, and
    a zip's SSTs) were checked before. ``only_cached``: ``None`` on a miss."""
    key = _verify_key(cache, ckpt, file) if cache is not None else None
    if cache is not None and key is not None:
        hit = _cached_verdict(cache, ckpt, file, cache.get(key))
        if hit is not None:
            return hit
    if only_cached:
        return None
    data = None
    deps: list[Any] | None = None
    if cache is not None and key is not None and file.kind == "zip":
        # the SSTs a zip depends on are named by its bytes: their identities are taken
        # before they are read, the bytes once for both
        try:
            data = ckpt.read_bytes(file.path)
        except StatekitError:
            key = None
        else:
            names = _sst_names(data, ckpt.display(file.path))
            deps = _zip_deps(cache, ckpt, file, names) if names is not None else None
            key = key if deps is not None else None
    problem = verify_file(ckpt, file, data)
    sst_files = sst_bytes = 0
    instance = ckpt.inventory.instances.get((file.operator_id, file.store, file.partition))
    if file.kind == "zip" and restart_reads_past(problem) and instance is not None:
        ssts = _ssts_of(ckpt, instance, file, data)
        sst_files, sst_bytes = len(ssts), sum(s.size for s in ssts)
    if cache is not None and key is not None and (problem is None or problem.exit_code in (
            EXIT_CORRUPT, EXIT_UNSUPPORTED)):  # what the bytes say, not a failed read
        cache.put(key, {"problem": asdict(problem) if problem is not None else None,
                        "ssts": [sst_files, sst_bytes], "deps": deps})
    return problem, sst_files, sst_bytes


def _verify_key(cache: DecodeCache, ckpt: Checkpoint, file: StateFile) -> str | None:
    """The entry of ``file``'s verdict: its identity and its checksum files' (``None``: one
    has none)."""
    ids = cache.identities([(file.path, file.size), *(
        (crc.path, crc.size) for crc in ckpt.inventory.checksums_of(file.path))])
    return None if ids is None else cache.key("verify", ckpt.display(file.path), file.kind,
                                              ids)


def _cached_verdict(cache: DecodeCache, ckpt: Checkpoint, file: StateFile, entry: Any
                    ) -> tuple[DamagedFile | None, int, int] | None:
    """A kept verdict, when it reads and a zip's SSTs are still the ones it was given."""
    try:
        problem = DamagedFile(**entry["problem"]) if entry["problem"] is not None else None
        sst_files, sst_bytes = (int(n) for n in entry["ssts"])
        deps = entry["deps"]
        if deps is not None and _zip_deps(cache, ckpt, file, [d[0] for d in deps]) != deps:
            return None
    except (TypeError, KeyError, ValueError, IndexError):
        return None
    return problem, sst_files, sst_bytes


def _sst_names(data: bytes, shown: str) -> set[str] | None:
    """Every SST name a zip's metadata lists, read both ways Spark and statekit read it
    (``None``: the bytes break a parser unexpectedly — nothing is kept then)."""
    from statekit.formats.rocksdb_zip import (
        METADATA_MEMBER,
        metadata_from_zip,
        parse_metadata_bytes,
    )
    from statekit.formats.zip_stream import java_zip_entries

    names: set[str] = set()
    try:
        with contextlib.suppress(StatekitError):
            names.update(s.dfs_name for s in metadata_from_zip(io.BytesIO(data),
                                                               path=shown).sst_files)
        with contextlib.suppress(StatekitError):
            entries = java_zip_entries(data, path=shown)
            if METADATA_MEMBER in entries:
                names.update(s.dfs_name for s in parse_metadata_bytes(
                    entries[METADATA_MEMBER], path=shown).sst_files)
    except Exception:
        return None
    return names


def _zip_deps(cache: DecodeCache, ckpt: Checkpoint, file: StateFile, names: Iterable[str]
              ) -> list[Any] | None:
    """``[name, identities of the SST and its checksum files, or None: not listed]`` for
    each SST name a zip lists (``None``: one of them has no identity)."""
    instance = ckpt.inventory.instances.get((file.operator_id, file.store, file.partition))
    listed = {f.name: f for f in instance.of_kind("sst")} if instance is not None else {}
    deps: list[Any] = []
    for name in sorted(set(names)):
        sst = listed.get(name)
        ids = None if sst is None else cache.identities([(sst.path, sst.size), *(
            (crc.path, crc.size) for crc in ckpt.inventory.checksums_of(sst.path))])
        if sst is not None and ids is None:
            return None
        deps.append([name, ids])
    return deps


def _ssts_of(ckpt: Checkpoint, instance: StoreInstance, file: StateFile,
             data: bytes | None = None) -> list[StateFile]:
    try:
        if data is None:
            metadata = zip_metadata(ckpt, [file])[file.path]
        else:
            metadata = metadata_from_zip(io.BytesIO(data), path=ckpt.display(file.path))
        names = {s.dfs_name for s in metadata.sst_files}
    except StatekitError:
        return []
    return instance.ssts_named(names)


def path_key(cache: DecodeCache, ckpt: Checkpoint, version: int,
             items: list[tuple[tuple[int, str, int], list[StateFile]]]) -> str | None:
    """The entry of a whole restart path that read without damage (a damaged one is judged
    file by file: the older chains a snapshot repair would load are outside the path): what
    each file's own entry is made of, and for a zip every SST of its instance."""
    checksums_of = ckpt.inventory.checksums_of
    parts = []
    for key, files in items:
        read = [*files]
        if any(file.kind == "zip" for file in files):
            read += ckpt.inventory.instances[key].of_kind("sst")
        ids = cache.identities(
            pair for file in read for pair in [(file.path, file.size), *(
                (crc.path, crc.size) for crc in checksums_of(file.path))])
        if ids is None:
            return None
        parts.append([list(key), [file.kind for file in files], ids])
    return cache.key("verify-path", version, parts)
