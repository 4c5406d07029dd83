"""statekit on a real standalone cluster whose executors lack statekit (tests/cluster.py).

Each command runs as a user runs it — a fresh ``statekit … --master spark://…`` process, so
that its driver, the cluster's master, worker and executor are four processes — and must give
what the local path gives; statekit reaches the executors only because it ships itself.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cluster import Cluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def statekit(cluster: Cluster, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                          text=True, env={**cluster.env(), **(env or {})}, timeout=600)


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
