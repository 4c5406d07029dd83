"""Shared fixtures: one SparkSession and real reference-pipeline checkpoints per test process.

Later test modules (report, recovery, growth, repartition, TUI) reuse these checkpoints:

    def test_something(reference_checkpoints):
        run = reference_checkpoints.get("hdfs")             # or "rocksdb", leaky=True, …
        run.checkpoint, run.landing, run.output, run.result  # paths + RunResult

Each distinct (provider, variant, changelog) is run at most once per test session, lazily, so
a JVM-free selection (``-m 'not spark'``) never starts Spark.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from statekit.reference_pipeline.generator import GeneratorConfig, generate

# The shared helpers in tests/support assert too (statekit_json, the restart proofs): pytest
# rewrites their asserts as it does a test module's, so a failure shows the values compared —
# registered before anything imports the package, or it warns and rewrites nothing.
pytest.register_assert_rewrite("tests.support")

from tests.support.shared_build import build_once, shared_root  # noqa: E402
from tests.support.tools import check_marked  # noqa: E402

# Estimates in the benchmark machine's seconds, whatever machine runs the suite: snapshots and
# numbers compared across processes must not move with the machine's speed. The tests of the
# probe, and the restart test that judges the estimate against Spark on this machine, ask for
# the probe explicitly.
os.environ["STATEKIT_MACHINE_SPEED"] = "reference"
# statekit's cache folder (decoded files, replayed histories, the speed probe, shipped zips):
# one per test process, so that no entry of another run — another version of the code —
# answers for this one, and nothing is left in the user's home.
_CACHE = tempfile.mkdtemp(prefix="statekit-test-cache-")
os.environ["STATEKIT_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

TEST_GENERATOR = GeneratorConfig(seed=11, users=300, new_users_per_batch=3, events_per_batch=120,
                                 fraud_per_batch=1.0, near_miss_per_batch=1.5)
#: Bounded traffic with lognormal bursts (seed 1: a quiet stretch, then traffic rising over
#: the last batches — the key count rises while every key still expires).
BURSTY_GENERATOR = GeneratorConfig(seed=1, users=300, new_users_per_batch=3, events_per_batch=120,
                                   fraud_per_batch=1.0, near_miss_per_batch=1.5, burstiness=0.6)
TEST_BATCHES = 14
TEST_PARTITIONS = 4
TEST_MIN_DELTAS = 3
VARIANTS: dict[str | None, tuple[int, tuple[tuple[str, str], ...]]] = {
    None: (TEST_MIN_DELTAS, ()),
    "no-snapshot": (1000, ()),
    "format-v2": (TEST_MIN_DELTAS,
                  (("spark.sql.streaming.stateStore.checkpointFormatVersion", "2"),)),
    "purged": (TEST_MIN_DELTAS, (("spark.sql.streaming.minBatchesToRetain", "4"),)),
    "bursty": (TEST_MIN_DELTAS, ()),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """``make test`` hands tests to its workers one at a time (``--dist loadgroup``), except
    the tests of a module that share a module-scoped fixture (a checkpoint built for that
    module): those run on one worker, which builds it once (``xdist_group``)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(defs and defs[-1].scope in ("module", "class", "package")
               for name in info.names_closure
               if (defs := info.name2fixturedefs.get(name))):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test marked ``needs_tools`` fails (CI) or skips (elsewhere) with one line naming the
    missing package before any of its fixtures is set up (tests/support/tools.py)."""
    check_marked(item)


@pytest.fixture(scope="session")
def spark():
    from statekit.jobs.session import build_session

    session = build_session(
        "statekit-tests",
        conf={
            "spark.sql.shuffle.partitions": str(TEST_PARTITIONS),
            "spark.default.parallelism": "2",
            # HDFS snapshots come only from the maintenance task: run it often in tests.
            "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
        },
    )
    yield session
    session.stop()


def quiesce(spark, checkpoint) -> None:
    """Make a finished query's checkpoint static for the tests that list it.

    The session keeps state-store providers loaded after a query stops, and their background
    maintenance keeps writing snapshots (RocksDB uploads zips) into the checkpoint. Unload them
    (local mode: driver = executor JVM), then wait until the folder stops changing.
    """
    getattr(spark._jvm, "org.apache.spark.sql.execution.streaming.state.StateStore").stop()
    state = Path(checkpoint) / "state"
    previous, deadline = None, time.monotonic() + 15
    while time.monotonic() < deadline:
        current = sorted((str(p), p.stat().st_size) for p in state.rglob("*") if p.is_file()) \
            if state.exists() else []
        if current == previous:
            return
        previous = current
        time.sleep(0.5)


@dataclass(frozen=True)
class ReferenceRun:
    """A checkpoint the reference pipeline really wrote, with its inputs and outputs."""

    name: str
    landing: Path
    checkpoint: Path
    output: Path
    progress_log: Path
    result: object  # reference_pipeline.pipeline.RunResult


class ReferenceCheckpoints:
    """Lazily runs the reference pipeline per configuration and caches the result."""

    def __init__(self, spark, root: Path) -> None:
        self._spark = spark
        self._root = root
        self._runs: dict[str, ReferenceRun] = {}
        self.landing = build_once(root, "landing", self._generate(TEST_GENERATOR))
        self._bursty_landing: Path | None = None

    @staticmethod
    def _generate(config: GeneratorConfig):
        def write(folder: Path) -> Path:
            generate(folder, config, TEST_BATCHES)
            return folder
        return write

    def _landing(self, variant: str | None) -> Path:
        if variant != "bursty":
            return self.landing
        if self._bursty_landing is None:
            self._bursty_landing = build_once(self._root, "landing-bursty",
                                              self._generate(BURSTY_GENERATOR))
        return self._bursty_landing

    def get(self, provider: str = "hdfs", *, leaky: bool = False,
            changelog: bool = False, variant: str | None = None) -> ReferenceRun:
        """``variant``: ``None``; ``"no-snapshot"`` (minDeltas too high for any snapshot);
        ``"format-v2"`` (checkpointFormatVersion=2); ``"purged"`` (minBatchesToRetain=4, so
        old batches and state files have been cleaned up); ``"bursty"`` (the bounded pipeline
        fed BURSTY_GENERATOR's traffic)."""
        min_deltas, extra = VARIANTS[variant]
        name = (f"{provider}{'-changelog' if changelog else ''}{'-leaky' if leaky else ''}"
                f"{'-' + variant if variant else ''}")
        if name not in self._runs:
            landing = self._landing(variant)
            self._runs[name] = build_once(self._root, name, lambda base: self._run(
                name, base, landing, provider, leaky, changelog, min_deltas, extra))
        return self._runs[name]

    def _run(self, name: str, base: Path, landing: Path, provider: str, leaky: bool,
             changelog: bool, min_deltas: int, extra: tuple[tuple[str, str], ...]
             ) -> ReferenceRun:
        from statekit.reference_pipeline.pipeline import RunOptions, run

        opts = RunOptions(
            landing=landing,
            checkpoint=str(base / "checkpoint"),
            output=str(base / "output"),
            provider=provider,
            partitions=TEST_PARTITIONS,
            min_deltas_for_snapshot=min_deltas,
            changelog=changelog,
            leaky=leaky,
            progress_log=base / "progress.jsonl",
            extra_confs=extra,
        )
        base.mkdir(parents=True)
        try:
            result = run(self._spark, opts)
        finally:  # the session is shared: do not leak a variant's confs to later runs
            for key, _ in extra:
                self._spark.conf.unset(key)
        quiesce(self._spark, opts.checkpoint)
        return ReferenceRun(name, landing, base / "checkpoint", base / "output",
                            base / "progress.jsonl", result)


@pytest.fixture(scope="session")
def reference_checkpoints(spark, tmp_path_factory) -> ReferenceCheckpoints:
    return ReferenceCheckpoints(spark, shared_root(tmp_path_factory, "reference"))


@pytest.fixture(scope="session")
def small_queries(spark, tmp_path_factory):
    """Small real aggregation / dropDuplicates / join checkpoints (see tests/small_queries)."""
    from tests.small_queries import SmallQueries

    return SmallQueries(spark, shared_root(tmp_path_factory, "small"))


@pytest.fixture(scope="session")
def sources(spark, tmp_path_factory):
    """Small real queries of every stateful operator on three files, and their restarts on a
    copy with a fourth (tests/support/spark_runs.Sources): shared by the migrate, repartition
    and evict tests, which only read them (each asserts its source is left untouched)."""
    from tests.support.spark_runs import Sources

    return Sources(spark, shared_root(tmp_path_factory, "sources"))


@pytest.fixture(scope="session")
def growth_queries(spark, tmp_path_factory):
    """Labelled aggregation / dropDuplicates checkpoints with and without a watermark."""
    from tests.growth_queries import GrowthQueries

    return GrowthQueries(spark, shared_root(tmp_path_factory, "growth"))


@pytest.fixture(scope="session")
def s3_server():
    """An S3-protocol server (moto) on 127.0.0.1 that logs every request it serves."""
    from tests.s3_server import start_server

    server, httpd = start_server()
    yield server
    httpd.shutdown()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server from the pyspark wheel on 127.0.0.1 (tests/connect_server.py),
    its Python workers without statekit; stopped at the end."""
    from tests.connect_server import start_connect_server

    server = start_connect_server(tmp_path_factory.mktemp("connect"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A standalone Spark cluster on 127.0.0.1 (tests/cluster.py): a Master and two Workers as
    separate processes, executors on a Python without statekit; stopped at the end."""
    from tests.cluster import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()

