"""The cost model of a restart: seconds per unit of state read, per provider's load path,
and the constants the benchmark grid fitted.

Kept apart from the estimate (:mod:`statekit.recovery.estimate`) because three consumers change it
without estimating anything: ``--calibrate`` and ``--measure``
(:mod:`statekit.recovery.scaling`) tune it to the user's storage and cluster, and
``benchmarks/bench_recovery_grid.py`` fits it and prints the constants to paste here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.logs import provider_short_name
from statekit.recovery.machine_speed import MachineSpeed, machine_speed


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
    base_wave_s: float = 0.0
    """Per task the busiest core runs that opens a base (a RocksDB zip), either sign: a new
    query's first batch, which the estimate is measured against, creates each of its stores
    empty, and a restart that opens a base instead does not pay that on top of its load."""
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
    machine: MachineSpeed | None = None
    """The machine-speed factor the costs were multiplied by (``None``: the benchmark
    machine's seconds, as fitted or as ``--measure`` scaled them)."""

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


#: Fitted by ``benchmarks/bench_recovery_grid.py`` on Spark 4.3.0, on the machine whose probe
#: is :data:`statekit.recovery.machine_speed.REFERENCE_PROBE_S` (fit named by
#: :data:`~statekit.recovery.machine_speed.MODEL_FIT`). The load terms on Spark's own
#: per-partition load times (its state store's DEBUG log) of the fit half's cold restarts; the
#: first-batch terms (``load_factor`` … ``restart_s``) on warm pairs — restart and empty
#: checkpoint in one warmed-up JVM — of the fit half (docs/concepts/recovery.md: 100k–3M keys,
#: ~50 B and ~400 B values, 4 and 16 partitions on 2 cores, every load path; the variant with
#: the least leave-one-out error: on 4.3 a factor on the whole load, for both providers), then
#: × what cold restarts of that half take per second of that fit (HDFS 1.13, RocksDB 0.93);
#: ``low``/``high`` are the extreme measured ÷ estimated ratios of the other half. Spark 4.3
#: opens a RocksDB zip's SSTs far faster than the Spark the previous constants were fitted on
#: (a 3M-key zip restart: 0.24 s, was 2.05 s), which no speed factor could carry.
DEFAULT_MODELS = {
    "hdfs": CostModel("hdfs", per_task_s=0.0, base_file_s=0.01498, change_file_s=0.004699,
                      base_byte_s=5.452e-09, change_byte_s=0.0, record_s=1.241e-06,
                      first_wave_s=0.01418, first_wave_base_s=0.01418,
                      first_wave_record_s=7.989e-07, load_factor=1.592, base_factor=1.592,
                      row_s=0.0, gc_row_s=0.0, wave_s=0.0, base_wave_s=0.0, restart_s=-0.2015,
                      low=0.902, high=1.37),
    "rocksdb": CostModel("rocksdb", per_task_s=0.0, base_file_s=0.015, change_file_s=0.0,
                         base_byte_s=9.614e-10, change_byte_s=5.428e-09, record_s=5.642e-06,
                         first_wave_s=0.0, first_wave_base_s=0.4098,
                         first_wave_record_s=1.074e-06, load_factor=0.9586, base_factor=0.9586,
                         row_s=0.0, gc_row_s=0.0, wave_s=0.0, base_wave_s=0.0,
                         restart_s=-0.005647, low=0.365, high=1.08),
}

READER_OVERHEAD = {"hdfs": (0.0771, 0.638, 4.83e-07), "rocksdb": (0.0814, 0.896, 1.12e-06)}
"""``--measure``: on the benchmark machine, Spark's state reader loading one partition and
iterating its rows took ``fixed + ratio × (the model's restart load of it) + per_row × rows``
(fitted on the grid's fit half, with the constants above, each configuration read in a fresh
JVM as ``--measure`` reads it: a restart never iterates a RocksDB zip's keys, the reader does),
so a reader timing on the user's master over that is how much
slower or faster than the benchmark machine a restart's load runs there."""


def default_model(ckpt: Checkpoint) -> CostModel:
    """The default cost model of the checkpoint's provider, in the benchmark machine's
    seconds."""
    provider = provider_short_name(ckpt.conf.get(
        "spark.sql.streaming.stateStore.providerClass")) or "hdfs"
    return DEFAULT_MODELS.get(provider, DEFAULT_MODELS["hdfs"])


def local_model(ckpt: Checkpoint, speed: MachineSpeed | None = None) -> CostModel:
    """The default model in this machine's seconds: × the machine-speed factor
    (:func:`statekit.recovery.machine_speed.machine_speed` unless ``speed`` is given)."""
    model = default_model(ckpt)
    speed = speed or machine_speed(provider=model.provider)
    return replace(model.scaled(speed.factor, model.source), machine=speed)
