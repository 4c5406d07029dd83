"""The TUI on an object-store URL (an S3-protocol server through s3fs), like the CLI, and a
corrupt state file shown where its records would be while the rest keeps working. No JVM."""

from __future__ import annotations

import asyncio
from pathlib import Path

from statekit.tui.app import StatekitApp
from statekit.tui.panes.growth import GrowthPane
from statekit.tui.panes.operators import OperatorsPane
from statekit.tui.panes.recovery import RecoveryPane
from tests.tui.helpers import show_tab, until

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "tui" / "reference_hdfs"


def test_tui_on_s3_with_a_corrupt_delta(s3_server):
    url = s3_server.upload(str(FIXTURE), "tui", "ckpt")
    fs = s3_server.filesystem()
    good = fs.cat("tui/ckpt/state/0/2/5.delta")
    fs.pipe("tui/ckpt/state/0/2/5.delta", good[: len(good) // 2])  # truncated mid-block

    async def scenario():
        app = StatekitApp(url, storage_options=s3_server.storage_options(), cores=2)
        async with app.run_test(size=(120, 36)) as pilot:

            await until(pilot, lambda: app.snapshot is not None, "the first load")
            assert app.snapshot.report.shuffle_partitions == 4
            assert app.sub_title == url

            ops = app.query_one(OperatorsPane)
            await show_tab(pilot, app, "2")
            assert app.focused is ops.table
            await pilot.press("enter")  # partitions
            await pilot.press("j", "enter")  # partition 1: its files, read over S3
            assert ops.path == ["0/default", "1"]
            await pilot.press("end", "enter")  # its last file → records, decoded over S3
            await until(pilot, lambda: "records shown" in str(ops.status.render()), "records")
            assert ops.table.row_count > 0

            await pilot.press("escape", "escape")  # back to the partitions, on partition 1
            assert ops.table.selected_key() == "1"
            await pilot.press("j", "enter")  # partition 2: the bad file
            assert ops.path == ["0/default", "2"]
            await pilot.press("slash", *"5.delta", "enter", "enter")
            await until(pilot, lambda: "✗" in str(ops.status.render()), "the error in place")
            assert "5.delta" in str(ops.status.render())
            assert ops.path[-1].endswith("state/0/2/5.delta")

            await pilot.press("5")  # the rest keeps working: the Recovery tab says, as the
            recovery = app.query_one(RecoveryPane)  # doctor does with the file decoded,
            await until(pilot, lambda: "✗" in str(recovery.status.render()),  # that there
                        "the recovery tab's answer")  # is no restart to estimate
            said = " ".join(str(recovery.status.render()).split())
            assert "will not restart" in said and recovery.result is None, said
            await pilot.press("4")  # the growth replay meets the bad file: its history ends
            growth = app.query_one(GrowthPane)  # before it, and the verdict stands, flagged
            await until(pilot, lambda: growth.result is not None, "the growth verdict")
            status = str(growth.status.render())
            assert "DAMAGED" in status and "5.delta" in status, status
            assert app.is_running

    asyncio.run(scenario())
