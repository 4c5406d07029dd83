"""``statekit tui … --web`` in a real browser: headless Chromium (Debian's ``chromium``) loads
the page, runs textual-serve's xterm.js client, which opens the app's websocket; a screenshot
shows the fleet list; a key pressed in the page opens a checkpoint.

Driven through the Chrome DevTools Protocol over its websocket (no Selenium, no Playwright:
aiohttp is already here). What the page shows is drawn on a canvas, so the page's text is
read where xterm.js gets it: a script added before the page's own wraps ``WebSocket`` and
keeps the text of every frame the terminal is given. The screenshot is checked as an image
(a PNG of the window's size whose pixels are not one colour)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

from tests.support import tools
from tests.support.tools import find
from tests.support.web import GOLDEN, served_tui, terminal_text

CHROMIUM = find(tools.CHROMIUM)
WIDTH, HEIGHT = 1400, 900

pytestmark = tools.needs(tools.CHROMIUM)

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


def png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the first rows) of a PNG: enough to tell a
    real rendering from an empty or one-colour page without an image library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, offset = b"", 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8:offset + 8 + length]
        offset += 12 + length
    pixels = zlib.decompress(idat)
    return width, height, len(set(pixels[: width * 4 * 200]))


class DevTools:
    """One page target of a running Chromium, spoken to over CDP."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, **params):
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = json.loads((await self.ws.receive(timeout=60)).data)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result", {})

    async def text(self) -> str:
        result = await self.call("Runtime.evaluate",
                                 expression="(window.__terminalText || []).join('')",
                                 returnByValue=True)
        return terminal_text(result["result"].get("value", ""))

    async def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = await self.text()
            if pattern in text:
                return text
            await asyncio.sleep(0.25)
        raise AssertionError(f"the page never showed {pattern!r}: {text[-1500:]}")

    async def press(self, key: str, code: str, key_code: int, text: str) -> None:
        for kind in ("keyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code,
                            windowsVirtualKeyCode=key_code,
                            **({"text": text} if kind == "keyDown" else {}))


async def _browse(devtools_port: int, url: str, shots: Path) -> tuple[str, str]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as listing:
            targets = [t for t in await listing.json() if t["type"] == "page"]
        async with http.ws_connect(targets[0]["webSocketDebuggerUrl"],
                                   max_msg_size=0) as ws:
            page = DevTools(ws)
            await page.call("Page.enable")
            await page.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
            await page.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                            deviceScaleFactor=1, mobile=False)
            await page.call("Page.navigate", url=url)
            fleet = await page.wait_for("complete in", 90)
            await asyncio.sleep(0.5)  # the canvas draws what the terminal was given
            shot = await page.call("Page.captureScreenshot", format="png")
            (shots / "fleet.png").write_bytes(base64.b64decode(shot["data"]))
            await page.call("Runtime.evaluate", expression="window.__terminalText = []")
            # the key goes where a user's goes: the focused xterm.js textarea
            await page.call("Runtime.evaluate", expression=(
                "document.querySelector('.xterm-helper-textarea').focus()"))
            await page.press("Enter", "Enter", 13, "\r")
            opened = await page.wait_for("Overview", 90)
            await asyncio.sleep(0.5)
            shot = await page.call("Page.captureScreenshot", format="png")
            (shots / "opened.png").write_bytes(base64.b64decode(shot["data"]))
    return fleet, opened


def _start_chromium(profile: Path) -> tuple[subprocess.Popen, int]:
    browser = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
         "--remote-debugging-port=0", f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    assert browser.stderr is not None
    while time.monotonic() < deadline:
        line = browser.stderr.readline()
        found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if found:
            return browser, int(found.group(1))
        if not line and browser.poll() is not None:
            break
    browser.kill()
    raise AssertionError("Chromium did not start its DevTools endpoint")


def test_chromium_shows_the_fleet_list_and_a_key_opens_a_checkpoint(tmp_path):
    profile = Path(tempfile.mkdtemp(prefix="statekit-chromium-"))
    try:
        with served_tui([str(p) for p in GOLDEN[:3]]) as (port, said):
            assert f"serving http://127.0.0.1:{port}" in said
            browser, devtools_port = _start_chromium(profile)
            try:  # the browser goes first: the server waits for its open sessions to end
                fleet, opened = asyncio.run(_browse(devtools_port,
                                                    f"http://127.0.0.1:{port}/", tmp_path))
            finally:
                browser.terminate()
                browser.wait(timeout=20)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert "3 checkpoints" in fleet and "aggregation_hdfs" in fleet and "restarts" in fleet
    assert "Operators" in opened and "Recovery" in opened
    for name in ("fleet.png", "opened.png"):
        width, height, colours = png_size_and_colours((tmp_path / name).read_bytes())
        assert (width, height) == (WIDTH, HEIGHT), name
        assert colours > 8, f"{name} is blank"
