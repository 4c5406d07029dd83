"""Save the README's TUI screenshots: the app itself renders each screen and saves it as SVG.

Run after ``make demo`` (or on any checkpoint)::

    .venv/bin/python docs/make_screenshots.py demo/checkpoint

The app runs headless at 130×40, opens a screen, waits for its workers, and saves
``docs/tui-<screen>.svg`` with Textual's own ``save_screenshot``. Pass the checkpoint by a
relative path: it is shown in the header.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from statekit.tui.app import StatekitApp

OUT = Path(__file__).resolve().parent
#: screen name → keys that reach it from the Overview
SCREENS = {"overview": (), "partitions": ("2", "enter"), "growth": ("4",),
           "recovery": ("5",)}


async def save(url: str, name: str, keys: tuple[str, ...]) -> Path:
    app = StatekitApp(url, cores=2)
    async with app.run_test(size=(130, 40)) as pilot:
        for key in (None, *keys):
            if key:
                await pilot.press(key)
            for _ in range(200):
                await pilot.pause()
                await app.workers.wait_for_complete()
                if app.snapshot is not None and not any(w.is_running for w in app.workers):
                    break
                await asyncio.sleep(0.05)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return Path(app.save_screenshot(filename=f"tui-{name}.svg", path=str(OUT)))


def main(url: str) -> None:
    for name, keys in SCREENS.items():
        print(asyncio.run(save(url, name, keys)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo/checkpoint")
