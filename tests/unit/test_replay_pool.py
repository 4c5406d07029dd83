"""The replay's worker processes: one pool per call, never forked from a multi-threaded
caller — concurrent calls from threads, no fork with other threads alive, a fresh interpreter
outside the repository, worker errors. Real state files pyspark wrote, copied into layouts;
the parallel path is forced by lowering ``PARALLEL_MIN_BYTES``."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import fsspec
import pytest

import statekit.state.workers as partition_workers
from statekit.checkpoint import Checkpoint, open_checkpoint
from statekit.state.history import StoreHistory, all_histories
from tests.support.builders import hdfs_checkpoint
from tests.unit.checkpoint_builder import REAL_SCHEMA_FILE, operator_metadata_text, write_checkpoint

FORMATS = REAL_SCHEMA_FILE.parent.parent
AGG_ZSTD = FORMATS / "agg_zstd"  # groupBy(user_id).count(): 1-4.delta, zstd
WINDOW_ROCKSDB = FORMATS / "rocksdb_sst" / "window_lz4"  # RocksDB zips 1-7 + their SSTs


def agg_checkpoint(root: Path, partitions: int) -> Path:
    """An aggregation's HDFS store replayed from empty: four real zstd deltas per partition."""
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=4, committed=4,
                     partitions=partitions, crc=False, codec="zstd")
    (root / "state" / "0" / "_metadata" / "metadata").write_text(
        operator_metadata_text(name="stateStoreSave", partitions=partitions))
    for partition in range(partitions):
        folder = root / "state" / "0" / str(partition)
        for version in range(1, 5):
            shutil.copy(AGG_ZSTD / f"{version}.delta", folder / f"{version}.delta")
    shutil.copy(AGG_ZSTD / "schema", root / "state" / "0" / "0" / "_metadata" / "schema")
    return root


def rocksdb_checkpoint(root: Path, partitions: int) -> Path:
    """A RocksDB store without changelogs (history from zips, contents from real SSTs)."""
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=7, committed=7,
                     partitions=partitions, provider="rocksdb", crc=False)
    (root / "state" / "0" / "_metadata" / "metadata").write_text(
        operator_metadata_text(name="stateStoreSave", partitions=partitions))
    for partition in range(partitions):
        folder = root / "state" / "0" / str(partition)
        shutil.rmtree(folder)
        shutil.copytree(WINDOW_ROCKSDB, folder,
                        ignore=shutil.ignore_patterns("expected.json", "schema"))
    schema = root / "state" / "0" / "0" / "_metadata" / "schema"
    schema.parent.mkdir()
    shutil.copy(WINDOW_ROCKSDB / "schema", schema)
    return root


class CountingPool(partition_workers.ProcessPoolExecutor):
    """The real executor, recording the pools started and the groups handed to workers."""

    pools: ClassVar[list[int]] = []
    futures: ClassVar[list[Future]] = []

    def __init__(self, workers: int, **kw: Any) -> None:
        CountingPool.pools.append(workers)
        super().__init__(workers, **kw)

    def submit(self, fn, /, *args, **kwargs):
        future = super().submit(fn, *args, **kwargs)
        CountingPool.futures.append(future)
        return future

    @classmethod
    def workers_replayed(cls) -> bool:
        """Some groups went to worker processes, and each came back (no fallback)."""
        return bool(cls.futures) and all(f.done() and not f.cancelled() and
                                         f.exception() is None for f in cls.futures)


@pytest.fixture
def parallel(monkeypatch):
    """Every replay of two partitions or more runs in two worker processes and the caller."""
    monkeypatch.setattr(partition_workers, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(partition_workers, "usable_cpus", lambda: 2)
    monkeypatch.setattr(CountingPool, "pools", [])
    monkeypatch.setattr(CountingPool, "futures", [])
    monkeypatch.setattr(partition_workers, "ProcessPoolExecutor", CountingPool)
    return CountingPool


def in_process(path: Path) -> list[StoreHistory]:
    saved = partition_workers.PARALLEL_MIN_BYTES
    partition_workers.PARALLEL_MIN_BYTES = 1 << 60
    try:
        return all_histories(open_checkpoint(str(path)))
    finally:
        partition_workers.PARALLEL_MIN_BYTES = saved


def in_threads(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` at once, one thread each (released together); their results in order."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = calls[index]()
        except BaseException as error:  # the test thread reports it
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a replay never finished"
    if errors:
        raise errors[0]
    return results


def test_concurrent_replays_from_threads_equal_their_sequential_results(tmp_path, parallel):
    paths = [hdfs_checkpoint(tmp_path / "a", partitions=3),
             agg_checkpoint(tmp_path / "b", partitions=4),
             rocksdb_checkpoint(tmp_path / "c", partitions=2)]
    alone = [in_process(path) for path in paths]
    # three different stores: a snapshot + deltas, deltas from empty, zips + SSTs
    assert [h.method for (h,) in alone] == ["replay", "replay", "zip-metadata"]
    assert alone[0] != alone[1]
    for _ in range(3):
        concurrent = in_threads([lambda p=path: all_histories(open_checkpoint(str(p)))
                                 for path in paths])
        assert concurrent == alone
    assert parallel.pools == [2] * 9  # every call had a pool of its own
    assert parallel.workers_replayed()


def test_a_parallel_replay_from_a_thread_neither_forks_nor_warns(tmp_path, parallel,
                                                                 monkeypatch):
    path = hdfs_checkpoint(tmp_path, partitions=3)
    alone = in_process(path)
    forks: list[int] = []

    def no_fork() -> int:  # fork() in a multi-threaded process may deadlock the child
        forks.append(1)
        raise AssertionError("os.fork() in a multi-threaded process")

    monkeypatch.setattr(os, "fork", no_fork)
    idle = threading.Event()  # a second thread alive throughout, as in the TUI
    bystander = threading.Thread(target=idle.wait)
    bystander.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (histories,) = in_threads([lambda: all_histories(open_checkpoint(str(path)))])
    finally:
        idle.set()
        bystander.join()
    assert histories == alone and not forks
    assert parallel.pools == [2] and parallel.workers_replayed()


@dataclass(frozen=True)
class WhoRuns:
    """A picklable work that reports which process ran each group. A worker's group waits
    until the calling process has run one of its own (``caller_ran``, a manager's event that
    pickles): the workers cannot take every group before the calling thread takes one, however
    the processes and threads are scheduled."""

    caller: int
    caller_ran: Any

    def __call__(self, ckpt: Checkpoint, items: list[int], progress: Any) -> tuple[int, ...]:
        if os.getpid() == self.caller:
            self.caller_ran.set()
        else:  # a generous bound that only catches a hang
            assert self.caller_ran.wait(120), "the calling thread never ran a group"
        return tuple((item, os.getpid()) for item in items)


def test_workers_and_the_calling_thread_share_the_groups(tmp_path, parallel):
    ckpt = open_checkpoint(str(hdfs_checkpoint(tmp_path, partitions=3)))
    items = list(range(20))
    said: list[str] = []
    with multiprocessing.Manager() as manager:
        work = WhoRuns(os.getpid(), manager.Event())
        results = partition_workers.map_groups(ckpt, items, 1, work, said.append)
    assert parallel.pools == [2] and len(results) == 2 * 4  # GROUPS_PER_WORKER groups each
    assert parallel.workers_replayed()  # the first group always goes to a worker
    ran = dict(pair for group in results for pair in group)
    assert sorted(ran) == items  # each item exactly once, in its group
    assert os.getpid() in ran.values() and len(set(ran.values())) >= 2
    assert said[0] == "20 partitions in 2 worker processes and this one"
    assert said[-1] == "8/8 partition groups done"


def test_a_worker_error_reaches_the_caller_as_it_would_in_process(tmp_path, parallel):
    """A damaged file met in a worker ends the history where it would in process: the
    caller gets the error (as raised), and the history stops before the file, flagged."""
    path = hdfs_checkpoint(tmp_path, partitions=3)
    delta = path / "state" / "0" / "0" / "8.delta"
    delta.write_bytes(delta.read_bytes()[:40])  # truncated
    here = in_process(path)
    shared = all_histories(open_checkpoint(str(path)))
    assert [h.damaged for h in shared] == [h.damaged for h in here]
    assert "0/8.delta" in (shared[0].damaged or "") and "ends at version 7" in \
        (shared[0].damaged or "")
    assert [v.version for v in shared[0].versions] == [v.version for v in here[0].versions]
    assert parallel.pools == [2, 2]


SCRIPT = """
import json, sys, threading
from concurrent.futures import ProcessPoolExecutor

import statekit.state.workers as partition_workers
import statekit.state.history as state_history
from statekit.checkpoint import open_checkpoint

methods, futures = [], []


class Recording(ProcessPoolExecutor):
    def __init__(self, workers, mp_context):
        methods.append(mp_context.get_start_method())
        super().__init__(workers, mp_context=mp_context)

    def submit(self, *args, **kwargs):
        futures.append(super().submit(*args, **kwargs))
        return futures[-1]


if sys.argv[2] == "threads":  # another thread alive, as in the TUI
    threading.Thread(target=threading.Event().wait, daemon=True).start()
partition_workers.ProcessPoolExecutor = Recording
partition_workers.PARALLEL_MIN_BYTES = 0
partition_workers.usable_cpus = lambda: 2
histories = state_history.all_histories(open_checkpoint(sys.argv[1]))
print(json.dumps({"methods": methods,
                  "workers": bool(futures) and all(f.exception() is None for f in futures),
                  "histories": [h.to_dict() for h in histories]}, default=str))
"""
LINUX = sys.platform.startswith("linux")
NOT_FORKED = "forkserver" if sys.platform != "win32" else "spawn"


@pytest.mark.parametrize(("how", "threads", "method"), [
    ("-c", "one thread", "fork" if LINUX else NOT_FORKED),
    ("-c", "threads", NOT_FORKED),
    ("script without a main guard", "threads", NOT_FORKED),
])
def test_a_fresh_interpreter_outside_the_repository_replays_in_parallel(tmp_path, how,
                                                                       threads, method):
    """Workers are forked only from a process whose one thread is the caller; otherwise they
    come from the fork server and import statekit as their parent did (the installed package,
    not the current folder). A script that forgot ``if __name__ == "__main__":`` is re-run by
    each such worker as it starts, which then fails there: the caller replays its groups."""
    path = hdfs_checkpoint(tmp_path / "data", partitions=3)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "-c":
        command = [sys.executable, "-c", SCRIPT, str(path), threads]
    else:
        script = elsewhere / "unguarded.py"
        script.write_text(SCRIPT)
        command = [sys.executable, str(script), str(path), threads]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(command, capture_output=True, text=True, cwd=elsewhere, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    expected = json.dumps([h.to_dict() for h in in_process(path)], default=str)
    assert out["histories"] == json.loads(expected)
    assert out["methods"] == [method]
    assert out["workers"] is (how == "-c")
