"""``statekit metrics --serve`` as an SRE leaves it running: over a fleet with a healthy
checkpoint, a missing one, an endpoint that never answers and one that refuses the
credentials, every scrape answers 200, the healthy checkpoint is ``up 1`` in every one, each
broken one is ``up 0`` with its reason, stderr has one line per failure (no traceback), and
SIGTERM ends the process within 5 s. User errors (a bad port, a port in use) are one line
and a documented code. No JVM; the exporter is started as a user starts it."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.bad_endpoints import refusing_credentials, silent_endpoint

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "spark-4.1.4"
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _up(body: str) -> dict[str, tuple[float, str | None]]:
    for family in text_string_to_metric_families(body):
        if family.name == "statekit_checkpoint_up":
            return {s.labels["checkpoint"]: (s.value, s.labels.get("reason"))
                    for s in family.samples}
    return {}


def _statekit(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "statekit", *args], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)


def test_the_exporter_survives_a_broken_fleet_and_stops_on_sigterm(tmp_path):
    healthy = tmp_path / "healthy"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", healthy)
    with silent_endpoint() as silent, refusing_credentials() as wrong_keys:
        fleet = tmp_path / "fleet.txt"
        fleet.write_text(f"{healthy}   # the one that works\n"
                         f"{tmp_path / 'missing'}\n"
                         f"s3://silent/ck endpoint_url={silent} key=k secret=s\n"
                         f"s3://wrongkeys/ck endpoint_url={wrong_keys} key=k secret=s\n")
        server = _statekit("metrics", "--checkpoints-from", str(fleet), "--serve",
                           "127.0.0.1:0", "--timeout", "2", "--cache-seconds", "0.5")
        try:
            assert server.stderr is not None
            said = server.stderr.readline()
            assert "serving http://127.0.0.1:" in said, said
            url = said.split("serving ", 1)[1].split()[0]
            scrapes = []
            for _ in range(8):  # spans several readings of each checkpoint and 2 deadlines
                with OPENER.open(url, timeout=60) as response:
                    scrapes.append((response.status, response.read().decode()))
                time.sleep(0.5)
        finally:
            server.send_signal(signal.SIGTERM)
            started = time.monotonic()
            server.wait(timeout=30)
            stopped_in = time.monotonic() - started
            log = server.stderr.read() if server.stderr else ""
    assert [status for status, _ in scrapes] == [200] * 8
    for _, body in scrapes:
        up = _up(body)
        assert up[str(healthy)] == (1.0, None)
    last = _up(scrapes[-1][1])
    assert last[str(tmp_path / "missing")] == (0.0, "missing")
    assert last["s3://silent/ck"] == (0.0, "timeout")
    assert last["s3://wrongkeys/ck"] == (0.0, "credentials")
    assert "Traceback" not in log, log
    downs = [line for line in log.splitlines() if " down (" in line]
    for broken in ("missing", "s3://silent/ck", "s3://wrongkeys/ck"):
        assert sum(broken in line for line in downs) == 1, log  # per transition, not scrape
    assert str(healthy) + ":" not in log
    assert stopped_in < 5, f"SIGTERM took {stopped_in:.1f} s"


def _one_line_error(args: list[str]) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                          text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("statekit: error: "), done.stderr
    return done.returncode, lines[0]


def test_bad_ports_and_a_port_in_use_are_user_errors():
    checkpoint = str(GOLDEN / "aggregation_hdfs" / "checkpoint")
    for address in ("127.0.0.1:99999", "abc", "127.0.0.1:-1"):
        code, line = _one_line_error(["metrics", checkpoint, "--serve", address])
        assert code == 3 and "port from 0 to 65535" in line, line
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, line = _one_line_error(["metrics", checkpoint, "--serve", f"127.0.0.1:{port}"])
    assert code == 3 and "address already in use" in line, line
