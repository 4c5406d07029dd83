"""``statekit tui … --web`` in a real browser: headless Chromium (Debian's ``chromium``) loads
the page, runs textual-serve's xterm.js client, which opens the app's websocket; a screenshot
shows the fleet list; a key pressed in the page opens a checkpoint.

Driven through the Chrome DevTools Protocol over its websocket (no Selenium, no Playwright:
aiohttp is already here; the helpers, shared with the soak's browser cycles, are in
tests/support/devtools.py). What the page shows is drawn on a canvas, so the page's text is
read where xterm.js gets it: a script added before the page's own wraps ``WebSocket`` and
keeps the text of every frame the terminal is given. The screenshot is checked as an image
(a PNG of the window's size whose pixels are not one colour).

Offline, as on a firewalled laptop: a Chromium that can reach nothing but 127.0.0.1 (every
other name resolves to nothing, every other address goes to a proxy that is not there) loads
the page of a server bound to 0.0.0.0 through the URL with its token; every request the page
made (CDP's Network domain) went to the server's origin, none failed, the font is the
server's, and the app's text arrives."""

from __future__ import annotations

import asyncio
import base64
import re
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.support import tools
from tests.support.devtools import DevTools, first_page_target, hooked_page
from tests.support.ports import free_port
from tests.support.tools import find
from tests.support.web import DEMO, GOLDEN, served_tui, web_server

CHROMIUM = find(tools.CHROMIUM)
WIDTH, HEIGHT = 1400, 900

pytestmark = tools.needs(tools.CHROMIUM)

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


async def wait_for(page: DevTools, pattern: str, timeout: float) -> str:
    """The terminal's text once it shows ``pattern`` (AssertionError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = await page.text()
        if pattern in text:
            return text
        await asyncio.sleep(0.25)
    raise AssertionError(f"the page never showed {pattern!r}: {text[-1500:]}")


@asynccontextmanager
async def _first_page_at(devtools_port: int, url: str,
                         domains: tuple[str, ...] = ("Page",)) -> AsyncIterator[DevTools]:
    """The browser's first tab, ``domains`` enabled, the hook added, a WIDTH×HEIGHT
    window, navigated to ``url``."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        target = await first_page_target(http, devtools_port)
        async with hooked_page(http, target, domains) as page:
            await page.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                            deviceScaleFactor=1, mobile=False)
            await page.call("Page.navigate", url=url)
            yield page


async def _browse(devtools_port: int, url: str, shots: Path) -> tuple[str, str]:
    async with _first_page_at(devtools_port, url) as page:
        fleet = await wait_for(page, "complete in", 90)
        await asyncio.sleep(0.5)  # the canvas draws what the terminal was given
        shot = await page.call("Page.captureScreenshot", format="png")
        (shots / "fleet.png").write_bytes(base64.b64decode(shot["data"]))
        await page.call("Runtime.evaluate", expression="window.__terminalText = []")
        # the key goes where a user's goes: the focused xterm.js textarea
        await page.focus_terminal()
        await page.press("Enter", "Enter", 13, "\r")
        opened = await wait_for(page, "Overview", 90)
        await asyncio.sleep(0.5)
        shot = await page.call("Page.captureScreenshot", format="png")
        (shots / "opened.png").write_bytes(base64.b64decode(shot["data"]))
    return fleet, opened


OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
           "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1"]
"""Nothing but 127.0.0.1: every name resolves to nothing, every other address goes through a
proxy on the discard port, where nothing listens."""


def _start_chromium(profile: Path, *flags: str) -> tuple[subprocess.Popen, int]:
    browser = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
         "--remote-debugging-port=0", f"--window-size={WIDTH},{HEIGHT}", *flags,
         "about:blank"],
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
            try:  # the browser goes first, as a user's tab closes before the server stops
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


async def _browse_offline(devtools_port: int, url: str) -> tuple[DevTools, str, bool]:
    async with _first_page_at(devtools_port, url, ("Network", "Page")) as page:
        text = await wait_for(page, "Overview", 90)
        await asyncio.sleep(1)  # anything the page still asks for, asked
        font = await page.call("Runtime.evaluate", returnByValue=True, expression=(
            "[...document.fonts].some(f => f.family.includes('Roboto Mono') "
            "&& f.status === 'loaded')"))
        await page.call("Runtime.evaluate", expression="1")  # the last events, received
    return page, text, bool(font["result"].get("value"))


def test_offline_chromium_gets_the_whole_page_from_the_server(tmp_path):
    """No request of the page leaves the server's origin (the font too comes from the
    server), none fails, the token URL's cookie carries the page's websocket, and the app's
    text arrives — in a browser that can reach nothing else."""
    profile = Path(tempfile.mkdtemp(prefix="statekit-chromium-"))
    ckpt = tmp_path / "ckpt"
    shutil.copytree(DEMO, ckpt)
    try:
        port = free_port()
        with web_server([str(ckpt), "--web", f"0.0.0.0:{port}"], port=port) as served:
            assert served.token, served.said
            browser, devtools_port = _start_chromium(profile, *OFFLINE)
            try:
                page, text, font_loaded = asyncio.run(_browse_offline(
                    devtools_port, f"http://127.0.0.1:{port}/?token={served.token}"))
            finally:
                browser.terminate()
                browser.wait(timeout=20)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    origin = f"http://127.0.0.1:{port}/"
    requested = [event["request"]["url"] for event in page.seen("Network.requestWillBeSent")]
    sockets = [event["url"] for event in page.seen("Network.webSocketCreated")]
    assert len(sockets) == 1 and sockets[0].startswith(f"ws://127.0.0.1:{port}/ws?"), sockets
    handshakes = page.seen("Network.webSocketHandshakeResponseReceived")
    assert [event["response"]["status"] for event in handshakes] == [101]
    print("requested:", *requested, sep="\n  ")
    elsewhere = [url for url in requested if not url.startswith(origin)
                 and not url.startswith("data:")]  # data: URLs are no request
    assert not elsewhere, elsewhere
    assert not page.seen("Network.loadingFailed"), page.seen("Network.loadingFailed")
    assert any(url.endswith("/static/fonts/RobotoMono-VariableFont_wght.ttf")
               for url in requested), requested
    statuses = {event["response"]["url"]: event["response"]["status"]
                for event in page.seen("Network.responseReceived")}
    assert statuses and all(status == 200 for status in statuses.values()), statuses
    assert font_loaded
    assert "Operators" in text and "Recovery" in text
