"""What ``statekit evict`` removes, from which stores — and every reason to refuse (no JVM).

Spark offers one remedy for leaked or poisoned state: delete the checkpoint and reprocess.
``statekit evict`` instead writes a NEW checkpoint whose state is the source's minus the
selected rows, by the same protocol as a repartition (:mod:`statekit.writes.repartition_plan`): the
target gets batch N + 1 with N's offsets and the *same* partition count, and state version
N + 2 in every partition; the source is only read.

A selection is up to three narrowing conditions, each a Spark SQL predicate over the rows as
Spark's ``statestore`` reader shows them (``key.*``, ``value.*``), so ``statekit state``
output is what a user writes them against:

* ``--where SQL``: any predicate (poison keys, a tenant, a bad deploy's keys);
* ``--stale-after K``: keys unchanged for at least K state versions — the key age
  ``statekit growth`` reports (:mod:`statekit.state.history`), carried as the column
  :data:`CHANGED_AT` (the version that last wrote the key) beside ``key`` and ``value``;
* ``--expired`` / ``--no-timeout``: (flat)MapGroupsWithState / applyInPandasWithState rows
  whose event-time timeout is behind the watermark the next batch runs with (``commits/N``'s
  ``nextBatchWatermarkMs``: Spark would fire it at the next batch), or that carry no timeout
  (never fire: the leak of a query without timeouts). Together they select either.

The conditions narrow each other (AND). A store the selection cannot apply to keeps every row.

Operators: removing a row is meaningful where a row is one self-contained key — an
aggregation's partial aggregate (its window then starts again if more data arrives), a
dropDuplicates key (a duplicate would then pass once more), a session, a
(flat)MapGroupsWithState/applyInPandasWithState group's state. A stream-stream join is
refused: each side keeps a key's rows in two stores that must agree (``keyToNumValues``
counts the rows ``keyWithIndexToValue`` holds at indexes 0..count-1), so removing rows from
either breaks the other — Spark then fails or silently misses matches; the join's watermark
is the way to evict its state.

transformWithState keeps one column family per state variable (value, list, map state),
plus its timers and TTL indexes, all keyed by the grouping key (a map state's key adds the
user key, a timer's the expiry time). Removing *part* of a key's rows would leave a timer
firing for a key whose state is gone, or a TTL index entry pointing at nothing, so statekit
removes whole grouping keys: ``--where`` sees ``key.*`` (the grouping key, as Spark's
raw-row reader extracts it from every column family) and every row of a selected key goes,
in every column family. Key ages are not tracked across column families (``--stale-after``
is refused) and its timers are its own (``--expired`` does not apply): its ``ttlConfig`` is
the way to bound its state by age.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.state.history import NO_TIMESTAMP, TIMEOUT_OPERATORS, timeout_reader
from statekit.support.errors import BadInput, UnsupportedFormat
from statekit.writes.partition_key import JOIN, SPARK_KEYED_OPERATORS, operator_label
from statekit.writes.repartition_plan import STATE_REWRITER, RepartitionPlan, plan_repartition

CHANGED_AT = "__statekit_changed_at"
"""The column holding the state version that last wrote a row's key."""
TIMEOUT_COLUMN = "value.timeoutTimestamp"
SAMPLE_ROWS = 10

JOIN_REFUSAL = (
    "a stream-stream join keeps each side's rows in two stores that must agree "
    "(keyToNumValues counts the rows keyWithIndexToValue holds at indexes 0..count-1): "
    "removing rows from either breaks the other, and Spark then fails or silently misses "
    "matches; let the join's watermark evict its state, or pass --operator to evict from "
    "another operator of this query")
TWS_STALE_REFUSAL = (
    "--stale-after: statekit does not track key ages across transformWithState's column "
    "families (state variables, timers, TTL indexes); select its keys with --where over "
    "key.* (the grouping key), or bound its state by age with its ttlConfig")


@dataclass(frozen=True)
class Selection:
    """What the user asked to remove."""

    where: str | None = None
    stale_after: int | None = None
    expired: bool = False
    no_timeout: bool = False
    operator: int | None = None
    """Only this operator's stores (None: every operator the selection applies to)."""

    @property
    def by_timeout(self) -> bool:
        return self.expired or self.no_timeout

    def describe(self) -> str:
        parts = []
        if self.where:
            parts.append(f"where {self.where}")
        if self.stale_after is not None:
            parts.append(f"unchanged for ≥ {self.stale_after} versions")
        if self.by_timeout:
            parts.append(" or ".join(p for p, on in (
                ("timeout behind the watermark", self.expired),
                ("no timeout set", self.no_timeout)) if on))
        return " and ".join(parts)


@dataclass(frozen=True)
class StoreSelection:
    """One store's rows to remove, as a predicate over ``key``, ``value`` and
    :data:`CHANGED_AT` (``"false"``: the store is copied whole)."""

    operator_id: int
    operator_name: str
    store: str
    predicate: str
    why_untouched: str | None = None
    """Why the selection does not apply to this store (None: it does)."""
    whole_keys: bool = False
    """transformWithState: the rows are Spark's raw rows of every column family, ``key``
    their grouping key; a selected key goes from all of them."""

    @property
    def touched(self) -> bool:
        return self.why_untouched is None


@dataclass(frozen=True)
class EvictPlan:
    base: RepartitionPlan
    """The rewrite every evict is: the source's state, same provider and partition count,
    at batch N + 1 / state version N + 2 of the new checkpoint."""
    selection: Selection
    stores: tuple[StoreSelection, ...]
    watermark_ms: int | None
    """The watermark ``--expired`` compares timeouts with (None: not used)."""
    stale_before: int | None
    """``--stale-after``: rows whose key last changed at this version or earlier go."""
    removed: dict[str, list[int]] = field(default_factory=dict)
    """Filled by the Spark job: per ``op/store``, rows removed in each partition."""
    sample: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Filled by the Spark job: per ``op/store``, a few removed rows, decoded."""

    @property
    def jvm_writer(self) -> str | None:
        """What writes the kept rows inside Spark's JVM (no Spark Connect path), or None:
        RocksDB state goes through Spark's state rewriter, HDFS snapshots through executor
        tasks over DataFrames."""
        return STATE_REWRITER if self.base.provider == "rocksdb" else None

    @property
    def source(self) -> str:
        return self.base.source

    @property
    def target(self) -> str:
        return self.base.target

    @property
    def needs_age(self) -> bool:
        return self.stale_before is not None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target,
                "selection": {"where": self.selection.where,
                              "stale_after": self.selection.stale_after,
                              "expired": self.selection.expired,
                              "no_timeout": self.selection.no_timeout,
                              "operator": self.selection.operator,
                              "described": self.selection.describe()},
                "last_committed": self.base.last_committed,
                "new_batch": self.base.repartition_batch,
                "state_version": self.base.state_version,
                "partitions": self.base.to_partitions, "provider": self.base.provider,
                "watermark_ms": self.watermark_ms, "stale_before": self.stale_before,
                "stores": [{"operator_id": s.operator_id, "operator": s.operator_name,
                            "store": s.store, "predicate": s.predicate,
                            "untouched_because": s.why_untouched} for s in self.stores],
                "removed": self.removed, "removed_total": sum(map(sum, self.removed.values())),
                "sample": self.sample, "notes": list(self.base.notes)}


def _timeout_predicate(selection: Selection, has_timeout_column: bool,
                       watermark_ms: int | None) -> str:
    """The rows ``--expired`` / ``--no-timeout`` select in a timeout operator's store."""
    parts = []
    if selection.expired and has_timeout_column and watermark_ms is not None:
        parts.append(f"({TIMEOUT_COLUMN} <> {NO_TIMESTAMP} AND "
                     f"{TIMEOUT_COLUMN} < {watermark_ms})")
    if selection.no_timeout:
        parts.append(f"({TIMEOUT_COLUMN} IS NULL OR {TIMEOUT_COLUMN} = {NO_TIMESTAMP})"
                     if has_timeout_column else "true")
    return " OR ".join(parts) or "false"


def store_predicate(selection: Selection, *, timeout_operator: bool,
                    has_timeout_column: bool, watermark_ms: int | None,
                    stale_before: int | None) -> str:
    """One store's selection as one Spark SQL predicate (the conditions ANDed)."""
    parts = []
    if selection.where:
        parts.append(f"({selection.where})")
    if stale_before is not None:
        parts.append(f"({CHANGED_AT} <= {stale_before})")
    if selection.by_timeout:
        parts.append(f"({_timeout_predicate(selection, has_timeout_column, watermark_ms)})"
                     if timeout_operator else "false")
    return " AND ".join(parts) or "false"


def next_watermark(ckpt: Checkpoint, batch: int) -> int | None:
    """The watermark batch ``batch + 1`` runs with: ``commits/<batch>``'s
    ``nextBatchWatermarkMs`` (Spark's own record of it), else ``offsets/<batch>``'s."""
    commit = ckpt.commit(batch)
    if commit.next_watermark_ms is not None:
        return commit.next_watermark_ms
    return ckpt.offset(batch).watermark_ms


def plan_evict(ckpt: Checkpoint, target: Location, selection: Selection, *,
               allow_uncommitted: bool = False, force: bool = False,
               now_ms: float | None = None, dry_run: bool = False) -> EvictPlan:
    """The plan to write ``ckpt`` minus the ``selection`` into ``target`` (``dry_run``: the
    write-only refusals are notes, as for :func:`plan_repartition`).

    Raises
    ------
    BadInput
        No condition given, or ``--operator`` names no operator of the checkpoint.
    UnsupportedFormat
        The selection would touch a join, ``--stale-after`` a transformWithState, or
        ``--expired`` /
        ``--no-timeout`` with no operator that has timeouts.
    UnsafeOperation
        As for a repartition: uncommitted last batch, live-looking query, non-empty target.
    """
    url = ckpt.location.url
    if not (selection.where or selection.stale_after is not None or selection.by_timeout):
        raise BadInput("nothing selected: pass --where, --stale-after, --expired or "
                       "--no-timeout", path=url)
    if selection.where is not None and not selection.where.strip():
        raise BadInput("--where is empty", path=url)
    if selection.stale_after is not None and selection.stale_after < 1:
        raise BadInput("--stale-after must be at least 1", path=url)
    base = plan_repartition(ckpt, target, None, allow_uncommitted=allow_uncommitted,
                            force=force, now_ms=now_ms, same_partitions=True,
                            dry_run=dry_run)
    operators = ckpt.operators
    if selection.operator is not None and selection.operator not in operators:
        raise BadInput(f"--operator {selection.operator}: the checkpoint's operators are "
                       f"{', '.join(map(str, sorted(operators)))}", path=url)
    chosen = {op: meta for op, meta in operators.items()
              if selection.operator is None or op == selection.operator}
    if selection.by_timeout and not any(m.name in TIMEOUT_OPERATORS for m in chosen.values()):
        raise UnsupportedFormat(
            "--expired and --no-timeout apply to (flat)MapGroupsWithState / "
            "applyInPandasWithState state; "
            + ("operator " + str(selection.operator) if selection.operator is not None
               else "this checkpoint") + " has none", path=url)
    last = base.last_committed
    watermark = next_watermark(ckpt, last) if selection.expired else None
    stale_before = (last + 1 - selection.stale_after if selection.stale_after is not None
                    else None)
    from statekit.checkpoint.state_data import store_schemas

    schemas = store_schemas(ckpt)
    stores = []
    for store in base.stores:
        meta = operators[store.operator_id]
        label = operator_label(meta.name)
        why = None
        if store.operator_id not in chosen:
            why = f"not operator {selection.operator}"
        elif selection.by_timeout and meta.name not in TIMEOUT_OPERATORS:
            why = f"{label} state has no timeouts"  # ANDed: nothing of it is selected
        if why is None and meta.name == JOIN:
            raise UnsupportedFormat(f"operator {store.operator_id} ({label}): {JOIN_REFUSAL}",
                                    path=url)
        if why is None and meta.name in SPARK_KEYED_OPERATORS and \
                selection.stale_after is not None:
            raise UnsupportedFormat(f"operator {store.operator_id} ({label}): "
                                    f"{TWS_STALE_REFUSAL}", path=url)
        mode, _ = timeout_reader(schemas.get((store.operator_id, store.store)), meta.name)
        predicate = "false" if why else store_predicate(
            selection, timeout_operator=meta.name in TIMEOUT_OPERATORS,
            has_timeout_column=mode == "per-key", watermark_ms=watermark, stale_before=stale_before)
        stores.append(StoreSelection(store.operator_id, label, store.store, predicate, why,
                                     whole_keys=meta.name in SPARK_KEYED_OPERATORS))
    return EvictPlan(base, selection, tuple(stores), watermark, stale_before)
