"""Save the docs' TUI screenshots: the app itself renders every screen as SVG, and headless
Chromium turns each SVG into a PNG (for pages and chats that do not show SVG).

Run after ``make demo`` (or on any checkpoint and its progress log)::

    .venv/bin/python docs/make_screenshots.py demo/checkpoint demo/progress.jsonl

The app runs headless at 120×36 with an RTO of 30 s, opens a screen, waits until every
request it started has answered (its own messages), and saves ``docs/tui-<screen>.svg`` with
the app's ``save_screenshot`` (text pinned to its cells, so the pictures read as the
terminal does); the fleet list shows the checkpoint beside the repository's golden ones.
Pass the checkpoint by a relative path: it is shown in the header. Without Chromium
(Debian's ``chromium``) only the SVGs are written, and the script says so.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from statekit.tui.app import StatekitApp
from statekit.tui.messages import ENDED, WorkStarted

OUT = Path(__file__).resolve().parent
ROOT = OUT.parent
SIZE = (120, 36)
#: screen name → keys that reach it from the Overview (every tab, a drill-down, the help)
SCREENS = {"overview": (), "operators": ("2",), "partitions": ("2", "enter"),
           "batches": ("3",), "growth": ("4",), "recovery": ("5",), "state": ("6",),
           "repartition": ("7",), "query": ("8",), "fix": ("9",), "help": ("question_mark",)}
FLEET = sorted(str(p) for p in (ROOT / "tests/data/golden/spark-4.1.4").glob("*/checkpoint"))
"""The golden checkpoints beside the user's (absolute: the script runs from the folder
holding demo/; the list names each by its distinct tail)."""
PIXELS = (1482, 929)
"""The SVG's size at 120×36 (its viewBox, rounded up): the PNG's window."""


async def save(url: str, progress: str | None, name: str, keys: tuple[str, ...],
               fleet: list[str] | None = None) -> Path:
    started: list[object] = []
    ended: list[object] = []

    def hook(message: object) -> None:
        if isinstance(message, WorkStarted):
            started.append(message.request)
        elif isinstance(message, ENDED):
            ended.append(message.request)

    app = StatekitApp(url, cores=2, progress=progress, rto_s=30.0, fleet=fleet)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        for key in (None, *keys):
            if key:
                await pilot.press(key)
            for _ in range(1200):
                await pilot.pause()
                if started and all(r in ended for r in started):
                    break
                await asyncio.sleep(0.05)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return Path(app.save_screenshot(filename=f"tui-{name}.svg", path=str(OUT)))


def to_png(svg: Path, chromium: str) -> Path:
    """The SVG as Chromium draws it, at the SVG's own size."""
    png = svg.with_suffix(".png")
    with tempfile.TemporaryDirectory(prefix="statekit-shot-") as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--screenshot={png}",
                        f"--window-size={PIXELS[0]},{PIXELS[1]}", svg.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
    return png


def main(url: str, progress: str | None) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    svgs = [asyncio.run(save(url, progress, name, keys)) for name, keys in SCREENS.items()]
    svgs.append(asyncio.run(save(url, progress, "fleet", (), fleet=[url, *FLEET])))
    for svg in svgs:
        print(svg)
        if chromium:
            print(to_png(svg, chromium))
    if not chromium:
        print("no Chromium (apt-get install chromium): SVGs only", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo/checkpoint",
         sys.argv[2] if len(sys.argv) > 2 else "demo/progress.jsonl")
