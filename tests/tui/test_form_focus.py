"""Forms never hold the keyboard: a tab with input fields opens with the focus on its table, so
digit keys still switch tabs; Esc leaves a field; no target is filled in for the user
(JVM-free: nothing here plans or writes)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Input

from statekit.tui.app import StatekitApp
from statekit.tui.panes.overview import OverviewPane
from statekit.tui.panes.repartition import RepartitionPane
from tests.tui.helpers import Messages, until

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "tui" / "reference_hdfs"


def test_digits_switch_tabs_from_the_repartition_tab_and_esc_leaves_a_field():
    async def scenario() -> None:
        app = StatekitApp(str(FIXTURE), cores=2)
        app.messages = Messages()
        async with app.run_test(size=(160, 48), message_hook=app.messages.hook) as pilot:
            await app.messages.answer(pilot, "snapshot")
            pane = app.query_one(RepartitionPane)
            await pilot.press("7")
            await until(pilot, lambda: app.current_pane() is pane, "the Repartition tab")
            await pilot.pause()
            assert not isinstance(app.focused, Input), app.focused
            assert app.query_one("#rp-target", Input).value == ""  # the user names it
            await pilot.press("1")  # a tab key, not a digit typed into a field
            await until(pilot, lambda: isinstance(app.current_pane(), OverviewPane),
                        "the Overview again")
            assert app.query_one("#rp-partitions", Input).value == ""
            await pilot.press("7")
            await until(pilot, lambda: app.current_pane() is pane, "the Repartition tab")
            await pilot.click("#rp-partitions")
            await pilot.press("1", "6")
            assert app.query_one("#rp-partitions", Input).value == "16"
            await pilot.press("escape")
            assert not isinstance(app.focused, Input), app.focused
            await pilot.press("2")
            await until(pilot, lambda: app.current_pane() is not pane, "another tab")

    asyncio.run(scenario())
