"""``statekit tui … --web`` started as a user starts it, for the tests that speak to it as a
browser does (its websocket) or in a real browser (Chromium)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
"""The terminal's control sequences: what is left of the app's output is its text."""

GOLDEN = sorted((Path(__file__).resolve().parents[1] / "data" / "golden").glob(
    "spark-4.1.4/*/checkpoint"))


@contextmanager
def served_tui(urls: Sequence[str]) -> Iterator[tuple[int, str]]:
    """The app served on a free port: (port, the line it said where it listens), once the
    port accepts connections; stopped afterwards."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "statekit", "tui", *urls, "--web",
                               str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        said = server.stderr.readline()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield port, said
    finally:
        server.terminate()
        server.wait(timeout=20)


def terminal_text(stream: str) -> str:
    """The text a terminal stream shows, without its control sequences."""
    return ANSI.sub("", stream)
