"""Run a rollback: copy into staging, prove the state equal through Spark, publish.

The copy itself is pure Python (:func:`statekit.writes.rollback.write_rollback`). The
proof is Spark's: the ``statestore`` reader (transformWithState: its raw rows of every column
family) must find the same rows at batch B in the target as in the source, per operator and
store, before anything is published. Without Spark (``check=False``) the copy is still
staged and published only when complete.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from statekit.checkpoint.operators import JOIN_STORES
from statekit.jobs.raw_rows import read_raw_rows
from statekit.jobs.staged_writes import StoreCheck, point_schemas_at_target, staged_job
from statekit.jobs.state_reader import (
    StateTarget,
    read_state,
    reader_confs,
    session_confs,
    spark_path,
    spark_url,
)
from statekit.support.errors import JobFailed
from statekit.writes.partition_key import SPARK_KEYED_OPERATORS
from statekit.writes.rollback import write_rollback

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.writes.rollback import RollbackPlan
    from statekit.writes.staging import Staging


@dataclass(frozen=True)
class RollbackResult:
    plan: RollbackPlan
    checks: tuple[StoreCheck, ...] | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "seconds": round(self.seconds, 3),
                "verification": None if self.checks is None else
                {"ok": all(c.ok for c in self.checks),
                 "stores": [asdict(c) for c in self.checks]}}


def run_rollback(spark: SparkSession | None, ckpt: Checkpoint, plan: RollbackPlan,
                 staging: Staging, *, progress: Callable[[str], None] = lambda _m: None
                 ) -> RollbackResult:
    """Stage, verify (when ``spark`` is given) and publish the rollback ``plan``; on any
    failure the staging folder is removed and nothing is published."""

    started = time.perf_counter()
    with staged_job(spark, ckpt, staging, "rollback"):
        progress(f"copying {len(plan.copied)} files")
        last = write_rollback(ckpt, plan, staging)
        checks = None
        if spark is not None:
            progress("verifying through Spark's state readers")
            checks = same_state(spark, ckpt, spark_url(staging.url), plan.batch)
            bad = [c for c in checks if not c.ok]
            if bad:
                raise JobFailed("verification failed, nothing published: " + "; ".join(
                    f"operator {c.operator_id} store {c.store}: {c.missing} rows missing, "
                    f"{c.extra} extra" for c in bad), path=plan.target)
        point_schemas_at_target(ckpt, staging, plan.target)
        progress("publishing")
        staging.publish(last=last)
    return RollbackResult(plan, checks, time.perf_counter() - started)


def _has_schema(ckpt: Checkpoint, op_id: int, store: str) -> bool:
    """Whether the store has the schema files Spark's state reader needs (a join's reader
    reads the schema of its side's other store too: all of them, then)."""
    if ckpt.inventory.meta("schema-v3", op_id):
        return True
    stores = ckpt.inventory.stores(op_id) if store in JOIN_STORES else [store]
    have = {m.store for m in ckpt.inventory.meta("schema", op_id) if m.partition == 0}
    return all(s in have for s in stores)


def _has_operator_metadata(ckpt: Checkpoint, op_id: int) -> bool:
    return bool(ckpt.inventory.meta("operator-metadata", op_id)
                or ckpt.inventory.meta("operator-metadata-v2", op_id))


def same_state(spark: SparkSession, ckpt: Checkpoint, target_path: str, batch: int
               ) -> tuple[StoreCheck, ...]:
    """Every store's rows at ``batch``, source against target, as multisets."""

    source_path = spark_path(ckpt)

    def rows(path: str, op_id: int, name: str, store: str) -> DataFrame:
        if name in SPARK_KEYED_OPERATORS:  # every column family, timers included
            return read_raw_rows(spark, path, batch, op_id, store).select(
                "column_family_name", "key_bytes", "value_bytes")
        frame = read_state(spark, StateTarget(path, op_id, name, store, batch_id=batch))
        return frame.select(F.to_json(F.struct("key", "value")).alias("row"))

    out = []
    with session_confs(spark, reader_confs(ckpt)):
        for op_id, meta in sorted(ckpt.operators.items()):
            for store in ckpt.inventory.stores(op_id):
                if not _has_schema(ckpt, op_id, store) or not _has_operator_metadata(
                        ckpt, op_id):
                    # Spark's reader needs the schema and operator metadata files (without
                    # them it reads a session window's keys in another format); the restart
                    # writes them again. The store's files were copied byte for byte:
                    # nothing to compare.
                    continue
                src = rows(source_path, op_id, meta.name, store)
                tgt = rows(target_path, op_id, meta.name, store)
                out.append(StoreCheck.compare(op_id, store, src, tgt))
    return tuple(out)
