"""Snapshot tests: the main screens rendered as SVG and compared with the stored ones.

The Pilot tests (``test_app.py``) check what the screens *do*; these catch what they *look
like* — a column lost, a colour gone, a layout that no longer fits 120×36. Each test drives the
app headless to a screen, exports Textual's SVG screenshot and compares it with
``snapshots/<name>.svg``. The checkpoint is ``tests/data/tui/reference_hdfs``, written once by
the reference pipeline and kept as written (see its generator), so the screens are
reproducible; no JVM starts.

The id Rich derives from the SVG's content is normalised before comparing, and the clock
behind the Overview's "read in 0.04 s" is held still.

On a mismatch the test writes the new SVG next to pytest's temporary files and shows a line
diff of the screen's text. To accept intended changes, run
``STATEKIT_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_snapshots.py`` and look at the SVGs.
"""

from __future__ import annotations

import asyncio
import difflib
import html
import os
import re
import shutil
from pathlib import Path

import pytest

from statekit.tui.app import StatekitApp
from statekit.tui.panes.growth import GrowthPane
from statekit.tui.panes.operators import OperatorsPane
from statekit.tui.panes.overview import OverviewPane
from statekit.tui.panes.recovery import RecoveryPane
from statekit.tui.table import Table
from tests.tui.helpers import Messages, show_tab
from tests.tui.shots import FIXTURE, PROGRESS, ROOT, SIZE, keys, settle, shoot

STORED = Path(__file__).resolve().parent / "snapshots"
CHAR_WIDTH = 12.2
UPDATE = os.environ.get("STATEKIT_UPDATE_SNAPSHOTS") == "1"


def normalise(svg: str) -> str:
    return re.sub(r"\bterminal-\d+", "terminal", svg)


#: The wall clock the screens measure ages from: a minute after the fixture's last batch.
NOW = 1795698799.307 + 60


@pytest.fixture(autouse=True)
def still_clock(monkeypatch):
    monkeypatch.setattr("statekit.tui.model.clock", lambda: 0.0)
    monkeypatch.setattr("statekit.tui.model.wall_clock", lambda: NOW)


def screen_text(svg: str) -> list[str]:
    """The SVG's text, one line per row of the terminal (for a readable diff)."""
    rows: dict[float, list[str]] = {}
    for x, y, text in re.findall(r'<text[^>]*\bx="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>',
                                 svg):
        line = rows.setdefault(float(y), [])
        column = round(float(x) / CHAR_WIDTH)  # Rich's SVG: one cell = 0.61 × 20 px
        line.extend(" " * (column - len(line)))
        line[column:column + len(text)] = html.unescape(text).replace("\xa0", " ")
    return ["".join(line).rstrip() for _, line in sorted(rows.items())]


def check_snapshot(name: str, svg: str, tmp_path: Path) -> None:
    stored = STORED / f"{name}.svg"
    actual = normalise(svg)
    if UPDATE:
        stored.parent.mkdir(exist_ok=True)
        stored.write_text(actual, encoding="utf-8")
        return
    assert stored.exists(), (f"no stored snapshot {stored}: run with "
                             "STATEKIT_UPDATE_SNAPSHOTS=1 and review the SVG")
    expected = stored.read_text(encoding="utf-8")
    if actual != expected:
        (tmp_path / f"{name}.svg").write_text(actual, encoding="utf-8")
        diff = "\n".join(difflib.unified_diff(screen_text(expected), screen_text(actual),
                                              "stored", "now", lineterm=""))
        pytest.fail(f"screen {name!r} differs from {stored} (new SVG: "
                    f"{tmp_path / (name + '.svg')}):\n{diff or '(same text, styles differ)'}")


@pytest.fixture
def in_repo(monkeypatch):
    """Open the fixture by a relative path, so no machine-specific path is on screen."""
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(("name", "pressed"), [
    ("overview", ()),
    ("operators", ("2",)),
    ("partitions", ("2", "enter")),
    ("files-filtered", ("2", "enter", "j", "enter", "slash", *"11.delta", "enter")),
    ("records", ("2", "enter", "j", "enter", "slash", *"11.delta", "enter", "enter")),
    ("batches", ("3",)),
    ("growth", ("4",)),
    ("recovery", ("5",)),
    ("query", ("8",)),
    ("help", ("question_mark",)),
])
def test_screen(name, pressed, in_repo, tmp_path):
    svg = shoot(FIXTURE, keys(*pressed), progress=PROGRESS, rto_s=30.0)
    check_snapshot(name, svg, tmp_path)


def test_screens_show_the_fixture(in_repo):
    """The snapshots are only worth keeping if the screens really hold the fixture's data."""

    async def scenario():
        app = StatekitApp(FIXTURE, cores=2)
        app.messages = Messages()
        async with app.run_test(size=SIZE, message_hook=app.messages.hook) as pilot:
            await settle(pilot, app)
            assert app.snapshot.report.shuffle_partitions == 4
            await pilot.press("4")
            await settle(pilot, app)
            assert app.query_one(GrowthPane).result.is_growth  # the leaky variant grows
            await pilot.press("5")
            await settle(pilot, app)
            assert app.query_one(RecoveryPane).result.estimate.cores == 2
            await keys("2", "enter")(pilot, app)
            table = app.query_one(OperatorsPane).query_one(".main", Table)
            assert table.row_count == 4
            # Every cell whole on screen (auto widths once cut Text cells to the last table's).
            for row in range(table.row_count):
                shown = table.render_line(row + 1).text
                assert all(str(cell) in shown for cell in table.get_row_at(row))
            # Keys per partition (replayed for HDFS) add up to the growth history's last count.
            counted = [int(str(table.get_row_at(r)[5])) for r in range(table.row_count)]
            growth = app.query_one(GrowthPane).result
            assert sum(counted) == growth.stores[0].history.versions[-1].keys

    asyncio.run(scenario())


def test_repartition_without_allow_write(in_repo, tmp_path):
    async def steps(pilot, app: StatekitApp) -> None:
        await show_tab(pilot, app, "7")
        await settle(pilot, app)
        await pilot.click("#rp-partitions")
        await pilot.press(*"2", "tab")
        target = app.query_one("#rp-target")
        target.value = "reference_hdfs-2-partitions"
        # past the target, the file sink and the checkbox, then execute
        await pilot.press("tab", "tab", "tab", "x")

    check_snapshot("repartition-read-only", shoot(FIXTURE, steps), tmp_path)


def test_error_in_place(tmp_path, monkeypatch):
    """A checkpoint that cannot be read (its ``metadata`` is a folder): the error is on
    screen, the app runs."""
    shutil.copytree(ROOT / FIXTURE, tmp_path / "checkpoint")
    (tmp_path / "checkpoint" / "metadata").unlink()
    (tmp_path / "checkpoint" / "metadata").mkdir()
    monkeypatch.chdir(tmp_path)

    async def scenario() -> str:
        app = StatekitApp("checkpoint", cores=2)
        messages = Messages()
        async with app.run_test(size=SIZE, message_hook=messages.hook) as pilot:
            await messages.answer(pilot, "snapshot")
            assert "metadata" in str(app.query_one(OperatorsPane).status.render())
            await pilot.press("2")  # the other tabs still answer
            await pilot.press("1")
            await pilot.pause()
            assert app.is_running
            return app.export_screenshot()

    check_snapshot("error-in-place", asyncio.run(scenario()), tmp_path)


def test_a_checkpoint_that_will_not_restart_shows_no_estimate(tmp_path, monkeypatch):
    """The newest delta of one partition gone: the Overview says what the doctor says —
    WILL NOT RESTART, naming the file — and shows no restart estimate that "meets the RTO"
    beside the unloadable partition."""
    shutil.copytree(ROOT / FIXTURE, tmp_path / "checkpoint")
    newest = max((tmp_path / "checkpoint/state/0/1").glob("*.delta"), key=lambda p: int(p.stem))
    newest.unlink()
    monkeypatch.chdir(tmp_path)

    async def scenario() -> str:
        app = StatekitApp("checkpoint", cores=2, rto_s=30.0)
        messages = Messages()
        async with app.run_test(size=SIZE, message_hook=messages.hook) as pilot:
            await messages.answer(pilot, "snapshot")
            await messages.answer(pilot, "assessment")
            await messages.idle(pilot)
            line = str(app.query_one(OverviewPane).recovery_line.render())
            assert "WILL NOT RESTART" in line and newest.name in line, line
            assert "meets the RTO" not in line and "estimated restart" not in line
            assert app.snapshot.assessment(2, 30.0).estimate is None  # none was computed
            return app.export_screenshot()

    check_snapshot("will-not-restart", asyncio.run(scenario()), tmp_path)


def test_the_fix_tab_plans_the_doctors_rollback(tmp_path, monkeypatch):
    """The same broken checkpoint on the Fix tab: the doctor's findings, its rollback filled
    in, and the rollback's dry run (no JVM); read-only, nothing is written."""
    shutil.copytree(ROOT / FIXTURE, tmp_path / "checkpoint")
    newest = max((tmp_path / "checkpoint/state/0/1").glob("*.delta"), key=lambda p: int(p.stem))
    newest.unlink()
    monkeypatch.chdir(tmp_path)

    async def steps(pilot, app: StatekitApp) -> None:
        from statekit.tui.panes.fix import FixPane

        await show_tab(pilot, app, "9")
        await settle(pilot, app)
        pane = app.query_one(FixPane)
        assert pane.result is not None and pane.result.fix_batch is not None
        assert pane.query_one("#fx-target").value.endswith(f"-at-{pane.result.fix_batch}")
        pane.query_one("#fx-target").value = "checkpoint-fixed"
        await pilot.click("#fx-batch")
        await pilot.press("enter")
        await settle(pilot, app)
        assert "read-only" in str(pane.status.render())

    check_snapshot("fix-read-only", shoot("checkpoint", steps), tmp_path)
    assert not (tmp_path / "checkpoint-fixed").exists()
