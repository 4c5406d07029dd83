"""Fitting the cost model to where the checkpoint lives: ``recovery --calibrate`` times
reading the checkpoint's own files through its filesystem (what object stores change), and
``recovery --measure`` scales the whole model by Spark's own load times on the user's master
(timed by :mod:`statekit.jobs.recovery_measure`).

Apart from the estimate because both take measurements and return a tuned
:class:`~statekit.recovery.cost_model.CostModel`; the estimate only uses one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.recovery.cost_model import READER_OVERHEAD, CostModel
from statekit.recovery.estimate import (
    SAMPLE_PREFIX_BYTES,
    InstanceWork,
    RecoveryEstimate,
    records_in,
)
from statekit.support.errors import StatekitError


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
            records += records_in(ckpt, file, SAMPLE_PREFIX_BYTES, data[file.path])[0]
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
