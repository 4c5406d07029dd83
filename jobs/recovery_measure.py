"""``statekit recovery --measure``: time Spark loading the slowest store instances.

The default estimate is a model fitted on one machine. Measuring on the user's own master
replaces assumption with evidence: Spark's state reader loads exactly what a restart loads
for one partition (the newest snapshot or zip at or below the version, then the change files
after it), so timing it on the slowest partitions and comparing with what the model predicts
for the same reads gives the factor by which this cluster (its CPUs, its disks, its object
store) is slower or faster than the benchmark machine.

Only the chosen partitions run: the reader plans one input partition per state partition
(in partition order), and ``collectPartitions`` runs a job on just those indices. A filter
that no row passes keeps the rows in the JVM (nothing is sent to Python). The first read (the
smallest partition of the same store) is a warm-up and is not timed: the restart pays the
JVM's warm-up in its own term. A job that reads nothing is timed too and subtracted.

When Spark cannot reach the checkpoint's store from this machine (an object store without
its Hadoop connector on the classpath, as with a plain ``pip install pyspark``), the files
those partitions load are fetched through statekit's own filesystem into a local staging
copy, timed — the download a restart pays — and Spark loads the copy.
"""

from __future__ import annotations

import posixpath
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import file_records, zip_metadata, zip_sst_paths
from statekit.jobs.state_reader import (
    JOIN_OPERATOR,
    TWS_OPERATORS,
    StateTarget,
    read_state,
    spark_path,
    state_variables,
    translate,
)
from statekit.recovery.estimate import InstanceWork
from statekit.recovery.scaling import LoadTiming
from statekit.support.errors import CorruptFile, JobFailed, StatekitError

UNREACHABLE = ("No FileSystem for scheme", "ClassNotFoundException", "UnsupportedFileSystem")


@dataclass(frozen=True)
class _Read:
    work: InstanceWork
    jdf: Any
    """The reader's DataFrame (JVM side), filtered so that no row leaves the JVM."""
    partitions: int


def _target(ckpt: Checkpoint, path: str, work: InstanceWork) -> StateTarget:
    meta = ckpt.operators.get(work.operator_id)
    name = meta.name if meta else "?"
    store = work.store if work.store != "default" else None
    variable = None
    timers = False
    if name in TWS_OPERATORS:  # one variable's read loads the whole store
        variables = state_variables(ckpt, work.operator_id)
        variable = variables[0] if variables else None
        timers = variable is None
    if name == JOIN_OPERATOR and store is None:
        store = work.store
    return StateTarget(path, work.operator_id, name, store, None, variable, timers,
                       work.version - 1)


def _run(spark: SparkSession, jdf, index: int) -> float:
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    indices = gateway.new_array(jvm.int, 1)
    indices[0] = index
    rdd = jdf.toJavaRDD()
    started = time.perf_counter()
    rdd.collectPartitions(indices)
    return time.perf_counter() - started


def damaged_file(ckpt: Checkpoint, files: Sequence[StateFile]) -> tuple[str, str] | None:
    """The first of ``files`` statekit's own decoder cannot read, and why (no JVM)."""

    for file in files:
        if file.kind not in ("delta", "snapshot", "changelog"):
            continue
        try:
            for _ in file_records(ckpt, file):
                pass
        except StatekitError as error:
            return ckpt.display(file.path), str(error)
        except OSError as error:
            return ckpt.display(file.path), f"cannot be read: {error}"
    return None


def _failure(ckpt: Checkpoint, operator_id: int, store: str, partition: int, version: int,
             error: BaseException) -> Exception:
    """A failed load as one line naming the file Spark could not load (found by decoding the
    instance's files the way statekit reads them), else the files it reads."""
    what = f"loading operator {operator_id} store {store} partition {partition} at version " \
           f"{version}"
    translated = translate(what, error)
    instance = ckpt.inventory.instances.get((operator_id, store, partition))
    files = instance.files_to_load(version) if instance else []
    damaged = damaged_file(ckpt, files)
    if damaged is not None:
        path, reason = damaged
        reason = reason.split(": ", 1)[1] if reason.startswith(path) else reason
        return CorruptFile(f"{what}: Spark cannot load {path}: {reason}")
    message = str(translated)
    named = [ckpt.display(f.path) for f in files]
    if named:
        message += f" (it reads {', '.join(posixpath.basename(n) for n in named[:6])}" \
                   f"{' …' if len(named) > 6 else ''} in {posixpath.dirname(named[0])})"
    if isinstance(translated, CorruptFile):
        return CorruptFile(message)
    return JobFailed(message) if isinstance(translated, JobFailed) else translated


def time_loads(spark: SparkSession, ckpt: Checkpoint, works: Sequence[InstanceWork],
               progress: Callable[[str], None] = lambda _: None
               ) -> tuple[list[LoadTiming], float, float]:
    """Seconds Spark took to load each of ``works`` (after a warm-up read), the seconds of a
    job that loads nothing, and the seconds spent fetching files into a local staging copy
    (0 when Spark reads the checkpoint where it is)."""
    staging: Path | None = None
    fetch_s = 0.0
    path = spark_path(ckpt)
    try:
        try:
            reads = _plan(spark, ckpt, path, works)
        except StatekitError as error:  # Spark's own failure, as one line
            said = f"{error} {error.__cause__ or ''}"
            if not any(marker in said for marker in UNREACHABLE):
                raise
            progress("Spark cannot reach this store from here: fetching the partitions' "
                     "files into a local staging copy")
            staging = Path(tempfile.mkdtemp(prefix="statekit-measure-"))
            fetch_s = stage_locally(ckpt, works, staging)
            reads = _plan(spark, ckpt, str(staging), works)
        return [*_timed(spark, ckpt, reads, progress)], _empty_job(spark), fetch_s
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _plan(spark: SparkSession, ckpt: Checkpoint, path: str, works: Sequence[InstanceWork]
          ) -> list[_Read]:
    """Each work's reader, planned once (a narrow filter keeps the partitioning)."""
    reads = []
    for work in works:
        jdf = read_state(spark, _target(ckpt, path, work)).where("partition_id < 0")._jdf
        reads.append(_Read(work, jdf, jdf.toJavaRDD().getNumPartitions()))
    return reads


def _timed(spark: SparkSession, ckpt: Checkpoint, reads: Sequence[_Read],
           progress: Callable[[str], None]):
    warmed: set[tuple[int, str]] = set()
    for n, read in enumerate(reads, 1):
        work = read.work
        if work.partition >= read.partitions:
            raise JobFailed(f"Spark's state reader plans {read.partitions} partitions for "
                            f"operator {work.operator_id}, not partition {work.partition}",
                            path=ckpt.location.url)
        jdf = read.jdf
        key = (work.operator_id, work.store)
        if key not in warmed:
            progress(f"warming up the load path on operator {work.operator_id}")
            smallest = warmup_partitions(ckpt, [work])[key]
            try:
                _run(spark, jdf, smallest)
            except (PySparkException, Py4JJavaError) as error:
                raise _failure(ckpt, work.operator_id, work.store, smallest, work.version,
                               error) from error
            warmed.add(key)
        progress(f"timing Spark loading partition {work.partition} ({n}/{len(reads)})")
        try:
            seconds = _run(spark, jdf, work.partition)
        except (PySparkException, Py4JJavaError) as error:
            raise _failure(ckpt, work.operator_id, work.store, work.partition, work.version,
                           error) from error
        yield LoadTiming(work.operator_id, work.store, work.partition, work.version, seconds)


def warmup_partitions(ckpt: Checkpoint, works: Sequence[InstanceWork]
                      ) -> dict[tuple[int, str], int]:
    """Per (operator, store) of ``works``: its smallest partition, read first and untimed."""
    keys = {(w.operator_id, w.store) for w in works}
    smallest: dict[tuple[int, str], tuple[int, int]] = {}
    for instance in ckpt.inventory.instances.values():
        key = (instance.operator_id, instance.store)
        if key in keys and (key not in smallest or instance.total_bytes < smallest[key][0]):
            smallest[key] = (instance.total_bytes, instance.partition)
    return {key: partition for key, (_, partition) in smallest.items()}


def _empty_job(spark: SparkSession) -> float:
    """A one-partition job reading nothing: scheduling and result handling."""
    jdf = spark.range(0, 1, 1, 1).where("id < 0")._jdf
    _run(spark, jdf, 0)
    return min(_run(spark, jdf, 0) for _ in range(3))


def stage_locally(ckpt: Checkpoint, works: Sequence[InstanceWork], staging: Path) -> float:
    """Copy what Spark's reader needs to load ``works`` into ``staging`` (logs of the batch,
    operator metadata and schemas, the instances' files to load); seconds spent fetching
    the state files (the restart's download)."""

    root = ckpt.location.path("").rstrip("/")
    fs = ckpt.fs

    def copy(path: str) -> int:
        rel = posixpath.relpath(path, root)
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = ckpt.read_bytes(path)
        target.write_bytes(data)
        return len(data)

    batch = max(w.version for w in works) - 1
    copy(ckpt.location.path("metadata"))
    for log in ("offsets", "commits"):
        for b in (batch, batch - 1):  # the batch and the one before (the reader checks)
            name = ckpt.location.path(f"{log}/{b}")
            if b >= 0 and fs.exists(name):
                copy(name)
    operators = {w.operator_id for w in works}
    for op in operators:
        state = ckpt.location.path(f"state/{op}")
        for path in fs.find(state):  # operator metadata, and schemas (in partition 0's folder)
            if "/_metadata/" in path or "/_stateSchema/" in path:
                copy(path)
        for instance in ckpt.inventory.instances.values():
            if instance.operator_id == op:  # every partition folder, so indices stay
                (staging / "state" / str(op) / str(instance.partition)).mkdir(
                    parents=True, exist_ok=True)
    warmups = [(op, store, partition, works[0].version)
               for (op, store), partition in warmup_partitions(ckpt, works).items()]
    for op, store, partition, version in warmups:  # untimed: not a load that is measured
        _copy_instance(ckpt, op, store, partition, version, copy)
    started = time.perf_counter()
    for work in works:
        _copy_instance(ckpt, work.operator_id, work.store, work.partition, work.version, copy)
    return time.perf_counter() - started


def _copy_instance(ckpt: Checkpoint, operator_id: int, store: str, partition: int,
                   version: int, copy: Callable[[str], int]) -> None:
    """Copy the files loading one instance at ``version`` reads (a zip's SSTs included)."""

    files = ckpt.inventory.instances[(operator_id, store, partition)].files_to_load(version)
    paths = [f.path for f in files]
    zips = [f for f in files if f.kind == "zip"]
    for meta_file, meta in zip_metadata(ckpt, zips).items():
        file = next(f for f in zips if f.path == meta_file)
        paths += zip_sst_paths(ckpt, file, meta)
    for path in paths:
        copy(path)
