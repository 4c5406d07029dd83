"""Browsers coming and going on ``statekit tui --web``: headless Chromium over DevTools.

Each browser tab that opens the page starts an app process on the server; each tab that
closes must end it. An on-call channel opens the link dozens of times a day, so the soak
opens a tab, waits for the app's terminal text, presses a couple of keys, checks the app
answered them, and closes the tab — many times — while the service's process tree is
measured.

As tests/tui/test_browser.py does, and with its helpers (tests/support/devtools.py):
Chromium is driven over the Chrome DevTools Protocol with aiohttp (no Selenium, no
Playwright), and the page's text is read where xterm.js gets it (a script added before the
page's own wraps ``WebSocket`` and keeps every frame's text).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import soak_probe

from tests.support.devtools import hooked_page

KEYS = (("ArrowDown", "ArrowDown", 40, ""), ("s", "KeyS", 83, "s"))
"""Keys pressed in each cycle: move down the fleet list, sort it."""
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-port=0", "--window-size=1400,900")


class Chromium:
    """A headless Chromium with a fresh profile, its DevTools endpoint on 127.0.0.1."""

    def __init__(self, binary: str) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="statekit-soak-chromium-"))
        self.process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}",
                                         "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True, start_new_session=True)
        self.port = self._devtools_port()

    def _devtools_port(self, timeout_s: float = 60) -> int:
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                # its stderr is read to the end, or a full pipe would block the browser
                threading.Thread(target=self.process.stderr.read, daemon=True).start()
                return int(found.group(1))
            if not line and self.process.poll() is not None:
                break
        self.close()
        raise RuntimeError("Chromium did not start its DevTools endpoint")

    def close(self) -> None:
        """Stop the browser and every process of its session (renderers, zygotes)."""
        members = {stat.ident for stat in soak_probe.tree(self.process.pid)}
        soak_probe.stop_process(self.process, 20)
        _, left = soak_probe.wait_gone(members, 5.0)
        soak_probe.kill(left)
        shutil.rmtree(self.profile, ignore_errors=True)


@dataclass
class Cycle:
    """One tab's visit."""

    ok: bool
    shown_s: float | None
    """Seconds from navigation until the page showed the expected text."""
    answered_keys: bool
    error: str = ""


async def _visit(devtools: int, url: str, expect: str, timeout_s: float) -> Cycle:
    import aiohttp

    base = f"http://127.0.0.1:{devtools}"
    async with aiohttp.ClientSession() as http:
        async with http.put(f"{base}/json/new?about:blank") as made:
            target = await made.json(content_type=None)
        try:
            async with hooked_page(http, target) as page:
                started = time.monotonic()
                await page.call("Page.navigate", url=url)
                shown = None
                while time.monotonic() - started < timeout_s:
                    if expect in await page.text():
                        shown = time.monotonic() - started
                        break
                    await asyncio.sleep(0.25)
                if shown is None:
                    tail = (await page.text())[-300:]
                    return Cycle(False, None, False, f"never showed {expect!r}: {tail!r}")
                await page.focus_terminal()
                before = await page.frames()
                for key in KEYS:
                    await page.press(*key)
                    await asyncio.sleep(0.3)
                answered = False
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not answered:
                    answered = await page.frames() > before
                    await asyncio.sleep(0.2)
                return Cycle(answered, shown, answered,
                             "" if answered else "no terminal output after the keys")
        finally:
            async with http.get(f"{base}/json/close/{target['id']}") as closed:
                await closed.read()


def visit(devtools: int, url: str, expect: str, timeout_s: float = 90) -> Cycle:
    """Open ``url`` in a new tab, wait for ``expect``, press the keys, close the tab."""
    try:
        return asyncio.run(_visit(devtools, url, expect, timeout_s))
    except Exception as failure:  # reported as a failed cycle, with its reason
        return Cycle(False, None, False, f"{type(failure).__name__}: {failure}")
