"""Starting and stopping what the soak runs: the three statekit services and Prometheus.

The statekit services run as an SRE runs them, with one difference: as root, without the
capabilities that let root read any file (``setpriv``, as tests/unit/test_doctor_generated_
faults.py does), or the fleet's chmod-000 folder would not be a fault at all. Each service
is a session leader (``start_new_session``; tmux makes each pane one), which is how
soak_probe.py finds every process it ever started, re-parented or not.

Stopping is measured, not assumed: SIGTERM goes to the service's own process only (as
``kill PID`` or a process supervisor's stop does), then the clock runs until no process the
service ever had still runs; whatever is left after the grace period is reported as a
survivor and killed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import soak_probe
from soak_http import OPENER, wait_ready

from tests.support.ports import free_port

SERVING = re.compile(r"serving (https?://\S+)")
"""The line a statekit service says where it listens in (its URL, a token included)."""
TRACEBACK = "Traceback (most recent call last)"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]|\x1b\][^\x07]*\x07")


def without_read_override() -> list[str]:
    """The prefix that runs a command without root's power to read every file."""
    if os.geteuid() != 0:
        return []
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]


def statekit() -> list[str]:
    script = Path(sys.executable).parent / "statekit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "statekit"]


def supports(command: str, option: str) -> bool:
    """Whether ``statekit COMMAND --help`` lists ``option`` (an interface still landing)."""
    done = subprocess.run([*statekit(), command, "--help"], capture_output=True, text=True,
                          timeout=120)
    return option in done.stdout


@dataclass
class Service:
    """One running service: the root of its process tree, and every process it had."""

    name: str
    root: int
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    seen: set[soak_probe.ProcessId] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def track(self) -> list[soak_probe.Stat]:
        members = soak_probe.tree(self.root)
        with self._lock:
            self.seen.update(stat.ident for stat in members)
        return members

    def running(self) -> bool:
        stat = soak_probe.read_stat(self.root)
        return stat is not None and stat.state != "Z"

    def usage(self) -> soak_probe.Usage:
        return soak_probe.steady_usage(self.root)

    def stop(self, grace_s: float = 20.0) -> dict[str, object]:
        """SIGTERM the root; the seconds until every process it had is gone, and the
        survivors (killed) after ``grace_s``."""
        self.track()
        with self._lock:
            watched = set(self.seen)
        was_running = self.running()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.root, signal.SIGTERM)
        seconds, survivors = soak_probe.wait_gone(watched, grace_s)
        # a process started between the last sample and the signal still has the session
        late = {s.ident for s in soak_probe.tree(self.root)} - watched
        if late:
            more_s, more = soak_probe.wait_gone(late, max(1.0, grace_s - (seconds or 0)))
            survivors += more
            seconds = None if seconds is None or more_s is None else max(seconds, more_s)
        described = [f"{pid} {soak_probe.command_line(pid)}" for pid, _ in survivors]
        soak_probe.kill(survivors)
        if self.popen is not None:
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        return {"was_running": was_running, "exit_s": seconds, "survivors": described,
                "returncode": self.popen.returncode if self.popen else None}

    def kill(self) -> None:
        """Kill whatever is left (the way out of a failed run)."""
        self.track()
        with self._lock:
            soak_probe.kill(self.seen)
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)

    def text(self) -> str:
        return ANSI.sub("", self.log.read_text(errors="replace")) if self.log.exists() else ""

    def tracebacks(self) -> int:
        return self.text().count(TRACEBACK)


def spawn(name: str, command: list[str], log: Path, env: dict[str, str]) -> Service:
    with log.open("w") as out:
        popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    return Service(name, popen.pid, log, popen)


def wait_for_line(service: Service, pattern: re.Pattern[str], timeout_s: float) -> str:
    """The first match of ``pattern`` in the service's log (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = pattern.search(service.text())
        if found:
            return found.group(1)
        if not service.running():
            break
        time.sleep(0.2)
    raise RuntimeError(f"{service.name} never said {pattern.pattern!r}:\n"
                       f"{service.text()[-2000:]}")


def wait_http(url: str, service: Service, timeout_s: float) -> float:
    """GET ``url`` until it answers (any status); the seconds it took (bounded)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if not service.running():
            raise RuntimeError(f"{service.name} exited:\n{service.text()[-2000:]}")
        try:
            OPENER.open(url, timeout=max(1.0, timeout_s - (time.monotonic() - started))).read()
            return time.monotonic() - started
        except OSError as failure:
            if getattr(failure, "code", None):  # an HTTP error is an answer
                return time.monotonic() - started
            time.sleep(0.2)
    raise RuntimeError(f"{service.name} did not answer {url} in {timeout_s:g} s:\n"
                       f"{service.text()[-2000:]}")


def wait_port(port: int, service: Service, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        if not service.running():
            raise RuntimeError(f"{service.name} exited:\n{service.text()[-2000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"{service.name} did not listen on {port} in {timeout_s:g} s")


def metrics(listing: Path, port: int, log: Path, env: dict[str, str], *, cache_s: float,
            timeout_s: float | None) -> Service:
    """``statekit metrics --checkpoints-from F --serve 127.0.0.1:PORT``."""
    extra = ["--timeout", f"{timeout_s:g}"] if timeout_s is not None else []
    return spawn("metrics", [*without_read_override(), *statekit(), "metrics",
                             "--checkpoints-from", str(listing), "--serve",
                             f"127.0.0.1:{port}", "--cache-seconds", f"{cache_s:g}", *extra],
                 log, env)


def web(listing: Path, port: int, log: Path, env: dict[str, str],
        timeout_s: float | None) -> tuple[Service, str]:
    """``statekit tui --checkpoints-from F --web 127.0.0.1:PORT``; and its URL."""
    extra = ["--timeout", f"{timeout_s:g}"] if timeout_s is not None else []
    service = spawn("tui --web", [*without_read_override(), *statekit(), "tui",
                                  "--checkpoints-from", str(listing), *extra, "--web",
                                  f"127.0.0.1:{port}"], log, env)
    try:
        url = wait_for_line(service, SERVING, 60)
        wait_port(port, service, 30)
    except BaseException:  # not yet the caller's to stop
        service.kill()
        raise
    return service, url


class Tmux:
    """A private tmux server (``-L``) holding ``statekit tui --watch`` in a 200×50 pane."""

    def __init__(self, binary: str, work: Path, env: dict[str, str]) -> None:
        self.binary = binary
        self.socket = f"statekit-soak-{os.getpid()}-{int(time.time())}"
        self.config = work / "tmux.conf"
        # the pane stays after its process exits (its last screen is read then)
        self.config.write_text("set -g remain-on-exit on\nset -g history-limit 10000\n")
        self.env = env

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run([self.binary, "-L", self.socket, "-f", str(self.config), *args],
                              capture_output=True, text=True, timeout=30, env=self.env)
        if check and done.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def start(self, listing: Path, log: Path, watch_s: float,
              timeout_s: float | None) -> Service:
        extra = ["--timeout", f"{timeout_s:g}"] if timeout_s is not None else []
        command = shlex.join([*without_read_override(), *statekit(), "tui",
                              "--checkpoints-from", str(listing), "--watch", f"{watch_s:g}",
                              *extra])
        log.touch()
        # a moment's pause before the app, so that pipe-pane records its first byte; exec
        # keeps the pane's pid the app's
        # (the server, started by this first command, passes its environment to the pane)
        self.run("new-session", "-d", "-s", "soak", "-x", "200", "-y", "50",
                 f"sleep 0.5; exec {command}")
        self.run("pipe-pane", "-t", "soak", "-o", f"cat >> {shlex.quote(str(log))}")
        pane = int(self.run("display-message", "-p", "-t", "soak", "#{pane_pid}").strip())
        return Service("tui --watch (tmux)", pane, log)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "soak", check=False)

    def close(self) -> None:
        self.run("kill-server", check=False)


class Prometheus:
    """Debian's prometheus scraping ``target`` every ``interval_s`` (timeout: the same)."""

    def __init__(self, binary: str, work: Path, target: str, job: str,
                 interval_s: float) -> None:
        folder = work / "prometheus"
        folder.mkdir()
        config = folder / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {interval_s:g}s\n"
            f"  scrape_timeout: {interval_s:g}s\n"
            "scrape_configs:\n"
            f"  - job_name: {job}\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n")
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = folder / "prometheus.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_ready(self.process, f"{self.base}/-/ready", poll_s=0.2,
                       exited=lambda: f"prometheus exited:\n{self.log.read_text()[-2000:]}",
                       never="prometheus never became ready")
        except BaseException:  # not yet the caller's to stop
            self.close()
            raise

    def close(self) -> None:
        soak_probe.stop_process(self.process, 15, reap_s=15)
