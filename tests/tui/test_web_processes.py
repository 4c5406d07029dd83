"""How ``statekit tui --web`` ends an app's process group, on real processes: one that ignores
the polite requests and has started a child, one that exited and left a child behind, and the
server's last act on groups nobody ended. And how the app's own process ends once the app has
exited although a worker thread is still busy (``statekit.tui.app._leave``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

from statekit.cli.web_processes import end_group, group_alive, kill_remaining, start_group
from tests.support.web import members, wait_until

STUBBORN = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    subprocess.Popen([sys.executable, "-c", "import signal, time; "
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print("ready", flush=True)
    while True:
        sys.stdin.read(1) or time.sleep(600)
""")
"""An app that ignores "quit" (it reads and discards), SIGTERM and SIGINT, and whose child
ignores SIGTERM too: only SIGKILL to the group ends them."""

LEAVES_A_CHILD = textwrap.dedent("""
    import subprocess, sys
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("ready", flush=True)
""")
"""An app that exits at once and leaves a child running in its group."""


async def _started(code: str) -> asyncio.subprocess.Process:
    process = await start_group([sys.executable, "-c", code], dict(os.environ))
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 60) == b"ready\n"
    return process


def test_a_stubborn_app_and_its_child_are_killed_as_a_group():
    async def run() -> tuple[int, int | None, bool]:
        process = await _started(STUBBORN)
        assert os.getpgid(process.pid) == process.pid == os.getsid(process.pid)
        assert wait_until(lambda: len(members({process.pid})) == 2, 30)
        assert process.stdin is not None
        quit_ = b'{"type": "quit"}'
        process.stdin.write(b"M" + len(quit_).to_bytes(4, "big") + quit_)
        await end_group(process, grace=0.5, term=0.5)
        return process.pid, process.returncode, group_alive(process.pid)

    group, returncode, alive = asyncio.run(run())
    assert returncode == -signal.SIGKILL  # quit and SIGTERM ignored: SIGKILL, and reaped
    assert not alive and not members({group})


def test_what_an_app_that_exited_left_in_its_group_is_ended_too():
    async def run() -> tuple[int, int | None]:
        process = await _started(LEAVES_A_CHILD)
        await end_group(process, grace=1, term=1)
        return process.pid, process.returncode

    group, returncode = asyncio.run(run())
    assert returncode == 0
    assert not group_alive(group) and not members({group})


def test_the_servers_last_act_kills_every_group_not_ended():
    async def run() -> int:
        process = await _started(STUBBORN)
        assert kill_remaining() == 1
        await asyncio.wait_for(process.wait(), 30)
        return process.pid

    group = asyncio.run(run())
    assert wait_until(lambda: not members({group}), 10), members({group})
    assert kill_remaining() == 0


LINGERING = textwrap.dedent("""
    import sys, threading, time
    from statekit.tui.app import _leave
    if sys.argv[1] == "busy":
        threading.Thread(target=time.sleep, args=(600,), name="busy-worker").start()
    print("app exited", flush=True)
    _leave(int(sys.argv[2]))
    print("returned", flush=True)
""")


def _leave(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LINGERING, *args], capture_output=True,
                          text=True, timeout=120)


def test_an_app_that_exited_does_not_wait_for_a_busy_worker_thread():
    """A non-daemon thread still working would be joined at interpreter exit (for 600 s
    here): the process ends instead, with the app's code, its output flushed."""
    busy = _leave("busy", "0")
    assert (busy.returncode, busy.stdout) == (0, "app exited\n")
    failed = _leave("busy", "1")
    assert (failed.returncode, failed.stdout) == (1, "app exited\n")


def test_without_busy_threads_the_process_exits_as_usual():
    idle = _leave("idle", "0")
    assert (idle.returncode, idle.stdout) == (0, "app exited\nreturned\n")
    failed = _leave("idle", "1")
    assert (failed.returncode, failed.stdout) == (1, "app exited\n")
