"""Who may look at ``statekit tui --web``: the holder of a secret token, off loopback.

The app shows state rows (user ids, amounts) and, with ``--allow-write``, writes checkpoints:
served on an address others can reach, it must not answer whoever finds the port. As Jupyter
does, the server then requires a token on every request — the page, its static files,
downloads and the websocket that starts an app. It is generated (``secrets.token_urlsafe``)
and printed once in the "serving" line as a URL with ``?token=…``, or chosen by whoever
starts the server (``--web-token`` / ``STATEKIT_WEB_TOKEN``, which also protects a loopback
server, e.g. on a shared host).

A browser presents it once in the URL; the response sets an HttpOnly, SameSite=Strict cookie
that the page's own requests (scripts, fonts, the websocket handshake) then carry. Scripts
and other tools may send ``Authorization: Bearer TOKEN`` instead. Comparisons take constant
time (``hmac.compare_digest``). A request without the token gets 403 before any handler
runs: a refused websocket never starts an app.
"""

from __future__ import annotations

import hmac
import re
import secrets
from typing import TYPE_CHECKING

from statekit.support.errors import BadInput

if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

TOKEN_ENV = "STATEKIT_WEB_TOKEN"
"""The environment variable that gives the token (kept off the command line, where every
local user can read it in the process list)."""
TOKEN_BYTES = 32
"""Random bytes of a generated token (43 URL-safe characters)."""
MIN_LENGTH = 16
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]+")
"""Characters a token may use: the URL-safe and base64 alphabets, safe in a URL query and a
cookie alike."""


def new_token() -> str:
    """A fresh random token."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def check_token(text: str, option: str = "--web-token") -> str:
    """``text`` if it can serve as a token; ``BadInput`` otherwise."""
    if len(text) < MIN_LENGTH or not _TOKEN.fullmatch(text):
        raise BadInput(f"{option}: a token needs at least {MIN_LENGTH} characters from "
                       "A-Z a-z 0-9 . _ ~ + / = - (e.g. python -c \"import secrets; "
                       "print(secrets.token_urlsafe())\")")
    return text


def _matches(presented: str | None, token: bytes) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode("utf-8"), token)


def _bearer(header: str | None) -> str | None:
    scheme, _, credentials = (header or "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


class TokenGuard:
    """The aiohttp middleware that lets through only requests carrying ``token`` (all of
    them when ``token`` is None: a loopback server nobody gave a token)."""

    def __init__(self, token: str | None, port: int) -> None:
        self.token = token
        self.cookie = f"statekit-web-token-{port}"
        """Named by port: cookies ignore ports, and two servers on one host must not
        overwrite each other's."""

    def admits(self, request: web.Request) -> tuple[bool, bool]:
        """(whether ``request`` may pass, whether it brought the token in its URL)."""
        if self.token is None:
            return True, False
        token = self.token.encode("utf-8")
        in_url = _matches(request.query.get("token"), token)
        admitted = (in_url or _matches(request.cookies.get(self.cookie), token)
                    or _matches(_bearer(request.headers.get("Authorization")), token))
        return admitted, in_url

    def middleware(self) -> Middleware:
        from aiohttp import web

        @web.middleware
        async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
            admitted, in_url = self.admits(request)
            if not admitted:
                return web.Response(
                    status=403, text="403 forbidden: this statekit server needs its token: "
                    "open the URL with ?token=… it printed when it started\n")
            response = await handler(request)
            if in_url and self.token is not None and not response.prepared:
                response.set_cookie(self.cookie, self.token, path="/", httponly=True,
                                    samesite="Strict")
            return response

        return require_token
