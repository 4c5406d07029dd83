"""The transports a listing runs on, and the knobs every transport shares.

:mod:`statekit.checkpoint.listing` walks a checkpoint level by level and
:mod:`statekit.checkpoint.s3_fast` adds S3's ranged transport; both build on these (kept
apart so that neither imports the other's module for them):

* :class:`Lister`: one level of folders listed at once (``ls_many``, ``find_many``);
* :class:`ThreadLister` (synchronous fsspec filesystems, in a thread pool) and
  :class:`AsyncLister` (fsspec ``AsyncFileSystem``, on its own loop), chosen by
  :func:`generic_lister`;
* :func:`concurrency_setting`: requests in flight at once, from the environment.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fsspec.asyn import AsyncFileSystem, sync

from statekit.support.errors import BadInput

#: Requests in flight at once (async clients: S3's fast path, other async fsspec stores).
#: On the 2,000-partition S3 benchmark (50 ms per request) 128 left the report waiting on
#: the network again once each request's client CPU was cut (own presigner): 3.3 s, 256:
#: 3.0 s, 512: no faster. S3 serves 5,500 GETs per second per prefix and answers more with
#: 503 SlowDown, which is retried with backoff; s5cmd runs 256 workers by default.
DEFAULT_CONCURRENCY = 256
#: Overrides :data:`DEFAULT_CONCURRENCY` (a shared bucket, a proxy with a connection cap).
CONCURRENCY_ENV = "STATEKIT_CONCURRENCY"
#: Threads at most for filesystems without an async API (one blocking request each).
_MAX_THREADS = 64
#: Objects one S3 listing page holds (``MaxKeys`` default and maximum).
_PAGE = 1000

_T = TypeVar("_T")
_R = TypeVar("_R")

Entry = dict[str, Any]
"""A listing entry as fsspec's ``ls(detail=True)`` gives it: ``name``, ``type``, ``size``."""
GroupSink = Callable[[int, list[tuple[str, int]]], None]
"""Takes one listed group's index and files."""


def concurrency_setting() -> int:
    """Requests in flight at once: :data:`CONCURRENCY_ENV` if set, else the default."""
    raw = os.environ.get(CONCURRENCY_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_CONCURRENCY
    if not raw.strip().isdecimal() or not 1 <= int(raw) <= 4096:
        raise BadInput(f"must be a whole number from 1 to 4096, not {raw!r}",
                       path=CONCURRENCY_ENV)
    return int(raw)


class FastPathRefused(Exception):
    """The store refused the fast S3 path in a way the generic path may not hit."""


class Lister:
    """How one level of folders is listed; subclasses choose the transport."""

    method = "threads"
    #: Whether one request chain may cover several sibling folders (S3's ``StartAfter``).
    ranged = False
    #: Objects per page (sizes the ranged groups).
    page_size = _PAGE

    def __init__(self, fs: Any, concurrency: int) -> None:
        self.fs = fs
        self.concurrency = concurrency
        self.requests = 0

    def ls_many(self, folders: list[str]) -> list[list[Entry]]:
        """Each folder's direct entries (files and sub-folders)."""
        raise NotImplementedError

    def find_many(self, groups: list[list[str]], sink: GroupSink) -> None:
        """Every file below each group of sibling folders, handed to ``sink`` (with the
        group's index) group by group as each is listed, one at a time."""
        raise NotImplementedError


class ThreadLister(Lister):
    """Any synchronous fsspec filesystem: its own calls, run in a thread pool."""

    def _map(self, func: Callable[[_T], _R], items: list[_T]) -> list[_R]:
        self.requests += len(items)
        if len(items) <= 1:
            return [func(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items),
                                                _MAX_THREADS)) as pool:
            return list(pool.map(func, items))

    def ls_many(self, folders: list[str]) -> list[list[Entry]]:
        return self._map(lambda path: list(self.fs.ls(path, detail=True)), folders)

    def find_many(self, groups: list[list[str]], sink: GroupSink) -> None:
        found = self._map(lambda path: self.fs.find(path, detail=True), [g[0] for g in groups])
        for index, files in enumerate(found):
            sink(index, regular_files(files.values()))


class AsyncLister(Lister):
    """An fsspec ``AsyncFileSystem`` (s3fs, gcsfs, adlfs …): its own coroutines on its loop."""

    method = "async"

    def _gather(self, coros: list[Awaitable[_R]]) -> list[_R]:
        self.requests += len(coros)
        return list(sync(self.fs.loop, bounded_gather, coros, self.concurrency))

    def ls_many(self, folders: list[str]) -> list[list[Entry]]:
        return self._gather([self.fs._ls(path, detail=True) for path in folders])

    def find_many(self, groups: list[list[str]], sink: GroupSink) -> None:
        async def one(index: int, folder: str) -> None:
            sink(index, regular_files((await self.fs._find(folder, detail=True)).values()))

        self._gather([one(i, g[0]) for i, g in enumerate(groups)])


async def bounded_gather(coros: list[Awaitable[_R]], limit: int) -> list[_R]:
    gate = asyncio.Semaphore(limit)

    async def run(coro: Awaitable[_R]) -> _R:
        async with gate:
            return await coro

    return list(await asyncio.gather(*(run(c) for c in coros)))


def regular_files(entries: Iterable[Entry]) -> list[tuple[str, int]]:
    """``(path, size)`` of the regular files among listing entries."""
    return [(e["name"], int(e.get("size") or 0)) for e in entries
            if e.get("type", "file") == "file"]


def generic_lister(fs: Any, concurrency: int) -> Lister:
    if isinstance(fs, AsyncFileSystem) and getattr(fs, "loop", None) is not None:
        return AsyncLister(fs, concurrency)
    return ThreadLister(fs, concurrency)
