"""What a repartition into a new checkpoint will read and write — and every reason to refuse.

A stateful query's shuffle-partition count is pinned in its offset log; changing it means
rewriting its state. statekit never does that in place: it plans a *new* checkpoint. This
module decides, from the source's files alone (no JVM), whether that is safe and what it
takes:

* the last committed batch ``N``: the target gets a repartition batch ``N + 1`` (offsets with
  N's source offsets and the new partition count, and a commit) and state version ``N + 2``
  for every new partition — Spark's own convention for its in-place repartition;
* per operator and store: the files the source loads at version ``N + 1`` (what the job
  reads), their bytes and an estimate of the keys;
* the refusals, each with the reason and nothing written: the same partition count, an
  uncommitted last batch (unless allowed: then the plan starts from the last committed one),
  a query that looks live, an unsupported provider, codec or operator, a target that exists
  and is not empty.

Keys per *new* partition (the skew) depend on Spark's hash of each key; the Spark job fills
them in (``jobs/repartition.py``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.support.errors import UnsafeOperation, UnsupportedFormat
from statekit.writes.partition_key import (
    PREFIX_KEY_OPERATORS,
    SPARK_KEYED_OPERATORS,
    WHOLE_KEY_OPERATORS,
    operator_label,
    partition_fields,
)

#: Operators whose state only a RocksDB target can hold, and why.
ROCKSDB_ONLY_OPERATORS = {
    name: f"{label} keeps one column family per state variable, which only RocksDB has"
    for name, label in SPARK_KEYED_OPERATORS.items()}
SUPPORTED_PROVIDERS = ("hdfs", "rocksdb")
SUPPORTED_CODECS = ("lz4", "zstd")
JVM_START_S = 8.0
"""A local Spark session's start on the reference machine."""
KEYS_PER_S = {("hdfs", True): 20_000.0, ("hdfs", False): 44_000.0,
              ("rocksdb", True): 25_000.0, ("rocksdb", False): 80_000.0}
"""Keys per second of the job, by provider and with/without verification, at 1M keys on 2
cores (``benchmarks/bench_repartition.py``); it scales with the cluster's cores."""
LIVE_INTERVALS = 3
"""A batch started within this many typical trigger intervals of now looks live."""
LIVE_MIN_S = 120.0
"""... and never less than this many seconds."""


@dataclass(frozen=True)
class StorePlan:
    operator_id: int
    operator_name: str
    store: str
    partitions: int
    files: int
    """State files the source loads at version N + 1 (snapshot + deltas, zip + SSTs …)."""
    bytes: int
    keys: int | None
    """Keys at version N + 1 when the files say (RocksDB zip metadata), else None."""


STATE_REWRITER = "Spark's state rewriter (StateRewriter)"
"""Writes RocksDB state files from rows, inside Spark's JVM."""


@dataclass(frozen=True)
class RepartitionPlan:
    source: str
    target: str
    provider: str
    codec: str
    from_partitions: int
    to_partitions: int
    last_committed: int
    """N: the batch whose state is repartitioned."""
    stores: tuple[StorePlan, ...]
    copied_logs: tuple[str, ...]
    """Source files copied verbatim (relative paths): metadata, offsets and commits up to N,
    sources/, schema files."""
    notes: tuple[str, ...] = ()
    keys_per_partition: dict[str, list[int]] = field(default_factory=dict)
    """Filled by the Spark job: per ``op/store``, keys in each new partition."""
    to_provider: str | None = None
    """``statekit migrate``: the provider the target's state is written for (None: the
    source's)."""
    changelog: bool = False
    """``statekit migrate --to rocksdb --changelog``: the target is written, and meant to be
    restarted, with RocksDB changelog checkpointing."""
    spark_keyed_operators: tuple[int, ...] = ()
    """Operators (transformWithState) whose rows are placed by the grouping key Spark's
    raw-row reader extracts: written by Spark's state rewriter, verified on raw rows."""

    @property
    def target_provider(self) -> str:
        return self.to_provider or self.provider

    @property
    def migrates(self) -> bool:
        """Whether the target's provider differs from the source's."""
        return self.target_provider != self.provider

    @property
    def jvm_writer(self) -> str | None:
        """The part of Spark that writes this plan's state inside its JVM, driven through
        py4j — so the write needs a JVM in statekit's process and has no Spark Connect path
        — or None: HDFS snapshots are written by executor tasks over DataFrames, which run
        the same over Connect."""
        if self.target_provider != "rocksdb":
            return None
        if self.migrates or self.spark_keyed_operators:
            return STATE_REWRITER
        return "Spark's offline repartition (its streaming checkpoint manager)"

    @property
    def repartition_batch(self) -> int:
        return self.last_committed + 1

    @property
    def state_version(self) -> int:
        """The version every new partition's state is written at (loaded by batch N + 2)."""
        return self.last_committed + 2

    @property
    def read_bytes(self) -> int:
        return sum(s.bytes for s in self.stores)

    @property
    def files_to_write(self) -> int:
        """State files (one per new partition and store) plus the copied and new logs."""
        return self.to_partitions * len(self.stores) + len(self.copied_logs) + 2

    def bytes_per_partition(self) -> dict[str, list[int]]:
        """Per ``op/store``: bytes each new partition will hold, from its key count and the
        source's bytes per key (the files it loads ÷ its keys: an upper bound for HDFS,
        whose deltas repeat updated keys)."""
        out = {}
        for store in self.stores:
            counts = self.keys_per_partition.get(f"{store.operator_id}/{store.store}")
            if not counts or not sum(counts):
                continue
            per_key = store.bytes / sum(counts)
            out[f"{store.operator_id}/{store.store}"] = [round(c * per_key) for c in counts]
        return out

    def estimate(self, verify: bool = True) -> dict[str, float | None]:
        """Keys, bytes to write and seconds, from the dry run's counts (else the files')."""
        keys = sum(sum(c) for c in self.keys_per_partition.values()) if \
            self.keys_per_partition else None
        if keys is None and all(s.keys is not None for s in self.stores):
            keys = sum(s.keys or 0 for s in self.stores)
        rate = KEYS_PER_S[(self.target_provider, verify)]
        seconds = None if keys is None else JVM_START_S + keys / rate
        return {"keys": keys, "bytes_to_write": float(self.read_bytes),
                "seconds": seconds}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(repartition_batch=self.repartition_batch, state_version=self.state_version,
                    read_bytes=self.read_bytes, files_to_write=self.files_to_write,
                    target_provider=self.target_provider, migrates=self.migrates,
                    estimate=self.estimate(), bytes_per_partition=self.bytes_per_partition())
        return data


def check_operators(ckpt: Checkpoint, target_provider: str = "rocksdb") -> None:
    """Refuse operators whose partition key statekit cannot place correctly, or whose state
    ``target_provider`` cannot hold."""
    if not ckpt.operators:
        raise UnsupportedFormat("has no stateful operator metadata (state/<op>/_metadata): "
                                "nothing to repartition, or written by a Spark older than 3.5",
                                path=ckpt.location.url)
    for op_id, meta in ckpt.operators.items():
        if meta.name in ROCKSDB_ONLY_OPERATORS and target_provider != "rocksdb":
            raise UnsupportedFormat(f"operator {op_id} is {meta.name}: not supported with the "
                                    f"{target_provider} provider — "
                                    f"{ROCKSDB_ONLY_OPERATORS[meta.name]}; nothing was written",
                                    path=ckpt.location.url)
        if meta.name not in WHOLE_KEY_OPERATORS and meta.name not in PREFIX_KEY_OPERATORS \
                and meta.name not in SPARK_KEYED_OPERATORS:
            raise UnsupportedFormat(f"operator {op_id} is {meta.name}, which statekit does not "
                                    "know how to partition; nothing was written",
                                    path=ckpt.location.url)


def looks_live(ckpt: Checkpoint, now_ms: float) -> str | None:
    """Why the query looks like it is running (a recent batch), or None."""
    batches = ckpt.planned_batches[-12:]
    readable = ckpt.ledger.offsets
    stamps = [ms for b in batches if b in readable and (ms := readable[b].timestamp_ms)]
    if not stamps:
        return None
    gaps = sorted(b - a for a, b in itertools.pairwise(stamps) if b > a)
    interval = gaps[len(gaps) // 2] if gaps else 0
    window = max(LIVE_MIN_S * 1000, LIVE_INTERVALS * interval)
    age = now_ms - stamps[-1]
    if age < window:
        return (f"its newest batch started {age / 1000:.0f} s ago (within "
                f"{window / 1000:.0f} s): the query looks live")
    return None


def target_is_empty(target: Location) -> bool:
    try:
        if not target.fs.exists(target.root):
            return True
        return not target.fs.ls(target.root, detail=False)
    except FileNotFoundError:
        return True


def plan_repartition(ckpt: Checkpoint, target: Location, partitions: int | None, *,
                     to_provider: str | None = None, changelog: bool = False,
                     allow_uncommitted: bool = False, force: bool = False,
                     now_ms: float | None = None,
                     same_partitions: bool = False, dry_run: bool = False) -> RepartitionPlan:
    """The plan to repartition ``ckpt`` into ``target`` with ``partitions`` partitions, and
    (``statekit migrate``) to move its state to provider ``to_provider`` (``partitions``
    None: keep the source's count). ``same_partitions``: the same count and provider is the
    point (``statekit evict`` rewrites the state with rows removed). ``dry_run``: nothing
    will be written, so what only a write must not do (a live-looking query, an uncommitted
    last batch, a target with content) becomes a note instead of a refusal.

    Raises
    ------
    UnsafeOperation
        Nothing to change, uncommitted last batch, live-looking query, non-empty target.
    UnsupportedFormat
        Provider, codec or operator statekit cannot repartition or migrate.
    """
    url = ckpt.location.url
    committed = ckpt.last_committed_batch
    if committed is None:
        raise UnsafeOperation("has no committed batch: there is no state to repartition",
                              path=url)
    _ = ckpt.query_id  # copied verbatim into the target: a damaged one would not restart
    entry = ckpt.offset(committed)
    current = entry.shuffle_partitions
    if current is None:
        raise UnsupportedFormat(f"offsets/{committed} pins no spark.sql.shuffle.partitions",
                                path=url)
    partitions = current if partitions is None else partitions
    same_partitions = same_partitions and partitions == current and to_provider is None
    if partitions < 1:
        raise UnsafeOperation("--partitions must be at least 1", path=url)
    provider = entry.provider
    if to_provider is not None:
        _check_migration(url, provider, to_provider, partitions, current, changelog)
    elif partitions == current and not same_partitions:
        raise UnsafeOperation(f"already has {current} partitions: nothing to do", path=url)
    notes = []
    pending = ckpt.uncommitted_batches
    if pending:
        if not allow_uncommitted and dry_run:
            notes.append(f"batch {pending[-1]} was planned but not committed: the real run "
                         "needs --allow-uncommitted (or a restart that commits it first)")
        elif not allow_uncommitted:
            raise UnsafeOperation(
                f"batch {pending[-1]} was planned but not committed (a crash, or the query is "
                "running): restart the query once so it commits, or pass --allow-uncommitted "
                f"to repartition the state of the last committed batch {committed}", path=url)
        notes.append(
            f"batch(es) {', '.join(map(str, pending))} are not committed: the target "
            f"repartitions batch {committed}'s state and drops them, so the restarted query "
            f"re-reads their input; an exactly-once sink that already wrote them (e.g. a file "
            f"sink's _spark_metadata/{pending[0]}) would get that output twice")
    notes += live_refusal(ckpt, force=force, now_ms=now_ms, dry_run=dry_run)
    if provider not in SUPPORTED_PROVIDERS:
        raise UnsupportedFormat(f"state store provider {entry.provider_class} is not "
                                "supported (HDFS-backed and RocksDB are)", path=url)
    codec = entry.codec
    from statekit.formats.compression import normalize_codec

    codec = normalize_codec(codec)
    if codec not in SUPPORTED_CODECS:
        raise UnsupportedFormat(f"state compression codec {codec} is not supported "
                                f"({', '.join(SUPPORTED_CODECS)} are)", path=url)
    check_operators(ckpt, to_provider or provider)
    partition_fields(ckpt)  # refuses a store whose key lacks the shape its placement needs
    notes += target_refusal(ckpt, target, dry_run=dry_run)
    return RepartitionPlan(url, target.url, provider, codec, current, partitions, committed,
                           _store_plans(ckpt, committed + 1), _copied_logs(ckpt, committed),
                           tuple(notes), to_provider=to_provider, changelog=changelog,
                           spark_keyed_operators=tuple(
                               op for op, m in sorted(ckpt.operators.items())
                               if m.name in SPARK_KEYED_OPERATORS))


# What only a write must not do. A dry run writes nothing: it gets a note saying what the
# real run will need instead of the refusal.

def live_refusal(ckpt: Checkpoint, *, force: bool, now_ms: float | None = None,
                 dry_run: bool = False) -> list[str]:
    """Refuse a query that looks live (unless ``force``); a dry run's note instead."""
    live = None if force else looks_live(ckpt, now_ms if now_ms is not None
                                         else time.time() * 1000)
    if live and dry_run:
        return [f"{live}: the real run will be refused until it stops (or --force if it is "
                "stopped)"]
    if live:
        raise UnsafeOperation(f"{live}; stop it first (or pass --force if it is stopped)",
                              path=ckpt.location.url)
    return []


def target_refusal(ckpt: Checkpoint, target: Location, *, dry_run: bool = False
                   ) -> list[str]:
    """Refuse a target that exists with content or lies inside the source checkpoint; a dry
    run's note instead."""
    if not target_is_empty(target):
        problem = "exists and is not empty: statekit only writes new checkpoints"
    elif target.root.rstrip("/") == ckpt.location.root.rstrip("/") or \
            target.root.startswith(ckpt.location.root.rstrip("/") + "/"):
        problem = "is inside the source checkpoint"
    else:
        return []
    if dry_run:
        return [f"{target.url} {problem}: the real run needs another --out"]
    raise UnsafeOperation(problem, path=target.url)


def _check_migration(url: str, provider: str, to_provider: str, partitions: int,
                     current: int, changelog: bool) -> None:
    if to_provider not in SUPPORTED_PROVIDERS:
        raise UnsupportedFormat(f"cannot migrate to provider {to_provider!r} "
                                f"({' and '.join(SUPPORTED_PROVIDERS)} are supported)", path=url)
    if changelog and to_provider != "rocksdb":
        raise UnsafeOperation("--changelog applies to RocksDB targets only", path=url)
    if to_provider == provider and partitions == current:
        hint = (" (changelog checkpointing is not pinned in the checkpoint: restart the query "
                "with spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled)"
                if changelog else "")
        raise UnsafeOperation(f"already uses the {provider} provider with {current} "
                              f"partitions: nothing to migrate{hint}", path=url)


def _store_plans(ckpt: Checkpoint, version: int) -> tuple[StorePlan, ...]:
    from statekit.checkpoint.state_data import zip_metadata

    plans = []
    inventory = ckpt.inventory
    for op_id, meta in sorted(ckpt.operators.items()):
        for store in inventory.stores(op_id):
            instances = inventory.instances_of(op_id, store)
            files = [f for i in instances for f in i.files_to_load(version)]
            broken = [i.partition for i in instances if not i.files_to_load(version)]
            if broken and version > 0:
                raise UnsafeOperation(
                    f"operator {op_id} store {store}: partition(s) "
                    f"{', '.join(map(str, broken[:8]))} cannot load version {version} from "
                    "their files (see `statekit report`)", path=ckpt.location.url)
            zips = [f for f in files if f.kind == "zip"]
            keys = None
            size = sum(f.size for f in files)
            if zips and len(zips) == len(instances):
                metas = zip_metadata(ckpt, zips)
                counts = [m.num_keys for m in metas.values()]
                known = [c for c in counts if c is not None]
                keys = sum(known) if len(known) == len(counts) else None
                size += sum(s.size_bytes for m in metas.values() for s in m.sst_files)
            plans.append(StorePlan(op_id, operator_label(meta.name), store, len(instances),
                                   len(files), size, keys))
    return tuple(plans)


def source_log_files(ckpt: Checkpoint) -> list[str]:
    """Every file under ``sources/`` (the sources' own logs), relative, sorted."""
    try:
        found = ckpt.fs.find(ckpt.location.path("sources"), detail=False)
    except FileNotFoundError:
        found = []
    return sorted(ckpt.location.relative(p) for p in found)


def _copied_logs(ckpt: Checkpoint, committed: int) -> tuple[str, ...]:
    """Relative paths copied verbatim: metadata, logs up to N, sources/, schema files."""
    rel = ckpt.location.relative
    paths = ["metadata"]
    paths += [f"offsets/{b}" for b in ckpt.planned_batches if b <= committed]
    paths += [f"commits/{b}" for b in ckpt.committed_batches if b <= committed]
    paths += source_log_files(ckpt)
    paths += sorted(rel(m.path) for m in ckpt.inventory.meta("schema")) + \
        sorted(rel(m.path) for m in ckpt.inventory.meta("schema-v3"))
    return tuple(dict.fromkeys(paths))
