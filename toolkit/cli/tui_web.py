"""``statekit tui … --web [HOST:]PORT``: the same app in a browser, for an on-call channel.

textual-serve runs the app once per browser tab, as a subprocess speaking to xterm.js over a
websocket: the served app is the terminal one, started with the same arguments minus
``--web``, so it cannot drift from it. It binds to 127.0.0.1 unless a host is named (a
checkpoint's state is nobody else's business by default), says where it listens, and the
app writes only with ``--allow-write`` given too — on the web as in the terminal.
"""

from __future__ import annotations

import shlex
import sys

import click

from statekit.support.errors import BadInput

DEFAULT_HOST = "127.0.0.1"


def web_address(text: str) -> tuple[str, int]:
    """``PORT``, ``:PORT`` or ``HOST:PORT`` → (host, port); the host defaults to 127.0.0.1."""
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--web {text!r}: expected [HOST:]PORT, e.g. 8000 or 0.0.0.0:8000")
    return host or DEFAULT_HOST, int(port)


def served_command(argv: list[str]) -> str:
    """The command each browser session runs: this ``statekit tui`` without ``--web``."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--web":
            skip = True
            continue
        if arg.startswith("--web="):
            continue
        kept.append(arg)
    return shlex.join([sys.executable, "-m", "statekit", *kept])


def serve(command: str, host: str, port: int, *, allow_write: bool, checkpoints: int) -> None:
    """Serve ``command`` until interrupted."""
    from textual_serve.server import Server

    reach = ("this machine only: --web 0.0.0.0:PORT lets others in"
             if host in ("127.0.0.1", "localhost", "::1") else f"every address of {host}")
    writes = "writes enabled (--allow-write)" if allow_write else \
        "read-only (add --allow-write to enable writes)"
    click.echo(f"statekit tui: serving http://{host}:{port} — {checkpoints} checkpoint(s), "
               f"{reach}, {writes}; Ctrl+C stops", err=True)
    Server(command, host=host, port=port, title="statekit").serve()
