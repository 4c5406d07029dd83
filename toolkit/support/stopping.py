"""Ending a long-running statekit process, and everything it started, within seconds.

A service (``metrics --serve``, ``tui --watch``, the apps behind ``tui --web``) starts
processes of its own: decode workers, a fork server, sometimes a JVM. Python's own exit path
waits for them — ``concurrent.futures`` joins every pool at exit, a pool waits for its
workers — and a reading blocked on a dead endpoint never ends, so "stopped" could mean
"hanging at 28 % CPU until kill -9". :func:`end_process` is the other way out: end every
descendant (SIGTERM, then SIGKILL after a grace), flush, and leave with ``os._exit``.

Descendants are found through ``/proc`` (every process whose parent chain leads here), so
grandchildren — a fork server's workers, a JVM's launcher — are included; elsewhere only
``multiprocessing``'s own children are known.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable


def _parents() -> dict[int, int]:
    """pid → parent pid of every process ``/proc`` shows (empty without ``/proc``)."""
    parents: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()  # the name may hold spaces and ')'
        if len(fields) > 1 and fields[1].isdigit():
            parents[int(name)] = int(fields[1])
    return parents


def descendants(pid: int | None = None) -> list[int]:
    """Every process started by ``pid`` (this one by default) or by its descendants."""
    root = os.getpid() if pid is None else pid
    parents = _parents()
    if not parents:
        import multiprocessing

        return [child.pid for child in multiprocessing.active_children()
                if child.pid is not None] if root == os.getpid() else []
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError, OSError):
        done, _status = os.waitpid(pid, os.WNOHANG)  # reap our own children
        if done == pid:
            return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return b") Z " not in stat.read()  # a zombie is gone for our purposes
    except OSError:
        return False


def end_descendants(grace_s: float = 2.0) -> int:
    """SIGTERM every descendant, SIGKILL what is left after ``grace_s``; how many there
    were."""
    found = descendants()
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    left = [pid for pid in found if _alive(pid)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [pid for pid in left if _alive(pid)]
    for pid in left + [pid for pid in descendants() if pid not in found]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in found:
        _alive(pid)
    return len(found)


def end_process(code: int = 0, *, grace_s: float = 2.0) -> None:
    """End every descendant, flush the standard streams and leave now, whatever threads or
    pools are still running."""
    end_descendants(grace_s)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def on_stop_signals(handler: Callable[[int], None]) -> None:
    """Call ``handler(signal number)`` on SIGTERM and SIGINT (from the main thread)."""
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda received, _frame: handler(received))
