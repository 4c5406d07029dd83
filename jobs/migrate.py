"""The Spark side of ``statekit migrate``: a checkpoint's state rewritten for another provider.

Spark pins the state store provider in the offset log, and its documentation says a query
cannot change it without a new checkpoint. The state itself is provider-neutral: every row
is an ``UnsafeRow`` key and value, in the same bytes for both providers. So a migration
moves those bytes, unchanged, into the other provider's files:

* **into RocksDB** (``rewrite_into_rocksdb``): Spark 4.3's own ``StateRewriter`` writes the
  RocksDB files (statekit cannot write SST files itself) at the new batch of the *staging*
  target, with the provider and partition count the target's offsets pin. Its input is the
  ``statestore`` reader's raw rows ``(partition_key, key_bytes, value_bytes,
  column_family_name)``, handed to a transform statekit supplies (a Python object the JVM
  calls through Py4J): it places every row by ``pmod(hash(partition key), n)``. Spark's
  reader accepts only RocksDB checkpoints, so for an HDFS source the transform *replaces*
  its input with the rows statekit replays from the HDFS files in executor tasks (the same
  replay as ``statekit repartition``); the reader is only planned, on a view of the source's
  schema files inside the staging folder (``target.write_read_view``).
* **into HDFS** (``write_hdfs_from_rocksdb``): the RocksDB source's raw rows through the same
  reader, placed by the same hash, streamed by executor tasks into one ``.snapshot`` file per
  new partition (the HDFS provider has no "load empty" write path Spark could drive).

Both write state version N + 2 for batch N + 1, like ``statekit repartition``; the caller
(``jobs/repartition.run_repartition``) then verifies and publishes as for a repartition.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame as PyDataFrame
from pyspark.sql import functions as F

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.operators import DERIVED_VERSION
from statekit.jobs.hdfs_replay import keyed_frame, source_tasks
from statekit.jobs.raw_rows import partition_key_columns, read_raw_rows, without_selected_keys
from statekit.jobs.staged_writes import (
    KEY_BYTES,
    VALUE_BYTES,
    WrittenPartition,
    each_store,
    staged_rocksdb_partition,
    write_snapshots,
)
from statekit.jobs.state_reader import CHANGELOG_CONF, session_confs, spark_url
from statekit.support.errors import JobFailed
from statekit.writes.target import write_read_view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.state_data import StoreSchema
    from statekit.writes.repartition_plan import RepartitionPlan, StorePlan
    from statekit.writes.staging import Staging

REWRITER = "org.apache.spark.sql.execution.streaming.state.StateRewriter"
_STORE_IN_PLAN = re.compile(r"\[operatorId=(\d+)\]\[storeName=([^\]]*)\]")


class _PlacingTransform:
    """The transform Spark's ``StateRewriter`` calls (through Py4J) with each store's raw
    rows: returns them — or, for an HDFS source, statekit's replay of them — hash-placed
    into the target's partitions."""

    def __init__(self, spark: SparkSession, replay: dict[tuple[int, str], Any] | None,
                 placed_by: dict[tuple[int, str], list[str]], partitions: int,
                 drop: dict[tuple[int, str], str] | None = None):
        self.spark = spark
        self.replay = replay
        self.drop = drop or {}
        """Per store: a predicate over ``key`` (the raw rows' ``partition_key``); the rows
        it selects are not written (``statekit evict`` on transformWithState)."""
        self.placed_by = placed_by
        self.partitions = partitions
        self.error: BaseException | None = None

    def apply(self, jdf: Any) -> Any:
        try:
            return self._place(jdf)._jdf
        except BaseException as error:  # the JVM sees only "Python callback failed"
            self.error = error
            raise

    def _place(self, jdf: Any) -> DataFrame:
        plan = jdf.queryExecution().analyzed().toString()
        found = _STORE_IN_PLAN.search(plan)
        if not found:
            raise JobFailed("cannot tell which state store Spark's rewriter is writing")
        key = (int(found.group(1)), found.group(2))
        placed = self.placed_by.get(key)  # None: transformWithState (Spark's key alone)
        columns = None if placed is None else len(placed)
        original = PyDataFrame(jdf, self.spark)
        if self.replay is None or key not in self.replay:
            rows = original
            if key in self.drop:
                rows = without_selected_keys(rows, self.drop[key])
            by = partition_key_columns(original, columns)
        else:
            rows, by = self._replayed(original, key)
        if not by:  # no grouping key (a global aggregation): its one partition
            return rows.coalesce(1)
        return rows.repartition(self.partitions, *by)

    def _replayed(self, original: DataFrame, key: tuple[int, str]) -> tuple[DataFrame, list]:
        assert self.replay is not None
        frame, exprs = self.replay[key]
        pk_type = original.schema["partition_key"].dataType
        by = [F.expr(e) for e in exprs]
        # the rewriter's writer uses only the bytes and the column family; the key is there
        # because the schemas must be equal
        partition_key = F.struct(*by).cast(pk_type)
        # nullable like the reader's columns (the schemas must be equal; Spark folds a
        # literal condition away, so the condition is on the bytes, which are never null)
        present = F.col(KEY_BYTES).isNotNull()
        rows = frame.select(*(F.when(present, column).alias(name) for name, column in (
            ("partition_key", partition_key), ("key_bytes", F.col(KEY_BYTES)),
            ("value_bytes", F.col(VALUE_BYTES)), ("column_family_name", F.lit("default")))))
        if rows.schema != original.schema:
            raise JobFailed(f"operator {key[0]} store {key[1]}: the replayed rows' schema "
                            f"{rows.schema.simpleString()} differs from Spark's reader's "
                            f"{original.schema.simpleString()} (nullability included)")
        return rows, by

    class Java:
        implements: ClassVar[list[str]] = ["scala.Function1"]


def _hdfs_replay(spark: SparkSession, ckpt: Checkpoint, plan: RepartitionPlan,
                 schemas: dict[tuple[int, str], StoreSchema],
                 placed_by: dict[tuple[int, str], list[str]],
                 storage_options: dict[str, Any]) -> dict[tuple[int, str], Any]:
    """Per store of an HDFS source: its live rows (replayed in executor tasks) and the SQL
    expressions of its partition-key columns."""
    out = {}
    for store in plan.stores:
        key = (store.operator_id, store.store)
        schema = schemas[key]
        shown = ckpt.display(schema.path)
        frame, exprs = keyed_frame(spark, ckpt.location.portable_url, storage_options, plan.codec,
                                    source_tasks(ckpt, *key, plan.last_committed + 1),
                                    schema.file.raw["key"], shown)
        out[key] = (frame, exprs[:len(placed_by[key])])
    return out


def _read_location(ckpt: Checkpoint, plan: RepartitionPlan,
                   staging: Staging) -> tuple[str, str | None]:
    """Where Spark's raw-row reader opens the source: the source itself, or a view of it in
    the staging folder (an HDFS source, or one without operator metadata: see
    :func:`statekit.writes.target.write_read_view`); and the view's relative path."""

    derived = any(m.version == DERIVED_VERSION for m in ckpt.operators.values())
    if plan.provider != "hdfs" and not derived:
        return spark_url(ckpt.location.portable_url), None
    view = write_read_view(ckpt, plan, staging, with_state=plan.provider != "hdfs")
    return spark_url(staging.url.rstrip("/") + "/" + view), view


def rewrite_into_rocksdb(spark: SparkSession, ckpt: Checkpoint, plan: RepartitionPlan,
                         staging: Staging, *, schemas: dict[tuple[int, str], StoreSchema],
                         placed_by: dict[tuple[int, str], list[str]],
                         storage_options: dict[str, Any],
                         replay: dict[tuple[int, str], Any] | None = None,
                         drop: dict[tuple[int, str], str] | None = None
                         ) -> tuple[dict[str, list[WrittenPartition]],
                                    dict[str, list[list[str]]] | None]:
    """Spark's ``StateRewriter`` writes batch N + 1's RocksDB state into the staging folder
    (whose ``offsets/N+1`` must already pin RocksDB and the new partition count). Returns
    what was written and, with checkpoint format v2, the ids of the new state files (for
    ``commits/N+1``). ``replay``: per store, the rows to write instead of the source's
    (a frame with the key and value bytes, and the SQL of its partition-key columns), as
    ``statekit evict`` hands them over; ``drop``: per store, a predicate over ``key.*``
    whose keys' raw rows are left out (evict on transformWithState)."""

    read_from, view = _read_location(ckpt, plan, staging)
    if replay is None and plan.provider == "hdfs":
        replay = _hdfs_replay(spark, ckpt, plan, schemas, placed_by, storage_options)
    transform = _PlacingTransform(spark, replay, placed_by, plan.to_partitions, drop)
    jvm = spark._jvm
    assert jvm is not None
    ensure_callback_server_started(spark.sparkContext._gateway)
    jspark = spark._jsparkSession
    none = getattr(getattr(jvm.scala, "None$"), "MODULE$")
    staging.on_step("spark state rewrite")
    rewriter = getattr(jvm, REWRITER)(
        jspark, plan.last_committed, plan.repartition_batch, spark_url(staging.url),
        jspark.sessionState().newHadoopConf(), jvm.scala.Some(read_from),
        jvm.scala.Some(transform), none)
    try:
        with session_confs(spark, {CHANGELOG_CONF: str(plan.changelog).lower()}):
            ids = rewriter.run()
    except Exception:
        if transform.error is not None:
            raise transform.error from None
        raise
    if view is not None:
        staging.fs.rm(staging.path(view), recursive=True)
    return written_rocksdb(staging, plan), _unique_ids(jvm, ids)


def _unique_ids(jvm: Any, ids: Any) -> dict[str, list[list[str]]] | None:
    """The rewriter's ``Option[Map[operator id, Array[partition][store] of file id]]`` as
    the commit log's ``stateUniqueIds`` (``None`` below checkpoint format v2)."""
    if not ids.isDefined():
        return None
    by_operator = jvm.scala.jdk.javaapi.CollectionConverters.asJava(ids.get())
    return {str(op): [[str(i) for i in stores] for stores in by_operator.get(op)]
            for op in sorted(by_operator.keySet())}


def written_rocksdb(staging: Staging, plan: RepartitionPlan) -> dict[str, list[WrittenPartition]]:
    """Keys and bytes of every staged RocksDB partition at the target's state version."""

    staged = open_checkpoint(staging.url)
    written: dict[str, list[WrittenPartition]] = {}
    for key, instance in sorted(staged.inventory.instances.items()):
        partition, _ = staged_rocksdb_partition(staged, instance, plan.state_version)
        written.setdefault(f"{key[0]}/{key[1]}", []).append(partition)
    return written


def write_hdfs_from_rocksdb(spark: SparkSession, ckpt: Checkpoint, plan: RepartitionPlan,
                            staging: Staging, *, placed_by: dict[tuple[int, str], list[str]],
                            storage_options: dict[str, Any], progress: Any,
                            fail_on: str | None = None) -> dict[str, list[WrittenPartition]]:
    """Every store of a RocksDB source into one HDFS ``.snapshot`` per new partition."""

    read_from, view = _read_location(ckpt, plan, staging)

    def write(store: StorePlan) -> list[WrittenPartition]:
        key = (store.operator_id, store.store)
        progress(f"writing operator {key[0]} store {key[1]} as HDFS snapshots "
                 f"({store.partitions} → {plan.to_partitions} partitions)")
        rows = read_raw_rows(spark, read_from, plan.last_committed, *key)
        by = partition_key_columns(rows, len(placed_by[key]))
        columns = [f"k{i}" for i in range(len(by))]
        frame = rows.select(*(c.alias(name) for c, name in zip(by, columns, strict=True)),
                            F.col("key_bytes").alias(KEY_BYTES),
                            F.col("value_bytes").alias(VALUE_BYTES))
        return write_snapshots(
            frame, [F.col(c) for c in columns], staging_url=staging.url,
            storage_options=storage_options, operator_id=key[0], store=key[1],
            version=plan.state_version, codec=plan.codec, partitions=plan.to_partitions,
            fail_on=fail_on)

    written = {f"{s.operator_id}/{s.store}": w
               for s, w in each_store(plan.stores, write).items()}
    if view is not None:
        staging.fs.rm(staging.path(view), recursive=True)
    return written
