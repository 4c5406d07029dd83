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

Per-instance cost is linear in what is read — files of the base, change files, bytes,
records replayed, plus a fixed cost — and the first wave of tasks also pays the JVM's one-time
warm-up of the load path (measured: 22 ms for HDFS, 0.55 s for opening RocksDB from a zip).
The per-provider constants are fitted on Spark's own per-partition load times of measured
restarts (``benchmarks/bench_recovery.py``); ``calibrate`` replaces the filesystem-dependent
part (per-file latency, bytes/s) with what reading the checkpoint's own files through its own
filesystem measures — what matters on an object store.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.location import Location
from statekit.checkpoint.logs import provider_short_name
from statekit.progress_log import BatchTiming

WHAT_IF_MIN_DELTAS = (1, 2, 5, 10, 20, 50, 100)


@dataclass(frozen=True)
class CostModel:
    """Seconds a restart spends per unit of state read, for one provider."""

    provider: str
    per_instance_s: float
    """Fixed cost of bringing up one store instance from files."""
    base_file_s: float
    """Per file of the base: a snapshot (HDFS) or a zip and each SST it references (RocksDB,
    copied next to the local database)."""
    change_file_s: float
    """Per change file replayed: ``.delta`` (HDFS) or ``.changelog`` (RocksDB)."""
    bytes_per_s: float
    """Compressed state bytes read per second, per core."""
    record_s: float
    """Per record replayed into the store (HDFS snapshot and delta records; RocksDB
    changelog records — zip/SST contents are copied as files, not iterated)."""
    first_wave_s: float
    """One-time warm-up (class loading, JIT, native libraries) paid by each task of the
    first wave of the first stateful stage when it loads from change files only ..."""
    first_wave_base_s: float
    """... and when it loads a base (RocksDB: opening a checkpoint from a zip costs more)."""
    source: str = "default"
    """``default`` (benchmark-fitted) or ``calibrated`` (measured on this checkpoint)."""

    def seconds(self, base_files: int, change_files: float, size: float, records: float
                ) -> float:
        """Seconds to load one instance from ``base_files`` base files and ``change_files``
        change files (fractional for the what-if's typical case: half an interval of deltas),
        ``size`` bytes and ``records`` records in all."""
        return (self.per_instance_s + self.base_file_s * base_files
                + self.change_file_s * change_files + size / self.bytes_per_s
                + records * self.record_s)


#: Fitted on Spark's own per-partition state-load times of measured restarts of the reference
#: pipeline (``benchmarks/bench_recovery.py``, 2 cores, local disk; README "Recovery"):
#: HDFS 12.2 µs/record + 13.7 ms/instance + 21.9 ms first-wave warm-up, per-file and per-byte
#: costs indistinguishable from 0 (kept at 400 MB/s so very large files still count);
#: RocksDB zip 10.3 ms per zip/SST file + 554 ms first-wave warm-up; RocksDB changelog:
#: 65 ms per 61 changelog files / 3,263 records beyond the first wave — the HDFS per-record
#: cost plus 0.4 ms per file — and a 63 ms warm-up.
DEFAULT_MODELS = {
    "hdfs": CostModel("hdfs", per_instance_s=0.0137, base_file_s=0.0, change_file_s=0.0,
                      bytes_per_s=400e6, record_s=12.2e-6, first_wave_s=0.0219,
                      first_wave_base_s=0.0219),
    "rocksdb": CostModel("rocksdb", per_instance_s=0.0, base_file_s=0.0103,
                         change_file_s=0.0004, bytes_per_s=400e6, record_s=12.2e-6,
                         first_wave_s=0.063, first_wave_base_s=0.554),
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
    """The stage's makespan over the cores (with the first-wave warm-up, if it pays it)."""
    tasks: int
    waves: int
    warmup_s: float
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
class Rerun:
    """A batch planned before the crash and not committed: what the restart does with it."""

    batch: int
    action: str
    """``re-run`` (processed again, first) or ``skip`` (its sink already committed it:
    Spark re-plans it and writes nothing)."""
    seconds: float
    source: str


@dataclass(frozen=True)
class RecoveryEstimate:
    checkpoint: str
    provider: str
    cores: int
    version: int | None
    estimate_s: float
    state_load_s: float
    rerun_s: float
    reruns: tuple[Rerun, ...]
    stages: tuple[StageEstimate, ...]
    instances: tuple[InstanceWork, ...]
    model: CostModel
    what_if: tuple[WhatIf, ...]
    recommendation: int | None = None
    """With an RTO: the largest minDeltasForSnapshot whose worst case meets it."""
    notes: tuple[str, ...] = field(default=())

    @property
    def rerun_batches(self) -> tuple[int, ...]:
        return tuple(r.batch for r in self.reruns)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rerun_batches"] = list(self.rerun_batches)
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
    base_files = [base] if base is not None else []
    if base is not None and base.kind == "zip":
        base_files += instance.ssts_named((referenced or {}).get(base.path))
    changes = [f for f in files if f.kind in ("delta", "changelog")]
    size = sum(f.size for f in base_files + changes)
    record_bytes = sum(f.size for f in files if f.kind in ("snapshot", "delta", "changelog"))
    records = record_bytes / bytes_per_record if bytes_per_record else 0.0
    return InstanceWork(instance.operator_id, instance.store, instance.partition, version,
                        base.version if base else None, len(base_files) + len(changes), size,
                        records, len(changes),
                        model.seconds(len(base_files), len(changes), size, records))


def schedule(costs: Sequence[float], cores: int, warmup: float = 0.0) -> float:
    """Makespan of tasks over ``cores`` slots, longest first onto the least-loaded slot;
    each task of the first wave also pays ``warmup``."""
    if not costs:
        return 0.0
    slots = [warmup] * max(1, min(cores, len(costs)))
    heapq.heapify(slots)
    for cost in sorted(costs, reverse=True):
        heapq.heappush(slots, heapq.heappop(slots) + cost)
    return max(slots)


def _warmup(model: CostModel, works: Sequence[InstanceWork]) -> float:
    """The first stage's warm-up: none when nothing is loaded from files."""
    loading = [w for w in works if w.files]
    if not loading:
        return 0.0
    if any(w.base_version is not None for w in loading):
        return model.first_wave_base_s
    return model.first_wave_s


def stage_estimate(operator_id: int, works: list[InstanceWork], cores: int,
                   warmup: float = 0.0) -> StageEstimate:
    """One stateful stage: a task per partition loads all its stores (a join's four)."""
    per_task: dict[int, list[InstanceWork]] = {}
    for work in works:
        per_task.setdefault(work.partition, []).append(work)
    tasks = {p: sum(w.seconds for w in ws) for p, ws in per_task.items()}
    seconds = schedule(list(tasks.values()), cores, warmup)
    waves = math.ceil(len(tasks) / max(1, cores)) if tasks else 0
    slowest = sorted(per_task, key=lambda p: -tasks[p])[:waves]
    critical = tuple(sorted((w for p in slowest for w in per_task[p]),
                            key=lambda w: -w.seconds))
    return StageEstimate(operator_id, seconds, len(tasks), waves, warmup, critical)


def _stages(works: Sequence[InstanceWork], model: CostModel, cores: int
            ) -> tuple[StageEstimate, ...]:
    """Stateful stages run one after another; only the first pays the JVM's warm-up."""
    by_op: dict[int, list[InstanceWork]] = {}
    for work in works:
        by_op.setdefault(work.operator_id, []).append(work)
    warmup = _warmup(model, works)
    return tuple(stage_estimate(op, ws, cores, warmup if n == 0 else 0.0)
                 for n, (op, ws) in enumerate(sorted(by_op.items())))


def default_model(ckpt: Checkpoint) -> CostModel:
    """The default cost model of the checkpoint's provider."""
    provider = provider_short_name(ckpt.conf.get(
        "spark.sql.streaming.stateStore.providerClass")) or "hdfs"
    return DEFAULT_MODELS.get(provider, DEFAULT_MODELS["hdfs"])


def with_cores(estimate: RecoveryEstimate, cores: int) -> float:
    """The same load scheduled over another number of cores (for what-if questions)."""
    stages = _stages(estimate.instances, estimate.model, cores)
    return sum(s.seconds for s in stages) + estimate.rerun_s


DEFAULT_BYTES_PER_RECORD = 120.0
"""Compressed bytes per state record when no file can be sampled (reference pipeline: ~110)."""

SKIPPED_BATCH_S = 0.35
"""A re-planned batch whose sink already committed it, without a progress log to time a warm
batch's planning and log writes (``triggerExecution − addBatch``; benchmark: 0.35 s)."""


def sample_bytes_per_record(ckpt: Checkpoint, instances: Sequence[StoreInstance],
                            limit: int = 12) -> tuple[float, str]:
    """Compressed bytes per record, from up to ``limit`` record files spread over the
    instances (their records counted by actually reading them)."""
    from statekit.checkpoint.state_data import file_records
    from statekit.errors import StatekitError

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


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def file_sink_committed(sink: Location, batch: int) -> bool | None:
    """Whether the file sink at ``sink`` already committed ``batch`` (its ``_spark_metadata``
    log has ``<batch>`` or ``<batch>.compact``); None when its log cannot be read."""
    try:
        names = {str(p).rstrip("/").rsplit("/", 1)[-1]
                 for p in sink.fs.ls(sink.path("_spark_metadata"), detail=False)}
    except (OSError, ValueError):
        return None
    return str(batch) in names or f"{batch}.compact" in names


def _runs(timings: Sequence[BatchTiming]) -> list[list[BatchTiming]]:
    """The log's batches split at every (re)start of the query (a new ``runId``)."""
    runs: list[list[BatchTiming]] = []
    for timing in timings:
        if not runs or timing.run_id != runs[-1][-1].run_id:
            runs.append([])
        runs[-1].append(timing)
    return runs


def _batch_seconds(ckpt: Checkpoint, timings: Sequence[BatchTiming] | None
                   ) -> tuple[float | None, str]:
    """What re-running a batch adds to a restart.

    The re-run is the restart's first batch and pays the JVM's cold start (as the first new
    batch would have), so what it adds is a batch *after* the cold one: the second batch of a
    run, which is still far from warm (JIT, Python workers). The progress log shows those at
    every start of the query; without a start in the log, its median batch; without a log,
    the offset log's median gap between batch starts.
    """
    if timings:
        seconds = [run[1].trigger_s for run in _runs(timings) if len(run) > 1
                   and run[0].run_id is not None]
        if seconds:
            return _median(seconds), "progress log: the second batch after a start"
        return (_median([t.trigger_s for t in timings[-20:]]),
                "progress log: median of the last 20 batches")
    committed = ckpt.committed_batches[-12:]
    pending = ckpt.uncommitted_batches[:1]
    stamps = ckpt.load_offsets([*committed, *pending])
    times = [ms for b in sorted(stamps) if (ms := stamps[b].timestamp_ms)]
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    if not gaps:
        return None, "unknown: no progress log and no batch timestamps"
    return _median(gaps) / 1000, "offset log: median gap between batch starts"


def _skip_seconds(timings: Sequence[BatchTiming] | None) -> tuple[float, str]:
    """A re-planned batch that its sink already committed. It writes nothing and, as the
    restart's first batch, plans cold — but then the first new batch plans warm instead of
    cold, so what the skip adds is what a *warm* batch spends outside ``addBatch`` (planning,
    offset and commit log writes): the median over the log's batches that are not the first
    after a start; else a default."""
    if not timings:
        return SKIPPED_BATCH_S, "default for a skipped batch"
    warm = [t for run in _runs(timings) for t in run[1:]][-20:] or list(timings)
    return (_median([max(0.0, t.trigger_s - t.add_batch_s) for t in warm]),
            "progress log: a warm batch's planning and log writes")


def plan_reruns(ckpt: Checkpoint, timings: Sequence[BatchTiming] | None = None,
                sink: Location | None = None) -> tuple[tuple[Rerun, ...], int]:
    """The uncommitted batches a restart runs first, and the state version it then loads.

    Spark re-runs the newest planned batch without a commit. A file sink that already
    committed it (a crash between the sink's commit and the commit log's) makes Spark skip
    the write — nothing is loaded for it; the next batch loads the version the crashed run
    wrote. Any other re-run loads ``last commit + 1`` and processes the batch again.
    """
    committed = ckpt.last_committed_batch
    version = committed + 1 if committed is not None else 0
    reruns = []
    batch_s, batch_source = _batch_seconds(ckpt, timings)
    skipping = True
    for batch in ckpt.uncommitted_batches:
        done = file_sink_committed(sink, batch) if sink and skipping else None
        if done:
            reruns.append(Rerun(batch, "skip", *_skip_seconds(timings)))
            version = batch + 1
            continue
        skipping = False
        reruns.append(Rerun(batch, "re-run", batch_s or 0.0, batch_source))
    return tuple(reruns), version


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
            base = max(base_files, key=lambda f: f.version or 0).size if base_files else \
                sum(f.size for f in changes)
            snapshot_bytes += base / m
            for deltas, target in ((m, worst), (m / 2, typical)):
                size = base + deltas * delta
                cost = model.seconds(1, deltas, size, size / bytes_per_record)
                target.setdefault(inst.operator_id, []).append(cost)
        warmup = model.first_wave_base_s
        out.append(WhatIf(m, sum(schedule(c, cores, warmup) for c in worst.values()),
                          sum(schedule(c, cores, warmup) for c in typical.values()),
                          snapshot_bytes))
    return tuple(out)


def estimate_recovery(ckpt: Checkpoint, *, cores: int, model: CostModel | None = None,
                      timings: Sequence[BatchTiming] | None = None,
                      sink: Location | None = None,
                      rto_s: float | None = None, current_min_deltas: int | None = None
                      ) -> RecoveryEstimate:
    """The restart cost of ``ckpt`` now (see the module docstring). No JVM."""
    from statekit.checkpoint.state_data import zip_metadata

    model = model or default_model(ckpt)
    inventory = ckpt.inventory
    reruns, version = plan_reruns(ckpt, timings, sink)
    instances = [inventory.instances[k] for k in sorted(inventory.instances)]
    bytes_per_record, _ = sample_bytes_per_record(ckpt, instances)
    bases = [f for i in instances for f in i.files_to_load(version)[:1] if f.kind == "zip"]
    referenced = {path: {s.dfs_name for s in meta.sst_files}
                  for path, meta in zip_metadata(ckpt, bases).items()} if bases else {}
    works = [instance_work(i, version, model, bytes_per_record, referenced) for i in instances]
    stages = _stages(works, model, cores)
    load = sum(s.seconds for s in stages)
    rerun = sum(r.seconds for r in reruns)
    notes = []
    zips_only = model.provider == "rocksdb" and not any(
        i.of_kind("changelog") for i in instances)
    what_if: tuple[WhatIf, ...] = ()
    if zips_only:
        notes.append("RocksDB without changelog checkpointing uploads a full snapshot (zip) "
                     "every batch: minDeltasForSnapshot does not apply, no what-if table")
    else:
        values = sorted({*WHAT_IF_MIN_DELTAS,
                         *([current_min_deltas] if current_min_deltas else [])})
        what_if = _what_if(instances, version, model, bytes_per_record, cores, values)
    recommendation = None
    if rto_s is not None and what_if:
        fitting = [w.min_deltas for w in what_if if w.worst_s + rerun <= rto_s]
        recommendation = max(fitting) if fitting else None
    if works and all(w.base_version is None for w in works if w.loadable) and version > 0 \
            and not zips_only:
        notes.append(f"no snapshot yet: a restart replays every change file from version 1 "
                     f"({max(w.changes for w in works)} per partition)")
    broken = [w for w in works if not w.loadable]
    if broken:
        notes.append(f"{len(broken)} store instance(s) cannot be loaded from their files "
                     "(missing deltas or snapshots): the restart would fail — see "
                     "`statekit report`")
    notes += _rerun_notes(reruns, sink, version)
    if not ckpt.location.is_local and model.source == "default":
        notes.append("object storage: the defaults were measured on local disk, where a "
                     "file costs well under a millisecond; run with --calibrate to time "
                     "this store's per-file latency and bandwidth")
    return RecoveryEstimate(ckpt.location.url, model.provider, cores, version, load + rerun,
                            load, rerun, reruns, stages, tuple(works), model, what_if,
                            recommendation, tuple(notes))


def _rerun_notes(reruns: Sequence[Rerun], sink: Location | None, version: int) -> list[str]:
    notes = []
    for rerun in reruns:
        if rerun.action == "skip":
            notes.append(f"batch {rerun.batch} was planned but not committed, and the file "
                         f"sink {sink.url if sink else '-'} already committed it: the restart "
                         f"re-plans it and writes nothing; state then loads at version {version}")
        else:
            notes.append(f"batch {rerun.batch} was planned but not committed: the restart "
                         f"re-runs it first ({rerun.source})")
    if any(r.action == "re-run" for r in reruns) and not sink:
        notes.append("if the sink already committed that batch (a file sink's "
                     "_spark_metadata/<batch>), Spark skips the re-run: give --sink PATH "
                     "(or a --progress log naming the sink) to check")
    return notes


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
    speed is reported but the default ``record_s`` stays.
    """
    import time

    from statekit.checkpoint.state_data import file_records
    from statekit.errors import StatekitError

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
    # Spark's local/HDFS filesystems open a .crc beside every state file, object stores none
    per_file = latency * (2 if ckpt.inventory.crc_files else 1)
    tuned = replace(model, base_file_s=max(model.base_file_s, per_file),
                    change_file_s=max(model.change_file_s, per_file),
                    bytes_per_s=min(model.bytes_per_s, bandwidth), source="calibrated")
    return tuned, measured
