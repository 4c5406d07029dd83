"""Chromium driven over the Chrome DevTools Protocol, for ``statekit tui --web`` in a browser.

Two places open the web TUI in headless Chromium: tests/tui/test_browser.py (a screenshot,
a key, an offline browser) and the soak's browser cycles (benchmarks/soak_browser.py, tabs
opened and closed many times). Both speak CDP over its websocket with aiohttp (no Selenium,
no Playwright), and both must read what the page shows — which xterm.js draws on a canvas,
so the text is taken where xterm.js gets it: :data:`HOOK`, added before the page's own
scripts, wraps ``WebSocket`` and keeps the text of every frame the terminal is given. What
they share lives here, so that the hook and the protocol plumbing cannot drift apart.

The callers hold the aiohttp session (aiohttp is imported where it is used, as in
tests/support/web.py): importing this module needs only the standard library.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from tests.support.web import terminal_text

if TYPE_CHECKING:
    import aiohttp

HOOK = """
window.__terminalText = [];
const Original = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new Original(...args);
  socket.addEventListener("message", (event) => {
    if (typeof event.data !== "string") {
      window.__terminalText.push(new TextDecoder().decode(new Uint8Array(event.data)));
    }
  });
  return socket;
};
window.WebSocket.prototype = Original.prototype;
"""
"""The page script that keeps the terminal's frames (binary websocket messages) as text in
``window.__terminalText``."""


class DevTools:
    """One page target of a running Chromium, spoken to over CDP."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse[bool]) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        """Every event received so far (``method``, ``params``), in order."""

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait (60 s per message) for its result; the events that
        arrive meanwhile are kept. RuntimeError when Chromium answers with an error."""
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = json.loads((await self.ws.receive(timeout=60)).data)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            if "method" in message:
                self.events.append(message)

    def seen(self, method: str) -> list[dict[str, Any]]:
        """The parameters of every ``method`` event received so far."""
        return [event["params"] for event in self.events if event["method"] == method]

    async def text(self) -> str:
        """What the terminal was given so far, without its control sequences."""
        result = await self.call("Runtime.evaluate", returnByValue=True,
                                 expression="(window.__terminalText || []).join('')")
        return terminal_text(result["result"].get("value", ""))

    async def frames(self) -> int:
        """How many frames the terminal was given so far."""
        result = await self.call("Runtime.evaluate", returnByValue=True,
                                 expression="(window.__terminalText || []).length")
        return int(result["result"].get("value", 0))

    async def focus_terminal(self) -> None:
        """Focus xterm.js's textarea: where a user's keys go."""
        await self.call("Runtime.evaluate", expression=(
            "document.querySelector('.xterm-helper-textarea').focus()"))

    async def press(self, key: str, code: str, key_code: int, text: str) -> None:
        """One key down and up; ``text`` (what the key types, "" for none) on the down."""
        for kind in ("keyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code,
                            windowsVirtualKeyCode=key_code,
                            **({"text": text} if kind == "keyDown" and text else {}))


async def first_page_target(http: aiohttp.ClientSession, devtools_port: int) -> dict[str, Any]:
    """The first ``page`` target of the Chromium whose DevTools endpoint is on
    ``devtools_port`` (the tab it opened at start), as ``/json/list`` describes it."""
    async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as listing:
        targets = [t for t in await listing.json() if t["type"] == "page"]
    return dict(targets[0])


@asynccontextmanager
async def hooked_page(http: aiohttp.ClientSession, target: dict[str, Any],
                      domains: Sequence[str] = ("Page",)) -> AsyncIterator[DevTools]:
    """A CDP session on ``target`` with ``domains`` enabled, in that order, and :data:`HOOK`
    added to every document it loads from now on: ready to navigate."""
    async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
        page = DevTools(ws)
        for domain in domains:
            await page.call(f"{domain}.enable")
        await page.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
        yield page
