"""statekit on a real standalone cluster whose executors lack statekit (tests/cluster.py).

Each command runs as a user runs it — a fresh ``statekit … --master spark://…`` process, so
that its driver, the cluster's master, worker and executor are four processes — and must give
what the local path gives; statekit reaches the executors only because it ships itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster import Cluster
from tests.support.oracle import fixed_sample

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def statekit(cluster: Cluster, *args: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                          text=True, env={**cluster.env(), **(env or {})}, timeout=600,
                          cwd=cwd)


def _without_timings(data: dict) -> dict:
    data.pop("elapsed_s", None)
    return data


def test_the_executors_python_lacks_statekit(spark_cluster):
    python = str(spark_cluster.executor_python)
    missing = subprocess.run([python, "-c", "import statekit"], capture_output=True, text=True,
                             env=spark_cluster.env())
    assert missing.returncode != 0 and "No module named 'statekit'" in missing.stderr
    present = subprocess.run([python, "-c", "import pandas, pyarrow, lz4.block, zstandard, "
                              "xxhash"], capture_output=True, text=True, env=spark_cluster.env())
    assert present.returncode == 0, present.stderr


def test_growth_on_the_cluster_prints_the_local_report(spark_cluster, reference_checkpoints):
    path = str(reference_checkpoints.get(provider="hdfs", leaky=True).checkpoint)
    local = statekit(spark_cluster, "growth", path, "--json")
    assert local.stdout, local.stderr
    shipped = statekit(spark_cluster, "growth", path, "--json", "--master",
                       spark_cluster.master_url, *spark_cluster.confs())
    assert shipped.returncode == local.returncode, shipped.stderr
    assert _without_timings(json.loads(shipped.stdout)) == \
        _without_timings(json.loads(local.stdout))


def test_without_the_shipped_code_the_probe_names_the_module_first(spark_cluster,
                                                                   reference_checkpoints):
    path = str(reference_checkpoints.get(provider="hdfs", leaky=True).checkpoint)
    # an inherited PYSPARK_PYTHON (here the test venv's, which has statekit) must not beat
    # the explicit --conf spark.pyspark.python: PySpark itself reads only the variable
    done = statekit(spark_cluster, "growth", path, "--json", "--master",
                    spark_cluster.master_url, *spark_cluster.confs(),
                    env={"STATEKIT_SHIP": "0", "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 7, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot import statekit" in lines[0]
    assert str(spark_cluster.executor_python) in lines[0]
    assert not done.stdout


def test_a_packed_environment_runs_the_executors(spark_cluster, reference_checkpoints,
                                                 tmp_path):
    """``statekit pack``'s archive as ``spark.archives`` (``--env-archive``): Spark unpacks it
    in each executor's folder and the executors run its Python — one without statekit (an
    editable install is not packed; statekit arrives by shipping) — even with an inherited
    PYSPARK_PYTHON pointing elsewhere; growth gives the local path's result."""
    from statekit.jobs.env_archive import ARCHIVE_ALIAS

    archive = tmp_path / "env.tar.gz"
    packed = statekit(spark_cluster, "pack", str(archive), "--json")
    assert packed.returncode == 0, packed.stderr
    path = str(reference_checkpoints.get(provider="hdfs", leaky=True).checkpoint)
    local = statekit(spark_cluster, "growth", path, "--json")
    shipped = statekit(spark_cluster, "growth", path, "--json", "--master",
                       spark_cluster.master_url, "--env-archive", str(archive),
                       *spark_cluster.confs(python=False),
                       env={"PYSPARK_PYTHON": str(spark_cluster.executor_python)})
    assert shipped.returncode == local.returncode, shipped.stderr
    assert _without_timings(json.loads(shipped.stdout)) == \
        _without_timings(json.loads(local.stdout))
    unpacked = list(spark_cluster.work.glob(f"worker-*/app-*/*/{ARCHIVE_ALIAS}/bin/python"))
    assert {p.parts[len(spark_cluster.work.parts)] for p in unpacked} == \
        {"worker-0", "worker-1"}, unpacked
    # what the executors unpacked: pyarrow, and no statekit of its own
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    env = unpacked[0].parents[1]
    assert (env / site / "pyarrow" / "__init__.py").is_file()
    assert not (env / site / "statekit").exists()
    assert not list((env / site).glob("__editable__*"))
    assert not list((env / site / "__pycache__").glob("__editable__*"))


def test_report_decode_on_the_cluster_reads_what_the_local_reading_reads(
        spark_cluster, reference_checkpoints):
    """Every file a restart loads, decoded by statekit's readers in the executors' Python (a
    task per store instance: statekit must have arrived there)."""
    path = str(reference_checkpoints.get(provider="rocksdb").checkpoint)
    results = []
    for extra in ([], ["--master", spark_cluster.master_url, *spark_cluster.confs()]):
        done = statekit(spark_cluster, "report", path, "--decode", "--json", *extra)
        assert done.returncode == 0, done.stderr
        verification = json.loads(done.stdout)["verification"]
        verification.pop("elapsed_s")
        results.append(verification)
    local, on_cluster = results
    assert local["files"] > 0 and on_cluster == local


#: every write on the cluster under ``make test-oracle``; two of them (fixed seed) in
#: ``make test`` — what differs between them (the rewrite) is proved locally by each write's
#: own matrix; what the cluster adds (shipping, relative paths, executors' Python) is the same
WRITES = {
    "repartition": ["repartition", "--partitions", "3"],
    "migrate": ["migrate", "--to", "rocksdb", "--partitions", "3"],
    "evict": ["evict", "--where", "key.key IN ('k01', 'k02', 'k03')"],
    "rollback": ["rollback", "--to-batch", "1"],
}


@pytest.mark.parametrize("command", fixed_sample(sorted(WRITES), count=2, seed=54))
def test_writes_on_the_cluster_equal_the_local_writes(spark, spark_cluster, sources, tmp_path,
                                                      command):
    """The same write on ``local[*]`` (in this process) and on the cluster (its driver a
    process of its own, its tasks in the executors' Python): both verified, and Spark's
    reader finds the same row multiset in both targets."""
    from tests.support.cli import statekit_json
    from tests.support.spark_runs import final_state
    from tests.support.trees import tree_hash

    source = sources.get("aggregation", "hdfs")
    before = tree_hash(source.checkpoint)
    name, *options = WRITES[command]
    local = statekit_json(name, str(source.checkpoint), *options, "--out",
                          str(tmp_path / "local"))
    # relative paths, as typed in a shell: resolved on the driver, never in an executor's
    # working folder
    done = statekit(spark_cluster, name, os.path.relpath(source.checkpoint, tmp_path),
                    *options, "--out", "cluster", "--json", "--force", "--master",
                    spark_cluster.master_url, *spark_cluster.confs(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shipped = json.loads(done.stdout)
    for result in (local, shipped):
        verification = result["verification"]
        assert verification is not None and verification["ok"], verification
    assert final_state(spark, tmp_path / "cluster") == final_state(spark, tmp_path / "local")
    assert tree_hash(source.checkpoint) == before


def test_state_export_on_the_cluster_equals_the_local_export(spark, spark_cluster, sources,
                                                             tmp_path):
    from tests.support.cli import run

    source = sources.get("aggregation", "hdfs")
    rows = []
    for where in ("local", "cluster"):
        out = tmp_path / where
        args = ["state", "export", str(source.checkpoint), "--out", str(out), "--format",
                "jsonl", "--json"]
        if where == "local":  # in this process, on the tests' local[*] session
            code, _, stderr = run(args)
            assert code == 0, stderr
        else:
            done = statekit(spark_cluster, *args, "--master", spark_cluster.master_url,
                            *spark_cluster.confs())
            assert done.returncode == 0, done.stderr
        parts = sorted(p for p in out.rglob("part-*") if not p.name.endswith(".crc"))
        rows.append(sorted(line for path in parts for line in path.read_text().splitlines()))
    assert rows[0] == rows[1] and rows[0]


def test_recovery_measure_on_the_cluster_times_the_same_partitions(spark, spark_cluster,
                                                                   reference_checkpoints):
    """``--measure`` times Spark's reader loading the two slowest partitions — on the
    cluster, in its executors: the same partitions as locally, a model scaled by what it
    measured there."""
    from tests.support.cli import run

    path = str(reference_checkpoints.get(provider="hdfs").checkpoint)
    args = ["recovery", path, "--measure", "--json", "--cores", "2"]
    code, stdout, stderr = run(args)  # in this process, on the tests' local[*] session
    assert code == 0, stderr
    done = statekit(spark_cluster, *args, "--master", spark_cluster.master_url,
                    *spark_cluster.confs())
    assert done.returncode == 0, done.stderr
    local, on_cluster = json.loads(stdout), json.loads(done.stdout)
    for data in (local, on_cluster):
        assert data["model"]["source"] == "measured" and data["measurement"]["factor"] > 0
    assert [(t["operator_id"], t["store"], t["partition"], t["version"])
            for t in on_cluster["measurement"]["timings"]] == \
        [(t["operator_id"], t["store"], t["partition"], t["version"])
         for t in local["measurement"]["timings"]]
