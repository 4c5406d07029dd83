"""The app processes of ``statekit tui --web``: each one a process group the server can end.

A browser session runs ``statekit tui`` as a child, and that app may start more: decode
worker processes (a fork server and its pool), a Spark JVM. Ended politely (the "quit"
message) the app exits and takes them along — unless it hangs, as an app did joining a busy
worker thread at interpreter exit, or a worker outlives it. An on-call tool left running for
weeks cannot leak such processes at every reconnect. So every app is started with ``exec``
(no shell in between, whose pid would not be the app's) as the leader of a session of its
own, and ended by the group: quit, then after ``QUIT_GRACE`` seconds SIGTERM to the whole
group, after ``TERM_GRACE`` more SIGKILL, and reaped. Whatever the app started in its group
goes with it, also when the app itself exited cleanly and left something behind.

A new session also keeps the terminal's Ctrl+C (sent to the server's foreground process
group) away from the apps: the server ends them itself, in order. The groups still alive are
remembered, so that the server's last act can kill them whatever went wrong before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from asyncio.subprocess import PIPE, Process
from collections.abc import Mapping, Sequence

QUIT_GRACE = 2.0
"""Seconds an app has to exit after the "quit" message before its group gets SIGTERM."""
TERM_GRACE = 1.0
"""Seconds the group has after SIGTERM before SIGKILL."""
POLL = 0.05
"""Seconds between two looks at whether a group is empty."""

_live: set[int] = set()
"""Process groups started and not yet seen empty."""


async def start_group(argv: Sequence[str], env: Mapping[str, str]) -> Process:
    """``argv`` exec'd (no shell) with pipes for stdin, stdout and stderr, as the leader of a
    new session and process group (its pgid is its pid)."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=dict(env), start_new_session=True)
    _live.add(process.pid)
    return process


def signal_group(group: int, signum: int) -> None:
    """Send ``signum`` to every process of ``group``; nothing if it is empty."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def group_alive(group: int) -> bool:
    """Whether ``group`` has a process that is not a zombie. On Linux /proc says (an orphan's
    zombie waits for init, which may be slow, and can do no harm); elsewhere any member
    counts."""
    if sys.platform.startswith("linux"):
        try:
            entries = os.listdir("/proc")
        except OSError:
            entries = []
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
            except OSError:  # it ended while we looked
                continue
            if len(fields) > 2 and int(fields[2]) == group and fields[0] != b"Z":
                return True
        if entries:
            return False
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _exited(process: Process, timeout: float) -> bool:
    if process.returncode is not None:
        return True
    try:
        await asyncio.wait_for(process.wait(), timeout)
    except asyncio.TimeoutError:
        return False
    return True


async def _emptied(group: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while group_alive(group):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL)
    return True


async def end_group(process: Process, *, grace: float = QUIT_GRACE,
                    term: float = TERM_GRACE) -> None:
    """End ``process`` (asked to quit already) and its group: wait up to ``grace`` seconds
    for it to exit, then SIGTERM the group, ``term`` seconds later SIGKILL; reap it.

    The app counts as gone once it has exited *and* its output pipes are closed (asyncio's
    ``wait``), so a process it left running with its pipes open gets the same SIGTERM and
    SIGKILL; one that left them gets them after the app is reaped, if still in its group."""
    group = process.pid
    try:
        if not await _exited(process, grace):
            signal_group(group, signal.SIGTERM)
            if not await _exited(process, term):
                signal_group(group, signal.SIGKILL)
                await process.wait()
        if group_alive(group):
            signal_group(group, signal.SIGTERM)
            if not await _emptied(group, term):
                signal_group(group, signal.SIGKILL)
                await _emptied(group, term)
    except asyncio.CancelledError:  # whoever waited is going away: the group goes first
        kill_group(group)
        raise
    _live.discard(group)


def kill_group(group: int) -> None:
    """SIGKILL ``group`` now, without waiting."""
    signal_group(group, signal.SIGKILL)
    _live.discard(group)


def kill_remaining() -> int:
    """SIGKILL every group not yet ended; how many there were. The server's last act."""
    groups = sorted(_live)
    for group in groups:
        kill_group(group)
    return len(groups)
