"""statekit over a real Spark Connect server (tests/connect_server.py: the pyspark wheel's
``SparkConnectServer`` on 127.0.0.1, its Python workers without statekit).

Each command runs as a user runs it — a fresh ``statekit … --remote sc://…`` process — and
must give what the local run gives; the client side runs without Java.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]


def statekit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                          text=True, env={**base, **(env or {})}, timeout=600)


def without_java() -> dict[str, str]:
    """An environment where no ``java`` can be found: ``JAVA_HOME`` unset (empty), and every
    ``PATH`` folder that holds one left out."""
    folders = [f for f in os.environ.get("PATH", "").split(os.pathsep)
               if f and not (Path(f) / "java").exists()]
    env = {"PATH": os.pathsep.join(folders), "JAVA_HOME": ""}
    assert shutil.which("java", path=env["PATH"]) is None
    return env


def _without_timings(data):
    if isinstance(data, dict):
        return {k: _without_timings(v) for k, v in data.items()
                if k not in ("elapsed_s", "seconds", "read_s")}
    if isinstance(data, list):
        return [_without_timings(v) for v in data]
    return data


def test_state_show_over_connect_without_java_gives_the_local_rows(spark, connect_server,
                                                                    reference_checkpoints):
    path = str(reference_checkpoints.get(provider="hdfs").checkpoint)
    here = local("state", "show", path, "--limit", "50")
    assert len(here["rows"]) == 50
    assert remote(connect_server, "state", "show", path, "--limit", "50") == here


def test_report_decode_over_connect_runs_the_pass_on_the_server(spark, connect_server,
                                                               reference_checkpoints):
    path = str(reference_checkpoints.get(provider="rocksdb").checkpoint)
    assert _without_timings(remote(connect_server, "report", path, "--decode")) == \
        _without_timings(local("report", path, "--decode"))


def local(*args: str) -> dict:
    """A command run in this process on the suite's local session (no second JVM start)."""
    import io
    from contextlib import redirect_stdout

    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = run_cli(cli, "statekit", [*args, "--json"])
    assert code == 0, buffer.getvalue()
    return json.loads(buffer.getvalue())


def remote(server, *args: str) -> dict:
    """The same command as a user runs it over Connect: a process without Java."""
    done = statekit(*args, "--json", "--remote", server.url, env=without_java())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("command", [
    ["state", "changes", "{ckpt}", "--from-batch", "10", "--rows", "20"],
    ["state", "stats", "{ckpt}"],
    ["state", "operators", "{ckpt}"],
    ["recovery", "{ckpt}"],
    ["growth", "{ckpt}"],
])
def test_reads_over_connect_give_the_local_result(spark, connect_server, reference_checkpoints,
                                                  command):
    path = str(reference_checkpoints.get(provider="hdfs").checkpoint)
    args = [a.format(ckpt=path) for a in command]
    assert _without_timings(remote(connect_server, *args)) == _without_timings(local(*args))


def test_export_over_connect_writes_the_local_rows(spark, connect_server, reference_checkpoints,
                                                   tmp_path):
    import pyarrow.parquet as pq

    path = str(reference_checkpoints.get(provider="rocksdb").checkpoint)
    local("state", "export", path, "--out", str(tmp_path / "local"))
    remote(connect_server, "state", "export", path, "--out", str(tmp_path / "remote"))

    def rows(folder):
        table = pq.read_table(folder)
        return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())

    expected = rows(tmp_path / "local")
    assert len(expected) > 100 and rows(tmp_path / "remote") == expected


def _write_result(data: dict, target: Path) -> dict:
    """A write's JSON without its timings and with its target's path made neutral."""
    return json.loads(json.dumps(_without_timings(data)).replace(str(target), "TARGET"))


def test_hdfs_repartition_over_connect_without_java_restarts_like_the_source(
        spark, connect_server, reference_checkpoints, tmp_path):
    """The write end to end over Connect, from a client without Java: staged, verified on
    the server, published; restarted here (a local JVM), the target writes what the source
    writes."""
    from statekit.checkpoint import open_checkpoint
    from tests.conftest import TEST_PARTITIONS
    from tests.support.restarts import PipelineRun, assert_target_restarts_like_the_source
    from tests.support.spark_runs import landing_after
    from tests.support.trees import tree_hash

    shared = reference_checkpoints.get("hdfs")
    run = PipelineRun(tmp_path, landing_after(shared.landing, tmp_path / "landing"),
                      shared.checkpoint, shared.output, "hdfs", TEST_PARTITIONS)
    before = tree_hash(run.checkpoint)
    target, target_out = tmp_path / "target", tmp_path / "target-out"
    shutil.copytree(run.output, target_out)
    result = remote(connect_server, "repartition", str(run.checkpoint), "-n", "3",
                    "--out", str(target), "--file-sink", str(target_out), "--force")
    check = result["verification"]
    assert check["ok"] and set(check["metadata_partitions"]) == {3}
    assert sorted(w["partition"] for w in result["written"]["0/default"]) == [0, 1, 2]
    assert sum(w["keys"] for w in result["written"]["0/default"]) == \
        check["stores"][0]["source_rows"] > 0
    assert open_checkpoint(str(target)).offset(
        result["plan"]["last_committed"] + 1).shuffle_partitions == 3
    assert not list(tmp_path.glob(".*statekit-staging"))
    assert tree_hash(run.checkpoint) == before
    assert_target_restarts_like_the_source(spark, run, target, target_out, tmp_path)


@pytest.mark.parametrize("write", ["evict", "rollback", "migrate-to-hdfs"])
def test_writes_over_connect_give_the_local_result(spark, connect_server, reference_checkpoints,
                                                   tmp_path, write):
    """Evict (HDFS), a verified rollback and a RocksDB → HDFS migration: over Connect the
    same plan, rows written and verification as the local run."""
    provider = "rocksdb" if write == "migrate-to-hdfs" else "hdfs"
    path = str(reference_checkpoints.get(provider).checkpoint)
    args = {"evict": ["evict", path, "--where", "key.user_id < 'u00012'"],
            "rollback": ["rollback", path, "--to-batch", "5"],
            "migrate-to-hdfs": ["migrate", path, "--to", "hdfs"]}[write]
    here = local(*args, "--force", "--out", str(tmp_path / "local"))
    there = remote(connect_server, *args, "--force", "--out", str(tmp_path / "remote"))
    assert _write_result(there, tmp_path / "remote") == _write_result(here, tmp_path / "local")
    if write == "evict":
        assert sum(sum(v) for v in here["plan"]["removed"].values()) > 0  # it removed rows
    assert (tmp_path / "remote" / "commits").is_dir()


def test_a_failed_write_over_connect_leaves_nothing(connect_server, reference_checkpoints,
                                                    tmp_path):
    """A writer task failing on the server: the client, which cannot see the server's tasks,
    removes the staging folder until it stays gone; a rerun then completes."""
    path = reference_checkpoints.get("hdfs").checkpoint
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.connect_crash", connect_server.url, str(path),
         str(tmp_path)], capture_output=True, text=True, timeout=600,
        cwd=Path(__file__).resolve().parents[2],
        env={k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] and "injected failure" in report["error"]
    assert report["rerun_ok"]
    assert not (tmp_path / "crashed").exists()
    assert not list(tmp_path.glob(".*statekit-staging"))
    assert (tmp_path / "again" / "commits").is_dir()


def test_the_reference_pipeline_over_connect_writes_the_local_output(
        spark, connect_server, reference_checkpoints, tmp_path):
    """``pipeline run --remote`` from a client without Java: the streaming query
    (applyInPandasWithState, statekit's code shipped to the server) on the shared landing
    writes the alerts and sessions the local run wrote, and a checkpoint statekit reads."""
    from statekit.checkpoint import open_checkpoint
    from statekit.reference_pipeline.pipeline import read_output
    from tests.conftest import TEST_MIN_DELTAS, TEST_PARTITIONS

    shared = reference_checkpoints.get("hdfs")
    summary = remote(connect_server, "pipeline", "run", "--landing", str(shared.landing),
                     "--checkpoint", str(tmp_path / "checkpoint"),
                     "--output", str(tmp_path / "output"), "--provider", "hdfs",
                     "--partitions", str(TEST_PARTITIONS),
                     "--min-deltas-for-snapshot", str(TEST_MIN_DELTAS),
                     "--progress-log", str(tmp_path / "progress.jsonl"))

    def rows(folder):
        return sorted(tuple(str(v) for v in r) for r in read_output(spark, str(folder)).collect())

    expected = rows(shared.output)
    assert len(expected) > 5 and rows(tmp_path / "output") == expected
    assert summary["alerts_total"] + summary["sessions_closed_total"] == len(expected)
    assert summary["state_keys"] == shared.result.state_keys()
    def per_batch(log):  # what recovery and growth read from a progress log
        lines = [json.loads(line) for line in Path(log).read_text().splitlines()]
        return [(p["batchId"], p["numInputRows"], p["stateOperators"][0]["numRowsTotal"])
                for p in lines]

    assert per_batch(tmp_path / "progress.jsonl") == per_batch(shared.progress_log)
    ckpt = open_checkpoint(str(tmp_path / "checkpoint"))
    assert ckpt.last_committed_batch == open_checkpoint(str(shared.checkpoint)) \
        .last_committed_batch
