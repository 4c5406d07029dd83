"""The Spark side of ``statekit repartition``: re-bucket state by Spark's own hash, verify.

HDFS-backed state (``bucket_hdfs_store``): one task per *source* partition replays its files
(newest snapshot ≤ N + 1, then deltas) in the executor, in pure Python, and emits every live
``(key bytes, value bytes)`` with the key's partition-key columns decoded. Spark computes the
new partition with ``pmod(hash(<key columns>), n)`` — the expression its HashPartitioning
uses for a stateful operator's input, so no home-made hash — and shuffles each row to the
task of its new partition, which streams it into that partition's snapshot file. The key and
value bytes are never re-encoded: what Spark wrote is what the target holds. Nothing is
collected on the driver but per-partition counts, so the job scales with the cluster and the
driver's memory does not grow with the state.

RocksDB state (``repartition_rocksdb``): Spark's own offline repartition, run on the staged
copy only (never on the source).

``verify``: the target read back through Spark's ``statestore`` reader at batch N + 1 holds
exactly the source's multiset of (key, value) rows at batch N, per operator and store; every
row sits in ``pmod(hash(key), n)``; ``state-metadata`` reports n partitions.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from statekit.errors import UnsupportedFormat
from statekit.jobs.state_reader import spark_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.inventory import StoreInstance
    from statekit.repartition.plan import RepartitionPlan, StorePlan
    from statekit.repartition.staging import Staging

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S", bound=Sequence[Any])
KEY_BYTES = "__statekit_key"
VALUE_BYTES = "__statekit_value"
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)
_TEMPORAL = ("timestamp", "date", "timestamp_ntz")


@dataclass(frozen=True)
class SourceTask:
    """What one executor task reads: one source partition's files to load version N + 1."""

    partition: int
    files: tuple[tuple[str, str], ...]
    """``(fs path, kind)`` in load order."""


@dataclass(frozen=True)
class WrittenPartition:
    partition: int
    keys: int
    bytes: int


def _mentions_temporal(field_type: Any) -> bool:
    if isinstance(field_type, str):
        return field_type in _TEMPORAL
    if isinstance(field_type, dict):
        return any(_mentions_temporal(v) for v in field_type.values())
    if isinstance(field_type, list):
        return any(_mentions_temporal(v) for v in field_type)
    return False


def key_columns(key_schema_json: str, shown: str) -> tuple[list[dict], list[str], list[str]]:
    """The partition-key columns as the job carries them: (Spark field JSON per column, SQL
    expression per column rebuilding the key's exact type, conversion per column).

    Timestamps and dates travel as their raw micros / days (``timestamp_micros`` /
    ``date_from_unix_date`` rebuild them in Spark exactly, with no time-zone round trip).
    """
    schema = json.loads(key_schema_json)
    fields, exprs, converts = [], [], []
    for index, field in enumerate(schema.get("fields") or []):
        column = f"k{index}"
        kind = field["type"]
        if kind == "timestamp":
            fields.append({"name": column, "type": "long", "nullable": True, "metadata": {}})
            exprs.append(f"timestamp_micros(`{column}`)")
            converts.append("timestamp")
        elif kind == "date":
            fields.append({"name": column, "type": "integer", "nullable": True,
                           "metadata": {}})
            exprs.append(f"date_from_unix_date(`{column}`)")
            converts.append("date")
        elif _mentions_temporal(kind):
            raise UnsupportedFormat(f"state key column {field['name']!r} has type "
                                    f"{json.dumps(kind)}: timestamp_ntz and temporal values "
                                    "inside nested key columns are not supported", path=shown)
        else:
            fields.append({**field, "name": column})
            exprs.append(f"`{column}`")
            converts.append("")
    return fields, exprs, converts


def _convert(value: Any, how: str) -> Any:
    if value is None or not how:
        return value
    if how == "timestamp":
        return (value - _EPOCH_UTC) // dt.timedelta(microseconds=1)
    return (value - _EPOCH_DATE).days


def live_state(url: str, storage_options: dict, codec: str, task: SourceTask
               ) -> dict[bytes, bytes]:
    """In an executor: one source partition's live state at the planned version, replayed
    from its files (snapshot, then deltas) exactly as Spark's HDFS provider loads it."""
    import fsspec

    from statekit.formats.records import read_state_file

    fs, _ = fsspec.core.url_to_fs(url, **storage_options)
    state: dict[bytes, bytes] = {}
    for path, kind in task.files:
        for record in read_state_file(fs, path, codec, kind):
            if record.value is None:
                state.pop(record.key, None)
            else:
                state[record.key] = record.value
    return state


def _representable(values: S, url: str) -> S:
    """``values`` (decoded key columns), refused when one is a ``RawValue``: a value Python
    cannot represent, which statekit can neither hash nor hand to Spark."""
    from statekit.formats.unsafe_row import RawValue

    if any(isinstance(v, RawValue) for v in values):
        raise UnsupportedFormat("a state key holds a value Python cannot represent (e.g. a "
                                "date outside years 1-9999)", path=url)
    return values


def _replay_chunks(url: str, storage_options: dict, codec: str, key_schema_json: str,
                   converts: list[str], chunk: int
                   ) -> Callable[[SourceTask], Iterator[tuple[list, list, list]]]:
    """The executor function: a source partition's live state (snapshot, then deltas), in
    chunks of ``(key columns, key bytes, value bytes)``, the columns decoded for the hash.

    Column-wise on purpose: the bytes are never repacked into per-row tuples."""

    def run(task: SourceTask) -> Iterator[tuple[list, list, list]]:
        from itertools import islice

        from statekit.formats.schema import parse_struct_json
        from statekit.formats.unsafe_row import make_decoder

        state = live_state(url, storage_options, codec, task)
        decode = make_decoder(parse_struct_json(key_schema_json), as_tuple=True)
        width = len(converts)
        items = iter(state.items())
        while True:
            pairs = list(islice(items, chunk))
            if not pairs:
                return
            keys = [k for k, _ in pairs]
            decoded = [decode(k) for k in keys]
            columns = [list(c) for c in zip(*decoded, strict=True)] if decoded and width \
                else [[] for _ in range(width)]
            for index, how in enumerate(converts):
                column = _representable(columns[index], url)
                if how:
                    columns[index] = [_convert(c, how) for c in column]
            yield columns, keys, [v for _, v in pairs]

    return run


def _write_snapshot(staging_url: str, storage_options: dict, relative: str, codec: str,
                    pairs: Iterator[tuple[bytes, bytes]]) -> tuple[int, int]:
    """Stream ``pairs`` into the snapshot file ``relative`` of the staging folder; returns
    (records, file bytes)."""
    import fsspec

    from statekit.formats.state_writer import SnapshotWriter

    fs, root = fsspec.core.url_to_fs(staging_url, **storage_options)
    path = f"{root.rstrip('/')}/{relative}"
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as handle:
        writer = SnapshotWriter(handle, codec)
        for key, value in pairs:
            writer.write(key, value)
        writer.close()
    return writer.records, fs.size(path)


def _snapshot_relative(operator_id: int, store: str, partition: int, version: int) -> str:
    store_dir = "" if store == "default" else f"{store}/"
    return f"state/{operator_id}/{partition}/{store_dir}{version}.snapshot"


def _snapshot_writer(staging_url: str, storage_options: dict, operator_id: int, store: str,
                     version: int, codec: str, fail_on: str | None
                     ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The executor function (``mapInArrow``) writing its partition's snapshot file: the
    task's partition index *is* the new partition (the rows were hash-partitioned into
    it)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        partition = context.partitionId()
        relative = _snapshot_relative(operator_id, store, partition, version)
        if fail_on == f"write {relative}":
            raise RuntimeError(f"injected failure before writing {relative}")

        def pairs() -> Iterator[tuple[bytes, bytes]]:
            for batch in batches:
                yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                               strict=True)

        keys, size = _write_snapshot(staging_url, storage_options, relative, codec, pairs())
        yield pa.RecordBatch.from_pylist(
            [{"partition": partition, "keys": keys, "bytes": size}],
            schema=pa.schema([("partition", pa.int32()), ("keys", pa.int64()),
                              ("bytes", pa.int64())]))

    return run


ARROW_ROWS = 32_768
"""Rows per Arrow batch between the replaying Python workers and the JVM."""


def _replay_arrow(url: str, storage_options: dict, codec: str, key_schema_json: str,
                  converts: list[str], schema_json: str
                  ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The executor function (``mapInArrow``): each input row names a source partition's
    files; out come its live rows as Arrow batches (columns, key bytes, value bytes)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        schema = to_arrow_schema(StructType.fromJson(json.loads(schema_json)))
        replay = _replay_chunks(url, storage_options, codec, key_schema_json, converts,
                                ARROW_ROWS)
        for batch in batches:
            for spec in batch.column(0).to_pylist():
                partition, files = json.loads(spec)
                task = SourceTask(partition, tuple((path, kind) for path, kind in files))
                for columns, keys, values in replay(task):
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(data, type=field.type) for data, field in
                         zip([*columns, keys, values], schema, strict=True)], schema=schema)

    return run


def _keyed_frame(spark: SparkSession, source_url: str, storage_options: dict, codec: str,
                 tasks: list[SourceTask], key_schema_json: str, shown: str
                 ) -> tuple[Any, list[str]]:
    """Every live row of a store's source partitions, replayed by one task per source
    partition and handed to the JVM in Arrow batches: ``(frame, exprs)``, the frame's
    columns being the key columns, the key bytes and the value bytes, and ``exprs`` the
    SQL rebuilding each key column's exact type."""
    from pyspark.sql.types import StructType

    fields, exprs, converts = key_columns(key_schema_json, shown)
    schema = StructType.fromJson({"type": "struct", "fields": [
        *fields,
        {"name": KEY_BYTES, "type": "binary", "nullable": True, "metadata": {}},
        {"name": VALUE_BYTES, "type": "binary", "nullable": True, "metadata": {}}]})
    specs = [(json.dumps([t.partition, [list(f) for f in t.files]]),) for t in tasks]
    frame = spark.sparkContext.parallelize(specs, max(1, len(specs))).toDF("task string") \
        .mapInArrow(_replay_arrow(source_url, storage_options, codec, key_schema_json,
                                  converts, schema.json()), schema)
    return frame, exprs


def bucket_hdfs_store(spark: SparkSession, *, source_url: str, storage_options: dict,
                      codec: str, operator_id: int, store: str, tasks: list[SourceTask],
                      key_schema_json: str, partition_columns: int, partitions: int,
                      staging_url: str, version: int, shown: str,
                      fail_on: str | None = None) -> list[WrittenPartition]:
    """Re-bucket one store's state into ``partitions`` snapshot files at ``version``, placed
    by its first ``partition_columns`` key columns.

    Where statekit reproduces Spark's hash of those columns' types
    (:mod:`statekit.formats.spark_hash`), the replaying tasks place and pack every record
    themselves and Spark only shuffles large chunks of packed records to the writers
    (:func:`_bucket_packed`); else the rows go to the JVM in Arrow batches and Spark hashes
    them (:func:`write_snapshots`). The verification checks the placement with Spark's own
    hash either way."""
    from pyspark.sql import functions as F

    from statekit.formats.schema import parse_struct_json
    from statekit.formats.spark_hash import columns_hasher

    key_fields = parse_struct_json(key_schema_json).fields[:partition_columns]
    if columns_hasher([f.data_type for f in key_fields]) is not None:
        return _bucket_packed(spark, source_url=source_url, storage_options=storage_options,
                              codec=codec, operator_id=operator_id, store=store, tasks=tasks,
                              key_schema_json=key_schema_json,
                              partition_columns=partition_columns, partitions=partitions,
                              staging_url=staging_url, version=version, fail_on=fail_on)
    frame, exprs = _keyed_frame(spark, source_url, storage_options, codec, tasks,
                                key_schema_json, shown)
    return write_snapshots(frame, [F.expr(e) for e in exprs[:partition_columns]],
                           staging_url=staging_url, storage_options=storage_options,
                           operator_id=operator_id, store=store, version=version, codec=codec,
                           partitions=partitions, fail_on=fail_on)


PACKED_CHUNK = 4 << 20
"""Bytes of packed records a replaying task sends to one new partition at a time."""


def _pack_by_partition(url: str, storage_options: dict, codec: str, key_schema_json: str,
                       partition_columns: int, partitions: int
                       ) -> Callable[[SourceTask], Iterator[tuple[int, tuple[bytes, int]]]]:
    """The executor function: a source partition's live state, each record packed as
    Spark's snapshot records into the buffer of its new partition ``pmod(hash(key
    columns), n)``; out come ``(new partition, (packed bytes, records))`` chunks."""

    def run(task: SourceTask) -> Iterator[tuple[int, tuple[bytes, int]]]:
        from statekit.formats.schema import parse_struct_json
        from statekit.formats.spark_hash import columns_hasher
        from statekit.formats.state_writer import pack_record
        from statekit.formats.unsafe_row import make_decoder

        state = live_state(url, storage_options, codec, task)
        schema = parse_struct_json(key_schema_json)
        decode = make_decoder(schema, as_tuple=True)
        hasher = columns_hasher([f.data_type for f in schema.fields[:partition_columns]])
        assert hasher is not None
        buffers = [bytearray() for _ in range(partitions)]
        counts = [0] * partitions
        for key, value in state.items():
            if partition_columns:
                columns = _representable(decode(key)[:partition_columns], url)
                target = hasher(columns) % partitions
            else:
                target = 0  # no grouping key (a global aggregation): its one partition
            buffer = buffers[target]
            buffer += pack_record(key, value)
            counts[target] += 1
            if len(buffer) >= PACKED_CHUNK:
                yield target, (bytes(buffer), counts[target])
                buffer.clear()
                counts[target] = 0
        for target, buffer in enumerate(buffers):
            if counts[target]:
                yield target, (bytes(buffer), counts[target])

    return run


def _packed_writer(staging_url: str, storage_options: dict, operator_id: int, store: str,
                   version: int, codec: str, fail_on: str | None
                   ) -> Callable[[int, Iterable[tuple[int, tuple[bytes, int]]]],
                                 Iterable[WrittenPartition]]:
    """The executor function writing one new partition's snapshot from packed chunks."""

    def run(partition: int, chunks: Iterable[tuple[int, tuple[bytes, int]]]
            ) -> Iterator[WrittenPartition]:
        import fsspec

        from statekit.formats.state_writer import SnapshotWriter

        relative = _snapshot_relative(operator_id, store, partition, version)
        if fail_on == f"write {relative}":
            raise RuntimeError(f"injected failure before writing {relative}")
        fs, root = fsspec.core.url_to_fs(staging_url, **storage_options)
        path = f"{root.rstrip('/')}/{relative}"
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "wb") as handle:
            writer = SnapshotWriter(handle, codec)
            for _, (data, records) in chunks:
                writer.write_packed(data, records)
            writer.close()
        yield WrittenPartition(partition, writer.records, fs.size(path))

    return run


def _bucket_packed(spark: SparkSession, *, source_url: str, storage_options: dict,
                   codec: str, operator_id: int, store: str, tasks: list[SourceTask],
                   key_schema_json: str, partition_columns: int, partitions: int,
                   staging_url: str, version: int,
                   fail_on: str | None = None) -> list[WrittenPartition]:
    """One task per source partition places and packs its records; Spark shuffles the
    chunks to one writer task per new partition (every one runs: empty partitions get an
    empty snapshot)."""
    chunks = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(
        _pack_by_partition(source_url, storage_options, codec, key_schema_json,
                           partition_columns, partitions))
    written = chunks.partitionBy(partitions, lambda p: p).mapPartitionsWithIndex(
        _packed_writer(staging_url, storage_options, operator_id, store, version, codec,
                       fail_on)).collect()
    return sorted(written, key=lambda w: w.partition)


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
    from pyspark.sql.types import StructType

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
            relative = _snapshot_relative(operator_id, store, partition, version)
            if fail_on == f"write {relative}":
                raise RuntimeError(f"injected failure before writing {relative}")
            _, size = _write_snapshot(staging_url, storage_options, relative, codec,
                                      iter(()))
            written[partition] = WrittenPartition(partition, 0, size)
    return [written[p] for p in range(partitions)]


def placement(key_names: list[str], partitions: int) -> str:
    """Spark SQL for the new partition of a ``statestore`` row: ``pmod(hash(key.*), n)``."""
    if not key_names:
        return "0"
    columns = ", ".join(f"key.`{name}`" for name in key_names)
    return f"pmod(hash({columns}), {partitions})"


def count_per_new_partition(spark: SparkSession, *, source_path: str, plan: RepartitionPlan,
                            key_fields: dict[tuple[int, str], list[str]]
                            ) -> dict[str, list[int]]:
    """Keys per new partition per ``op/store`` (the dry run's skew): the source's rows at
    batch N through Spark's ``statestore`` reader, placed with ``pmod(hash(key), n)``."""
    from pyspark.sql import functions as F

    from statekit.jobs.migrate import partition_key_columns, read_raw_rows
    from statekit.jobs.state_reader import StateTarget, read_state

    out = {}
    for store in plan.stores:
        if store.operator_id in plan.spark_keyed_operators:  # every column family's rows
            rows = read_raw_rows(spark, source_path, plan.last_committed, store.operator_id,
                                 store.store)
            by = partition_key_columns(rows, None)
            target = F.pmod(F.hash(*by), F.lit(plan.to_partitions)) if by else F.lit(0)
        else:
            rows = read_state(spark, StateTarget(source_path, store.operator_id,
                                                 store.operator_name, store.store,
                                                 batch_id=plan.last_committed))
            target = F.expr(placement(key_fields[(store.operator_id, store.store)],
                                      plan.to_partitions))
        counts: dict[int, int] = dict(rows.groupBy(target.alias("p")).count().collect())
        out[f"{store.operator_id}/{store.store}"] = [int(counts.get(p, 0))
                                                     for p in range(plan.to_partitions)]
    return out


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
                misplaced: int = 0) -> StoreCheck:
        """Source and target rows (DataFrames of the same columns) as multisets."""
        return cls(operator_id, store, source.count(), target.count(),
                   source.exceptAll(target).count(), target.exceptAll(source).count(),
                   misplaced)


@dataclass(frozen=True)
class Verification:
    stores: tuple[StoreCheck, ...]
    metadata_partitions: tuple[int, ...]
    """``numPartitions`` of every state-metadata row of the target."""
    partitions: int

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stores) and bool(self.metadata_partitions) and \
            set(self.metadata_partitions) == {self.partitions}

    def problems(self) -> list[str]:
        out = [f"operator {s.operator_id} store {s.store}: {s.missing} source rows missing, "
               f"{s.extra} extra, {s.misplaced} in the wrong partition "
               f"({s.source_rows} → {s.target_rows} rows)" for s in self.stores if not s.ok]
        if set(self.metadata_partitions) != {self.partitions}:
            out.append(f"state-metadata reports {sorted(set(self.metadata_partitions))} "
                       f"partitions, expected {self.partitions}")
        return out


def verify(spark: SparkSession, *, source_path: str, target_path: str, plan: RepartitionPlan,
           key_fields: dict[tuple[int, str], list[str]]) -> Verification:
    """Compare the target at batch N + 1 with the source at batch N through Spark's readers.

    An HDFS target of a checkpoint-format-v2 source can only be read with the session at
    format v1, and the source only at v2: the source's rows are then materialized first
    (``localCheckpoint``), and the target read after the session is switched.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from statekit.jobs.state_reader import (
        FORMAT_VERSION_CONF,
        StateTarget,
        read_metadata,
        read_state,
        session_confs,
    )

    n = plan.last_committed
    as_json = F.to_json(F.struct(F.col("key"), F.col("value"))).alias("row")

    def rows(store: StorePlan, path: str, batch: int) -> DataFrame:
        return read_state(spark, StateTarget(path, store.operator_id, store.operator_name,
                                             store.store, batch_id=batch))

    target_confs: dict[str, str] = {}
    if plan.target_provider == "hdfs" and spark.conf.get(FORMAT_VERSION_CONF, "1") != "1":
        target_confs[FORMAT_VERSION_CONF] = "1"
    materialized: dict[StorePlan, DataFrame] = {}
    if target_confs:
        materialized = each_store(plan.stores, lambda store: rows(store, source_path, n)
                                  .select(as_json).localCheckpoint(eager=True))

    def check(store: StorePlan) -> StoreCheck:
        if store.operator_id in plan.spark_keyed_operators:
            return _verify_raw(spark, source_path, target_path, plan, store.operator_id,
                               store.store)
        src = (materialized[store] if store in materialized
               else rows(store, source_path, n).select(as_json))
        target = rows(store, target_path, n + 1)
        tgt = target.select(as_json)
        expected = placement(key_fields[(store.operator_id, store.store)], plan.to_partitions)
        misplaced = target.where(F.col("partition_id") != F.expr(expected)).count()
        return StoreCheck.compare(store.operator_id, store.store, src, tgt, misplaced)

    with session_confs(spark, target_confs):
        checks = list(each_store(plan.stores, check).values())
        metadata = [int(r["numPartitions"]) for r in
                    read_metadata(spark, target_path).select("numPartitions").collect()]
    return Verification(tuple(checks), tuple(metadata), plan.to_partitions)


def _verify_raw(spark: SparkSession, source_path: str, target_path: str,
                plan: RepartitionPlan, operator_id: int, store: str) -> StoreCheck:
    """One store compared on Spark's raw rows (key bytes, value bytes, column family): every
    column family of a transformWithState store — value, list and map state, timers, TTL
    indexes — in one pass; each target row must sit in ``pmod(hash(partition key), n)``."""
    from pyspark.sql import functions as F

    from statekit.jobs.migrate import partition_key_columns, read_raw_rows

    n = plan.last_committed
    source = read_raw_rows(spark, source_path, n, operator_id, store)
    target = read_raw_rows(spark, target_path, n + 1, operator_id, store)
    columns = ["key_bytes", "value_bytes", "column_family_name"]
    src, tgt = source.select(*columns), target.select(*columns)
    by = partition_key_columns(target, None)
    expected = F.pmod(F.hash(*by), F.lit(plan.to_partitions)) if by else F.lit(0)
    misplaced = target.where(F.spark_partition_id() != expected).count()
    return StoreCheck.compare(operator_id, store, src, tgt, misplaced)


def source_tasks(ckpt: Checkpoint, operator_id: int, store: str, version: int
                 ) -> list[SourceTask]:
    """One task per source partition: the files Spark would load for ``version``."""
    return [SourceTask(i.partition, tuple((f.path, f.kind) for f in i.files_to_load(version)))
            for i in ckpt.inventory.instances_of(operator_id, store)]


@dataclass(frozen=True)
class RepartitionResult:
    plan: RepartitionPlan
    written: dict[str, list[WrittenPartition]]
    """Per ``op/store``: keys and bytes of every new partition's state."""
    verification: Verification | None
    target: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"plan": self.plan.to_dict(), "target": self.target, "seconds": self.seconds,
                "written": {k: [asdict(w) for w in v] for k, v in self.written.items()},
                "verification": None if self.verification is None else {
                    "ok": self.verification.ok, "problems": self.verification.problems(),
                    "stores": [asdict(s) for s in self.verification.stores],
                    "metadata_partitions": list(self.verification.metadata_partitions)}}


def repartition_rocksdb(spark: SparkSession, ckpt: Checkpoint, plan: RepartitionPlan,
                        staging: Staging) -> dict[str, list[WrittenPartition]]:
    """Spark's own offline repartition, on a staged copy of what loading batch N needs.

    Spark writes ``offsets/N+1``, the state at version N + 2 and ``commits/N+1`` into the
    staging folder; statekit then removes what a restart of the target does not need (the
    copied version N + 1 files, partition folders ≥ n that Spark leaves behind) and writes
    the v1 operator metadata with the new count (Spark updates only v2).
    """
    from statekit.checkpoint import open_checkpoint
    from statekit.repartition.target import files_loading, write_operator_metadata

    for file in files_loading(ckpt, plan.last_committed + 1):
        # streamed: at 10M keys single SST files pass 50 MB
        staging.write_chunks(ckpt.location.relative(file.path), ckpt.read_chunks(file.path))
    staging.on_step("spark repartition")
    spark._streamingCheckpointManager.repartition(spark_url(staging.url), plan.to_partitions,
                                                  True)
    staged = open_checkpoint(staging.url)
    written: dict[str, list[WrittenPartition]] = {}
    leftover: set[str] = set()  # partition folders ≥ n Spark leaves behind (all their stores)
    for key, instance in sorted(staged.inventory.instances.items()):
        if instance.partition >= plan.to_partitions:
            leftover.add(staged.location.path("state", str(key[0]), str(key[2])))
            continue
        partition, keep = staged_rocksdb_partition(staged, instance, plan.state_version)
        written.setdefault(f"{key[0]}/{key[1]}", []).append(partition)
        for file in instance.files:
            if file.path not in keep:
                staged.fs.rm(file.path)
                crc = file.path.rsplit("/", 1)
                if staged.fs.exists(f"{crc[0]}/.{crc[1]}.crc"):
                    staged.fs.rm(f"{crc[0]}/.{crc[1]}.crc")
    for folder in sorted(leftover):
        if staged.fs.exists(folder):
            staged.fs.rm(folder, recursive=True)
    write_operator_metadata(ckpt, plan, staging, plan.to_partitions)
    return written


def point_schemas_at_target(ckpt: Checkpoint, staging: Staging, target: str) -> None:
    """The staged v2 operator metadata's schema paths → the target's own schema files, named
    as Spark will open them (``file:`` URLs for local paths); just before publishing."""
    from statekit.repartition.target import retarget_schema_paths

    url = spark_url(target)
    retarget_schema_paths(ckpt, staging, f"file:{url}" if url.startswith("/") else url)


def wait_for_running_tasks(spark: SparkSession, timeout_s: float = 30.0) -> None:
    """Wait (bounded) until no task runs on any executor.

    When one task of a write job fails, Spark fails the job at once but kills its other
    tasks asynchronously: a writer task may still be creating files in the staging folder
    while the driver removes it, and would leave part of it behind. Removing the folder only
    after the tasks ended keeps the promise that a failed run leaves nothing.
    """
    import time

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
    from statekit.checkpoint.state_data import zip_metadata

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
    from concurrent.futures import ThreadPoolExecutor

    stores = list(stores)
    if len(stores) <= 1:
        return {s: work(s) for s in stores}
    with ThreadPoolExecutor(max_workers=len(stores),
                            thread_name_prefix="statekit-store") as pool:
        futures = {s: pool.submit(work, s) for s in stores}
        return {s: f.result() for s, f in futures.items()}


def is_spark_error(error: BaseException) -> bool:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return isinstance(error, (Py4JJavaError, PySparkException))


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
            if spark is not None:
                wait_for_running_tasks(spark)
            staging.abort()
        if spark is not None and is_spark_error(error):
            from statekit.jobs.errors import spark_failure

            raise spark_failure(what, error, ckpt) from error
        raise


def run_repartition(spark: SparkSession, ckpt: Checkpoint, plan: RepartitionPlan,
                    staging: Staging, *, storage_options: dict[str, Any],
                    check: bool = True, progress: Callable[[str], None] = lambda _m: None,
                    fail_on: str | None = None) -> RepartitionResult:
    """Build the target in ``staging``, verify it, publish it (see the module docstring).

    On any failure the staging folder is removed and nothing is published; the source is
    only ever read.
    """
    import time

    from statekit.checkpoint.state_data import store_schemas
    from statekit.errors import JobFailed
    from statekit.repartition.partition_key import partition_fields
    from statekit.repartition.target import commit_entry, write_logs

    started = time.perf_counter()
    with staged_job(spark, ckpt, staging, "repartition"):
        progress("copying logs and metadata")
        rewriter = plan.migrates or bool(plan.spark_keyed_operators)
        write_logs(ckpt, plan, staging, new_batch=plan.provider == "hdfs" or rewriter)
        written: dict[str, list[WrittenPartition]] = {}
        schemas = store_schemas(ckpt)  # read once: the HDFS job and the verification use them
        placed_by = partition_fields(ckpt, schemas)
        if rewriter:
            from statekit.jobs.migrate import rewrite_into_rocksdb, write_hdfs_from_rocksdb

            unique_ids: dict[str, list[list[str]]] | None = None  # HDFS: format v1
            if plan.target_provider == "hdfs":
                written = write_hdfs_from_rocksdb(spark, ckpt, plan, staging,
                                                  placed_by=placed_by,
                                                  storage_options=storage_options,
                                                  progress=progress, fail_on=fail_on)
            else:
                progress(f"Spark's state rewriter: {plan.provider} → RocksDB files "
                         f"({plan.from_partitions} → {plan.to_partitions} partitions)")
                written, unique_ids = rewrite_into_rocksdb(
                    spark, ckpt, plan, staging, schemas=schemas, placed_by=placed_by,
                    storage_options=storage_options)
            name, data = commit_entry(ckpt, plan, unique_ids)
            staging.write(name, data)
        elif plan.provider == "hdfs":
            def bucket(store: StorePlan) -> list[WrittenPartition]:
                progress(f"re-bucketing operator {store.operator_id} store {store.store} "
                         f"({store.partitions} → {plan.to_partitions} partitions)")
                schema = schemas[(store.operator_id, store.store)]
                return bucket_hdfs_store(
                    spark, source_url=ckpt.location.url, storage_options=storage_options,
                    codec=plan.codec, operator_id=store.operator_id, store=store.store,
                    tasks=source_tasks(ckpt, store.operator_id, store.store,
                                       plan.last_committed + 1),
                    key_schema_json=schema.file.raw["key"],
                    partition_columns=len(placed_by[(store.operator_id, store.store)]),
                    partitions=plan.to_partitions,
                    staging_url=staging.url, version=plan.state_version,
                    shown=ckpt.display(schema.path), fail_on=fail_on)

            written = {f"{s.operator_id}/{s.store}": w
                       for s, w in each_store(plan.stores, bucket).items()}
            name, data = commit_entry(ckpt, plan)
            staging.write(name, data)
        else:
            progress(f"Spark's repartition on the staged copy ({plan.from_partitions} → "
                     f"{plan.to_partitions} partitions)")
            written = repartition_rocksdb(spark, ckpt, plan, staging)
            name = f"commits/{plan.repartition_batch}"
        verification = None
        if check:
            progress("verifying through Spark's state readers")
            verification = verify(spark, source_path=spark_url(ckpt.location.url),
                                  target_path=spark_url(staging.url), plan=plan,
                                  key_fields=placed_by)
            if not verification.ok:
                raise JobFailed("verification failed, nothing published: "
                                + "; ".join(verification.problems()), path=plan.target)
        if plan.spark_keyed_operators:
            point_schemas_at_target(ckpt, staging, plan.target)
        progress("publishing")
        staging.publish(last=name)
    return RepartitionResult(plan, written, verification, plan.target,
                             time.perf_counter() - started)
