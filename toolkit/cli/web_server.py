"""The web server of ``statekit tui --web``: textual-serve's ``Server``, made a service.

textual-serve (1.1.3) serves a Textual app to xterm.js in the browser; this subclass keeps
its protocol, its static files and its downloads, and changes what an on-call tool left
running for weeks needs changed:

- it serves on a socket already bound (:mod:`statekit.cli.web_address`), so a port in use is
  a one-line error before anything is printed;
- every request passes the token guard first (:mod:`statekit.cli.web_token`);
- its page is its own copy of textual-serve's (``web_page.html``): the font comes from this
  server, every URL is relative to it, and a Content-Security-Policy keeps the browser from
  sending anything elsewhere — an offline or firewalled laptop gets the whole page;
- each browser session's app is a process group (:mod:`statekit.cli.web_app`) ended when
  the session ends, however it ends;
- SIGINT, SIGTERM and SIGHUP close every websocket and end every app's group at once, and
  the server exits within seconds (aiohttp's ``shutdown_timeout``), killing any group still
  there;
- nothing it logs carries a traceback, and it keeps no access log (a URL may hold the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from aiohttp.typedefs import Handler
from aiohttp.web_runner import GracefulExit
from textual_serve.server import Server

from statekit.cli.web_app import AppProcess
from statekit.cli.web_processes import kill_remaining
from statekit.cli.web_token import TokenGuard

log = logging.getLogger("statekit.web")

PAGE = Path(__file__).with_name("web_page.html")
SHUTDOWN_TIMEOUT = 1.0
"""Seconds aiohttp gives handlers still running after every session was closed."""
CLOSE_TIMEOUT = 1.0
"""Seconds a websocket waits for the browser's answer to its close."""
HEARTBEAT = 15.0
"""Seconds between pings on a websocket: a browser that vanished (network gone, laptop
asleep) is noticed and its app ended."""
MAX_SIZE = 1000
"""Columns or rows a browser may ask for at most."""
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; connect-src 'self'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline'; font-src 'self'; img-src 'self' data: blob:; "
    "worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
"""What the page may load: its own server's files and websocket, nothing else."""


class OneLine(logging.Formatter):
    """A log record as one line: an exception is named, never traced."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            message = f"{message}: {type(error).__name__}: {error}"
        return "statekit tui: " + " ".join(message.split())


def quiet_logging() -> None:
    """Warnings and errors of the server, textual-serve and aiohttp: one line each on
    stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    for name in ("statekit.web", "textual-serve", "aiohttp"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def _size(text: str | None, default: int) -> int:
    try:
        return max(1, min(MAX_SIZE, int(text or default)))
    except ValueError:
        return default


@dataclass(eq=False)
class Session:
    """One browser tab: its websocket and its app."""

    websocket: web.WebSocketResponse
    app: AppProcess

    async def close(self) -> None:
        """Close the websocket and end the app's group, at once."""
        await asyncio.gather(
            self.app.stop(),
            self.websocket.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping"),
            return_exceptions=True)


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The page stays on its origin and its URL (which may hold the token) is never sent as
    a referrer."""
    response = await handler(request)
    if not response.prepared:
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


class AppServer(Server):
    """textual-serve's server for ``argv`` (one app per browser session) on ``sock``."""

    def __init__(self, argv: Sequence[str], sock: socket.socket, *, guard: TokenGuard,
                 title: str = "statekit") -> None:
        host, port = sock.getsockname()[:2]
        super().__init__(shlex.join(argv), host=host, port=port, title=title)
        self.argv = list(argv)
        self.sock = sock
        self.guard = guard
        self.sessions: set[Session] = set()
        self.stopping = False
        self.page = jinja2.Template(PAGE.read_text(encoding="utf-8"), autoescape=True)

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard.middleware(), security_headers])
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        app.on_shutdown.append(self.close_sessions)
        return app

    def run(self) -> None:
        """Serve until SIGINT, SIGTERM or SIGHUP (the terminal or ssh session it ran in
        closed); every app's group is gone when this returns."""
        quiet_logging()
        loop = asyncio.new_event_loop()
        with contextlib.suppress(NotImplementedError, AttributeError):  # not on Windows
            loop.add_signal_handler(signal.SIGHUP, self.request_exit)
        try:
            web.run_app(self._make_app(), sock=self.sock, shutdown_timeout=SHUTDOWN_TIMEOUT,
                        print=None, access_log=None, handle_signals=True, loop=loop)
        except GracefulExit:  # a second signal while stopping
            pass
        finally:
            left = kill_remaining()
            if left:
                log.warning("killed %d app process group(s) that outlived the server", left)

    async def close_sessions(self, _app: web.Application) -> None:
        """Shutdown (SIGINT, SIGTERM): refuse new sessions, close every open one."""
        self.stopping = True
        await asyncio.gather(*(session.close() for session in list(self.sessions)))

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page: textual-serve's, served from here."""
        html = self.page.render(static="/static/", title=self.title,
                                font_size=_size(request.query.get("fontsize"), 16))
        return web.Response(text=html, content_type="text/html")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """A browser session: its app runs while its websocket is open."""
        if self.stopping:
            raise web.HTTPServiceUnavailable(text="statekit tui: the server is stopping\n")
        websocket = web.WebSocketResponse(heartbeat=HEARTBEAT, timeout=CLOSE_TIMEOUT)
        await websocket.prepare(request)

        async def close() -> None:
            await websocket.close()

        app = AppProcess(self.argv, write_bytes=websocket.send_bytes,
                         write_str=websocket.send_str, close=close,
                         download_manager=self.download_manager)
        session = Session(websocket, app)
        self.sessions.add(session)
        try:
            await app.start(_size(request.query.get("width"), 80),
                            _size(request.query.get("height"), 24))
            await self._process_messages(websocket, app)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # one line in the log; the session ends
            log.warning("a browser session failed: %s: %s", type(error).__name__, error)
        finally:
            await app.stop()
            with contextlib.suppress(Exception):
                await websocket.close()
            self.sessions.discard(session)
        return websocket

    async def _process_messages(self, websocket: web.WebSocketResponse,
                                app_service: Any) -> None:
        """Relay the browser's messages to the app; anything malformed is ignored."""
        app: AppProcess = app_service
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = message.json()
            except ValueError:
                continue
            if not isinstance(envelope, list) or not envelope:
                continue
            kind, data = envelope[0], (envelope[1] if len(envelope) > 1 else None)
            if kind == "stdin" and isinstance(data, str):
                await app.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await app.set_terminal_size(_size(str(data.get("width")), 80),
                                            _size(str(data.get("height")), 24))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await app.blur()
            elif kind == "focus":
                await app.focus()
