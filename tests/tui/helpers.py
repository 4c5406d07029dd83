"""Waiting in Pilot tests on the app's own messages, never on its workers.

Every slow step of the app is a request answered by a message (:mod:`statekit.tui.messages`):
:class:`Messages` records them through ``App.run_test(message_hook=…)``, so a test waits for
"the growth analysis answered" or "nothing is outstanding any more" instead of polling worker
state or sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from statekit.tui.messages import ENDED, Request, WorkIgnored, WorkStarted


class Messages:
    """The app's work messages as they are dispatched (pass :meth:`hook` to ``run_test``)."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def hook(self, message: object) -> None:
        self.seen.append(message)

    def started(self) -> list[Request]:
        return [m.request for m in self.seen if isinstance(m, WorkStarted)]

    def ended(self) -> list[Request]:
        return [m.request for m in self.seen if isinstance(m, ENDED)]

    def outstanding(self) -> list[Request]:
        ended = {id(r) for r in self.ended()}
        return [r for r in self.started() if id(r) not in ended]

    def answered(self, kind: str, describe: str | None = None) -> list[object]:
        """Messages that ended a request of ``kind`` (its result or failure), of requests
        described as ``describe`` when given."""
        return [m for m in self.seen if isinstance(m, ENDED) and m.request.kind == kind
                and (describe is None or m.request.describe == describe)]

    def ignored(self, kind: str) -> list[Request]:
        return [m.request for m in self.seen if isinstance(m, WorkIgnored)
                and m.request.kind == kind]

    async def wait(self, pilot, condition: Callable[[], object], what: str,
                   timeout: float = 60.0) -> None:
        """Let the app run until ``condition()`` (over the recorded messages) holds."""
        await until(pilot, condition, what, timeout, explain=self._state)

    def _state(self) -> str:
        seen = [(type(m).__name__, m.request.kind) for m in self.seen
                if hasattr(m, "request")]
        return f"outstanding: {[r.kind for r in self.outstanding()]}; seen: {seen}"

    async def answer(self, pilot, kind: str, count: int = 1, timeout: float = 60.0, *,
                     describe: str | None = None) -> None:
        """Wait until ``count`` requests of ``kind`` (described as ``describe``) have
        ended, and the app has handled the last answer."""
        await self.wait(pilot, lambda: len(self.answered(kind, describe)) >= count,
                        f"{count} answer(s) to {kind!r}", timeout)
        await pilot.pause()

    async def idle(self, pilot, timeout: float = 60.0) -> None:
        """Wait until every request started so far has ended and none is started anew
        (two quiet passes: a handler may start the next request)."""
        async def quiet() -> bool:
            await pilot.pause()
            return bool(self.started()) and not self.outstanding()

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await quiet() and await quiet():
                await pilot.pause()
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the app kept working for {timeout:.0f} s; outstanding: "
                             f"{[r.kind for r in self.outstanding()]}")


async def until(pilot, condition: Callable[[], object], what: str = "the condition",
                timeout: float = 30.0, explain: Callable[[], str] | None = None) -> None:
    """Let the app run until ``condition()`` holds; fail naming ``what`` (and
    ``explain()``) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause()
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never saw {what} within {timeout:.0f} s"
                         + (f"; {explain()}" if explain else ""))


async def show_tab(pilot, app, key: str) -> None:
    """Press a tab's number and wait until the tab has the focus (it moves after a refresh,
    so an Enter pressed too early would go to the previous tab); a tab of charts only has
    nothing to focus and is ready once shown."""
    from statekit.tui.app import TABS

    tab = TABS[int(key) - 1][0]
    await pilot.press(key)

    def ready() -> bool:
        pane = app.current_pane()
        if pane.id != f"{tab}-pane":
            return False
        if not any(w.focusable for w in pane.query("*")):
            return True
        return app.focused is not None and pane in app.focused.ancestors_with_self

    await until(pilot, ready, f"tab {key} focused")
