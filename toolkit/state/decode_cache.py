"""Decode each state file once: what reading it found, kept on disk under what its bytes are.

Deciding whether a checkpoint restarts (:mod:`statekit.state.verify`) and rebuilding its
growth history (:mod:`statekit.state.history`) decode every state file — seconds of pure
Python on a big checkpoint — and the long-running surfaces (``statekit metrics --serve``,
``statekit tui --watch``) do it again on every refresh, although Spark never rewrites a
state file: a running query only adds new ones and deletes old ones. So the result of
decoding is kept in statekit's cache folder, keyed by the *identity* of every file it read,
and a later run decodes only the files that are new or changed.

A file's identity is its path and size plus, on a local disk, ``st_mtime_ns``,
``st_ctime_ns``, ``st_ino`` and ``st_dev`` (one ``stat``: rewriting a file, even to the same
size and with its old mtime restored, moves its ctime), on an object store its ETag /
version id / generation (one listing per folder, not one request per file). A file changed
within :data:`RACY_SECONDS` of being looked at has no identity (git's "racily clean" rule: a
rewrite within the filesystem's timestamp granularity would keep the same stamps), so it is
decoded afresh until it has settled. Every key also holds statekit's version and
:data:`CACHE_FORMAT`, so another release never reads these entries.

Storage: one small JSON file per entry, ``cache_dir()/decode/<2 hex>/<sha256>.json``,
written beside and renamed (concurrent worker processes never read half an entry). An entry
that does not read or parse is a miss; a cache folder that cannot be written (read-only
home) only stops the writing — never a command. ``STATEKIT_DECODE_CACHE=0`` turns the cache
off; ``STATEKIT_DECODE_CACHE_MB`` bounds its disk use (default :data:`DEFAULT_LIMIT_MB`): at
most every :data:`SWEEP_EVERY_S` seconds a writing process deletes the least recently used
entries beyond the bound.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from statekit import __version__
from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.modified import info_seconds
from statekit.support.cache import cache_dir

CACHE_FORMAT = 1
"""Part of every key: entries of another layout are never read."""
ENABLE_ENV = "STATEKIT_DECODE_CACHE"
"""``0`` (or ``off``, ``false``, ``no``) turns the decode cache off."""
LIMIT_ENV = "STATEKIT_DECODE_CACHE_MB"
DEFAULT_LIMIT_MB = 512
"""Disk use the decode cache is swept back to (a 200-partition checkpoint's verdicts and
growth replay take a few MB; each new batch adds a set of replay entries)."""
SWEEP_EVERY_S = 600.0
"""How often at most a writing process measures the cache and evicts."""
KEEP_FRACTION = 0.8
"""A sweep deletes the least recently used entries until this share of the bound is left."""
TOUCH_AFTER_S = 3600.0
"""An entry read this long after it was written (or last touched) is touched: eviction goes
by last use, at one ``utime`` per entry per hour at most."""
RACY_SECONDS = 2.0
"""A local file whose mtime or ctime is this recent has no identity yet (see the module
docstring): ext4 stamps are as coarse as the kernel tick, FAT's and HFS+'s a second or two."""
OBJECT_RACY_SECONDS = 60.0
"""The same for an object store that gives only a modification time, not an ETag: its
clock is not this machine's."""
FOLDER = "decode"
_STRONG = ("ETag", "etag", "VersionId", "version_id", "generation", "md5Hash", "crc32c")
"""Object-store fields that change whenever an object's bytes do."""

Identity = list[Any]
"""A file's identity, as JSON (compared for equality only)."""
_T = TypeVar("_T")


def enabled() -> bool:
    """Whether the decode cache is on (``STATEKIT_DECODE_CACHE``; on by default)."""
    setting = os.environ.get(ENABLE_ENV, "").strip().lower()
    return setting not in ("0", "off", "false", "no")


def limit_bytes() -> int:
    """The disk use sweeps bring the cache back to (``STATEKIT_DECODE_CACHE_MB``)."""
    try:
        megabytes = float(os.environ.get(LIMIT_ENV, "") or DEFAULT_LIMIT_MB)
    except ValueError:
        megabytes = DEFAULT_LIMIT_MB
    return int(max(megabytes, 0) * (1 << 20))


def folder() -> Path:
    """Where the decode cache keeps its entries."""
    return cache_dir() / FOLDER


class DecodeCache:
    """The decode cache as one checkpoint's readers use it: file identities (memoised for
    the life of this object: one run), keys, entries.

    Create it with :meth:`of`; one per process and run (worker processes make their own).
    """

    def __init__(self, ckpt: Checkpoint | None, root: Path) -> None:
        self._fs: Any = ckpt.fs if ckpt is not None else None
        self._local = ckpt.location.is_local if ckpt is not None else True
        self._root = root
        self._writable = True
        self._identities: dict[str, Identity | None] = {}
        self._folders: dict[str, dict[str, dict[str, Any]]] = {}
        self._codec = ckpt.conf.get("spark.sql.streaming.stateStore.compression.codec") \
            if ckpt is not None else None

    @classmethod
    def of(cls, ckpt: Checkpoint, root: str | Path | None = None) -> DecodeCache | None:
        """The cache for ``ckpt``, or ``None``: turned off, or a filesystem whose files
        have no identity worth keeping (``memory://``). ``root``: the folder the calling
        process chose (a worker process is handed it: a fork server's workers keep the
        environment the server started with, not the caller's)."""
        if "memory" in _protocols(ckpt.fs):
            return None
        if root is not None:
            return cls(ckpt, Path(root))
        return cls(ckpt, folder()) if enabled() else None

    @property
    def root(self) -> str:
        """The folder this cache keeps its entries in (handed to worker processes)."""
        return str(self._root)

    # -- identities ----------------------------------------------------------------------
    def identity(self, path: str, size: int) -> Identity | None:
        """``path``'s identity, or ``None`` when it has none (gone, changed since it was
        listed as ``size`` bytes, changed too recently, or an object store that tells
        nothing that changes with the bytes)."""
        if path in self._identities:
            return self._identities[path]
        found = self._local_identity(path, size) if self._local else \
            self._object_identity(path, size)
        self._identities[path] = found
        return found

    def identities(self, files: Iterable[tuple[str, int]]) -> list[Identity] | None:
        """``[path, identity]`` of each of ``files`` in order; ``None`` if one has none.
        (A growth replay asks this of every retained file: local files in a tight loop.)"""
        found: list[Identity] = []
        if not self._local:
            for path, size in files:
                identity = self.identity(path, size)
                if identity is None:
                    return None
                found.append([path, identity])
            return found
        settled = time.time_ns() - RACY_SECONDS * 1e9
        stat = os.stat
        for path, size in files:
            try:
                got = stat(path)
            except OSError:
                return None
            if got.st_size != size or max(got.st_mtime_ns, got.st_ctime_ns) > settled:
                return None
            found.append([path, [size, got.st_mtime_ns, got.st_ctime_ns, got.st_ino,
                                 got.st_dev]])
        return found

    @staticmethod
    def _local_identity(path: str, size: int) -> Identity | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if stat.st_size != size:  # changed since the listing: whatever is read now differs
            return None
        if max(stat.st_mtime_ns, stat.st_ctime_ns) > time.time_ns() - RACY_SECONDS * 1e9:
            return None  # a rewrite within the timestamps' granularity would not show
        return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]

    def _object_identity(self, path: str, size: int) -> Identity | None:
        if self._fs is None:  # a cache of pure results (computed_once): no files
            return None
        plain = self._fs._strip_protocol(path)
        parent = plain.rsplit("/", 1)[0]
        if parent not in self._folders:
            self._folders[parent] = self._list(parent)
        info = self._folders[parent].get(plain)
        if info is None or info.get("size") != size:
            return None
        strong = {k: str(info[k]) for k in _STRONG if info.get(k) not in (None, "")}
        if strong:
            return [size, strong]
        stamp = info_seconds(info)
        if stamp is None or stamp > time.time() - OBJECT_RACY_SECONDS:
            return None
        return [size, {"mtime": repr(stamp)}]

    def _list(self, parent: str) -> dict[str, dict[str, Any]]:
        """One listing of a folder, past the filesystem's own listing cache (which a
        long-running exporter would otherwise never refresh)."""
        if self._fs is None:
            return {}
        try:
            self._fs.invalidate_cache(parent)
            entries = self._fs.ls(parent, detail=True)
        except (OSError, ValueError, NotImplementedError):
            return {}
        return {self._fs._strip_protocol(e["name"]).rstrip("/"): e for e in entries
                if isinstance(e, dict) and "name" in e}

    # -- keys and entries ------------------------------------------------------------------
    def key(self, kind: str, *parts: Any) -> str:
        """The entry name of ``parts`` (JSON) for a result of ``kind``: statekit's version,
        the cache format and the checkpoint's pinned codec are always part of it."""
        material = json.dumps([__version__, CACHE_FORMAT, kind, self._codec, *parts],
                              separators=(",", ":"), default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self._root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        """The value kept under ``key``; ``None`` when there is none or it does not read."""
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
                written = os.fstat(handle.fileno()).st_mtime
            entry = json.loads(raw)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or "value" not in entry:
            return None
        if self._writable and time.time() - written > TOUCH_AFTER_S:
            with contextlib.suppress(OSError):
                os.utime(path)
        return entry["value"]

    def put(self, key: str, value: Any) -> None:
        """Keep ``value`` (JSON, never ``None``) under ``key``: written beside, then
        renamed. A folder that cannot be written stops this object's writing, silently."""
        if not self._writable:
            return
        path = self._path(key)
        try:
            text = json.dumps({"key": key, "value": value}, separators=(",", ":"))
        except (TypeError, ValueError):  # not JSON: nothing to keep
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(handle, "w") as out:
                    out.write(text)
                os.replace(temporary, path)
            except BaseException:
                _unlink(temporary)
                raise
        except OSError:
            self._writable = False
            return
        _maybe_sweep(self._root)


def remembered(ckpt: Checkpoint, kind: str, files: Iterable[StateFile],
               compute: Callable[[], _T], *parts: Any,
               dump: Callable[[_T], Any] | None = None,
               load: Callable[[Any], _T] | None = None) -> _T:
    """``compute()`` — or what it returned before for these very ``files`` and ``parts``:
    for a result that depends on nothing else (a check of two files, a sample's record
    count). Identities are taken before it runs; an exception is never kept. The result is
    kept as JSON: ``dump`` and ``load`` convert what does not survive it (tuples, bytes)."""
    cache = DecodeCache.of(ckpt)
    ids = cache.identities((f.path, f.size) for f in files) if cache is not None else None
    if cache is None or ids is None:
        return compute()
    return _through(cache, cache.key(kind, *parts, ids), compute, dump, load)


def computed_once(kind: str, inputs: Any, compute: Callable[[], _T], *,
                  dump: Callable[[_T], Any] | None = None,
                  load: Callable[[Any], _T] | None = None) -> _T:
    """``compute()`` — or what it returned before for these very ``inputs`` (JSON): for a
    pure function of data, whatever checkpoint the data came from (the growth fits of a
    replayed history, which cost more than the replay once the replay is cached)."""
    if not enabled():
        return compute()
    cache = DecodeCache(None, folder())
    return _through(cache, cache.key(kind, inputs), compute, dump, load)


def _through(cache: DecodeCache, key: str, compute: Callable[[], _T],
             dump: Callable[[_T], Any] | None, load: Callable[[Any], _T] | None) -> _T:
    """The result kept under ``key``, else ``compute()``'s, kept there."""
    held = cache.get(key)
    if isinstance(held, dict) and "result" in held:
        try:
            return load(held["result"]) if load is not None else held["result"]
        except (TypeError, KeyError, ValueError, IndexError):
            pass
    result = compute()
    cache.put(key, {"result": dump(result) if dump is not None else result})
    return result


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def _unlink(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


_next_sweep = 0.0
"""``time.monotonic()`` before which this process does not look at the cache's size."""


def _maybe_sweep(root: Path) -> None:
    """Sweep when this process has not looked for :data:`SWEEP_EVERY_S` and no process has
    swept for as long (a marker file's mtime tells)."""
    global _next_sweep
    now = time.monotonic()
    if now < _next_sweep:
        return
    _next_sweep = now + SWEEP_EVERY_S
    marker = root / ".swept"
    try:
        if time.time() - marker.stat().st_mtime < SWEEP_EVERY_S:
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        marker.touch()
    except OSError:
        return
    sweep(root, limit_bytes())


def sweep(root: Path | None = None, limit: int | None = None) -> tuple[int, int]:
    """Delete the least recently used entries while the cache uses more than ``limit``
    bytes of disk, down to :data:`KEEP_FRACTION` of it, and temporary files left by a
    killed writer. Returns (entries deleted, bytes in use after)."""
    root = root if root is not None else folder()
    limit = limit if limit is not None else limit_bytes()
    entries: list[tuple[float, int, str]] = []
    total = deleted = 0
    stale = time.time() - TOUCH_AFTER_S
    try:
        shards = [e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0, 0
    for shard in shards:
        try:
            listed = list(os.scandir(shard))
        except OSError:
            continue
        for entry in listed:
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name.startswith(".tmp-"):
                if stat.st_mtime < stale:
                    _unlink(entry.path)
                continue
            used = getattr(stat, "st_blocks", 0) * 512 or stat.st_size
            entries.append((stat.st_mtime, used, entry.path))
            total += used
    if total <= limit:
        return 0, total
    goal = limit * KEEP_FRACTION
    for _, used, path in sorted(entries):
        if total <= goal:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= used
        deleted += 1
    return deleted, total
