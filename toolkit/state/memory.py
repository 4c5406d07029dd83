"""How much memory a restart's loaded state needs per executor — and whether it fits.

A restart that runs out of heap does not come back slower: it does not come back. The
HDFS-backed provider holds every row of every partition an executor loaded in that
executor's JVM heap (a map per store instance, kept across batches), and keeps the maps of
the last ``spark.sql.streaming.maxBatchesToRetainInMemory`` versions (default 2; they share
their rows, not the map entries). At millions of keys that is gigabytes: the heap must hold it
with room for the batch itself, or the first batch dies in garbage collection or with an
``OutOfMemoryError``.

RocksDB keeps rows off the heap in native memory (memtables, block cache, table readers):
its figure is reported, not compared with the heap.

Per row, the estimate is the decoded key and value bytes (sampled from the files) plus a
fixed overhead for the objects around them (two ``UnsafeRow`` objects and their byte arrays,
the map's entry and slot), fitted on Spark's own accounting of the loaded maps
(``memoryUsedBytes`` of the first batch after a restart) on one half of the recovery
benchmark grid and checked on the other (``benchmarks/bench_recovery_grid.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HDFS_ROW_OVERHEAD_BYTES = 398.0
"""Heap bytes per row beyond its key and value bytes (objects, arrays, the map's entry)."""
HDFS_ROW_BYTE_FACTOR = 0.793
"""Heap bytes per decoded key/value byte (arrays round up to 8 bytes)."""
ROCKSDB_INSTANCE_BYTES = 1_332_000
"""Native bytes of a RocksDB instance opened on its files (block cache in use, table
readers)."""
ROCKSDB_REPLAY_FACTOR = 0.188
"""Memtable bytes per decoded byte of changelog records replayed into it."""
ROCKSDB_MEMTABLE_CAP_BYTES = 2 * (64 << 20)
"""What a RocksDB instance's memtables may hold: ``writeBufferSizeMB`` (64) ×
``maxWriteBufferNumber`` (2), Spark's defaults."""
RESERVED_HEAP_BYTES = 300 << 20
"""What the JVM heap keeps for Spark itself (``RESERVED_SYSTEM_MEMORY_BYTES``)."""
CONF_VERSIONS_IN_MEMORY = "spark.sql.streaming.maxBatchesToRetainInMemory"


@dataclass(frozen=True)
class ExecutorSizing:
    """The executors the state lives on, as the user gives them (``--executors``,
    ``--executor-memory``): what a restart's loaded state must fit into and what growing state
    fills (:mod:`statekit.growth.outlook`)."""

    executors: int = 1
    memory: int | None = None
    """Each executor's memory in bytes (``None``: not given)."""


ONE_EXECUTOR = ExecutorSizing()
"""The default: the whole state on one executor, its memory unknown."""


@dataclass(frozen=True)
class StateMemory:
    """The loaded state's memory on the busiest executor."""

    provider: str
    on_heap: bool
    """HDFS: the JVM heap; RocksDB: native memory beside it."""
    rows: float
    """Rows one executor holds after the load."""
    row_bytes: float
    """Decoded key + value bytes per row (sampled)."""
    bytes: float
    """One version of the state, as Spark accounts it (``memoryUsedBytes``) ..."""
    peak_bytes: float
    """... and with the versions the provider keeps in memory (an upper bound: they share
    their rows)."""
    largest_task_bytes: float
    """The largest partition's share (what one task builds)."""
    limit_bytes: int | None = None
    """Each executor's heap as given (``--executor-memory``); None when unknown."""

    @property
    def usable_bytes(self) -> float | None:
        if self.limit_bytes is None:
            return None
        return max(0.0, self.limit_bytes - RESERVED_HEAP_BYTES)

    @property
    def verdict(self) -> str:
        """``fits``, ``tight`` (fits one version, not every version kept), ``exceeds`` or
        ``unknown`` (no heap given, or the state is off the heap)."""
        usable = self.usable_bytes
        if usable is None or not self.on_heap:
            return "unknown"
        if self.bytes > usable:
            return "exceeds"
        if self.peak_bytes > usable:
            return "tight"
        return "fits"

    @property
    def note(self) -> str | None:
        from statekit.support.presentation import human_bytes

        usable = self.usable_bytes
        if self.verdict == "exceeds" and usable is not None:
            return (f"memory: the loaded state needs about {human_bytes(int(self.bytes))} of "
                    f"heap per executor and {human_bytes(int(usable))} is usable of "
                    f"{human_bytes(int(self.limit_bytes or 0))}: the restart will fail "
                    "(OutOfMemoryError) or crawl in garbage collection — raise the executor "
                    "(local: driver) memory, add executors, or move to RocksDB (`statekit "
                    "migrate`)")
        if self.verdict == "tight" and usable is not None:
            return (f"memory: one version of the state takes about "
                    f"{human_bytes(int(self.bytes))} of heap per executor, the versions kept "
                    f"in memory up to {human_bytes(int(self.peak_bytes))}, against "
                    f"{human_bytes(int(usable))} usable: expect long garbage-collection "
                    "pauses in the first batch")
        return None

    def to_dict(self) -> dict[str, object]:
        return {"provider": self.provider, "on_heap": self.on_heap, "rows": self.rows,
                "row_bytes": self.row_bytes, "bytes": self.bytes,
                "peak_bytes": self.peak_bytes, "largest_task_bytes": self.largest_task_bytes,
                "limit_bytes": self.limit_bytes, "usable_bytes": self.usable_bytes,
                "verdict": self.verdict}


def bytes_per_row(provider: str, row_bytes: float) -> float:
    """Heap one HDFS row takes once loaded (RocksDB: 0, its rows are off the heap)."""
    if provider == "hdfs":
        return HDFS_ROW_OVERHEAD_BYTES + HDFS_ROW_BYTE_FACTOR * row_bytes
    return 0.0


def rocksdb_instance_bytes(replayed: float, row_bytes: float) -> float:
    """Native memory of one RocksDB instance after the load: its block cache and what the
    changelog replay left in its memtables (at most the write buffers it may hold)."""
    return ROCKSDB_INSTANCE_BYTES + min(ROCKSDB_MEMTABLE_CAP_BYTES,
                                        ROCKSDB_REPLAY_FACTOR * replayed * row_bytes)


def state_memory(provider: str, instances: Sequence[tuple[float, float]], row_bytes: float,
                 executors: int = 1, limit_bytes: int | None = None,
                 conf: Mapping[str, str] | None = None) -> StateMemory | None:
    """The state's memory per executor once loaded, from (rows held after the load, change
    records replayed) per store instance; None when nothing is loaded."""
    loading = [(rows, replayed) for rows, replayed in instances if rows > 0]
    if not loading:
        return None
    executors = max(1, executors)
    rows = sum(r for r, _ in loading) / executors
    if provider == "hdfs":
        per_instance = [r * bytes_per_row(provider, row_bytes) for r, _ in loading]
    else:
        per_instance = [rocksdb_instance_bytes(replayed, row_bytes) for _, replayed in loading]
    one = sum(per_instance) / executors
    versions = 1
    if provider == "hdfs":
        try:
            versions = max(1, int((conf or {}).get(CONF_VERSIONS_IN_MEMORY, "2")))
        except ValueError:
            versions = 2
    return StateMemory(provider, provider == "hdfs", rows, row_bytes, one, one * versions,
                       max(per_instance), limit_bytes)
