"""How long until a restarted query has completed its first batch, estimated from files.

When a stateful query restarts, every task of every stateful stage first loads its store
instance at the version it will build on (last committed batch + 1):

* **HDFS-backed**: the newest ``.snapshot`` at or below that version, then every ``.delta``
  after it, each opened, decompressed and replayed into an in-memory map;
* **RocksDB**: the newest ``.zip`` at or below it (unzipped, its SST files copied next to
  the local database, the database opened), then — with changelog checkpointing — every
  ``.changelog`` after it, replayed into the database.

Per instance the load is linear in what is read (files of the base, change files, bytes of
each, records replayed — counted by decoding a sample of the files — and a fixed part), the
first wave also paying the JVM's warm-up of the load path. Tasks of one stage run in waves
over the cores, longest first; stateful stages run one after another. The first batch then
pays more than the load itself — the load × a factor, the rows held, garbage collection, a
part per task and a fixed part (:class:`~statekit.recovery.cost_model.CostModel`, fitted by
``benchmarks/bench_recovery_grid.py`` against measured restarts) — and any uncommitted batch
runs first (:mod:`statekit.recovery.reruns`). What is estimated is that first batch over what the
same
batch costs on an empty checkpoint: the JVM's start and the new input's processing do not
depend on the state. ``--calibrate`` / ``--measure`` tune the model
(:mod:`statekit.recovery.scaling`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.location import Location
from statekit.checkpoint.progress_log import BatchTiming
from statekit.recovery.cost_model import CostModel, default_model, local_model
from statekit.recovery.reruns import Rerun, plan_reruns, rerun_notes, version_loaded
from statekit.recovery.rto import within_rto

if TYPE_CHECKING:
    from statekit.checkpoint.event_log import StatefulTask
    from statekit.recovery.history import ObservedRestart, PartitionCheck, RestartLearning
    from statekit.state.memory import StateMemory

WHAT_IF_MIN_DELTAS = (1, 2, 5, 10, 20, 50, 100)


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
    base_files: int = 0
    """Snapshot, or zip + the SSTs it references."""
    base_bytes: int = 0
    change_bytes: int = 0
    rows: float = 0.0
    """Rows the store holds at the version: a zip's ``numKeys`` plus the changelog records
    replayed on it; otherwise the records replayed (an upper bound)."""

    def terms(self, model: CostModel) -> dict[str, float]:
        return model.terms(self.base_files, self.changes, self.base_bytes, self.change_bytes,
                           self.records)


@dataclass(frozen=True)
class StageEstimate:
    operator_id: int
    seconds: float
    """What the stage adds to the restart's first batch: its load × the model's
    ``load_factor``, plus the rows its busiest core then holds (and their garbage
    collection)."""
    tasks: int
    waves: int
    warmup_s: float
    """The first wave's fixed warm-up (0 for a stage after the first) ..."""
    first_wave_replay_s: float
    """... and what its slowest first-wave task pays for replaying while the JIT warms up."""
    critical: tuple[InstanceWork, ...]
    """The instances on the busiest core, largest first."""
    load_s: float = 0.0
    """The state load's makespan over the cores (with the first-wave warm-up): what Spark's
    own load log times."""
    rows: float = 0.0
    """Rows the busiest core's stores hold after the load."""
    rows_s: float = 0.0
    """What the first batch pays for those rows ..."""
    gc_s: float = 0.0
    """... and for collecting garbage among every row the executor's heap holds."""
    base_share: float = 0.0
    """The part of the load spent opening bases (snapshots, zips)."""
    waves_s: float = 0.0
    """What the busiest core's tasks cost beyond a new query's (either sign): their first
    commits, and for those that open a base, the empty stores a new query creates."""
    base_waves: int = 0
    """The busiest core's tasks that open a base (snapshot, zip)."""

@dataclass(frozen=True)
class WhatIf:
    min_deltas: int
    worst_s: float
    """Every partition at the end of a snapshot interval: ``min_deltas`` deltas to replay."""
    typical_s: float
    """Half an interval on average."""
    snapshot_bytes_per_batch: float
    """Snapshot bytes written per batch, amortised (the price of a smaller value)."""
    worst_low_s: float = 0.0
    worst_high_s: float = 0.0
    """The worst case's range (the model's held-out error range)."""


@dataclass(frozen=True)
class Term:
    """One kind of cost on the restart's critical path (the busiest core of each stage)."""

    name: str
    """``records``, ``bytes``, ``files`` or ``fixed`` (per task and first-wave warm-up)."""
    seconds: float
    share: float
    detail: str
    """What it is, in numbers: "replaying 1.1 M delta records"."""


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
    """With an RTO: the largest minDeltasForSnapshot whose worst case meets it even at the
    top of its range."""
    notes: tuple[str, ...] = field(default=())
    low_s: float = 0.0
    high_s: float = 0.0
    """The estimate's range: the state load × the load path's held-out error range, plus
    the re-runs."""
    breakdown: tuple[Term, ...] = field(default=())
    """The critical path's costs by kind, largest first."""
    restart_s: float = 0.0
    """The restart's first batch over an empty checkpoint's, without re-runs: the state load
    × ``load_factor``, the rows then held, garbage collection and a fixed part."""
    executors: int = 1
    memory: StateMemory | None = None
    """What the loaded state holds in memory, per executor."""
    learning: RestartLearning | None = None
    """What the query's own restarts (its progress log) taught the model (``None``: no
    progress log was given)."""

    @property
    def explanation(self) -> str:
        """The dominant terms in words: "94 % replaying 1.1 M delta records; 5 % ..."."""
        return "; ".join(f"{t.share:.0%} {t.detail}" for t in self.breakdown
                         if t.share >= 0.05) or "nothing to load"

    @property
    def cold_noise_s(self) -> float:
        """How much a cold first batch varies: measured on the query's restarts where they
        tell, else the benchmark's (about a second)."""
        from statekit.recovery.history import COLD_NOISE_S

        return self.learning.noise_s if self.learning is not None else COLD_NOISE_S

    @property
    def rerun_batches(self) -> tuple[int, ...]:
        return tuple(r.batch for r in self.reruns)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rerun_batches"] = list(self.rerun_batches)
        data["instances"] = [asdict(i) for i in sorted(
            self.instances, key=lambda i: -i.seconds)[:20]]
        data["learning"] = self.learning.to_dict() if self.learning is not None else None
        return data


def instance_work(instance: StoreInstance, version: int, model: CostModel,
                  bytes_per_record: float, referenced: dict[str, set[str]] | None = None,
                  zip_keys: dict[str, int | None] | None = None) -> InstanceWork:
    files = instance.files_to_load(version)
    if not files:
        return InstanceWork(instance.operator_id, instance.store, instance.partition, version,
                            None, 0, 0, 0.0, 0, 0.0, loadable=version == 0)
    base = files[0] if files[0].kind in ("snapshot", "zip") else None
    base_files = [base] if base is not None else []
    if base is not None and base.kind == "zip":
        base_files += instance.ssts_named((referenced or {}).get(base.path))
    changes = [f for f in files if f.kind in ("delta", "changelog")]
    base_bytes = sum(f.size for f in base_files)
    change_bytes = sum(f.size for f in changes)
    record_bytes = sum(f.size for f in files if f.kind in ("snapshot", "delta", "changelog"))
    records = record_bytes / bytes_per_record if bytes_per_record else 0.0
    base_keys = (zip_keys or {}).get(base.path) if base is not None else None
    rows = records + base_keys if base_keys is not None else records
    return InstanceWork(instance.operator_id, instance.store, instance.partition, version,
                        base.version if base else None, len(base_files) + len(changes),
                        base_bytes + change_bytes, records, len(changes),
                        model.seconds(len(base_files), len(changes), base_bytes, change_bytes,
                                      records),
                        base_files=len(base_files), base_bytes=base_bytes,
                        change_bytes=change_bytes, rows=rows)


def schedule(costs: Sequence[float], cores: int, warmup: float = 0.0,
             first_wave_extra: Sequence[float] | None = None) -> float:
    """Makespan of tasks over ``cores`` slots, longest first onto the least-loaded slot;
    each task of the first wave also pays ``warmup`` and its ``first_wave_extra``."""
    if not costs:
        return 0.0
    extra = first_wave_extra or [0.0] * len(costs)
    slots = [warmup] * max(1, min(cores, len(costs)))
    first_wave = len(slots)
    heapq.heapify(slots)
    ordered = sorted(range(len(costs)), key=lambda i: -costs[i])
    for n, i in enumerate(ordered):
        cost = costs[i] + (extra[i] if n < first_wave else 0.0)
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
                   warmup: float = 0.0, first_wave_record_s: float = 0.0,
                   model: CostModel | None = None, heap_rows: float = 0.0) -> StageEstimate:
    """One stateful stage: a task per partition loads all its stores (a join's four), then
    the first batch runs on what they hold. ``heap_rows``: the rows the executor's heap holds
    at once (every stage's, over the executors)."""
    per_task: dict[int, list[InstanceWork]] = {}
    for work in works:
        per_task.setdefault(work.partition, []).append(work)
    tasks = {p: sum(w.seconds for w in ws) for p, ws in per_task.items()}
    replay = {p: first_wave_record_s * sum(w.records for w in ws) for p, ws in per_task.items()}
    load = schedule(list(tasks.values()), cores, warmup, list(replay.values()))
    waves = math.ceil(len(tasks) / max(1, cores)) if tasks else 0
    slowest = sorted(per_task, key=lambda p: -tasks[p])[:waves]
    critical = tuple(sorted((w for p in slowest for w in per_task[p]),
                            key=lambda w: -w.seconds))
    rows = sum(w.rows for w in critical)
    factor, rows_s, gc_s, share = 1.0, 0.0, 0.0, 0.0
    if model is not None:
        share = base_share(critical, model, warmup)
        factor = effective_factor(model, share)
        rows_s = model.row_s * rows
        gc_s = model.gc_row_s * rows * heap_rows / 1e6
    base_waves = sum(1 for p in slowest if any(w.base_files for w in per_task[p]))
    waves_s = 0.0
    if model is not None and any(w.files for w in works):
        waves_s = model.wave_s * waves + model.base_wave_s * base_waves
    return StageEstimate(operator_id, factor * load + rows_s + gc_s + waves_s, len(tasks), waves,
                         warmup, replay[slowest[0]] if slowest else 0.0, critical, load, rows,
                         rows_s, gc_s, share, waves_s, base_waves)


def base_share(critical: Sequence[InstanceWork], model: CostModel, warmup: float) -> float:
    """The part of the critical path's load spent on bases (snapshot/zip files and bytes,
    and the warm-up of opening one beyond that of replaying change files)."""
    base = sum(model.base_file_s * w.base_files + model.base_byte_s * w.base_bytes
               for w in critical)
    if any(w.base_files for w in critical):
        base += max(0.0, warmup - model.first_wave_s)
    total = sum(w.seconds for w in critical) + warmup
    return min(1.0, base / total) if total > 0 else 0.0


def effective_factor(model: CostModel, share: float) -> float:
    """The first batch's multiple of a load whose ``share`` is opening bases."""
    return share * model.base_factor + (1 - share) * model.load_factor


def _stages(works: Sequence[InstanceWork], model: CostModel, cores: int, executors: int = 1
            ) -> tuple[StageEstimate, ...]:
    """Stateful stages run one after another; only the first pays the JVM's warm-up."""
    by_op: dict[int, list[InstanceWork]] = {}
    for work in works:
        by_op.setdefault(work.operator_id, []).append(work)
    warmup = _warmup(model, works)
    heap_rows = heap_rows_per_executor(works, executors)
    return tuple(stage_estimate(op, ws, cores, warmup if n == 0 else 0.0,
                                model.first_wave_record_s if n == 0 else 0.0, model, heap_rows)
                 for n, (op, ws) in enumerate(sorted(by_op.items())))


def heap_rows_per_executor(works: Sequence[InstanceWork], executors: int = 1) -> float:
    """Rows one executor holds after the load: the partitions spread evenly over them."""
    return sum(w.rows for w in works) / max(1, executors)


def fixed_seconds(stages: Sequence[StageEstimate], model: CostModel) -> float:
    """The model's fixed part (either sign), paid by a restart that loads anything."""
    loads = any(w.files for stage in stages for w in stage.critical)
    return model.restart_s if loads else 0.0


def restart_seconds(stages: Sequence[StageEstimate], model: CostModel) -> float:
    """The user-visible restart (first batch over an empty checkpoint's), without re-runs."""
    return max(0.0, sum(s.seconds for s in stages) + fixed_seconds(stages, model))


def with_cores(estimate: RecoveryEstimate, cores: int) -> float:
    """The same load scheduled over another number of cores (for what-if questions)."""
    stages = _stages(estimate.instances, estimate.model, cores, estimate.executors)
    return restart_seconds(stages, estimate.model) + estimate.rerun_s


DEFAULT_BYTES_PER_RECORD = 120.0
"""Compressed bytes per state record when no file can be sampled (reference pipeline: ~110)."""

DEFAULT_ROW_BYTES = 200.0
"""Decoded key + value bytes per state record when no file can be sampled."""

SAMPLE_PREFIX_BYTES = 1 << 20
"""A sampled file larger than this is decoded from its first MiB only (records per compressed
byte of a stream's prefix are those of the whole file, to within one compression block)."""


class RecordSample(NamedTuple):
    """What decoding a sample of state files told about its records."""

    bytes_per_record: float
    """Compressed bytes per record in the files."""
    row_bytes: float
    """Key + value bytes per record once decoded (what a row holds in memory, before the
    objects around it)."""
    source: str


def records_in(ckpt: Checkpoint, file: StateFile, cap: int, data: bytes | None = None
                ) -> tuple[int, int, int]:
    """(records, compressed bytes they came from, their key + value bytes) of ``file``, or of
    its first ``cap`` bytes: the stream is decoded until the cut ends it. ``data``: the
    file's content, if read."""
    from statekit.checkpoint.state_data import file_codec, file_records
    from statekit.formats.compression import decompress_prefix
    from statekit.formats.records import records_from_decompressed
    from statekit.support.errors import StatekitError

    count = row_bytes = 0
    if file.size <= cap:
        for record in file_records(ckpt, file, data):
            count += 1
            row_bytes += len(record.key) + len(record.value or b"")
        return count, file.size, row_bytes
    if data is not None:
        head = data[:cap]
    else:
        with ckpt.fs.open(file.path, "rb") as handle:
            head = handle.read(cap)
    shown = ckpt.display(file.path)
    decoded, covered = decompress_prefix(head, file_codec(ckpt, head[:8], shown), path=shown)
    try:
        for record in records_from_decompressed(decoded, file.kind, shown=shown):
            count += 1
            row_bytes += len(record.key) + len(record.value or b"")
    except StatekitError:
        pass  # the cut (mid-record): every record before it counted
    return count, covered, row_bytes


def sample_bytes_per_record(ckpt: Checkpoint, instances: Sequence[StoreInstance],
                            limit: int = 12, cap: int = SAMPLE_PREFIX_BYTES) -> RecordSample:
    """Compressed bytes per record, from up to ``limit`` record files spread over the
    instances (their records counted by actually reading them, a large file's from its
    first ``cap`` bytes: the estimate stays well under a second on GBs of state)."""
    from statekit.support.errors import StatekitError

    files = [f for i in instances for f in i.of_kind("delta", "snapshot", "changelog")]
    if not files:
        return RecordSample(DEFAULT_BYTES_PER_RECORD, DEFAULT_ROW_BYTES, "default")
    step = max(1, len(files) // limit)
    sample = files[::step][:limit]
    size = records = row_bytes = 0
    for file in sample:
        try:
            counted, covered, decoded = records_in(ckpt, file, cap)
        except (StatekitError, OSError):
            continue
        records += counted
        size += covered
        row_bytes += decoded
    if not records:
        return RecordSample(DEFAULT_BYTES_PER_RECORD, DEFAULT_ROW_BYTES, "default")
    return RecordSample(size / records, row_bytes / records, f"sampled {len(sample)} files")


def _what_if(instances: Sequence[StoreInstance], works: Sequence[InstanceWork], version: int,
             model: CostModel, bytes_per_record: float, cores: int, values: Sequence[int],
             held_s: float, factor: float) -> tuple[WhatIf, ...]:
    """Recovery if every partition had to replay ``m`` (worst) or ``m/2`` (typical) change
    files on top of a base as large as its current one (without a base yet: as large as the
    change files so far). ``held_s``: what the first batch pays beyond the load for the rows
    the state holds — the same whatever the snapshot interval; ``factor``: the first batch's
    multiple of the load now (of its base and replay parts), applied to the what-if's
    load."""
    hdfs = model.provider == "hdfs"
    out = []
    for m in values:
        worst: dict[int, list[tuple[float, float]]] = {}
        typical: dict[int, list[tuple[float, float]]] = {}
        snapshot_bytes = 0.0
        for inst, work in zip(instances, works, strict=True):
            changes = [f for f in inst.of_kind("delta", "changelog")
                       if f.version is not None and f.version <= version]
            delta = sum(f.size for f in changes) / len(changes) if changes else 0.0
            if work.base_files:
                base_files, base = work.base_files, float(work.base_bytes)
            else:
                base_files, base = 1, float(sum(f.size for f in changes))
            snapshot_bytes += base / m
            for deltas, target in ((m, worst), (m / 2, typical)):
                records = ((base if hdfs else 0.0) + deltas * delta) / bytes_per_record
                cost = model.seconds(base_files, deltas, base, deltas * delta, records)
                target.setdefault(inst.operator_id, []).append(
                    (cost, records * model.first_wave_record_s))
        worst_s, typical_s = (max(0.0, factor * _schedule_stages(cases, model, cores)
                                  + held_s) for cases in (worst, typical))
        out.append(WhatIf(m, worst_s, typical_s, snapshot_bytes, worst_s * model.low,
                          worst_s * model.high))
    return tuple(out)


def _schedule_stages(stages: dict[int, list[tuple[float, float]]], model: CostModel,
                     cores: int) -> float:
    """The makespans of stages of (cost, first-wave replay extra) tasks, one after another;
    the first pays the warm-up from a base."""
    total = 0.0
    for n, (_, tasks) in enumerate(sorted(stages.items())):
        costs, extras = [c for c, _ in tasks], [e for _, e in tasks]
        total += schedule(costs, cores, model.first_wave_base_s, extras) if n == 0 else \
            schedule(costs, cores)
    return total


def _count(n: float) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f}"


def load_multiple(stages: Sequence[StageEstimate], model: CostModel) -> float:
    """What the first batch pays per second of state load, over every stage."""
    load = sum(s.load_s for s in stages)
    if load <= 0:
        return model.load_factor
    return sum(s.load_s * effective_factor(model, s.base_share) for s in stages) / load


def breakdown(stages: Sequence[StageEstimate], model: CostModel) -> tuple[Term, ...]:
    """The critical path's seconds by kind of cost, with what they are in numbers."""
    from statekit.support.presentation import human_bytes

    critical = [w for stage in stages for w in stage.critical]
    seconds = {"records": 0.0, "bytes": 0.0, "files": 0.0, "fixed": 0.0, "rows": 0.0,
               "gc": 0.0}
    factor = load_multiple(stages, model)
    for work in critical:
        for name, value in work.terms(model).items():
            seconds[name] += value * factor
    seconds["fixed"] += sum(s.warmup_s for s in stages) * factor
    seconds["records"] += sum(s.first_wave_replay_s for s in stages) * factor
    seconds["rows"] = sum(s.rows_s for s in stages)
    seconds["gc"] = sum(s.gc_s for s in stages)
    offset = fixed_seconds(stages, model) + sum(s.waves_s for s in stages)
    if offset > 0:
        seconds["fixed"] += offset
    total = sum(seconds.values())
    if total <= 0:
        return ()
    based = any(w.base_files for w in critical)
    if model.provider == "hdfs":
        records = "snapshot and delta records" if based else "delta records"
        data = "snapshot and delta files" if based else "delta files"
        store = "copying them into the first batch's map and committing it"
    else:
        records = "changelog records"
        data = "SST, zip and changelog files" if based else "changelog files"
        store = "the first batch's commit of a database that holds them"
    rows = sum(s.rows for s in stages)
    details = {
        "records": f"replaying {_count(sum(w.records for w in critical))} {records}",
        "bytes": f"reading {human_bytes(sum(w.bytes for w in critical))} of {data}",
        "files": f"opening {sum(w.files for w in critical):,} files",
        "fixed": f"starting {len(critical):,} store instance(s), the first wave's JVM "
                 "warm-up and the first batch's planning",
        "rows": f"holding {_count(rows)} rows: {store}",
        "gc": f"garbage collection with {_count(rows)} rows live on the heap"}
    terms = [Term(name, value, value / total, details[name]) for name, value in seconds.items()
             if value > 0]
    if offset < 0:  # what a new query's first batch pays and a restart does not
        terms.append(Term("offset", max(offset, -total), max(offset, -total) / total,
                          "less what a new query's first batch pays anyway"))
    return tuple(sorted(terms, key=lambda t: -t.seconds))


def estimate_recovery(ckpt: Checkpoint, *, cores: int, model: CostModel | None = None,
                      timings: Sequence[BatchTiming] | None = None,
                      sink: Location | None = None,
                      rto_s: float | None = None, current_min_deltas: int | None = None,
                      executors: int = 1, memory_limit: int | None = None,
                      version: int | None = None, loaded_rows: int | None = None,
                      tasks: Sequence[StatefulTask] | None = None) -> RecoveryEstimate:
    """The restart cost of ``ckpt`` now (see the module docstring). No JVM. ``cores``: task
    slots in all (over ``executors``); ``memory_limit``: each executor's heap, to warn when
    the state will not fit; ``model``: by default the fitted constants in this machine's
    seconds (:func:`statekit.recovery.cost_model.local_model`). ``version``: the state
    version the restart loads as the doctor found it (its restart plan knows more than the
    logs alone, e.g. with ``commits/`` gone); ``loaded_rows``: the keys that version holds
    (from its replayed history), which the memory figure is scaled to — the files' record
    counts also count every update and delete. ``timings``: the progress log's batches; the
    query's restarts in it scale the model to what they measured
    (:mod:`statekit.recovery.history`); ``tasks``: the stateful tasks of Spark's event log,
    which time each restart's slowest partition."""
    from statekit.recovery.history import learn, observed_restarts, partition_checks

    model = model or local_model(ckpt)
    if not timings:
        return _estimate(ckpt, cores=cores, model=model, timings=timings, sink=sink,
                         rto_s=rto_s, current_min_deltas=current_min_deltas,
                         executors=executors, memory_limit=memory_limit, version=version,
                         loaded_rows=loaded_rows)
    # one sample of the files' records for today's estimate, the past restarts' and the
    # learned one: the records per byte are the checkpoint's, whatever the version
    sample = sample_bytes_per_record(ckpt, [ckpt.inventory.instances[k]
                                            for k in sorted(ckpt.inventory.instances)])
    under = partial(_estimate, ckpt, cores=cores, timings=timings, sink=sink, rto_s=rto_s,
                    current_min_deltas=current_min_deltas, executors=executors,
                    memory_limit=memory_limit, version=version, loaded_rows=loaded_rows,
                    sample=sample)
    plain = under(model=model)
    today = partition_seconds(plain.instances, model)

    at_version: dict[int, list[InstanceWork]] = {}

    def works_at(restart: ObservedRestart) -> list[InstanceWork]:
        if restart.batch not in at_version:
            at_version[restart.batch] = load_work(ckpt, restart.batch, model, sample)[1]
        return at_version[restart.batch]

    def modelled(restart: ObservedRestart) -> float | None:
        return restart_at(works_at(restart), model, cores, executors)

    def checks(restart: ObservedRestart) -> list[PartitionCheck]:
        return partition_checks(tasks or (), restart, partition_seconds(works_at(restart),
                                                                        model))

    today_rows = loaded_rows if loaded_rows is not None else \
        sum(w.rows for w in plain.instances) or None
    learning = learn(observed_restarts(timings), modelled, plain.restart_s, today_rows,
                     checks if tasks else None)
    if today:
        slowest = max(today, key=lambda key: today[key])
        learning = replace(learning, slowest_today=(*slowest, today[slowest]))
    if learning.scale is None:
        return replace(plain, learning=learning)
    scaled = model.scaled(learning.scale, "learned")
    learned = replace(scaled, restart_s=scaled.restart_s + learning.fixed_s)
    return replace(under(model=learned), learning=learning)


def restart_at(works: Sequence[InstanceWork], model: CostModel, cores: int, executors: int
               ) -> float | None:
    """What the model says a restart that loads ``works`` (:func:`load_work` at a version)
    costs (its state's part, no re-runs); ``None`` when the files to load it are gone."""
    if not any(w.files for w in works) or any(not w.loadable for w in works):
        return None
    return restart_seconds(_stages(works, model, cores, executors), model)


def partition_seconds(works: Sequence[InstanceWork], model: CostModel
                      ) -> dict[tuple[int, int], float]:
    """The first batch's cost of each partition's load by (stateful stage order,
    partition): its stores' load × the load factor (what its task pays over a warm one)."""
    order = {op: n for n, op in enumerate(sorted({w.operator_id for w in works}))}
    out: dict[tuple[int, int], float] = {}
    for work in works:
        key = (order[work.operator_id], work.partition)
        out[key] = out.get(key, 0.0) + work.seconds * model.load_factor
    return out


def _estimate(ckpt: Checkpoint, *, cores: int, model: CostModel,
              timings: Sequence[BatchTiming] | None, sink: Location | None,
              rto_s: float | None, current_min_deltas: int | None, executors: int,
              memory_limit: int | None, version: int | None, loaded_rows: int | None,
              sample: RecordSample | None = None) -> RecoveryEstimate:
    """The estimate under ``model`` (:func:`estimate_recovery` without learning;
    ``sample``: the files' records, when already sampled)."""
    from statekit.state.memory import state_memory

    reruns, planned = plan_reruns(ckpt, timings, sink)
    version = version_loaded(version, reruns, planned)
    instances, works, sample = load_work(ckpt, version, model, sample)
    bytes_per_record = sample.bytes_per_record
    stages = _stages(works, model, cores, executors)
    load = sum(s.load_s for s in stages)
    restart = restart_seconds(stages, model)
    held = sum(s.rows_s + s.gc_s for s in stages) + fixed_seconds(stages, model)
    rerun = sum(r.seconds for r in reruns)
    memory = state_memory(model.provider, _rows_loaded(works, loaded_rows),
                          sample.row_bytes, executors, memory_limit, ckpt.conf)
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
        what_if = _what_if(instances, works, version, model, bytes_per_record, cores, values,
                           held, load_multiple(stages, model))
    recommendation = None
    if rto_s is not None and what_if:
        fitting = [w.min_deltas for w in what_if if within_rto(w.worst_high_s + rerun, rto_s)]
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
    notes += rerun_notes(reruns, sink, version)
    if not ckpt.location.is_local and model.source == "default":
        notes.append("object storage: the defaults were measured on local disk, where a "
                     "file costs well under a millisecond; run with --calibrate to time "
                     "this store's per-file latency and bandwidth, or --measure to time "
                     "Spark loading the slowest partition")
    if memory is not None and memory.note:
        notes.append(memory.note)
    return RecoveryEstimate(ckpt.location.url, model.provider, cores, version,
                            restart + rerun, load, rerun, reruns, stages, tuple(works), model,
                            what_if, recommendation, tuple(notes), restart * model.low + rerun,
                            restart * model.high + rerun, breakdown(stages, model), restart,
                            executors, memory)


def _rows_loaded(works: Sequence[InstanceWork], loaded_rows: int | None
                 ) -> list[tuple[float, float]]:
    """(rows held, records replayed) per instance; the rows scaled so that they sum to the
    loaded version's keys when those are known."""
    estimated = sum(w.rows for w in works)
    scale = loaded_rows / estimated if loaded_rows is not None and estimated > 0 else 1.0
    return [(w.rows * scale, w.records) for w in works]


def load_work(ckpt: Checkpoint, version: int, model: CostModel,
              sample: RecordSample | None = None
              ) -> tuple[list[StoreInstance], list[InstanceWork], RecordSample]:
    """Every store instance and what loading it at ``version`` reads (files, bytes, records
    — records estimated from a sample of decoded files, unless ``sample`` is given — and
    seconds under ``model``), and the sample's bytes per record."""
    from statekit.checkpoint.state_data import readable_zip_metadata

    inventory = ckpt.inventory
    instances = [inventory.instances[k] for k in sorted(inventory.instances)]
    sample = sample or sample_bytes_per_record(ckpt, instances)
    bytes_per_record = sample.bytes_per_record
    bases = [f for i in instances for f in i.files_to_load(version)[:1] if f.kind == "zip"]
    metas = readable_zip_metadata(ckpt, bases) if bases else {}
    referenced = {path: {s.dfs_name for s in meta.sst_files} for path, meta in metas.items()}
    keys = {path: meta.num_keys for path, meta in metas.items()}
    works = [instance_work(i, version, model, bytes_per_record, referenced, keys)
             for i in instances]
    return instances, works, sample


def load_features(ckpt: Checkpoint) -> tuple[int, list[InstanceWork]]:
    """What a restart of ``ckpt`` now would load, per store instance (for fitting models:
    ``benchmarks/bench_recovery_grid.py``)."""
    _, version = plan_reruns(ckpt)
    return version, load_work(ckpt, version, default_model(ckpt))[1]
