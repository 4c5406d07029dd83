"""Per-partition passes over a local checkpoint, shared among worker processes.

Replaying state files is pure-Python parsing: threads would queue on the GIL, so a pass over
a big local checkpoint (the growth history, key counts) runs in worker processes, one per
usable CPU, with the calling thread working too. The work a caller hands over is plain data
(it must pickle); a worker re-opens the checkpoint from its path, and only small results come
back. Every call has a pool of its own, so several analyses may run at once from different
threads (the TUI does), and workers are never forked from a multi-threaded process (see
:func:`_pool_context`).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, Protocol, TypeVar

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.support.machine import usable_cpus

PARALLEL_MIN_BYTES = 16 << 20
"""Below this much state-file data a pass runs in-process: starting workers costs more."""
MAX_WORKERS = 8
"""Worker processes per call at most, however many CPUs."""
GROUPS_PER_WORKER = 4
"""Items are dealt into this many groups per worker (fewer when there are fewer items):
small enough that whoever finishes first takes more, few enough that the per-group results
stay small."""

Progress = Callable[[str], None]
_T = TypeVar("_T")
_R = TypeVar("_R")
Work = Callable[[Checkpoint, list[_T], Progress | None], _R]
"""What runs over one group of items: picklable (a frozen dataclass with ``__call__``)."""


@dataclass(frozen=True)
class CheckpointSource:
    """The checkpoint as another process re-opens it — a local worker or a Spark task —
    without a single request: its location (fsspec filesystems pickle with their options),
    the root folder's entries and the confs the query pinned (the codec), as the caller
    already read them."""

    location: Location
    root_entries: dict[str, dict[str, Any]]
    conf: dict[str, str]

    @classmethod
    def of(cls, ckpt: Checkpoint) -> CheckpointSource:
        return cls(ckpt.location, dict(ckpt.root_entries), dict(ckpt.conf))

    def open(self) -> Checkpoint:
        return Checkpoint(self.location, self.root_entries, conf=self.conf)


def run_group(source: CheckpointSource, work: Work[_T, _R], items: list[_T]) -> _R:
    """What a worker process or a Spark task runs: everything it needs came pickled in its
    arguments."""
    return work(source.open(), items, None)


class GroupRunner(Protocol):
    """Runs groups of a pass elsewhere — a Spark cluster (:mod:`statekit.jobs.distributed`):
    one task per group, results in the order of ``groups``."""

    def run_groups(self, source: CheckpointSource, groups: list[list[Any]],
                   work: Work[Any, Any], progress: Progress | None) -> list[Any]: ...


def _workers(ckpt: Checkpoint, items: int, data_bytes: int) -> int:
    if not ckpt.location.is_local or items < 2 or data_bytes < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(items, usable_cpus(), MAX_WORKERS))


def _single_threaded() -> bool:
    """Whether the calling thread is the only one in this process, native threads included
    (Linux: ``/proc/self/task``; elsewhere never assumed)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _pool_context(preload: list[str]) -> BaseContext:
    """How this call's worker processes start.

    Fork, the cheapest (the workers inherit everything imported), only where it is safe: on
    Linux, and while the calling thread is the only thread of the process — then no other
    thread can hold a lock at the fork that the workers would wait on forever. Every other
    caller (the TUI runs analyses in worker threads, the CLI's progress spinner is a thread)
    gets its workers from the fork server where the platform has one (Linux, macOS), else as
    fresh interpreters (spawn).

    The fork server is one single-threaded process per interpreter, started on first use with
    ``preload`` (the work's module) imported, and reused: each call's workers fork from it in
    milliseconds instead of importing statekit anew. Like spawned ones, such workers import
    the caller's main module first: a script that calls this needs the usual
    ``if __name__ == "__main__":`` guard (without it, the workers fail as they start and the
    calling thread runs their groups itself)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and _single_threaded():
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(preload)
        return context
    return multiprocessing.get_context("spawn")


class _Queue:
    """The groups of one call not taken yet: workers take them from the front, the calling
    thread from the back, so that both work until none is left."""

    def __init__(self, count: int) -> None:
        self._lock = threading.Lock()
        self._front = 0
        self._back = count

    def front(self) -> int | None:
        with self._lock:
            if self._front == self._back:
                return None
            self._front += 1
            return self._front - 1

    def back(self) -> int | None:
        with self._lock:
            if self._front == self._back:
                return None
            self._back -= 1
            return self._back

    def close(self) -> None:
        with self._lock:
            self._back = self._front


def map_groups(ckpt: Checkpoint, items: list[_T], data_bytes: int,
                work: Work[_T, _R],
                progress: Progress | None = None,
                runner: GroupRunner | None = None) -> list[_R]:
    """``work`` over groups of ``items`` (partitions); one result per group.

    With a ``runner`` (Spark), every item is a group of its own — one task per store
    instance — and runs there; only the small per-group results come back.

    Big local checkpoints (``PARALLEL_MIN_BYTES`` of data to read, two partitions or more)
    are shared among worker processes, one per usable CPU — the work is pure-Python
    parsing, so threads would queue on the GIL — and the calling thread (see :func:`_share`).
    Everything else runs in-process, as one group: small checkpoints, where starting workers
    would cost more than it saves, and object stores, whose reads are already concurrent and
    whose clients are not safe to hand to other processes."""
    if runner is not None and items:
        results: list[_R] = runner.run_groups(CheckpointSource.of(ckpt),
                                              [[item] for item in items], work, progress)
        return results
    workers = _workers(ckpt, len(items), data_bytes)
    if workers == 1:
        return [work(ckpt, items, progress)]
    count = min(len(items), GROUPS_PER_WORKER * workers)
    if progress:
        progress(f"{len(items)} partitions in {workers} worker processes and this one")
    return _share(ckpt, [items[i::count] for i in range(count)], workers, work, progress)


def _share(ckpt: Checkpoint, groups: list[list[_T]], workers: int,
           work: Work[_T, _R],
           progress: Progress | None) -> list[_R]:
    """Run ``groups`` in a pool of ``workers`` processes that belongs to this call alone,
    and in the calling thread; the results in the order of ``groups``.

    ``work`` and the groups must pickle (plain data): a worker
    re-opens the checkpoint from its path, and only the small per-version summaries come
    back. A feeder thread hands the next group to a worker whenever one is free, while the
    calling thread runs groups from the other end, so the workers' start (the fork
    server's first one imports statekit) is spent working, not waiting. The first group goes
    to the workers before the calling thread starts on its own, so that they get work even
    when every group is quick. When no worker can run a group (the pool does not start, or a
    worker dies), the calling thread runs it.
    """
    source = CheckpointSource.of(ckpt)
    queue = _Queue(len(groups))
    free = threading.Semaphore(workers)
    submitted: dict[int, Future[_R]] = {}
    unsent: list[int] = []
    failed: list[Exception] = []
    fed = threading.Event()

    def send(pool: ProcessPoolExecutor) -> bool:
        """Hand the next group to a worker once one is free; False when there is none left,
        or no worker to run it."""
        free.acquire()
        index = queue.front()
        fed.set()
        if index is None:
            return False
        try:
            future = pool.submit(run_group, source, work, groups[index])
        except (BrokenProcessPool, OSError):  # no worker: the calling thread takes over
            unsent.append(index)
            return False
        except Exception as error:  # e.g. started while the main module is being imported
            unsent.append(index)
            failed.append(error)
            queue.close()
            return False
        submitted[index] = future
        future.add_done_callback(lambda _: free.release())
        return True

    def feed(pool: ProcessPoolExecutor) -> None:
        try:
            while send(pool):
                pass
        finally:
            fed.set()

    results: dict[int, _R] = {}

    def run_here(index: int) -> None:
        results[index] = work(ckpt, groups[index], None)
        if progress:
            progress(f"{len(results)}/{len(groups)} partition groups done")

    context = _pool_context([type(work).__module__])
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        # Workers forked from this process are forked with the first group, while this is
        # still its only thread; elsewhere the feeder sends it (a fork server's first start
        # would keep this thread waiting).
        more = send(pool) if context.get_start_method() == "fork" else True
        feeder = threading.Thread(target=feed, args=(pool,), name="statekit-feeder",
                                  daemon=True) if more else None
        if feeder is not None:
            feeder.start()
        try:
            fed.wait()
            while not failed and (index := queue.back()) is not None:
                run_here(index)
        finally:
            queue.close()  # the feeder stops too when this thread failed
            if feeder is not None:
                free.release()  # in case it waits for a free worker
                feeder.join()
        if failed:
            raise failed[0]
        try:
            for index, future in submitted.items():
                try:
                    results[index] = future.result()
                except BrokenProcessPool:
                    unsent.append(index)
                    continue
                if progress:
                    progress(f"{len(results)}/{len(groups)} partition groups done")
        except BaseException:
            for future in submitted.values():
                future.cancel()
            raise
    for index in unsent:
        run_here(index)
    return [results[index] for index in range(len(groups))]
