"""The Spark side of ``statekit repartition``: re-bucket state by Spark's own hash, verify.

HDFS-backed state (``bucket_hdfs_store``): one task per *source* partition replays its files
(newest snapshot ≤ N + 1, then deltas) in the executor, in pure Python. Each live record goes
to the new partition ``pmod(hash(<key columns>), n)`` — the expression Spark's
HashPartitioning uses for a stateful operator's input. Where statekit computes that hash
itself (:mod:`statekit.formats.spark_hash`) the task packs records per new partition and
Spark shuffles large chunks; otherwise the rows cross to the JVM and Spark hashes them. A
task per new partition streams what reaches it into that partition's snapshot file. The key
and value bytes are never re-encoded: what Spark wrote is what the target holds. Nothing is
collected on the driver but per-partition counts, so the job scales with the cluster and the
driver's memory does not grow with the state. With a JVM at hand the packed chunks move
through an RDD's ``partitionBy``; over Spark Connect, which has no RDDs, the same executor
functions run through DataFrames (``range``, ``mapInArrow``, ``repartition`` by an int
Spark's hash sends to the chunk's partition).

RocksDB state (``repartition_rocksdb``): Spark's own offline repartition, run on the staged
copy only (never on the source).

``verify``: the target read back through Spark's ``statestore`` reader at batch N + 1 holds
exactly the source's multiset of (key, value) rows at batch N, per operator and store; every
row sits in ``pmod(hash(key), n)``; ``state-metadata`` reports n partitions.
"""


from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import store_schemas
from statekit.formats.schema import parse_struct_json
from statekit.formats.spark_hash import columns_hasher, routing_ints
from statekit.formats.state_writer import SnapshotWriter, pack_record
from statekit.formats.unsafe_row import make_decoder
from statekit.jobs.connect import is_connect, one_row_per_task
from statekit.jobs.hdfs_replay import (
    SourceTask,
    keyed_frame,
    live_state,
    representable,
    source_tasks,
)
from statekit.jobs.migrate import rewrite_into_rocksdb, write_hdfs_from_rocksdb
from statekit.jobs.raw_rows import partition_key_columns, read_raw_rows
from statekit.jobs.staged_writes import (
    MISPLACED,
    StoreCheck,
    WrittenPartition,
    each_store,
    placement,
    point_schemas_at_target,
    snapshot_relative,
    staged_job,
    staged_rocksdb_partition,
    write_snapshots,
)
from statekit.jobs.state_reader import (
    ARROW_BATCH_CONF,
    FORMAT_VERSION_CONF,
    StateTarget,
    read_metadata,
    read_state,
    session_confs,
    spark_url,
)
from statekit.support.errors import JobFailed
from statekit.writes.partition_key import partition_fields
from statekit.writes.target import (
    commit_entry,
    files_loading,
    write_logs,
    write_operator_metadata,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.writes.repartition_plan import RepartitionPlan, StorePlan
    from statekit.writes.staging import Staging

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

    key_fields = parse_struct_json(key_schema_json).fields[:partition_columns]
    if columns_hasher([f.data_type for f in key_fields]) is not None:
        return _bucket_packed(spark, source_url=source_url, storage_options=storage_options,
                              codec=codec, operator_id=operator_id, store=store, tasks=tasks,
                              key_schema_json=key_schema_json,
                              partition_columns=partition_columns, partitions=partitions,
                              staging_url=staging_url, version=version, fail_on=fail_on)
    frame, exprs = keyed_frame(spark, source_url, storage_options, codec, tasks,
                                key_schema_json, shown)
    return write_snapshots(frame, [F.expr(e) for e in exprs[:partition_columns]],
                           staging_url=staging_url, storage_options=storage_options,
                           operator_id=operator_id, store=store, version=version, codec=codec,
                           partitions=partitions, fail_on=fail_on)


PACKED_CHUNK = 4 << 20
"""Bytes of packed records a replaying task sends to one new partition at a time."""

CHUNKS_PER_BATCH = 4
"""Packed chunks per Arrow batch into a writer task over Spark Connect
(``maxRecordsPerBatch`` while the job runs): Arrow's default of 10,000 rows would hold a
whole partition's chunks at once."""

CHUNK_SCHEMA = pa.schema([("partition", pa.int32()), ("route", pa.int32()),
                          ("data", pa.binary()), ("records", pa.int64())])
WRITTEN_SCHEMA = pa.schema([("partition", pa.int32()), ("keys", pa.int64()),
                            ("bytes", pa.int64())])
"""The DataFrame route's Arrow batches; Spark's schemas are derived from them."""

Chunk = tuple[int, bytes, int]
"""``(new partition, packed snapshot records, how many)``."""


def _pack_by_partition(url: str, storage_options: dict, codec: str, key_schema_json: str,
                       partition_columns: int, partitions: int
                       ) -> Callable[[SourceTask], Iterator[Chunk]]:
    """The executor function: a source partition's live state, each record packed as
    Spark's snapshot records into the buffer of its new partition ``pmod(hash(key
    columns), n)``; out come chunks of about :data:`PACKED_CHUNK` bytes."""

    def run(task: SourceTask) -> Iterator[Chunk]:
        state = live_state(url, storage_options, codec, task)
        schema = parse_struct_json(key_schema_json)
        decode = make_decoder(schema, as_tuple=True)
        hasher = columns_hasher([f.data_type for f in schema.fields[:partition_columns]])
        assert hasher is not None
        buffers = [bytearray() for _ in range(partitions)]
        counts = [0] * partitions
        for key, value in state.items():
            if partition_columns:
                columns = representable(decode(key)[:partition_columns], url)
                target = hasher(columns) % partitions
            else:
                target = 0  # no grouping key (a global aggregation): its one partition
            buffer = buffers[target]
            buffer += pack_record(key, value)
            counts[target] += 1
            if len(buffer) >= PACKED_CHUNK:
                yield target, bytes(buffer), counts[target]
                buffer.clear()
                counts[target] = 0
        for target, buffer in enumerate(buffers):
            if counts[target]:
                yield target, bytes(buffer), counts[target]

    return run


def _packed_writer(staging_url: str, storage_options: dict, operator_id: int, store: str,
                   version: int, codec: str, fail_on: str | None
                   ) -> Callable[[int, Iterable[tuple[bytes, int]]], WrittenPartition]:
    """The executor function writing one new partition's snapshot from its packed chunks
    (``(data, records)``; empty ones are skipped)."""

    def run(partition: int, chunks: Iterable[tuple[bytes, int]]) -> WrittenPartition:
        relative = snapshot_relative(operator_id, store, partition, version)
        if fail_on == f"write {relative}":
            raise RuntimeError(f"injected failure before writing {relative}")
        fs, root = fsspec.core.url_to_fs(staging_url, **storage_options)
        path = f"{root.rstrip('/')}/{relative}"
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "wb") as handle:
            writer = SnapshotWriter(handle, codec)
            for data, records in chunks:
                if records:
                    writer.write_packed(data, records)
            writer.close()
        return WrittenPartition(partition, writer.records, fs.size(path))

    return run


def _bucket_packed(spark: SparkSession, *, source_url: str, storage_options: dict,
                   codec: str, operator_id: int, store: str, tasks: list[SourceTask],
                   key_schema_json: str, partition_columns: int, partitions: int,
                   staging_url: str, version: int,
                   fail_on: str | None = None) -> list[WrittenPartition]:
    """One task per source partition places and packs its records; Spark shuffles the
    chunks to one writer task per new partition (every one runs: empty partitions get an
    empty snapshot)."""
    pack = _pack_by_partition(source_url, storage_options, codec, key_schema_json,
                              partition_columns, partitions)
    write = _packed_writer(staging_url, storage_options, operator_id, store, version, codec,
                           fail_on)
    shuffle = _shuffle_over_dataframes if is_connect(spark) else _shuffle_over_rdds
    written = shuffle(spark, tasks, partitions, pack, write)
    if sorted(w.partition for w in written) != list(range(partitions)):
        raise JobFailed(f"the writer tasks wrote partitions "
                        f"{sorted(w.partition for w in written)}, expected 0…{partitions - 1}",
                        path=staging_url)
    return sorted(written, key=lambda w: w.partition)


def _shuffle_over_rdds(spark: SparkSession, tasks: list[SourceTask], partitions: int,
                       pack: Callable[[SourceTask], Iterator[Chunk]],
                       write: Callable[[int, Iterable[tuple[bytes, int]]], WrittenPartition]
                       ) -> list[WrittenPartition]:
    """With a JVM at hand: an RDD keyed by the new partition and ``partitionBy`` it —
    pickled chunks, half the job time of the DataFrame route at 1M keys (no Arrow
    conversions, no second kind of Python worker)."""
    chunks = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(
        lambda task: ((target, (data, records)) for target, data, records in pack(task)))
    return chunks.partitionBy(partitions, lambda p: p).mapPartitionsWithIndex(
        lambda partition, keyed: [write(partition, (chunk for _, chunk in keyed))]).collect()


def _shuffle_over_dataframes(spark: SparkSession, tasks: list[SourceTask], partitions: int,
                             pack: Callable[[SourceTask], Iterator[Chunk]],
                             write: Callable[[int, Iterable[tuple[bytes, int]]],
                                             WrittenPartition]) -> list[WrittenPartition]:
    """Over Spark Connect, which has no RDDs: ``range`` → ``mapInArrow`` packs; each chunk
    carries an int that Spark's own hash sends to exactly its partition
    (:func:`~statekit.formats.spark_hash.routing_ints`), so ``repartition(n, route)`` brings
    each new partition's chunks, and an empty marker chunk, to one writer task."""
    routes = routing_ints(partitions)

    def packed(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                for target, data, records in pack(tasks[index]):
                    yield pa.RecordBatch.from_pydict(
                        {"partition": [target], "route": [routes[target]], "data": [data],
                         "records": [records]}, schema=CHUNK_SCHEMA)

    def written(batches: Iterator[Any]) -> Iterator[Any]:
        def rows() -> Iterator[tuple[int, bytes, int]]:
            for batch in batches:
                columns = batch.to_pydict()
                yield from zip(columns["partition"], columns["data"], columns["records"],
                               strict=True)

        chunks = rows()
        first = next(chunks, None)
        if first is None:
            return  # cannot happen: every new partition has a marker chunk

        def same_partition() -> Iterator[tuple[bytes, int]]:
            for target, data, records in itertools.chain([first], chunks):
                if target != first[0]:
                    raise RuntimeError(f"chunks of new partitions {first[0]} and {target} "
                                       "reached one writer task")
                yield data, records

        done = write(first[0], same_partition())
        yield pa.RecordBatch.from_pydict(
            {"partition": [done.partition], "keys": [done.keys], "bytes": [done.bytes]},
            schema=WRITTEN_SCHEMA)

    chunk_schema = from_arrow_schema(CHUNK_SCHEMA)
    chunks = one_row_per_task(spark, len(tasks)).mapInArrow(packed, chunk_schema)
    markers = spark.createDataFrame([(p, routes[p], b"", 0) for p in range(partitions)],
                                    chunk_schema)
    placed = chunks.unionByName(markers).repartition(partitions, F.col("route"))
    with session_confs(spark, {ARROW_BATCH_CONF: str(CHUNKS_PER_BATCH)}):
        rows = placed.select("partition", "data", "records").mapInArrow(
            written, from_arrow_schema(WRITTEN_SCHEMA)).collect()
    return [WrittenPartition(r["partition"], r["keys"], r["bytes"]) for r in rows]


def count_per_new_partition(spark: SparkSession, *, source_path: str, plan: RepartitionPlan,
                            key_fields: dict[tuple[int, str], list[str]]
                            ) -> dict[str, list[int]]:
    """Keys per new partition per ``op/store`` (the dry run's skew): the source's rows at
    batch N through Spark's ``statestore`` reader, placed with ``pmod(hash(key), n)``."""

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
        expected = placement(key_fields[(store.operator_id, store.store)], plan.to_partitions)
        tgt = rows(store, target_path, n + 1).select(
            as_json, (F.col("partition_id") != F.expr(expected)).alias(MISPLACED))
        return StoreCheck.compare(store.operator_id, store.store, src, tgt, MISPLACED)

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

    n = plan.last_committed
    source = read_raw_rows(spark, source_path, n, operator_id, store)
    target = read_raw_rows(spark, target_path, n + 1, operator_id, store)
    columns = ["key_bytes", "value_bytes", "column_family_name"]
    by = partition_key_columns(target, None)
    expected = F.pmod(F.hash(*by), F.lit(plan.to_partitions)) if by else F.lit(0)
    tgt = target.select(*columns, (F.spark_partition_id() != expected).alias(MISPLACED))
    return StoreCheck.compare(operator_id, store, source.select(*columns), tgt, MISPLACED)


@dataclass(frozen=True)
class RepartitionResult:
    plan: RepartitionPlan
    written: dict[str, list[WrittenPartition]]
    """Per ``op/store``: keys and bytes of every new partition's state."""
    verification: Verification | None
    target: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
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


def run_repartition(spark: SparkSession, ckpt: Checkpoint, plan: RepartitionPlan,
                    staging: Staging, *, storage_options: dict[str, Any],
                    check: bool = True, progress: Callable[[str], None] = lambda _m: None,
                    fail_on: str | None = None) -> RepartitionResult:
    """Build the target in ``staging``, verify it, publish it (see the module docstring).

    On any failure the staging folder is removed and nothing is published; the source is
    only ever read.
    """

    started = time.perf_counter()
    with staged_job(spark, ckpt, staging, "repartition"):
        progress("copying logs and metadata")
        rewriter = plan.migrates or bool(plan.spark_keyed_operators)
        write_logs(ckpt, plan, staging, new_batch=plan.provider == "hdfs" or rewriter)
        written: dict[str, list[WrittenPartition]] = {}
        schemas = store_schemas(ckpt)  # read once: the HDFS job and the verification use them
        placed_by = partition_fields(ckpt, schemas)
        if rewriter:
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
                    spark, source_url=ckpt.location.portable_url, storage_options=storage_options,
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
            verification = verify(spark, source_path=spark_url(ckpt.location.portable_url),
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
