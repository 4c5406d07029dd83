"""How long a restart of this query spends getting its state back — estimated from files.

When a stateful query restarts, every task of every stateful stage first loads its store
instance at the version it will build on (last committed batch + 1):

* **HDFS-backed**: the newest ``.snapshot`` at or below that version, then every ``.delta``
  after it, each opened, decompressed and replayed into an in-memory map;
* **RocksDB**: the newest ``.zip`` at or below it (unzipped, its SST files copied next to
  the local database, the database opened), then — with changelog checkpointing — every
  ``.changelog`` after it, replayed into the database.

Tasks of one stage run in waves over the available cores, so the stage takes as long as its
busiest core (longest tasks scheduled first, as Spark's scheduler roughly does for equal-sized
partitions); stateful stages run one after another. A batch that was planned but never
committed is re-run first. The estimate is the sum — the time a restart spends beyond what
the same first batch would cost with empty state (JVM start, planning and processing the new
input are not included; they do not depend on the state).

Per-instance cost is linear in what is read: ``per_file_s × files + bytes / bytes_per_s +
records / records_per_s + per_instance_s`` with per-provider constants. Defaults come from
``benchmarks/bench_recovery.py`` (measured restarts of the reference pipeline); ``calibrate``
replaces the filesystem-dependent part (per-file latency, bytes/s) with what reading the
checkpoint's own files through its own filesystem measures.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from toolkit.checkpoint.checkpoint import Checkpoint
from toolkit.checkpoint.inventory import StoreInstance
from toolkit.checkpoint.logs import provider_short_name

WHAT_IF_MIN_DELTAS = (1, 2, 5, 10, 20, 50, 100)


@dataclass(frozen=True)
class CostModel:
    """Seconds a restart spends per unit of state read, for one provider."""

    provider: str
    per_file_s: float
    """Opening one state file (+ its checksum file), first byte."""
    bytes_per_s: float
    """Compressed state bytes read and decompressed per second, per core."""
    records_per_s: float
    """Records replayed per second, per core (HDFS map puts; RocksDB changelog writes)."""
    per_instance_s: float
    """Fixed cost of bringing up one store instance (RocksDB: open the database)."""
    source: str = "default"
    """``default`` (benchmark-fitted) or ``calibrated`` (measured on this checkpoint)."""

    def seconds(self, files: int, size: int, records: float) -> float:
        return (self.per_instance_s + self.per_file_s * files + size / self.bytes_per_s
                + records / self.records_per_s)


#: Defaults fitted on measured restarts (see benchmarks/bench_recovery.py and the README).
DEFAULT_MODELS = {
    "hdfs": CostModel("hdfs", per_file_s=0.004, bytes_per_s=60e6, records_per_s=1.5e6,
                      per_instance_s=0.002),
    "rocksdb": CostModel("rocksdb", per_file_s=0.006, bytes_per_s=120e6, records_per_s=1.0e6,
                         per_instance_s=0.03),
}


@dataclass(frozen=True)
class InstanceWork:
    """What one store instance reads on restart, and what it costs."""

    operator_id: int
    store: str
    partition: int
    version: int
    base_version: int | None
    """The snapshot/zip the load starts from (None: from an empty store)."""
    files: int
    bytes: int
    records: float
    changes: int
    """Delta/changelog files replayed after the base."""
    seconds: float
    loadable: bool = True


@dataclass(frozen=True)
class StageEstimate:
    operator_id: int
    seconds: float
    """The stage's makespan over the cores."""
    tasks: int
    waves: int
    critical: tuple[InstanceWork, ...]
    """The instances on the busiest core, largest first."""


@dataclass(frozen=True)
class WhatIf:
    min_deltas: int
    worst_s: float
    """Every partition at the end of a snapshot interval: ``min_deltas`` deltas to replay."""
    typical_s: float
    """Half an interval on average."""
    snapshot_bytes_per_batch: float
    """Snapshot bytes written per batch, amortised (the price of a smaller value)."""


@dataclass(frozen=True)
class RecoveryEstimate:
    checkpoint: str
    provider: str
    cores: int
    version: int | None
    estimate_s: float
    state_load_s: float
    rerun_s: float
    rerun_batches: tuple[int, ...]
    rerun_source: str | None
    stages: tuple[StageEstimate, ...]
    instances: tuple[InstanceWork, ...]
    model: CostModel
    what_if: tuple[WhatIf, ...]
    recommendation: int | None = None
    """With an RTO: the largest minDeltasForSnapshot whose worst case meets it."""
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["instances"] = [asdict(i) for i in sorted(
            self.instances, key=lambda i: -i.seconds)[:20]]
        return data


def instance_work(instance: StoreInstance, version: int, model: CostModel,
                  bytes_per_record: float, referenced: dict[str, set[str]] | None = None
                  ) -> InstanceWork:
    files = instance.files_to_load(version)
    if not files:
        return InstanceWork(instance.operator_id, instance.store, instance.partition, version,
                            None, 0, 0, 0.0, 0, 0.0, loadable=version == 0)
    base = files[0] if files[0].kind in ("snapshot", "zip") else None
    read = list(files)
    if base is not None and base.kind == "zip":
        read += _referenced_ssts(instance, base, referenced or {})
    size = sum(f.size for f in read)
    changes = [f for f in files if f.kind in ("delta", "changelog")]
    record_bytes = sum(f.size for f in files if f.kind in ("snapshot", "delta", "changelog"))
    records = record_bytes / bytes_per_record if bytes_per_record else 0.0
    # a .crc beside every HDFS file is opened and verified too
    opened = len(read) * (2 if model.provider == "hdfs" else 1)
    return InstanceWork(instance.operator_id, instance.store, instance.partition, version,
                        base.version if base else None, len(read), size, records,
                        len(changes), model.seconds(opened, size, records))


def _referenced_ssts(instance: StoreInstance, zip_file, referenced: dict[str, set[str]]
                     ) -> list:
    """The SST files the base zip's metadata lists (all of the instance's when unknown)."""
    names = referenced.get(zip_file.path)
    return [f for f in instance.of_kind("sst")
            if names is None or f.path.rsplit("/", 1)[-1] in names]


def schedule(costs: Sequence[float], cores: int) -> float:
    """Makespan of tasks over ``cores`` slots, longest first onto the least-loaded slot."""
    if not costs:
        return 0.0
    slots = [0.0] * max(1, min(cores, len(costs)))
    heapq.heapify(slots)
    for cost in sorted(costs, reverse=True):
        heapq.heappush(slots, heapq.heappop(slots) + cost)
    return max(slots)


def stage_estimate(operator_id: int, works: list[InstanceWork], cores: int) -> StageEstimate:
    """One stateful stage: a task per partition loads all its stores (a join's four)."""
    per_task: dict[int, list[InstanceWork]] = {}
    for work in works:
        per_task.setdefault(work.partition, []).append(work)
    tasks = {p: sum(w.seconds for w in ws) for p, ws in per_task.items()}
    seconds = schedule(list(tasks.values()), cores)
    waves = math.ceil(len(tasks) / max(1, cores)) if tasks else 0
    slowest = sorted(per_task, key=lambda p: -tasks[p])[:waves]
    critical = tuple(sorted((w for p in slowest for w in per_task[p]),
                            key=lambda w: -w.seconds))
    return StageEstimate(operator_id, seconds, len(tasks), waves, critical)


def default_model(ckpt: Checkpoint) -> CostModel:
    """The default cost model of the checkpoint's provider."""
    provider = provider_short_name(ckpt.conf.get(
        "spark.sql.streaming.stateStore.providerClass")) or "hdfs"
    return DEFAULT_MODELS.get(provider, DEFAULT_MODELS["hdfs"])


def with_cores(estimate: RecoveryEstimate, cores: int) -> float:
    """The same load scheduled over another number of cores (for what-if questions)."""
    by_op: dict[int, list[InstanceWork]] = {}
    for work in estimate.instances:
        by_op.setdefault(work.operator_id, []).append(work)
    return sum(stage_estimate(op, ws, cores).seconds for op, ws in by_op.items()) + \
        estimate.rerun_s


DEFAULT_BYTES_PER_RECORD = 120.0
"""Compressed bytes per state record when no file can be sampled (reference pipeline: ~110)."""


def sample_bytes_per_record(ckpt: Checkpoint, instances: Sequence[StoreInstance],
                            limit: int = 12) -> tuple[float, str]:
    """Compressed bytes per record, from up to ``limit`` record files spread over the
    instances (their records counted by actually reading them)."""
    from toolkit.checkpoint.state_data import file_records
    from toolkit.errors import StatekitError

    files = [f for i in instances for f in i.of_kind("delta", "snapshot", "changelog")]
    if not files:
        return DEFAULT_BYTES_PER_RECORD, "default"
    step = max(1, len(files) // limit)
    size = records = 0
    for file in files[::step][:limit]:
        try:
            records += sum(1 for _ in file_records(ckpt, file))
        except StatekitError:
            continue
        size += file.size
    if not records:
        return DEFAULT_BYTES_PER_RECORD, "default"
    return size / records, f"sampled {min(limit, len(files[::step]))} files"


def _rerun(ckpt: Checkpoint, batch_seconds: Sequence[float] | None
           ) -> tuple[float, tuple[int, ...], str | None]:
    """Uncommitted batches re-run on restart, and what one batch takes."""
    pending = tuple(ckpt.uncommitted_batches)
    if not pending:
        return 0.0, (), None
    if batch_seconds:
        typical = sorted(batch_seconds)[len(batch_seconds) // 2]
        return typical * len(pending), pending, "progress log (median batch duration)"
    committed = ckpt.committed_batches[-12:]
    stamps = ckpt.load_offsets([*committed, pending[0]])
    times = [stamps[b].timestamp_ms for b in sorted(stamps) if stamps[b].timestamp_ms]
    gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
    if not gaps:
        return 0.0, pending, "unknown (no batch timestamps)"
    return gaps[len(gaps) // 2] / 1000 * len(pending), pending, \
        "offset log (median gap between batch starts)"


def _what_if(instances: Sequence[StoreInstance], version: int, model: CostModel,
             bytes_per_record: float, cores: int, values: Sequence[int]) -> tuple[WhatIf, ...]:
    """Recovery if every partition had to replay ``m`` (worst) or ``m/2`` (typical) deltas on
    top of a snapshot as large as its current state."""
    out = []
    for m in values:
        worst: dict[int, list[float]] = {}
        typical: dict[int, list[float]] = {}
        snapshot_bytes = 0.0
        for inst in instances:
            base_files = [f for f in inst.of_kind("snapshot", "zip")
                          if f.version is not None and f.version <= version]
            changes = [f for f in inst.of_kind("delta", "changelog")
                       if f.version is not None and f.version <= version]
            delta = sum(f.size for f in changes) / len(changes) if changes else 0.0
            base = max(base_files, key=lambda f: f.version).size if base_files else \
                sum(f.size for f in changes)
            snapshot_bytes += base / m
            for deltas, target in ((m, worst), (m / 2, typical)):
                size = base + deltas * delta
                files = 1 + deltas
                cost = model.seconds(files * (2 if model.provider == "hdfs" else 1), size,
                                     size / bytes_per_record)
                target.setdefault(inst.operator_id, []).append(cost)
        out.append(WhatIf(m, sum(schedule(c, cores) for c in worst.values()),
                          sum(schedule(c, cores) for c in typical.values()), snapshot_bytes))
    return tuple(out)


def estimate_recovery(ckpt: Checkpoint, *, cores: int, model: CostModel | None = None,
                      batch_seconds: Sequence[float] | None = None, rto_s: float | None = None,
                      current_min_deltas: int | None = None) -> RecoveryEstimate:
    """The restart cost of ``ckpt`` now (see the module docstring). No JVM."""
    from toolkit.checkpoint.state_data import zip_metadata

    model = model or default_model(ckpt)
    inventory = ckpt.inventory
    committed = ckpt.last_committed_batch
    version = committed + 1 if committed is not None else 0
    instances = [inventory.instances[k] for k in sorted(inventory.instances)]
    bytes_per_record, _ = sample_bytes_per_record(ckpt, instances)
    bases = [f for i in instances for f in i.files_to_load(version)[:1] if f.kind == "zip"]
    referenced = {path: {s.dfs_name for s in meta.sst_files}
                  for path, meta in zip_metadata(ckpt, bases).items()} if bases else {}
    works = [instance_work(i, version, model, bytes_per_record, referenced) for i in instances]
    by_op: dict[int, list[InstanceWork]] = {}
    for work in works:
        by_op.setdefault(work.operator_id, []).append(work)
    stages = tuple(stage_estimate(op, ws, cores) for op, ws in sorted(by_op.items()))
    load = sum(s.seconds for s in stages)
    rerun, pending, rerun_source = _rerun(ckpt, batch_seconds)
    values = sorted({*WHAT_IF_MIN_DELTAS, *([current_min_deltas] if current_min_deltas else [])})
    what_if = _what_if(instances, version, model, bytes_per_record, cores, values)
    recommendation = None
    if rto_s is not None:
        fitting = [w.min_deltas for w in what_if if w.worst_s + rerun <= rto_s]
        recommendation = max(fitting) if fitting else None
    notes = []
    if works and all(w.base_version is None for w in works if w.loadable) and version > 0:
        notes.append(f"no snapshot yet: a restart replays every delta from version 1 "
                     f"({max(w.changes for w in works)} per partition)")
    broken = [w for w in works if not w.loadable]
    if broken:
        notes.append(f"{len(broken)} store instance(s) cannot be loaded from their files "
                     "(missing deltas or snapshots): the restart would fail — see "
                     "`statekit report`")
    if pending:
        notes.append(f"batch(es) {', '.join(map(str, pending))} were planned but not "
                     f"committed: the restart re-runs them first ({rerun_source})")
    if not ckpt.location.is_local and model.source == "default":
        notes.append("object storage: per-file latency dominates and the defaults assume "
                     "local disk — run with --calibrate")
    provider = model.provider
    return RecoveryEstimate(ckpt.location.url, provider, cores, version, load + rerun, load,
                            rerun, pending, rerun_source, stages, tuple(works), model, what_if,
                            recommendation, tuple(notes))


@dataclass(frozen=True)
class Calibration:
    """What reading a sample of this checkpoint's files through its filesystem measured."""

    files: int
    bytes: int
    records: int
    per_file_s: float
    bytes_per_s: float
    python_records_per_s: float


def calibrate(ckpt: Checkpoint, model: CostModel, limit: int = 16
              ) -> tuple[CostModel, Calibration | None]:
    """Measure per-file latency and read bandwidth on the checkpoint's own filesystem.

    Spark opens and reads the same files, so a filesystem slower than the defaults assume
    (object stores: tens of ms per file) slows it alike: the calibrated model takes the larger
    latency and the smaller bandwidth. Record replay is CPU-bound in the JVM; Python's decode
    speed is reported but the default ``records_per_s`` stays.
    """
    import time

    from toolkit.checkpoint.state_data import file_records
    from toolkit.errors import StatekitError

    files = [f for i in ckpt.inventory.instances.values()
             for f in i.of_kind("delta", "snapshot", "changelog", "zip")]
    if not files:
        return model, None
    step = max(1, len(files) // limit)
    sample = files[::step][:limit]
    started = time.perf_counter()
    data = {f.path: ckpt.read_bytes(f.path) for f in sample}
    read_s = max(time.perf_counter() - started, 1e-6)
    size = sum(len(d) for d in data.values())
    records = 0
    started = time.perf_counter()
    for file in sample:
        if file.kind == "zip":
            continue
        try:
            records += sum(1 for _ in file_records(ckpt, file, data[file.path]))
        except StatekitError:
            continue
    decode_s = max(time.perf_counter() - started, 1e-6)
    small = sorted(sample, key=lambda f: f.size)[: max(1, len(sample) // 2)]
    started = time.perf_counter()
    for file in small:
        ckpt.read_bytes(file.path)
    latency = (time.perf_counter() - started) / len(small)
    # bandwidth: what the reads took beyond their per-file latency; too few bytes to tell
    # (under 4 MiB) keeps the default
    transfer_s = read_s - latency * len(sample)
    bandwidth = size / transfer_s if size >= 4 << 20 and transfer_s > 0 else model.bytes_per_s
    measured = Calibration(len(sample), size, records, latency, bandwidth, records / decode_s)
    tuned = replace(model, per_file_s=max(model.per_file_s, latency),
                    bytes_per_s=min(model.bytes_per_s, bandwidth), source="calibrated")
    return tuned, measured
