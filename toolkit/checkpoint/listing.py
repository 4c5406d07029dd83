"""List a checkpoint's folders fast: concurrently on object stores, one walk on a local disk.

A recursive LIST of ``state/`` is one paginated chain: page *n+1* needs page *n*'s
continuation token. At 2,000 partitions × 100 versions (~200k–800k objects) that is hundreds
of requests one after another — tens of seconds at object-store latencies before anything
can be shown. The tree's shape is known, though: ``state/<op>/<partition>/…``. So the listing
goes level by level — ``state/`` and ``offsets/``/``commits/`` together, then every operator
folder, then the partition folders — and runs each level's requests concurrently (bounded).

Three ways to run a level, chosen from the filesystem:

* **S3** (s3fs): a ranged listing per group of sibling partition folders
  (``ListObjectsV2`` with ``StartAfter``), sized from a first probe so that a group fills
  about one page. The request count stays that of one sequential listing (one request per
  ~1,000 objects), only no longer in a chain (:mod:`statekit.checkpoint.s3_fast`: presigned
  requests, pages parsed without botocore). Anything unusual (a version-aware filesystem,
  a store that refuses presigned listings) falls back to the generic way.
* **Other async filesystems** (gcsfs, adlfs, …): ``_ls``/``_find`` per folder through the
  filesystem's own async API, bounded by a semaphore.
* **Synchronous filesystems**: the same calls in a thread pool.

A local disk is walked with ``os.scandir`` (many times faster than fsspec's per-file info
dicts at 40k+ files). ``sequential`` keeps the old single ``fs.find``: the reference the
parallel listing is tested against, and the "before" of ``benchmarks/bench_object_store.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.listers import (
    Entry,
    FastPathRefused,
    Lister,
    concurrency_setting,
    generic_lister,
    regular_files,
)
from statekit.checkpoint.s3_fast import S3RangedLister, s3_fast_for

if TYPE_CHECKING:
    from statekit.checkpoint.location import Location

FileSink = Callable[[list[tuple[str, int]]], None]
"""Takes a chunk of ``(path, size)`` of listed files."""


class _Counted:
    """A file sink that counts what passes, and keeps it when no sink was given."""

    def __init__(self, sink: FileSink | None) -> None:
        self.objects = 0
        self.kept: list[tuple[str, int]] = []
        self._sink = sink if sink is not None else self.kept.extend

    def __call__(self, files: list[tuple[str, int]]) -> None:
        self.objects += len(files)
        self._sink(files)


@dataclass
class ListingStats:
    """What a listing cost: shown in ``report --json`` so the request count stays honest."""

    method: str
    """``local``, ``sequential``, ``s3-ranged``, ``async`` or ``threads``."""
    requests: int = 0
    """LIST requests sent (``s3-ranged``: exact, one per page); for ``async``/``threads``
    the listing calls made (a call may span several pages); 0 on a local disk."""
    objects: int = 0
    seconds: float = 0.0
    concurrency: int = 1

    def merge(self, other: ListingStats) -> None:
        """Add ``other``'s cost to this one (its method wins: it listed the bulk)."""
        self.method = other.method
        self.requests += other.requests
        self.objects += other.objects
        self.seconds += other.seconds
        self.concurrency = max(self.concurrency, other.concurrency)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "requests": self.requests, "objects": self.objects,
                "seconds": round(self.seconds, 4), "concurrency": self.concurrency}


@dataclass
class TreeListing:
    """The files below a checkpoint's ``state/``, plus its log folders' direct entries."""

    files: list[tuple[str, int]] = field(default_factory=list)
    """``(path, size)`` of every regular file below ``state/`` (empty when the caller took
    them as they came, through ``on_files``)."""
    odd: list[str] = field(default_factory=list)
    """Paths below ``state/`` that are neither files nor folders (local disks only)."""
    folders: dict[str, list[Entry]] = field(default_factory=dict)
    """``{folder name: its direct entries}`` for the log folders listed alongside."""
    stats: ListingStats = field(default_factory=lambda: ListingStats("local"))


def list_checkpoint(location: Location, *, state: bool, log_folders: Sequence[str] = (),
                    method: str = "auto", concurrency: int | None = None,
                    on_files: FileSink | None = None,
                    on_log_folders: Callable[[dict[str, list[Entry]]], None] | None = None,
                    ) -> TreeListing:
    """List ``state/`` recursively (when ``state``) and each of ``log_folders`` (one level).

    ``method``: ``auto`` (the fastest way the filesystem allows), or ``sequential`` (one
    ``fs.find`` and one ``fs.ls`` per folder, one after another: the reference behaviour).

    ``on_files`` takes the files below ``state/`` in chunks as they are listed (on object
    stores while other requests are still in flight; possibly from another thread, never
    two chunks at once) instead of :attr:`TreeListing.files`. ``on_log_folders`` gets the
    log folders' entries as soon as they are listed, before ``state/`` is: a caller can
    start reading them meanwhile.

    Raises ``OSError`` as the filesystem does (the caller turns it into a one-line error).
    """
    started = time.perf_counter()
    concurrency = concurrency or concurrency_setting()
    fs = location.fs
    state_root = location.path("state")
    folders = [location.path(name) for name in log_folders]
    counted = _Counted(on_files)
    if method == "sequential":
        result = _sequential(fs, state_root if state else None, log_folders, folders)
    elif location.is_local:
        result = TreeListing(stats=ListingStats("local"))
        result.folders = {name: fs.ls(path, detail=True)
                          for name, path in zip(log_folders, folders, strict=True)}
        if state:
            result.files = list(_walk_local(state_root, result.odd))
    else:
        lister = _lister_for(fs, concurrency)
        refused = 0  # requests the fast path sent before it was refused: they were paid
        try:
            result = _level_by_level(lister, state_root if state else None, log_folders,
                                     folders, counted, on_log_folders)
        except FastPathRefused:
            if counted.objects:  # chunks already handed over cannot be taken back
                raise
            refused = lister.requests
            lister = generic_lister(fs, concurrency)
            result = _level_by_level(lister, state_root if state else None, log_folders,
                                     folders, counted, on_log_folders)
        result.stats = ListingStats(lister.method, refused + lister.requests,
                                    concurrency=concurrency)
    if method == "sequential" or location.is_local:  # listed in one go
        if on_log_folders is not None:
            on_log_folders(result.folders)
        files, result.files = result.files, []
        counted(files)
    if on_files is None:
        result.files = counted.kept
    result.stats.objects = counted.objects + sum(map(len, result.folders.values()))
    result.stats.seconds = time.perf_counter() - started
    return result


# ------------------------------------------------------------------ local and sequential
def _is_regular_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # a symlink loop
        return False


def _walk_local(root: str, odd: list[str]) -> Iterator[tuple[str, int]]:
    """``(path, size)`` of every regular file below ``root`` on the local disk; the paths
    of anything else (FIFOs, sockets, dangling or looping symlinks) go to ``odd``.
    Symlinked folders are not followed (no loops)."""
    pending = [root.rstrip("/")]
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif not _is_regular_file(entry):
                    odd.append(entry.path)
                else:
                    yield entry.path, entry.stat().st_size


def _sequential(fs: Any, state_root: str | None, names: Sequence[str],
                folders: Sequence[str]) -> TreeListing:
    result = TreeListing(stats=ListingStats("sequential", concurrency=1))
    if state_root is not None:
        found = fs.find(state_root, detail=True)
        result.files = regular_files(found.values())
        result.odd = [info["name"] for info in found.values()
                      if info.get("type", "file") not in ("file", "directory")]
        result.stats.requests += 1
    for name, path in zip(names, folders, strict=True):
        result.folders[name] = fs.ls(path, detail=True)
        result.stats.requests += 1
    return result


# ------------------------------------------------------------------ level by level
def _lister_for(fs: Any, concurrency: int) -> Lister:
    fast = s3_fast_for(fs, concurrency)
    return S3RangedLister(fast) if fast is not None else generic_lister(fs, concurrency)


def _level_by_level(lister: Lister, state_root: str | None, names: Sequence[str],
                    folders: Sequence[str], sink: FileSink,
                    on_log_folders: Callable[[dict[str, list[Entry]]], None] | None
                    ) -> TreeListing:
    """``state/`` and the log folders (one level), then each operator folder, then every
    folder below those — each level's requests concurrently."""
    result = TreeListing()
    first = lister.ls_many([*folders, *([state_root] if state_root is not None else [])])
    result.folders = dict(zip(names, first[:len(folders)], strict=True))
    if on_log_folders is not None:
        on_log_folders(result.folders)
    if state_root is None:
        return result
    top = first[-1]
    sink(regular_files(top))
    operators = _subfolders(top)
    subfolders: list[str] = []
    for entries in lister.ls_many(operators):
        sink(regular_files(entries))
        subfolders.extend(_subfolders(entries))
    # the order the store lists their keys in (a ranged group must be contiguous there)
    subfolders.sort(key=lambda folder: folder + "/")
    if not subfolders:
        return result
    if not lister.ranged:
        lister.find_many([[f] for f in subfolders], lambda _index, files: sink(files))
        return result
    # per parent folder (an operator), probe its first sub-folder (a partition) to size
    # that parent's groups so that one group fills about one page
    by_parent: dict[str, list[str]] = {}
    for folder in subfolders:
        by_parent.setdefault(folder.rsplit("/", 1)[0], []).append(folder)
    parents = sorted(by_parent)
    probed: dict[int, int] = {}

    def take_probe(index: int, files: list[tuple[str, int]]) -> None:
        probed[index] = len(files)
        sink(files)

    lister.find_many([[by_parent[p][0]] for p in parents], take_probe)
    groups: list[list[str]] = []
    for index, parent in enumerate(parents):
        # 5 % of a page kept free for partitions with a few more files than the probe
        # (one more file per partition than probed would cost a second, chained request)
        per_group = max(1, lister.page_size * 19 // 20 // max(probed[index], 1))
        rest = by_parent[parent][1:]
        groups.extend(rest[i:i + per_group] for i in range(0, len(rest), per_group))
    # groups holding an operator's _metadata/ or _stateSchema/ (which sort after its
    # partitions) first: the files read from there are then fetched while the partitions are
    # still being listed, not after the last page
    groups.sort(key=lambda group: all(f.rsplit("/", 1)[-1].isdecimal() for f in group))
    lister.find_many(groups, lambda _index, files: sink(files))
    return result


def _subfolders(entries: list[Entry]) -> list[str]:
    return sorted(e["name"].rstrip("/") for e in entries if e.get("type") == "directory")
