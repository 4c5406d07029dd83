"""The deep path of growth detection: Spark's own state reader, checked against the files.

``statekit growth`` reads the history from files (fast, no JVM). ``--deep`` asks Spark the same
question its own way, so a user can trust the file path on their Spark version:

* where Spark offers a change feed (HDFS, RocksDB with changelog checkpointing): upserts and
  deletes per batch over the retained batches, compared with what the replay counted;
* otherwise (RocksDB without changelogs): the ``statestore`` row count at each retained
  batch, compared with the replayed / ``numKeys`` key count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.jobs.state_analysis import summarize_changes
from statekit.jobs.state_reader import collect, read_changes, read_state, resolve_target
from statekit.state.history import StoreHistory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class BatchCheck:
    batch_id: int
    files: dict[str, int | None]
    spark: dict[str, int]

    @property
    def agree(self) -> bool:
        return all(self.files.get(k) == v for k, v in self.spark.items())


@dataclass(frozen=True)
class DeepCheck:
    """Spark's view of one store's history next to the file path's."""

    operator_id: int
    store: str
    method: str
    """``change-feed``, ``row-count`` or ``skipped``."""
    batches: tuple[BatchCheck, ...]
    note: str | None = None

    @property
    def agree(self) -> bool:
        return all(b.agree for b in self.batches)

    @property
    def mismatches(self) -> list[BatchCheck]:
        return [b for b in self.batches if not b.agree]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agree": self.agree,
                "batches": [{**asdict(b), "agree": b.agree} for b in self.batches]}


def _has_change_feed(history: StoreHistory, ckpt: Checkpoint) -> bool:
    instances = ckpt.inventory.instances_of(history.operator_id, history.store)
    return all(i.of_kind("delta") or i.of_kind("changelog") for i in instances)


def deep_check(spark: SparkSession, ckpt: Checkpoint, history: StoreHistory,
               on_progress: Callable[[str], None] | None = None) -> DeepCheck:
    """Compare one store's file-path history with Spark's reader (see the module docstring)."""
    operator = ckpt.operators.get(history.operator_id)
    if operator is None or operator.state_variables or history.store.startswith("$"):
        return DeepCheck(history.operator_id, history.store, "skipped", (),
                         "transformWithState state variables are compared by the file path "
                         "only" if operator is not None else "no operator metadata")
    store = None if history.store == "default" else history.store
    stats = history.versions
    if _has_change_feed(history, ckpt) and history.method == "replay":
        # (batch, upserts, deletes) of every version with churn counts (all three are known
        # together, or none is)
        churn = [(v.version - 1, v.inserts + v.updates, v.deletes) for v in stats
                 if v.inserts is not None and v.updates is not None]
        if not churn:
            return DeepCheck(history.operator_id, history.store, "skipped", (),
                             "no version with complete churn counts")
        target = resolve_target(ckpt, operator=history.operator_id, store=store)
        if on_progress:
            on_progress(f"change feed of {target.label} from batch {churn[0][0]}")
        feed = summarize_changes(read_changes(spark, target, churn[0][0], churn[-1][0]))
        by_batch = {b.batch_id: b for b in feed}
        checks = []
        for batch, upserts, deletes in churn:
            got = by_batch.get(batch)
            checks.append(BatchCheck(
                batch, {"upserts": upserts, "deletes": deletes},
                {"upserts": got.upserts if got else 0, "deletes": got.deletes if got else 0}))
        return DeepCheck(history.operator_id, history.store, "change-feed", tuple(checks))
    checks = []
    for v in stats:
        target = resolve_target(ckpt, operator=history.operator_id, store=store,
                                batch=v.version - 1)
        if on_progress:
            on_progress(f"counting rows of {target.label} at batch {v.version - 1}")
        # read_state's own errors are already one-line statekit errors; collect translates
        # the count's
        rows = collect(read_state(spark, target).count, f"counting {target.label}")
        checks.append(BatchCheck(v.version - 1, {"keys": v.keys}, {"keys": int(rows)}))
    return DeepCheck(history.operator_id, history.store, "row-count", tuple(checks))
