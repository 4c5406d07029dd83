"""Write plumbing every job that builds a new checkpoint shares (repartition, migrate, evict,
rollback): running a job against a staging folder and removing it on any failure, one Spark
job per store at once, HDFS snapshot files written by executor tasks from a placed frame,
Spark's placement of a state row, the row-multiset comparison a verification makes, and the
last touches before publishing. Kept apart from any one command so that none of them imports
another's module for its plumbing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import fsspec
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from statekit.checkpoint.state_data import zip_metadata
from statekit.formats.state_writer import SnapshotWriter
from statekit.jobs.connect import is_connect
from statekit.jobs.errors import is_spark_error
from statekit.jobs.state_reader import spark_failure, spark_url
from statekit.writes.target import retarget_schema_paths

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.inventory import StoreInstance
    from statekit.writes.staging import Staging

T = TypeVar("T")
R = TypeVar("R")
KEY_BYTES = "__statekit_key"
VALUE_BYTES = "__statekit_value"
MISPLACED = "__statekit_misplaced"
"""A verification's flag column: the target row sits outside its partition."""
@dataclass(frozen=True)
class WrittenPartition:
    partition: int
    keys: int
    bytes: int


def write_snapshot_file(staging_url: str, storage_options: dict, relative: str, codec: str,
                    pairs: Iterator[tuple[bytes, bytes]]) -> tuple[int, int]:
    """Stream ``pairs`` into the snapshot file ``relative`` of the staging folder; returns
    (records, file bytes)."""

    fs, root = fsspec.core.url_to_fs(staging_url, **storage_options)
    path = f"{root.rstrip('/')}/{relative}"
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as handle:
        writer = SnapshotWriter(handle, codec)
        for key, value in pairs:
            writer.write(key, value)
        writer.close()
    return writer.records, fs.size(path)


def snapshot_relative(operator_id: int, store: str, partition: int, version: int) -> str:
    store_dir = "" if store == "default" else f"{store}/"
    return f"state/{operator_id}/{partition}/{store_dir}{version}.snapshot"


def _snapshot_writer(staging_url: str, storage_options: dict, operator_id: int, store: str,
                     version: int, codec: str, fail_on: str | None
                     ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The executor function (``mapInArrow``) writing its partition's snapshot file: the
    task's partition index *is* the new partition (the rows were hash-partitioned into
    it)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        context = TaskContext.get()
        assert context is not None
        partition = context.partitionId()
        relative = snapshot_relative(operator_id, store, partition, version)
        if fail_on == f"write {relative}":
            raise RuntimeError(f"injected failure before writing {relative}")

        def pairs() -> Iterator[tuple[bytes, bytes]]:
            for batch in batches:
                yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                               strict=True)

        keys, size = write_snapshot_file(staging_url, storage_options, relative, codec, pairs())
        yield pa.RecordBatch.from_pylist(
            [{"partition": partition, "keys": keys, "bytes": size}],
            schema=pa.schema([("partition", pa.int32()), ("keys", pa.int64()),
                              ("bytes", pa.int64())]))

    return run


def write_snapshots(frame: Any, placed_by: list, *, staging_url: str, storage_options: dict,
                    operator_id: int, store: str, version: int, codec: str, partitions: int,
                    fail_on: str | None = None) -> list[WrittenPartition]:
    """Write ``frame``'s rows (with ``KEY_BYTES`` and ``VALUE_BYTES`` columns) into one HDFS
    ``.snapshot`` file per new partition at ``version``.

    Spark hash-partitions the rows by the ``placed_by`` columns — ``repartition(n, cols)``
    is ``pmod(hash(cols), n)``, its HashPartitioning — and each task streams its partition
    into the file (rows cross to Python in Arrow batches). Without key columns (a global
    aggregation) everything goes to partition 0. Partitions that got no rows get an empty
    snapshot, written here."""

    placed = (frame.repartition(partitions, *placed_by) if placed_by else frame.coalesce(1))
    result_schema = StructType.fromJson({"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": False, "metadata": {}}
        for n, t in (("partition", "integer"), ("keys", "long"), ("bytes", "long"))]})
    rows = placed.select(KEY_BYTES, VALUE_BYTES).mapInArrow(
        _snapshot_writer(staging_url, storage_options, operator_id, store, version, codec,
                         fail_on), result_schema).collect()
    written = {r["partition"]: WrittenPartition(r["partition"], r["keys"], r["bytes"])
               for r in rows}
    for partition in range(partitions):
        if partition not in written:
            relative = snapshot_relative(operator_id, store, partition, version)
            if fail_on == f"write {relative}":
                raise RuntimeError(f"injected failure before writing {relative}")
            _, size = write_snapshot_file(staging_url, storage_options, relative, codec,
                                      iter(()))
            written[partition] = WrittenPartition(partition, 0, size)
    return [written[p] for p in range(partitions)]


def placement(key_names: list[str], partitions: int) -> str:
    """Spark SQL for the new partition of a ``statestore`` row: ``pmod(hash(key.*), n)``."""
    if not key_names:
        return "0"
    columns = ", ".join(f"key.`{name}`" for name in key_names)
    return f"pmod(hash({columns}), {partitions})"


@dataclass(frozen=True)
class MultisetDiff:
    """A target's rows against a source's (less the rows removed from it), as multisets."""

    source_rows: int
    removed_rows: int
    target_rows: int
    missing: int
    """Rows the source has, not removed, that the target lacks (with multiplicity)."""
    extra: int
    """Target rows beyond the source less the removed rows (with multiplicity)."""
    flagged: dict[str, int]
    """Target rows where each of the target's flag columns is true."""


def multiset_diff(source: Any, target: Any, flags: Iterable[str] = (),
                  removed: Any | None = None) -> MultisetDiff:
    """Compare ``target`` with ``source`` less ``removed`` (DataFrames with the source's
    columns; the target may carry extra boolean ``flags`` columns, counted, not compared).

    One job with one shuffle: every side tagged and grouped by row, where a ``count`` per
    side and ``exceptAll`` both ways read each side three times and shuffle twice — and this
    is the verification a user waits for after every write.
    """

    flags = list(flags)
    columns = list(source.columns)
    zero, one = F.lit(0).cast("long"), F.lit(1).cast("long")

    def tagged(frame: Any, side: str, flag_columns: list[Any]) -> Any:
        return frame.select(*columns, *((one if side == s else zero).alias(s)
                                        for s in ("__s", "__r", "__t")),
                            *(c.alias(f"__f{i}") for i, c in enumerate(flag_columns)))

    no_flags = [zero] * len(flags)
    union = tagged(source, "__s", no_flags).unionByName(
        tagged(target, "__t", [F.col(f).cast("long") for f in flags]))
    if removed is not None:
        union = union.unionByName(tagged(removed, "__r", no_flags))
    per_row = union.groupBy(*columns).agg(
        *(F.sum(c).alias(c) for c in ("__s", "__r", "__t")),
        *(F.sum(f"__f{i}").alias(f"__f{i}") for i in range(len(flags))))
    kept = F.greatest(F.col("__s") - F.col("__r"), zero)  # exceptAll: never below zero
    totals = per_row.agg(
        F.sum("__s").alias("s"), F.sum("__r").alias("r"), F.sum("__t").alias("t"),
        F.sum(F.greatest(kept - F.col("__t"), zero)).alias("missing"),
        F.sum(F.greatest(F.col("__t") - kept, zero)).alias("extra"),
        *(F.sum(f"__f{i}").alias(f"f{i}") for i in range(len(flags)))).first()

    def total(name: str) -> int:
        return int(totals[name] or 0) if totals is not None else 0

    return MultisetDiff(total("s"), total("r"), total("t"), total("missing"), total("extra"),
                        {flag: total(f"f{i}") for i, flag in enumerate(flags)})


@dataclass(frozen=True)
class StoreCheck:
    operator_id: int
    store: str
    source_rows: int
    target_rows: int
    missing: int
    """Source rows (with multiplicity) absent from the target."""
    extra: int
    misplaced: int
    """Target rows outside ``pmod(hash(key), n)``."""

    @property
    def ok(self) -> bool:
        return (self.missing == 0 and self.extra == 0 and self.misplaced == 0
                and self.source_rows == self.target_rows)

    @classmethod
    def compare(cls, operator_id: int, store: str, source: Any, target: Any,
                misplaced: str | None = None) -> StoreCheck:
        """Source and target rows (DataFrames of the same columns) as multisets;
        ``misplaced``: the name of the target's boolean column that marks a row outside its
        partition (not compared)."""
        diff = multiset_diff(source, target, [misplaced] if misplaced else [])
        return cls(operator_id, store, diff.source_rows, diff.target_rows, diff.missing,
                   diff.extra, diff.flagged[misplaced] if misplaced else 0)


def point_schemas_at_target(ckpt: Checkpoint, staging: Staging, target: str) -> None:
    """The staged v2 operator metadata's schema paths → the target's own schema files, named
    as Spark will open them (``file:`` URLs for local paths); just before publishing."""

    url = spark_url(target)
    retarget_schema_paths(ckpt, staging, f"file:{url}" if url.startswith("/") else url)


def wait_for_running_tasks(spark: SparkSession, timeout_s: float = 30.0) -> None:
    """Wait (bounded) until no task runs on any executor.

    When one task of a write job fails, Spark fails the job at once but kills its other
    tasks asynchronously: a writer task may still be creating files in the staging folder
    while the driver removes it, and would leave part of it behind. Removing the folder only
    after the tasks ended keeps the promise that a failed run leaves nothing.
    """

    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(info.numRunningTasks() == 0 for info in tracker.getExecutorInfos()):
            return
        time.sleep(0.05)


def staged_rocksdb_partition(staged: Checkpoint, instance: StoreInstance, version: int
                             ) -> tuple[WrittenPartition, set[str]]:
    """Keys (the zips' ``numKeys``) and bytes of one staged RocksDB partition at
    ``version``, and the paths of every file loading that version needs."""

    files = instance.files_to_load(version)
    metas = zip_metadata(staged, [f for f in files if f.kind == "zip"])
    kept = files + instance.ssts_named({s.dfs_name for m in metas.values()
                                        for s in m.sst_files})
    return (WrittenPartition(instance.partition, sum(m.num_keys or 0 for m in metas.values()),
                             sum(f.size for f in kept)),
            {f.path for f in kept})


def each_store(stores: Iterable[T], work: Callable[[T], R]) -> dict[T, R]:
    """``work`` for every store, as concurrent Spark jobs (one driver thread each): a join's
    four stores then share the cluster's cores, where one store's last, lone tasks would
    leave them idle. The first failure is raised."""

    stores = list(stores)
    if len(stores) <= 1:
        return {s: work(s) for s in stores}
    with ThreadPoolExecutor(max_workers=len(stores),
                            thread_name_prefix="statekit-store") as pool:
        futures = {s: pool.submit(work, s) for s in stores}
        return {s: f.result() for s, f in futures.items()}


@contextmanager
def staged_job(spark: SparkSession | None, ckpt: Checkpoint, staging: Staging | None,
               what: str) -> Iterator[None]:
    """Run a job that writes into ``staging`` (created here): on any failure wait for the
    executors' tasks to end, remove the staging folder — nothing is published — and turn a
    Spark error into statekit's one line. ``staging`` None: a job that writes nothing;
    ``spark`` None: a copy without Spark."""
    if staging is not None:
        staging.prepare()
    try:
        yield
    except BaseException as error:
        if staging is not None:
            if spark is not None and is_connect(spark):
                staging.abort_settled()  # the client sees no tasks: watch the folder instead
            else:
                if spark is not None:
                    wait_for_running_tasks(spark)
                staging.abort()
        if spark is not None and is_spark_error(error):
            raise spark_failure(what, error, ckpt) from error
        raise


