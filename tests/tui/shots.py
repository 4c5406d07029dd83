"""Screens of the app as pictures: the app driven headless to a screen and its SVG
screenshot taken, for the snapshot tests and the tests that look at a rendering's pixels.

The checkpoint is ``tests/data/tui/reference_hdfs`` (written once by the reference pipeline
and kept as written), opened by a path relative to the repository so that no
machine-specific path is on screen."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.widgets import Input

from statekit.tui.app import StatekitApp
from tests.tui.helpers import Messages, show_tab

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = "tests/data/tui/reference_hdfs"
PROGRESS = "tests/data/tui/reference_hdfs.progress.jsonl"
SIZE = (120, 36)


async def settle(pilot, app: StatekitApp) -> None:
    """Let loading, the workers' answers and animations finish before the screenshot."""
    await app.messages.idle(pilot)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def shoot(url: str, steps: Callable[[object, StatekitApp], Awaitable[None]], **kwargs) -> str:
    async def scenario() -> str:
        app = StatekitApp(url, cores=2, **kwargs)
        app.messages = Messages()
        async with app.run_test(size=SIZE, message_hook=app.messages.hook) as pilot:
            await settle(pilot, app)
            await steps(pilot, app)
            await settle(pilot, app)
            return app.export_screenshot()

    return asyncio.run(scenario())


def keys(*pressed: str) -> Callable[[object, StatekitApp], Awaitable[None]]:
    async def steps(pilot, app: StatekitApp) -> None:
        for key in pressed:
            if key.isdigit() and not isinstance(app.focused, Input):  # a tab, not typing
                await show_tab(pilot, app, key)
            else:
                await pilot.press(key)
            await settle(pilot, app)

    return steps
