"""Save the README's TUI screenshots: the app itself renders each screen and saves it as SVG.

Run after ``make demo`` (or on any checkpoint and its progress log)::

    .venv/bin/python docs/make_screenshots.py demo/checkpoint demo/progress.jsonl

The app runs headless at 120×36 with an RTO of 30 s, opens a screen, waits until every
request it started has answered (its own messages), and saves ``docs/tui-<screen>.svg`` with
the app's ``save_screenshot`` (text pinned to its cells, so the pictures read as the
terminal does). Pass the checkpoint by a relative path: it is shown in the header.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from statekit.tui.app import StatekitApp
from statekit.tui.messages import ENDED, WorkStarted

OUT = Path(__file__).resolve().parent
#: screen name → keys that reach it from the Overview
SCREENS = {"overview": (), "partitions": ("2", "enter"), "growth": ("4",),
           "recovery": ("5",), "query": ("8",)}


async def save(url: str, progress: str | None, name: str, keys: tuple[str, ...]) -> Path:
    started: list[object] = []
    ended: list[object] = []

    def hook(message: object) -> None:
        if isinstance(message, WorkStarted):
            started.append(message.request)
        elif isinstance(message, ENDED):
            ended.append(message.request)

    app = StatekitApp(url, cores=2, progress=progress, rto_s=30.0)
    async with app.run_test(size=(120, 36), message_hook=hook) as pilot:
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


def main(url: str, progress: str | None) -> None:
    for name, keys in SCREENS.items():
        print(asyncio.run(save(url, progress, name, keys)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo/checkpoint",
         sys.argv[2] if len(sys.argv) > 2 else "demo/progress.jsonl")
