"""The command palette reaches every screen and every action, including each screen's own
(State paging, Repartition execute) — driven through ctrl+p like a user. No JVM."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.command import CommandList, CommandPalette

from statekit.tui.app import TABS, StatekitApp
from statekit.tui.panes.repartition import RepartitionPane
from tests.tui.helpers import until

FIXTURE = str(Path(__file__).resolve().parents[1] / "data" / "tui" / "reference_hdfs")


async def run_command(pilot, app: StatekitApp, text: str) -> None:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
    await pilot.press(*text)

    def best_match() -> str:  # the palette searches asynchronously; wait for its results
        found = app.screen.query(CommandList)
        if not found or not found.first().option_count:
            return ""
        return str(found.first().get_option_at_index(0).prompt).lower()

    await until(pilot, lambda: all(word in best_match() for word in text.lower().split()),
                f"{text!r} offered first")
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette close")


def test_palette_shows_every_screen_and_runs_screen_actions():
    async def scenario():
        app = StatekitApp(FIXTURE, cores=2)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.snapshot is not None, "the first load")
            tabs = app.query_one("#tabs")
            for tab, title, _ in TABS:
                if tab == "state":
                    continue  # opening it starts Spark (tested in test_app.py)
                await run_command(pilot, app, f"show {title}")
                # the command runs once the palette has closed, on a later turn of the loop
                await until(pilot, lambda tab=tab: tabs.active == tab, f"the {title} tab")
            await run_command(pilot, app, "show overview")
            await run_command(pilot, app, "repartition execute")  # a screen's own action
            pane = app.query_one(RepartitionPane)
            await until(pilot, lambda: "read-only" in str(pane.status.render()),
                        "the read-only refusal")
            assert tabs.active == "repartition"

    asyncio.run(scenario())
