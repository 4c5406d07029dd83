"""Waiting in Pilot tests: the app's work runs in thread workers, so tests poll for results."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(pilot, condition: Callable[[], object], what: str = "the condition",
                timeout: float = 30.0) -> None:
    """Let the app run until ``condition()`` holds; fail naming ``what`` after ``timeout``."""
    for _ in range(int(timeout / 0.05)):
        await pilot.pause()
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {what} within {timeout:.0f} s")


async def show_tab(pilot, app, key: str) -> None:
    """Press a tab's number and wait until the tab has the focus (it moves after a refresh,
    so an Enter pressed too early would go to the previous tab)."""
    await pilot.press(key)
    await until(pilot, lambda: app.focused is not None
                and app.current_pane() in app.focused.ancestors_with_self, f"tab {key} focused")
