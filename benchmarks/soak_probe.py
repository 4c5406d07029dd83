"""A service's whole process tree, measured from /proc: what the soak calls a leak.

A long-running statekit service is more than one process: the metrics exporter's decode
workers (a fork server and its children), textual-serve's one app per browser tab (through
``/bin/sh -c``), the TUI's readers. A leak shows in any of them — and a process that
outlives its parent is re-parented away from the tree, so walking children alone would miss
exactly the survivors the soak is looking for. A tree here is therefore every descendant of
the root *and* every process still in the root's session (each service is started as a
session leader; its children stay in that session unless they call setsid themselves).
A process is identified by (pid, start time), so a recycled pid is never mistaken for a
survivor.

Numbers are taken as the median of a few samples a moment apart: one in-flight scrape
holds a socket and a thread for a few milliseconds, which a single sample would count as
growth.

The harness's own helpers (Chromium, Prometheus, moto's servers) are stopped one way, by
:func:`stop_process`: SIGTERM, a grace period, SIGKILL, and always reaped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
PAGE = os.sysconf("SC_PAGE_SIZE")
ProcessId = tuple[int, int]
"""(pid, start time in clock ticks since boot): unique for the machine's uptime."""


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/PID/stat the probe needs."""

    pid: int
    ppid: int
    session: int
    state: str
    threads: int
    start: int
    rss_bytes: int

    @property
    def ident(self) -> ProcessId:
        return (self.pid, self.start)


def read_stat(pid: int) -> Stat | None:
    """One process's stat, or None when it is gone (or unreadable)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces or parentheses itself
    fields = text[text.rindex(")") + 2:].split()
    return Stat(pid=pid, state=fields[0], ppid=int(fields[1]), session=int(fields[3]),
                threads=int(fields[17]), start=int(fields[19]),
                rss_bytes=int(fields[21]) * PAGE)


def all_stats() -> list[Stat]:
    stats = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := read_stat(int(entry.name))) is not None:
            stats.append(stat)
    return stats


def tree(root: int, session: int | None = None) -> list[Stat]:
    """The root (if alive), its descendants, and every process of ``session`` (default:
    the root's own pid, as for a session leader)."""
    session = root if session is None else session
    stats = all_stats()
    children: dict[int, list[Stat]] = {}
    for stat in stats:
        children.setdefault(stat.ppid, []).append(stat)
    found: dict[int, Stat] = {s.pid: s for s in stats if s.pid == root or s.session == session}
    pending = list(found)
    while pending:
        for child in children.get(pending.pop(), []):
            if child.pid not in found:
                found[child.pid] = child
                pending.append(child.pid)
    return sorted(found.values(), key=lambda s: s.pid)


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(PROC / str(pid) / "fd"))
    except OSError:
        return 0


def command_line(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160]


@dataclass(frozen=True)
class Usage:
    """A process tree's resources at one moment (zombies count as processes, not memory)."""

    rss_mb: float
    fds: int
    threads: int
    processes: int
    zombies: int

    def as_dict(self) -> dict[str, float]:
        return {"rss_mb": round(self.rss_mb, 1), "fds": self.fds, "threads": self.threads,
                "processes": self.processes, "zombies": self.zombies}


def usage(root: int, session: int | None = None) -> Usage:
    members = tree(root, session)
    live = [s for s in members if s.state != "Z"]
    return Usage(rss_mb=sum(s.rss_bytes for s in live) / 2**20,
                 fds=sum(open_fds(s.pid) for s in live),
                 threads=sum(s.threads for s in live), processes=len(members),
                 zombies=len(members) - len(live))


def steady_usage(root: int, session: int | None = None, samples: int = 5,
                 spacing_s: float = 0.4) -> Usage:
    """The median of ``samples`` usages ``spacing_s`` apart (see the module's docstring)."""
    taken = []
    for index in range(samples):
        if index:
            time.sleep(spacing_s)
        taken.append(usage(root, session))

    def median(values: Iterable[float]) -> float:
        return float(statistics.median(values))

    return Usage(rss_mb=median(u.rss_mb for u in taken),
                 fds=round(median(u.fds for u in taken)),
                 threads=round(median(u.threads for u in taken)),
                 processes=round(median(u.processes for u in taken)),
                 zombies=round(median(u.zombies for u in taken)))


def alive(idents: Iterable[ProcessId]) -> list[ProcessId]:
    """The processes of ``idents`` that still run (zombies have stopped running: their
    parent, also tracked, is what must still reap them)."""
    living = []
    for pid, start in idents:
        stat = read_stat(pid)
        if stat is not None and stat.start == start and stat.state != "Z":
            living.append((pid, start))
    return living


def wait_gone(idents: Iterable[ProcessId], timeout_s: float,
              poll_s: float = 0.05) -> tuple[float | None, list[ProcessId]]:
    """Wait until none of ``idents`` runs: (seconds it took or None, the survivors)."""
    watched = list(idents)
    started = time.monotonic()
    while True:
        survivors = alive(watched)
        elapsed = time.monotonic() - started
        if not survivors:
            return elapsed, []
        if elapsed >= timeout_s:
            return None, survivors
        time.sleep(poll_s)


def kill(idents: Iterable[ProcessId]) -> None:
    """SIGKILL each of ``idents`` that is still the same process."""
    for pid, _start in alive(idents):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop_process(popen: subprocess.Popen[Any], grace_s: float, reap_s: float = 10.0) -> None:
    """SIGTERM ``popen`` if it still runs and wait ``grace_s`` for it to exit; past that,
    SIGKILL it and wait ``reap_s`` more (it is reaped either way: no zombie is left)."""
    if popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout=reap_s)
