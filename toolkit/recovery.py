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

Per-instance cost is linear in what is read — files of the base, change files, bytes of
each, records replayed, plus a fixed cost — and the first wave of tasks also pays the JVM's
one-time warm-up of the load path: a fixed part (tens of ms for HDFS, ~0.4 s for opening
RocksDB from a zip) and a part per record (the first wave replays while the JIT compiles the
replay code: up to ~1.5× slower than later waves on 2 cores). Records are counted by decoding
a sample of the files (a large file from its first MiB). The per-provider constants are fitted
by non-negative least squares on Spark's own per-partition load times of restarts measured on
one half of a grid (10k–3M keys, ~50 B and ~1 KB values, 4 and 16 partitions, every load
path; ``benchmarks/bench_recovery_grid.py``) and validated on the other half, whose extreme
errors become the estimate's range. ``calibrate`` replaces the filesystem-dependent part
(per-file latency, bytes/s) with what reading the checkpoint's own files through its own
filesystem measures — what matters on an object store; ``scale_to_measurement`` scales the
whole model to loads Spark timed on the user's own master (``recovery --measure``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.location import Location
from statekit.checkpoint.logs import provider_short_name
from statekit.progress_log import BatchTiming

if TYPE_CHECKING:
    from statekit.restart_memory import StateMemory

WHAT_IF_MIN_DELTAS = (1, 2, 5, 10, 20, 50, 100)


@dataclass(frozen=True)
class CostModel:
    """Seconds a restart spends per unit of state read, for one provider's load path.

    The terms separate what grows with files (opening, a ``.crc`` beside each on Hadoop
    filesystems, RocksDB's per-SST work when opening a database), with bytes (reading and
    decompressing; for RocksDB's base, copying SSTs next to the local database and unzipping),
    with records (replaying each into the in-memory map or the database) and what is paid once
    per task and once per core of the first wave (the JVM's warm-up of the load path).
    """

    provider: str
    per_task_s: float
    """Fixed cost of bringing up one store instance from files."""
    base_file_s: float
    """Per file of the base: a snapshot (HDFS) or a zip and each SST it references."""
    change_file_s: float
    """Per change file replayed: ``.delta`` (HDFS) or ``.changelog`` (RocksDB)."""
    base_byte_s: float
    """Per byte of the base (HDFS: decompressing a snapshot; RocksDB: copying its SSTs)."""
    change_byte_s: float
    """Per byte of change files (decompressing them)."""
    record_s: float
    """Per record replayed into the store (HDFS snapshot and delta records; RocksDB
    changelog records — zip/SST contents are copied as files, not iterated)."""
    first_wave_s: float
    """One-time warm-up (class loading, JIT, native libraries) paid by each task of the
    first wave of the first stateful stage when it loads from change files only ..."""
    first_wave_base_s: float
    """... and when it loads a base (RocksDB: opening a checkpoint from a zip costs more)."""
    first_wave_record_s: float = 0.0
    """Extra per record replayed by a task of the first wave: the replay runs while the JIT
    is still compiling it (the benchmark's first-wave partitions replayed up to ~1.5× slower
    than the same partitions in later waves)."""
    load_factor: float = 1.0
    """The first batch after a restart pays this multiple of the replay part of the load
    makespan that Spark's own load log times (change files, records, instances) ..."""
    base_factor: float = 1.0
    """... and this multiple of its base part (a snapshot's or zip's files and bytes, the
    warm-up of opening one): the first batch of a new query, which the estimate is measured
    against, pays part of opening a store too."""
    row_s: float = 0.0
    """Per row the busiest core's stores hold after the load: what the first batch pays on
    top (HDFS: copying the loaded map into the batch's new version and committing it;
    RocksDB: the first commit of a database that holds them)."""
    gc_row_s: float = 0.0
    """Per row on the busiest core × million rows the executor's heap holds at once (the
    HDFS provider keeps every loaded partition's map on the heap: garbage collection
    slows as the live set grows)."""
    wave_s: float = 0.0
    """Per task the busiest core runs in a stateful stage, either sign: a task's first commit
    after a restart costs other than a new query's first commit on an empty checkpoint (a
    RocksDB store re-uploads or re-links its files; a new one writes its first)."""
    restart_s: float = 0.0
    """Once per restart that loads any state. Either sign: what the estimate measures
    against, a new query's first batch on an empty checkpoint, pays costs of its own (a
    restart of a small state is faster than it); the estimate never goes below 0."""
    low: float = 1.0
    """The smallest measured ÷ estimated ratio of this load path on held-out restarts ..."""
    high: float = 1.0
    """... and the largest: the estimate's range is [estimate × low, estimate × high]."""
    source: str = "default"
    """``default`` (fitted on the benchmark grid), ``calibrated`` (this filesystem's latency
    and bandwidth) or ``measured`` (scaled to a load Spark timed on the user's master)."""

    def terms(self, base_files: int, change_files: float, base_bytes: float,
              change_bytes: float, records: float) -> dict[str, float]:
        """The seconds of one instance's load, by what they grow with."""
        return {"fixed": self.per_task_s,
                "files": self.base_file_s * base_files + self.change_file_s * change_files,
                "bytes": self.base_byte_s * base_bytes + self.change_byte_s * change_bytes,
                "records": self.record_s * records}

    def seconds(self, base_files: int, change_files: float, base_bytes: float,
                change_bytes: float, records: float) -> float:
        """Seconds to load one instance (``change_files`` fractional for the what-if's
        typical case: half an interval of deltas)."""
        return sum(self.terms(base_files, change_files, base_bytes, change_bytes,
                              records).values())

    def scaled(self, factor: float, source: str) -> CostModel:
        """Every cost × ``factor`` (a machine ``factor`` times slower than the benchmark's):
        every ``*_s`` field, so a cost added later cannot be forgotten here."""
        costs = {f.name: getattr(self, f.name) * factor for f in fields(self)
                 if f.name.endswith("_s")}
        return replace(self, source=source, **costs)


#: The load terms were fitted by ``benchmarks/bench_recovery_grid.py`` on Spark's own
#: per-partition load times (a grid with long chains of small change files, which tell the
#: per-file cost from the per-task one); the first-batch terms (``load_factor`` …
#: ``restart_s``) on warm pairs — restart and empty checkpoint in one warmed-up JVM — of the
#: fit half of the current grid (docs/recovery.md: 100k–3M keys, ~50 B and ~400 B values, 4
#: and 16 partitions on 2 cores, every load path; the variant with the least leave-one-out
#: error that still charges for replayed records), then × what cold restarts of that half
#: take per second of that fit (HDFS 1.0, RocksDB 0.79: a cold JVM overlaps part of its
#: warm-up with a long load); ``low``/``high`` are the extreme measured ÷ estimated ratios
#: of the other half.
DEFAULT_MODELS = {
    "hdfs": CostModel("hdfs", per_task_s=0.0115, base_file_s=0.001284, change_file_s=0.0004898,
                      base_byte_s=3.091e-09, change_byte_s=3.954e-09, record_s=8.686e-07,
                      first_wave_s=0.01512, first_wave_base_s=0.02843,
                      first_wave_record_s=8.625e-07, load_factor=3.02, base_factor=3.02,
                      row_s=0.0, gc_row_s=0.0, wave_s=0.0, restart_s=-0.3254, low=0.722,
                      high=1.23),
    "rocksdb": CostModel("rocksdb", per_task_s=0.0, base_file_s=0.01191,
                         change_file_s=0.0006224, base_byte_s=2.916e-09,
                         change_byte_s=5.606e-09, record_s=5.338e-06, first_wave_s=0.02753,
                         first_wave_base_s=0.3776, first_wave_record_s=8.105e-07,
                         load_factor=1.906, base_factor=2.275, row_s=0.0, gc_row_s=0.0,
                         wave_s=0.0, restart_s=-0.4046, low=0.47, high=1.07),
}

READER_OVERHEAD = {"hdfs": (0.0319, 1.29, 1.67e-07), "rocksdb": (0.0422, 1.38, 1.04e-06)}
"""``--measure``: on the benchmark machine, Spark's state reader loading one partition and
iterating its rows took ``fixed + ratio × (the model's restart load of it) + per_row × rows``
(fitted on the grid's fit half: a restart never iterates a RocksDB zip's keys, the reader
does), so a reader timing on the user's master over that is how much slower or faster than
the benchmark machine a restart's load runs there."""


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
    """What the busiest core's tasks' first commits cost beyond a new query's (either sign)."""

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

    @property
    def explanation(self) -> str:
        """The dominant terms in words: "94 % replaying 1.1 M delta records; 5 % ..."."""
        return "; ".join(f"{t.share:.0%} {t.detail}" for t in self.breakdown
                         if t.share >= 0.05) or "nothing to load"

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
    waves_s = model.wave_s * waves if model is not None and any(w.files for w in works) \
        else 0.0
    return StageEstimate(operator_id, factor * load + rows_s + gc_s + waves_s, len(tasks), waves,
                         warmup, replay[slowest[0]] if slowest else 0.0, critical, load, rows,
                         rows_s, gc_s, share, waves_s)


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


def default_model(ckpt: Checkpoint) -> CostModel:
    """The default cost model of the checkpoint's provider."""
    provider = provider_short_name(ckpt.conf.get(
        "spark.sql.streaming.stateStore.providerClass")) or "hdfs"
    return DEFAULT_MODELS.get(provider, DEFAULT_MODELS["hdfs"])


def with_cores(estimate: RecoveryEstimate, cores: int) -> float:
    """The same load scheduled over another number of cores (for what-if questions)."""
    stages = _stages(estimate.instances, estimate.model, cores, estimate.executors)
    return restart_seconds(stages, estimate.model) + estimate.rerun_s


DEFAULT_BYTES_PER_RECORD = 120.0
"""Compressed bytes per state record when no file can be sampled (reference pipeline: ~110)."""

DEFAULT_ROW_BYTES = 200.0
"""Decoded key + value bytes per state record when no file can be sampled."""

SKIPPED_BATCH_S = 0.35
"""A re-planned batch whose sink already committed it, without a progress log to time a warm
batch's planning and log writes (``triggerExecution − addBatch``; benchmark: 0.35 s)."""


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


def _records_in(ckpt: Checkpoint, file: StateFile, cap: int, data: bytes | None = None
                ) -> tuple[int, int, int]:
    """(records, compressed bytes they came from, their key + value bytes) of ``file``, or of
    its first ``cap`` bytes: the stream is decoded until the cut ends it. ``data``: the
    file's content, if read."""
    from statekit.checkpoint.state_data import file_codec, file_records
    from statekit.errors import StatekitError
    from statekit.formats.compression import decompress_prefix
    from statekit.formats.records import records_from_decompressed

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
    from statekit.errors import StatekitError

    files = [f for i in instances for f in i.of_kind("delta", "snapshot", "changelog")]
    if not files:
        return RecordSample(DEFAULT_BYTES_PER_RECORD, DEFAULT_ROW_BYTES, "default")
    step = max(1, len(files) // limit)
    sample = files[::step][:limit]
    size = records = row_bytes = 0
    for file in sample:
        try:
            counted, covered, decoded = _records_in(ckpt, file, cap)
        except (StatekitError, OSError):
            continue
        records += counted
        size += covered
        row_bytes += decoded
    if not records:
        return RecordSample(DEFAULT_BYTES_PER_RECORD, DEFAULT_ROW_BYTES, "default")
    return RecordSample(size / records, row_bytes / records, f"sampled {len(sample)} files")


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
    readable = ckpt.ledger.offsets  # a damaged old entry costs its timestamp, not the answer
    stamps = {b: readable[b] for b in [*committed, *pending] if b in readable}
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
    from statekit.presentation import human_bytes

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
                      executors: int = 1, memory_limit: int | None = None
                      ) -> RecoveryEstimate:
    """The restart cost of ``ckpt`` now (see the module docstring). No JVM. ``cores``: task
    slots in all (over ``executors``); ``memory_limit``: each executor's heap, to warn when
    the state will not fit."""
    from statekit.restart_memory import state_memory

    model = model or default_model(ckpt)
    reruns, version = plan_reruns(ckpt, timings, sink)
    instances, works, sample = load_work(ckpt, version, model)
    bytes_per_record = sample.bytes_per_record
    stages = _stages(works, model, cores, executors)
    load = sum(s.load_s for s in stages)
    restart = restart_seconds(stages, model)
    held = sum(s.rows_s + s.gc_s for s in stages) + fixed_seconds(stages, model)
    rerun = sum(r.seconds for r in reruns)
    memory = state_memory(model.provider, [(w.rows, w.records) for w in works],
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
        fitting = [w.min_deltas for w in what_if if w.worst_high_s + rerun <= rto_s]
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
                     "this store's per-file latency and bandwidth, or --measure to time "
                     "Spark loading the slowest partition")
    if memory is not None and memory.note:
        notes.append(memory.note)
    return RecoveryEstimate(ckpt.location.url, model.provider, cores, version,
                            restart + rerun, load, rerun, reruns, stages, tuple(works), model,
                            what_if, recommendation, tuple(notes), restart * model.low + rerun,
                            restart * model.high + rerun, breakdown(stages, model), restart,
                            executors, memory)


def load_work(ckpt: Checkpoint, version: int, model: CostModel
              ) -> tuple[list[StoreInstance], list[InstanceWork], RecordSample]:
    """Every store instance and what loading it at ``version`` reads (files, bytes, records
    — records estimated from a sample of decoded files — and seconds under ``model``), and
    the sample's bytes per record."""
    from statekit.checkpoint.state_data import readable_zip_metadata

    inventory = ckpt.inventory
    instances = [inventory.instances[k] for k in sorted(inventory.instances)]
    sample = sample_bytes_per_record(ckpt, instances)
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
                     "_spark_metadata/<batch>), Spark skips the re-run: give --file-sink PATH "
                     "(or a --progress-log log naming the sink) to check")
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

    from statekit.errors import StatekitError

    files = [f for i in ckpt.inventory.instances.values()
             for f in i.of_kind("delta", "snapshot", "changelog", "zip")]
    if not files:
        return model, None
    step = max(1, len(files) // limit)
    sample = files[::step][:limit]
    started = time.perf_counter()
    data = {f.path: ckpt.read_bytes(f.path, fast=False) for f in sample}
    read_s = max(time.perf_counter() - started, 1e-6)
    size = sum(len(d) for d in data.values())
    records = 0
    started = time.perf_counter()
    for file in sample:
        if file.kind == "zip":
            continue
        try:
            records += _records_in(ckpt, file, SAMPLE_PREFIX_BYTES, data[file.path])[0]
        except StatekitError:
            continue
    decode_s = max(time.perf_counter() - started, 1e-6)
    small = sorted(sample, key=lambda f: f.size)[: max(1, len(sample) // 2)]
    started = time.perf_counter()
    for file in small:
        ckpt.read_bytes(file.path, fast=False)  # the per-file cost Spark pays
    latency = (time.perf_counter() - started) / len(small)
    # bandwidth: what the reads took beyond their per-file latency; too few bytes to tell
    # (under 4 MiB) keeps the default
    transfer_s = read_s - latency * len(sample)
    bandwidth = size / transfer_s if size >= 4 << 20 and transfer_s > 0 else 0.0
    measured = Calibration(len(sample), size, records, latency, bandwidth, records / decode_s)
    # Spark's local/HDFS filesystems open a .crc beside every state file, object stores none
    per_file = latency * (2 if ckpt.inventory.crc_files else 1)
    per_byte = 1 / bandwidth if bandwidth else 0.0
    tuned = replace(model, base_file_s=max(model.base_file_s, per_file),
                    change_file_s=max(model.change_file_s, per_file),
                    base_byte_s=max(model.base_byte_s, per_byte),
                    change_byte_s=max(model.change_byte_s, per_byte), source="calibrated")
    return tuned, measured


@dataclass(frozen=True)
class LoadTiming:
    """One store instance's load, as Spark timed it on the user's master (``--measure``)."""

    operator_id: int
    store: str
    partition: int
    version: int
    seconds: float


@dataclass(frozen=True)
class Measurement:
    """What ``--measure`` timed and how it scaled the model."""

    timings: tuple[LoadTiming, ...]
    empty_job_s: float
    """A job that loads nothing (scheduling), subtracted from each timing."""
    fetch_s: float
    """Fetching the instances' files from a store Spark cannot reach from here (added)."""
    measured_s: float
    """What the timed loads took, net."""
    predicted_s: float
    """What the default model predicts for the same reads through Spark's state reader."""
    factor: float
    """measured ÷ predicted: this cluster against the benchmark machine."""


def measure_targets(estimate: RecoveryEstimate, count: int = 2) -> list[InstanceWork]:
    """The slowest loadable store instances: the ones whose timing says the most."""
    loading = [w for w in estimate.instances if w.loadable and w.files]
    return sorted(loading, key=lambda w: -w.seconds)[:count]


MEASURE_FACTOR_LIMITS = (0.05, 50.0)
"""A factor outside this range is a broken measurement (a cluster 50× slower would be told
by the user's eyes): it is clamped (``Measurement`` keeps the measured and predicted seconds
it came from)."""


def scale_to_measurement(model: CostModel, works: Sequence[InstanceWork],
                         timings: Sequence[LoadTiming], empty_job_s: float, fetch_s: float
                         ) -> tuple[CostModel, Measurement]:
    """The model scaled so that it predicts what Spark measured for ``works``."""
    fixed, ratio, per_row = READER_OVERHEAD.get(model.provider, (0.0, 1.0, 0.0))
    predicted = fixed * len(works) + ratio * sum(w.seconds for w in works) + \
        per_row * sum(w.rows for w in works)
    measured = sum(max(0.0, t.seconds - empty_job_s) for t in timings) + fetch_s
    low, high = MEASURE_FACTOR_LIMITS
    factor = min(high, max(low, measured / predicted)) if predicted > 0 else 1.0
    return (model.scaled(factor, "measured"),
            Measurement(tuple(timings), empty_job_s, fetch_s, measured, predicted, factor))
