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
