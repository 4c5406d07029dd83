"""``statekit tui … --web [HOST:]PORT``: the same app in a browser, as a service an SRE can
leave running.

textual-serve runs the app once per browser tab, as a subprocess speaking to xterm.js over a
websocket: the served app is the terminal one, started with the same arguments minus the
``--web`` options, so it cannot drift from it. It binds to 127.0.0.1 unless a host is named
(a checkpoint's state is nobody else's business by default); bound anywhere else it asks
every request for a token. The app writes only with ``--allow-write`` given too — on the web
as in the terminal.

This module is the command line's side: the options' values (a port that is no port, a weak
token: exit 3 before any work, as for ``metrics --serve``), the served command, and the order
of serving — bind, then say where, then serve — so that every failure is a one-line
``statekit: error`` with its exit code. The server itself (:mod:`statekit.cli.web_server`,
which imports aiohttp and textual-serve) is imported only when it runs.
"""

from __future__ import annotations

import socket
import sys

import click

from statekit.cli.web_address import (
    is_loopback,
    is_wildcard,
    listening_socket,
    shown,
    web_address,
)
from statekit.cli.web_token import TOKEN_ENV, check_token, new_token

__all__ = ["checked_token", "serve", "served_argv", "serving_line", "web_address"]

WEB_OPTIONS = ("--web", "--web-token")
"""The options of the server, not of the app it serves."""


def checked_token(value: str | None) -> str | None:
    """The token of ``--web-token`` / ``STATEKIT_WEB_TOKEN``, checked only when ``--web`` is
    given (a variable exported for the server must not break the terminal app); a weak one
    is ``BadInput``."""
    return None if value is None else check_token(value, f"--web-token / {TOKEN_ENV}")


def served_argv(argv: list[str]) -> list[str]:
    """The command each browser session runs: this ``statekit tui`` without the options of
    the server (``--web``, ``--web-token``), run by this interpreter."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in WEB_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in WEB_OPTIONS)):
            kept.append(arg)
    return [sys.executable, "-m", "statekit", *kept]


def serving_line(host: str, port: int, *, token: str | None, generated: bool,
                 allow_write: bool, checkpoints: int) -> str:
    """What the server says once it listens: where, for whom, whether it writes."""
    shown_host = socket.gethostname() if is_wildcard(host) else host
    url = f"http://{shown(shown_host, port)}/"
    if token is not None and generated:
        url += f"?token={token}"
    if is_loopback(host):
        reach = "this machine only: --web 0.0.0.0:PORT lets others in"
    else:
        reach = f"every address of {host}" if is_wildcard(host) else f"{host}'s network"
    if token is None:
        guard = ""
    elif generated:
        guard = ", only with this URL's token"
    else:
        guard = f", only with the token of --web-token / {TOKEN_ENV}"
    writes = ("writes enabled (--allow-write)" if allow_write
              else "read-only (add --allow-write to enable writes)")
    return (f"statekit tui: serving {url} — {checkpoints} checkpoint(s), {reach}{guard}, "
            f"{writes}; Ctrl+C stops")


def serve(argv: list[str], host: str, port: int, *, token: str | None, allow_write: bool,
          checkpoints: int) -> None:
    """Bind ``host:port`` (``BadInput`` if it cannot), say where, then serve ``argv`` to
    browsers until SIGINT or SIGTERM. Off loopback a token is required: ``token`` if given,
    else a new one, printed in the URL."""
    sock = listening_socket(host, port)
    try:
        generated = token is None and not is_loopback(host)
        if generated:
            token = new_token()
        from statekit.cli.web_server import AppServer
        from statekit.cli.web_token import TokenGuard

        server = AppServer(argv, sock, guard=TokenGuard(token, port))
        click.echo(serving_line(host, port, token=token, generated=generated,
                                allow_write=allow_write, checkpoints=checkpoints), err=True)
        server.run()
    finally:
        sock.close()
    click.echo("statekit tui: stopped; every browser session's app has ended", err=True)
