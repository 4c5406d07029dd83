"""How each state store evolved over its retained versions, rebuilt from the files alone.

Growth detection needs a trajectory — live keys, bytes, churn and key ages at every retained
version — and Spark can only give one version per read (a JVM start plus a full state scan
each). The files hold the whole history already: an HDFS store is its oldest usable snapshot
plus one delta per version, a RocksDB store with changelog checkpointing the same with
changelogs. So this module replays them *once*, forward, in lockstep over all partitions of a
store, and records statistics after every version:

* keys, bytes (key + value), inserts / updates / deletes of the version;
* value-size distribution (mean and percentiles), kept as a histogram of sizes so it costs
  nothing per version;
* key age: for every live key the version it last changed, kept as a histogram too, so "how
  many keys have not changed for N versions" is a prefix sum;
* keys whose flatMapGroupsWithState/applyInPandasWithState timeout is not set.

Big local checkpoints are replayed by worker processes, a group of partitions each, and by
the calling thread (:mod:`statekit.state.workers`); every call has its own workers, so
several analyses may run at once from different threads. Given a runner, the same replay
runs as Spark tasks, one per store instance (``statekit growth --master``).

Memory is bounded by one partition's live keys, not by the store: each worker replays its
partitions one after another, holding each live key of the current one as a 64-bit xxh3
digest mapped to one packed integer (last change, value size, no-timeout bit) — about 100
bytes per key — and dropping them before the next partition. What crosses partitions is
per-version histograms only. The few oldest keys are decoded at the end by re-reading only
the files that last wrote them.

RocksDB stores without a replayable chain fall back to each version's ``numKeys`` (and the SST
bytes it references) from the zip metadata (:mod:`statekit.state.zip_history`): exact counts,
no churn or ages.

A replay is kept in the decode cache (:mod:`statekit.state.decode_cache`): each partition's
result under the identities of the files it read, and the merged store under all of them, so
an unchanged checkpoint is not replayed again and a changed file costs its partition's
replay only. A new batch changes every partition's last version, so it is a new replay.

This module plans a store's replay and assembles its history. What runs in a worker is
:mod:`statekit.state.partition_replay`, counting into :mod:`statekit.state.replay_totals`
and sending back the records of :mod:`statekit.state.replay_records` (the decode cache's
entries too); the timeout column is read as :mod:`statekit.state.timeouts` says. Each sits
below this one, so no two of them import each other; the names callers use are exported from
here as well.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import StoreSchema, file_records, store_schemas
from statekit.formats.schema import StructType
from statekit.formats.unsafe_row import make_decoder
from statekit.formats.values import hex_preview
from statekit.state.decode_cache import DecodeCache, folder
from statekit.state.partition_replay import Replay, ReplayWork, partition_keys
from statekit.state.replay_records import (
    OLDEST_KEYS_SHOWN,
    Candidate,
    GroupResult,
    Unreplayable,
    VersionStats,
    merged_json,
    merged_of,
    result_of,
)
from statekit.state.replay_totals import TOUCH_CAP, key_digest, version_stats
from statekit.state.timeouts import (
    NO_TIMESTAMP,
    TIMEOUT_OPERATORS,
    TimeoutField,
    timeout_reader,
)
from statekit.state.workers import GroupRunner, Progress, map_groups
from statekit.state.zip_history import history_from_zips
from statekit.support.errors import CorruptFile, StatekitError

__all__ = [
    "NO_TIMESTAMP",
    "OLDEST_KEYS_SHOWN",
    "TIMEOUT_OPERATORS",
    "TOUCH_CAP",
    "OldKey",
    "StoreHistory",
    "VersionStats",
    "age_chain",
    "all_histories",
    "default_stale_after",
    "store_history",
    "timeout_reader",
]


@dataclass(frozen=True)
class OldKey:
    """One of the least recently changed live keys, decoded."""

    partition: int
    last_changed: int
    age: int
    key: Any
    value: Any
    key_hex: str


@dataclass(frozen=True)
class StoreHistory:
    """The retained history of one operator/store."""

    operator_id: int
    store: str
    operator_name: str | None
    method: str
    """``replay`` (snapshot + deltas/changelogs), ``zip-metadata`` (RocksDB numKeys only) or
    ``none`` (nothing could be rebuilt; see ``notes``)."""
    partitions: tuple[int, ...]
    versions: tuple[VersionStats, ...]
    partition_keys: dict[int, tuple[int, ...]]
    """Live keys per partition, aligned with ``versions``."""
    timeouts: str
    """``per-key`` (decoded from each value), ``disabled`` (a timeout-capable operator whose
    state stores no timeout: NoTimeout) or ``n/a``."""
    stale_after: int
    history_starts_at: int | None
    """Keys already present at this base version have unknown earlier history: their age is a
    lower bound. ``None`` when the replay started from an empty store."""
    oldest_keys: tuple[OldKey, ...] = ()
    notes: tuple[str, ...] = ()
    damaged: str | None = None
    """Why the history stops before the committed version (a change file missing or
    damaged): the verdict is the one of the history up to there. ``None``: undamaged."""
    touch_counts: tuple[int, ...] | None = None
    """Keys live at the last version that were first inserted after the history's first
    version (the versions of the discovery curve), by the number of versions that wrote
    them: element ``k - 1`` counts the keys written in exactly ``k`` versions, the last one
    ``TOUCH_CAP`` or more. What tells keys that come back from keys seen once (a leak);
    ``None`` when not replayed."""

    def series(self, name: str) -> list[Any]:
        return [getattr(v, name) for v in self.versions]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["partition_keys"] = {str(p): list(k) for p, k in self.partition_keys.items()}
        return data


def _plan(instance: StoreInstance, last_version: int) -> Replay | None:
    """The earliest base from which every version up to ``last_version`` can be rebuilt."""
    changes = {f.version: f for f in instance.of_kind("delta", "changelog")
               if f.version is not None and f.version <= last_version}
    missing = [v for v in range(1, last_version + 1) if v not in changes]
    if not missing:
        return Replay(instance.partition, None, 0, changes)
    need_from = missing[-1]  # every version after the newest gap is present
    for snap in sorted(instance.of_kind("snapshot", "zip"), key=lambda f: f.version or 0):
        if snap.version is not None and need_from <= snap.version <= last_version:
            return Replay(instance.partition, snap, snap.version,
                          {v: f for v, f in changes.items() if v > snap.version})
    return None


def age_chain(instance: StoreInstance, last_version: int) -> list[StateFile]:
    """The files that rebuild ``last_version`` from the earliest possible base (its base
    first, then every change file after it, in order): what tells a key's age furthest
    back. Spark's own load path (:meth:`StoreInstance.files_to_load`) when no older base
    exists."""
    plan = _plan(instance, last_version)
    if plan is None:
        return instance.files_to_load(last_version)
    return ([plan.base] if plan.base is not None else []) + \
        [plan.changes[v] for v in sorted(plan.changes)]


def default_stale_after(history: int) -> int:
    """Versions without change after which a key counts as untouched: a third of the retained
    history, between 2 and 10."""
    return max(2, min(10, history // 3))


def store_history(ckpt: Checkpoint, operator_id: int, store: str, *,
                  stale_after: int | None = None,
                  progress: Callable[[str], None] | None = None,
                  schemas: dict[tuple[int, str], StoreSchema] | None = None,
                  runner: GroupRunner | None = None) -> StoreHistory:
    """Rebuild the retained history of one operator/store (see the module docstring).
    ``schemas``: :func:`store_schemas` of the checkpoint, when the caller has them;
    ``runner``: replay on Spark, one task per store instance (the same results).

    Several calls may run at once in different threads: each carries its own replay job
    and, for big local checkpoints, has worker processes of its own (see
    :func:`statekit.state.workers.map_groups`)."""
    inventory = ckpt.inventory
    instances = inventory.instances_of(operator_id, store)
    operator = ckpt.readable_operators.get(operator_id)
    name = operator.name if operator else None
    schema = (schemas if schemas is not None else store_schemas(ckpt)).get((operator_id, store))
    timeouts, timeout = timeout_reader(schema, name)
    committed = ckpt.last_committed_batch
    last_version = committed + 1 if committed is not None else max(
        (i.latest_version or 0 for i in instances), default=0)
    partitions = tuple(i.partition for i in instances)
    plans = [_plan(i, last_version) for i in instances]
    damaged = None
    if instances and any(p is None for p in plans):
        # the history up to the newest version every partition can still rebuild: a
        # damaged store keeps the verdict its history gives, flagged (statekit doctor says
        # what the damage does to a restart)
        usable = _newest_rebuildable(instances, last_version)
        if usable is not None:
            broken = [i.partition for i, p in zip(instances, plans, strict=True) if p is None]
            damaged = (f"state version {last_version} cannot be rebuilt in partitions "
                       f"{_short(broken)} (a change file is missing); the history ends at "
                       f"version {usable}")
            last_version = usable
            plans = [_plan(i, last_version) for i in instances]
    ready = [p for p in plans if p is not None]
    has_changes = any(i.of_kind("delta", "changelog") for i in instances)
    note = ""
    while last_version and instances and has_changes and len(ready) == len(plans):
        try:
            history = _replay(ckpt, operator_id, store, name, schema, ready, last_version,
                              timeouts, timeout, stale_after, progress, runner)
            return replace(history, damaged=damaged) if damaged else history
        except Unreplayable as why:
            note = f"cannot replay ({why}); "
            break
        except CorruptFile as error:  # a damaged file: the history ends before it
            version = _version_of(ckpt, instances, error.path)
            if version is None or version - 1 < 2:
                raise
            damaged = (f"{error.path} is damaged ({error.message}); the history ends at "
                       f"version {version - 1}")
            last_version = version - 1
            plans = [_plan(i, last_version) for i in instances]
            ready = [p for p in plans if p is not None]
    else:
        broken = [i.partition for i, p in zip(instances, plans, strict=True) if p is None]
        note = (f"partitions {_short(broken)} have no complete delta/changelog chain up to "
                f"version {last_version}; " if broken else "")
    if any(i.of_kind("zip") for i in instances):
        return _from_zips(ckpt, operator_id, store, name, schema, instances, last_version,
                          timeouts, timeout, stale_after,
                          note + "counts come from each zip's numKeys", runner)
    return StoreHistory(operator_id, store, name, "none", partitions, (), {}, timeouts,
                        stale_after or 0, None, (), (note + "no history can be rebuilt",))


def _version_of(ckpt: Checkpoint, instances: list[StoreInstance], shown: str | None
                ) -> int | None:
    """The version of the state file an error names (as the user sees its path)."""
    if shown is None:
        return None
    for instance in instances:
        for file in instance.files:
            if file.version is not None and ckpt.display(file.path) == shown:
                return file.version
    return None


def _newest_rebuildable(instances: list[StoreInstance], last_version: int) -> int | None:
    """The newest version below ``last_version`` every instance can rebuild (from empty or
    a base), with at least two versions of history; ``None`` if there is none."""
    for version in range(last_version - 1, 1, -1):
        if all(_plan(i, version) is not None for i in instances):
            return version
    return None


def _short(items: list[int]) -> str:
    return ", ".join(map(str, items[:8])) + (f" (+{len(items) - 8} more)" if len(items) > 8
                                             else "")


# -- assembling a store's history -------------------------------------------------------------

def _replay(ckpt: Checkpoint, operator_id: int, store: str, name: str | None,
            schema: StoreSchema | None, plans: list[Replay], last_version: int,
            timeouts: str, timeout: TimeoutField | None, stale_after: int | None,
            progress: Progress | None, runner: GroupRunner | None) -> StoreHistory:
    """The replayed history of one store: from the decode cache when every file it reads
    was replayed before — the whole store in one entry, else partition by partition, the
    partitions no entry holds replayed (on Spark, with a runner: everything there)."""
    first = max(min(p.base_version for p in plans), 1)
    start = max(max(p.base_version for p in plans), 1)
    stale = stale_after or default_stale_after(last_version - start + 1)
    cache = DecodeCache.of(ckpt) if runner is None else None
    keys = partition_keys(cache, plans, first, last_version, start, timeout) \
        if cache is not None else {}
    store_key = cache.key("replay-store", first, last_version, start, stale, timeouts,
                          sorted(keys.items())) \
        if cache is not None and len(keys) == len(plans) else None
    partition_index = {p.partition: i for i, p in enumerate(plans)}
    kept = merged_of(cache.get(store_key)) if cache is not None and store_key else None
    if kept is None:
        results: list[GroupResult] = []
        todo = plans
        if cache is not None and keys:
            held = {p.partition: result_of(cache.get(keys[p.partition]))
                    for p in plans if p.partition in keys}
            results = [r for r in held.values() if r is not None]
            todo = [p for p in plans if held.get(p.partition) is None]
        if todo:
            results += _replay_groups(ckpt, operator_id, store, todo, first, last_version,
                                      start, timeout, progress, runner, keys or None)
        versions = tuple(version_stats(first_seen, [r[0][k] for r in results], stale,
                                       timeouts == "per-key")
                         for k, first_seen in enumerate(range(start, last_version + 1)))
        per_partition: dict[int, tuple[int, ...]] = {}
        touched = [0] * TOUCH_CAP
        for _, counts, _, touches in results:
            per_partition.update({p: tuple(c) for p, c in counts.items()})
            touched = [a + b for a, b in zip(touched, touches, strict=True)]
        candidates = heapq.nsmallest(OLDEST_KEYS_SHOWN, (c for r in results for c in r[2]))
        found = _oldest_found(ckpt, plans, partition_index, candidates)
        kept = versions, dict(sorted(per_partition.items())), tuple(touched), candidates, found
        if cache is not None and store_key:
            cache.put(store_key, merged_json(kept))
    versions, per_partition, touch_counts, candidates, found = kept
    base_known = None if all(p.base is None for p in plans) else \
        max(p.base_version for p in plans)
    oldest = tuple(_decoded(schema, ckpt, partition, changed, last_version - changed,
                            *found[digest])
                   for changed, partition, digest in candidates if digest in found)
    return StoreHistory(operator_id, store, name, "replay",
                        tuple(p.partition for p in plans), versions, per_partition, timeouts,
                        stale, base_known, oldest, touch_counts=touch_counts)


def _replay_groups(ckpt: Checkpoint, operator_id: int, store: str, plans: list[Replay],
                   first: int, last_version: int, start: int, timeout: TimeoutField | None,
                   progress: Progress | None, runner: GroupRunner | None,
                   keys: dict[int, str] | None) -> list[GroupResult]:
    """Replay ``plans`` in worker processes (or on Spark): one result per group."""
    size = sum(f.size for p in plans for f in [*p.changes.values(), p.base] if f is not None)
    label = f"operator {operator_id} {store}: "
    labelled: Progress | None = None
    if progress is not None:
        say = progress

        def labelled(message: str) -> None:
            say(label + message)

        say(f"{label}replaying {len(plans)} partitions up to version {last_version}")
    return map_groups(ckpt, plans, size,
                      ReplayWork(first, last_version, start, timeout, keys,
                                 str(folder()) if keys else None), labelled, runner)


def _oldest_found(ckpt: Checkpoint, plans: list[Replay], partition_index: dict[int, int],
                  candidates: list[Candidate]) -> dict[int, tuple[bytes, bytes]]:
    """The least recently changed live keys' bytes (key, value) by digest: re-read only the
    files that wrote them (decoded by the caller)."""
    wanted: dict[tuple[int, int], set[int]] = {}
    for changed, partition, digest in candidates:
        wanted.setdefault((partition_index[partition], changed), set()).add(digest)
    found: dict[int, tuple[bytes, bytes]] = {}
    for (i, changed), digests in wanted.items():
        plan = plans[i]
        file = plan.base if plan.base is not None and changed == plan.base_version \
            else plan.changes.get(changed)
        if file is None:
            continue
        for record in file_records(ckpt, file):
            if record.op == "put" and key_digest(record.key) in digests:
                found[key_digest(record.key)] = (record.key, record.value or b"")
    return found


def _from_zips(ckpt: Checkpoint, operator_id: int, store: str, name: str | None,
               schema: StoreSchema | None, instances: list[StoreInstance], last_version: int,
               timeouts: str, timeout: TimeoutField | None, stale_after: int | None,
               note: str, runner: GroupRunner | None = None) -> StoreHistory:
    """A RocksDB store's history from its zips (:func:`history_from_zips`), its unchanged
    keys decoded."""
    kept = history_from_zips(ckpt, instances, last_version, timeouts, timeout, stale_after,
                             runner)
    versions, per_partition, stale, first, notes, unchanged, damaged = kept
    oldest = tuple(_decoded(schema, ckpt, p, first, versions[-1].version - first, k, v)
                   for p, k, v in unchanged) if first is not None else ()
    history = StoreHistory(operator_id, store, name, "zip-metadata",
                           tuple(i.partition for i in instances), versions, per_partition,
                           timeouts, stale, first, oldest, (note, *notes))
    return replace(history, damaged=damaged) if damaged else history


def _decoded(schema: StoreSchema | None, ckpt: Checkpoint, partition: int, changed: int,
             age: int, key: bytes, value: bytes) -> OldKey:
    shown = ckpt.display(ckpt.location.root)
    try:
        decoded_key = make_decoder(schema.key, path=shown)(key) if schema and schema.key \
            else None
        decoded_value = make_decoder(schema.value, path=shown)(value) if schema and \
            isinstance(schema.value, StructType) and not schema.has_column_families else None
    except StatekitError:
        decoded_key = decoded_value = None
    return OldKey(partition, changed, age, decoded_key, decoded_value, hex_preview(key))


def all_histories(ckpt: Checkpoint, *, operator: int | None = None,
                  stale_after: int | None = None,
                  progress: Callable[[str], None] | None = None,
                  runner: GroupRunner | None = None) -> list[StoreHistory]:
    """The history of every operator/store (or one operator's); ``runner``: on Spark."""
    inventory = ckpt.inventory
    schemas = store_schemas(ckpt)  # every schema file read once, not once per store
    return [store_history(ckpt, op, store, stale_after=stale_after, progress=progress,
                          schemas=schemas, runner=runner)
            for op in inventory.operator_ids if operator is None or op == operator
            for store in inventory.stores(op)]
