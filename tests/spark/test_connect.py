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


def test_state_show_over_connect_without_java_gives_the_local_rows(connect_server,
                                                                    reference_checkpoints):
    path = str(reference_checkpoints.get(provider="hdfs").checkpoint)
    local = statekit("state", "show", path, "--json", "--limit", "50")
    assert local.returncode == 0, local.stderr
    remote = statekit("state", "show", path, "--json", "--limit", "50",
                      "--remote", connect_server.url, env=without_java())
    assert remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)


def test_report_decode_over_connect_runs_the_pass_on_the_server(connect_server,
                                                               reference_checkpoints):
    path = str(reference_checkpoints.get(provider="rocksdb").checkpoint)
    local = statekit("report", path, "--decode", "--json")
    assert local.returncode == 0, local.stderr
    remote = statekit("report", path, "--decode", "--json", "--remote", connect_server.url,
                      env=without_java())
    assert remote.returncode == 0, remote.stderr
    assert _without_timings(json.loads(remote.stdout)) == \
        _without_timings(json.loads(local.stdout))
