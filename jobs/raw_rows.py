"""A RocksDB checkpoint's raw state rows through Spark's own ``statestore`` reader — every
column family, as Spark's rewriter reads them — and their grouping key, for the jobs that
place, filter or compare them (repartition, migrate, evict, rollback).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from statekit.jobs.connect import is_connect
from statekit.support.errors import JobFailed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


STATE_SOURCE_OPTIONS = "org.apache.spark.sql.execution.datasources.v2.state.StateSourceOptions"
READ_ALL_COLUMN_FAMILIES = "_readAllColumnFamilies"
"""Spark 4.3's value of ``StateSourceOptions.INTERNAL_ONLY_READ_ALL_COLUMN_FAMILIES``."""
def read_raw_rows(spark: SparkSession, path: str, batch: int, operator_id: int,
                  store: str) -> DataFrame:
    """A RocksDB checkpoint's rows of one store as Spark's reader hands them to its own
    rewriter: ``(partition_key, key_bytes, value_bytes, column_family_name)``."""
    return (spark.read.format("statestore").option("path", path).option("batchId", batch)
            .option("operatorId", operator_id).option("storeName", store)
            .option(_read_all_option(spark), "true").load())


def _read_all_option(spark: SparkSession) -> str:
    """The reader's internal option for raw rows, as this Spark names it (the constant its
    rewriter uses)."""
    if is_connect(spark):  # no JVM here to ask: the name Spark 4.x uses
        return READ_ALL_COLUMN_FAMILIES
    options = getattr(spark._jvm, STATE_SOURCE_OPTIONS)
    try:
        return str(options.INTERNAL_ONLY_READ_ALL_COLUMN_FAMILIES())
    except Exception:  # py4j: no such method on this Spark
        return READ_ALL_COLUMN_FAMILIES


def without_selected_keys(raw: DataFrame, predicate: str) -> DataFrame:
    """Raw rows (every column family) minus those whose grouping key the predicate over
    ``key.*`` selects; the columns unchanged."""

    keep = ~F.coalesce(F.expr(predicate), F.lit(False))
    return (raw.withColumn("key", F.col("partition_key")).where(keep)
            .select(*raw.columns))


def partition_key_columns(frame: DataFrame, count: int | None) -> list:
    """The fields of the raw rows' ``partition_key`` (Spark's extraction of the grouping
    key), checked against the ``count`` statekit places the store by (None: transformWithState,
    placed by Spark's extraction alone)."""

    key_type = frame.schema["partition_key"].dataType
    names = key_type.names if isinstance(key_type, StructType) else []
    if count is not None and len(names) != count:
        raise JobFailed(f"Spark's reader places this store by {len(names)} key columns "
                        f"({', '.join(names)}), statekit by {count}: refusing to guess")
    return [F.col("partition_key").getField(name) for name in names]


