"""A real Prometheus (Debian's ``prometheus`` package) and ``promtool`` for the metrics tests.

Everything listens on 127.0.0.1 only, every wait is bounded, and every process started here
is terminated on the way out (killed if it does not stop). A test that needs a binary which
is not installed fails under CI (skips elsewhere) with one line naming the package
(tests/support/tools.py); ``make test`` installs the package where apt-get and root are
available.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import tools
from tests.support.ports import free_port

#: urllib without any proxy from the environment: every address here is 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


_TOOLS = {"prometheus": tools.PROMETHEUS, "promtool": tools.PROMTOOL}


def require(binary: str) -> str:
    """The path of ``prometheus``/``promtool``; missing, the test fails in CI and skips
    elsewhere, naming the package (tests/support/tools.py)."""
    return tools.require(_TOOLS[binary])


def needs(*binaries: str) -> pytest.MarkDecorator:
    """Checked before any fixture is set up (no Spark run for nothing)."""
    return tools.needs(*(_TOOLS[binary] for binary in binaries))


def promtool(*args: str, stdin: str | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``promtool ARGS…`` (bounded), its output captured."""
    return subprocess.run([require("promtool"), *args], input=stdin, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def promtool_check(text: str) -> subprocess.CompletedProcess:
    """``promtool check metrics`` on an exposition (stdin); its findings go to stderr."""
    return promtool("check", "metrics", stdin=text)


def fetch(url: str, timeout: float = 10) -> str:
    with OPENER.open(url, timeout=timeout) as response:
        return response.read().decode()


def _tail(log: Path, lines: int = 20) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


@contextmanager
def running(command: Sequence[str], log: Path) -> Iterator[subprocess.Popen]:
    """A process whose output goes to ``log``, terminated (then killed) on the way out."""
    with log.open("w") as out:
        process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def wait_for(url: str, process: subprocess.Popen, log: Path, what: str,
             timeout: float = 60) -> str:
    """GET ``url`` until it answers 200 (bounded); fail with the process' log otherwise."""
    deadline, error = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited with {process.returncode}:\n{_tail(log)}")
        try:
            return fetch(url)
        except (urllib.error.URLError, OSError) as failure:
            error = failure
        time.sleep(0.2)
    pytest.fail(f"{what} did not answer {url} within {timeout:g} s ({error}):\n{_tail(log)}")


@contextmanager
def served_metrics(folder: Path, checkpoints: Sequence[str],
                   cache_seconds: int, options: Sequence[str] = ()) -> Iterator[tuple[str, str]]:
    """``statekit metrics --serve`` on a free 127.0.0.1 port over ``checkpoints``; yields its
    address and the first exposition it served (that GET fills its cache, so a Prometheus
    started next is answered at once)."""
    script = Path(sys.executable).parent / "statekit"
    statekit = [str(script)] if script.exists() else [sys.executable, "-m", "statekit"]
    target = f"127.0.0.1:{free_port()}"
    log = folder / "statekit.log"
    with running([*statekit, "metrics", "--serve", target, "--cache-seconds",
                  str(cache_seconds), *options, *checkpoints], log) as server:
        yield target, wait_for(f"http://{target}/metrics", server, log,
                               "statekit metrics --serve")


@contextmanager
def prometheus(folder: Path, target: str, job: str) -> Iterator[str]:
    """A Prometheus server on a free 127.0.0.1 port scraping ``target`` every second; yields
    its base URL once ``/-/ready`` answers."""
    binary = require("prometheus")
    config = folder / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n")
    address = f"127.0.0.1:{free_port()}"
    log = folder / "prometheus.log"
    with running([binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'tsdb'}",
                  f"--web.listen-address={address}"], log) as process:
        wait_for(f"http://{address}/-/ready", process, log, "prometheus")
        yield f"http://{address}"


def query(base: str, promql: str) -> list[dict[str, Any]]:
    """An instant query through the HTTP API: ``[{"metric": {...}, "value": [t, "v"]}]``."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    answer = json.loads(fetch(url))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def poll(base: str, promql: str, ready: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """Query until ``ready(result)`` is true (bounded); fail with the last result."""
    deadline, result = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        result = query(base, promql)
        if ready(result):
            return result
        time.sleep(0.5)
    pytest.fail(f"Prometheus did not return the expected data for {promql!r} within "
                f"{timeout:g} s; last result: {result}")
