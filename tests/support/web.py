"""``statekit tui … --web`` started as a user starts it, for the tests that speak to it as a
browser does (its websocket) or in a real browser (Chromium).

The server's processes are told from every other test's (pytest-xdist runs several at once)
by a marker: a path unique to the test (its ``tmp_path``) on the server's command line, which
each app it starts repeats. An app is the leader of its own session (the server starts it so),
so what the app started is found by its session id."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
"""The terminal's control sequences: what is left of the app's output is its text."""

GOLDEN = sorted((Path(__file__).resolve().parents[1] / "data" / "golden").glob(
    "spark-4.1.4/*/checkpoint"))
DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "checkpoint"


def terminal_text(stream: str) -> str:
    """The text a terminal stream shows, without its control sequences."""
    return ANSI.sub("", stream)


@dataclass
class Served:
    """A running ``statekit tui --web``: its process, port and what it said on stderr."""

    process: subprocess.Popen[str]
    port: int
    said: str
    """The first line: where it serves."""
    lines: list[str] = field(default_factory=list)
    """Every line of stderr so far (read by a thread, so the pipe never fills)."""

    @property
    def token(self) -> str | None:
        found = re.search(r"[?&]token=([A-Za-z0-9_~.+/=-]+)", self.said)
        return found.group(1) if found else None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _drain(stream: Any, lines: list[str], first: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        first.set()
    first.set()


@contextmanager
def web_server(args: Sequence[str], *, env: dict[str, str] | None = None,
               port: int | None = None) -> Iterator[Served]:
    """``python -m statekit tui ARGS --web …`` (``args`` end with the ``--web`` value or
    ``port`` is appended as ``--web PORT``), once it said where it listens and the port
    accepts connections; SIGTERM and reaped afterwards."""
    port = port or free_port()
    command = [sys.executable, "-m", "statekit", "tui", *args]
    if "--web" not in args:
        command += ["--web", str(port)]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **(env or {})})
    lines: list[str] = []
    first = threading.Event()
    assert server.stderr is not None
    reader = threading.Thread(target=_drain, args=(server.stderr, lines, first), daemon=True)
    reader.start()
    try:
        first.wait(60)
        said = lines[0] if lines else ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and server.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield Served(server, port, said, lines)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
        reader.join(timeout=5)


@contextmanager
def served_tui(urls: Sequence[str]) -> Iterator[tuple[int, str]]:
    """The app served on a free port: (port, the line it said where it listens), once the
    port accepts connections; stopped afterwards."""
    with web_server(list(urls)) as served:
        yield served.port, served.said


# --- the processes a server started ------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    cmdline: str


def processes() -> list[Proc]:
    """Every live (not zombie) process of this machine, from /proc."""
    found: list[Proc] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:  # it ended while we looked
            continue
        state = fields[0].decode()
        if state in ("Z", "X"):
            continue
        found.append(Proc(int(entry), int(fields[1]), int(fields[2]), int(fields[3]), state,
                          " ".join(w.decode("utf-8", "replace") for w in words if w)))
    return found


def statekit_processes(marker: str) -> list[Proc]:
    """The processes whose command line runs statekit with ``marker`` in it."""
    return [p for p in processes() if marker in p.cmdline and "statekit" in p.cmdline]


def apps(served: Served, marker: str) -> list[Proc]:
    """The apps ``served`` runs now: its statekit processes other than itself."""
    return [p for p in statekit_processes(marker) if p.pid != served.process.pid]


def members(sessions: set[int]) -> list[Proc]:
    """The live processes of these sessions (an app and all it started)."""
    return [p for p in processes() if p.sid in sessions or p.pgid in sessions]


def wait_until(condition: Any, timeout: float, step: float = 0.1) -> bool:
    """Poll ``condition()`` until it is true or ``timeout`` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return bool(condition())
        time.sleep(step)


def resources(pid: int) -> tuple[int, int, int]:
    """(open file descriptors, threads, live child processes) of ``pid``."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    children = sum(1 for p in processes() if p.ppid == pid)
    return fds, threads, children


# --- a browser's websocket session ---------------------------------------------------------


class Terminal:
    """The app's side of a browser session: the websocket textual.js opens, the text the
    terminal was given, keys sent back."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.chunks: list[bytes] = []

    def text(self) -> str:
        return terminal_text(b"".join(self.chunks).decode("utf-8", "replace"))

    async def _receive(self, deadline: float) -> Any | None:
        """The next message, or None once ``deadline`` (``time.monotonic()``) has passed or
        nothing arrived by then (each wait is at least 0.1 s)."""
        if time.monotonic() >= deadline:
            return None
        try:
            return await self.ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            return None

    @staticmethod
    def _ends(message: Any) -> bool:
        """Whether ``message`` says the websocket is closing, closed or broken."""
        import aiohttp

        return message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.ERROR)

    async def until(self, pattern: str | tuple[str, ...], timeout: float) -> str:
        """Read frames until the text shows one of ``pattern``."""
        import aiohttp

        patterns = (pattern,) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while (message := await self._receive(deadline)) is not None:
            if message.type == aiohttp.WSMsgType.BINARY:
                self.chunks.append(message.data)
                if any(p in self.text() for p in patterns):
                    return self.text()
            elif self._ends(message):
                break
        raise AssertionError(f"never saw {pattern!r}: {self.text()[-2000:]}")

    async def closed(self, timeout: float) -> bool:
        """Read (answering the server's close) until the websocket is closed."""
        deadline = time.monotonic() + timeout
        while (message := await self._receive(deadline)) is not None:
            if self._ends(message):
                return True
        return self.ws.closed

    async def send_keys(self, keys: str) -> None:
        await self.ws.send_json(["stdin", keys])

    async def resize(self, width: int, height: int) -> None:
        await self.ws.send_json(["resize", {"width": width, "height": height}])
