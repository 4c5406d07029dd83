"""The fleet list (``statekit tui CKPT CKPT…``) driven with Pilot, without a JVM, over 21 real
checkpoints: the 15 golden ones (Spark 3.5/4.0/4.1, both providers), the TUI fixture (a
growing store), three damaged copies and two that cannot be read at all."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from statekit.fleet.readings import FleetRow, read_fleet, worst_growth
from statekit.tui.app import StatekitApp
from statekit.tui.fleet_screen import FleetScreen, sort_key
from statekit.tui.panes.overview import OverviewPane
from tests.tui.helpers import Messages, until

if TYPE_CHECKING:
    from textual.pilot import Pilot

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = sorted((DATA / "golden").glob("spark-*/*/checkpoint"))
GROWING = DATA / "tui" / "reference_hdfs"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, list[str]]:
    """Real checkpoints by kind (URLs as a user would type them)."""
    root = tmp_path_factory.mktemp("fleet")
    source = DATA / "golden" / "spark-4.1.4" / "aggregation_hdfs" / "checkpoint"
    damaged = []
    for name, damage in (("lost-delta", "state/0/1/2.delta"),
                         ("lost-partition", "state/0/0"),
                         ("bad-offsets", "offsets/2")):
        copy = root / name
        shutil.copytree(source, copy)
        if name == "lost-partition":
            shutil.rmtree(copy / damage)
        elif name == "bad-offsets":
            (copy / damage).write_text("v1\n{not json")
        else:  # the snapshot and a delta the restart would then need
            (copy / damage).unlink()
            (copy / "state/0/1/3.snapshot").unlink()
        damaged.append(str(copy))
    not_a_checkpoint = root / "not-a-checkpoint"
    not_a_checkpoint.mkdir()
    (not_a_checkpoint / "notes.txt").write_text("hello")
    return {"healthy": [str(p) for p in GOLDEN], "growing": [str(GROWING)],
            "damaged": damaged, "unreadable": [str(not_a_checkpoint), str(root / "missing")]}


def every(fleet: dict[str, list[str]]) -> list[str]:
    return [url for kind in ("healthy", "growing", "damaged", "unreadable") for url in fleet[kind]]


def test_the_fleet_has_a_row_per_checkpoint_and_errors_stay_in_their_rows(fleet):
    urls = every(fleet)
    assert len(urls) >= 20
    arrived: list[tuple[int, bool]] = []
    rows = read_fleet(urls, cores=2,
                      on_row=lambda index, row: arrived.append((index, row.complete)))
    assert [row.url for row in rows] == urls and all(row.complete for row in rows)
    assert {index for index, _ in arrived} == set(range(len(urls)))
    # each checkpoint: its listed row first (errors come complete at once), then its complete
    # row; every checkpoint was listed before the last complete row arrived
    for index in range(len(urls)):
        steps = [complete for n, complete in arrived if n == index]
        assert steps in ([False, True], [True]), (urls[index], steps)
    last_listed = max(n for n, (index, complete) in enumerate(arrived)
                      if not complete or (index, False) not in arrived)
    assert last_listed < len(arrived) - 1 or len(arrived) == len(urls)
    by_url = {row.url: row for row in rows}
    for url in fleet["healthy"]:
        row = by_url[url]
        assert row.error is None and row.health == "restarts", (url, row.summary)
        assert row.keys and row.keys > 0 and row.bytes and row.last_batch is not None
        assert row.restart_s is not None
    assert by_url[str(GROWING)].growth == "growing"
    for url in fleet["damaged"]:
        assert by_url[url].error is None and by_url[url].health != "restarts", by_url[url]
    for url in fleet["unreadable"]:
        row = by_url[url]
        assert row.error and url in row.error and "\n" not in row.error and row.exit_code
        assert row.health is None


def test_one_reading_serves_metrics_and_the_fleet(fleet):
    """``statekit metrics`` and the fleet row read the same numbers."""
    from statekit.checkpoint import open_checkpoint
    from statekit.fleet.metrics import checkpoint_metrics

    url = str(GROWING)
    row = read_fleet([url], cores=2)[0]
    families = {f.name: f for f in checkpoint_metrics(
        url, lambda u: open_checkpoint(u, allow_missing_metadata=True), cores=2)}
    assert sum(v for _, v in families["statekit_state_keys"].samples) == row.keys
    assert sum(v for _, v in families["statekit_state_bytes"].samples) == row.bytes
    assert max(v for _, v in families["statekit_snapshot_lag_versions"].samples) == \
        row.snapshot_lag
    assert families["statekit_recovery_estimate_seconds"].samples[0][1] == \
        pytest.approx(row.restart_s)


def test_worst_growth_and_sorting():
    assert worst_growth(["bounded", "growing", "saturating"]) == "growing"
    assert worst_growth([]) is None
    rows = [FleetRow("b", 0.1, keys=5, health="restarts"),
            FleetRow("a", 0.1, keys=50, health="will not restart"),
            FleetRow("c", 0.1, error="c: no such file or folder", exit_code=3)]
    assert [r.url for r in sorted(rows, key=sort_key("keys", 0.0))] == ["a", "b", "c"]
    assert [r.url for r in sorted(rows, key=sort_key("health", 0.0))] == ["a", "c", "b"]


def driven(app: StatekitApp, size=(200, 50)):
    app.messages = Messages()
    return app.run_test(size=size, message_hook=app.messages.hook)


def table_urls(screen: FleetScreen) -> list[str]:
    table = screen.table
    return [table.coordinate_to_cell_key((n, 0)).row_key.value for n in range(table.row_count)]


def test_fleet_list_sort_filter_open_and_back(fleet):
    asyncio.run(_fleet_scenario(fleet))


async def _fleet_scenario(fleet):
    urls = every(fleet)
    app = StatekitApp(urls[0], cores=2, fleet=urls, rto_s=30)
    async with driven(app) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await until(pilot, lambda: screen.last_row_s is not None, "every row read", 60)
        assert sorted(table_urls(screen)) == sorted(urls)
        assert screen.first_row_s is not None and screen.first_row_s <= screen.last_row_s
        # the broken ones say why, in their rows
        missing = fleet["unreadable"][1]
        cells = [str(c) for c in screen.table.get_row(missing)]
        assert "UNREADABLE" in cells and any("no such file" in c for c in cells)
        title = str(screen.query_one("#fleet-title").render())
        assert "2 unreadable" in title and "growing" in title
        # sort by health: what will not restart comes first
        while screen.sort_column != "health":
            await pilot.press("s")
        first = table_urls(screen)[0]
        assert first in fleet["damaged"], first
        await pilot.press("S")
        assert table_urls(screen)[-1] in fleet["damaged"]
        # filter
        await pilot.press("slash", *"reference", "enter")
        assert table_urls(screen) == [str(GROWING)]
        await pilot.press("escape")
        assert len(table_urls(screen)) == len(urls)
        # drill down: Enter opens the checkpoint's screens
        screen.table.select_key(str(GROWING))
        screen.table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is not screen, "the checkpoint's screens")
        await app.messages.answer(pilot, "snapshot")
        assert app.url == str(GROWING) and app.snapshot is not None
        assert app.snapshot.ckpt.location.url == str(GROWING)
        assert isinstance(app.current_pane(), OverviewPane)
        # back: Esc at the top level returns to the list, another checkpoint gets new screens
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the fleet list again")
        other = fleet["healthy"][0]
        screen.table.select_key(other)
        await pilot.press("enter")
        await until(pilot, lambda: app.url == other and app.snapshot is not None
                    and app.snapshot.ckpt.location.url == other, "the second checkpoint")


def test_watch_re_reads_only_what_is_on_the_screen(fleet):
    """``--watch`` with a fleet: the list re-reads its rows while it is shown, an opened
    checkpoint re-reads itself while it is shown — never the one hidden under the other."""
    asyncio.run(_watch_scenario(fleet))


async def _watch_scenario(fleet):
    urls = [*fleet["healthy"][:3], str(GROWING)]
    app = StatekitApp(urls[0], cores=2, fleet=urls, watch=0.5)

    def reads(kind: str) -> int:
        return sum(1 for r in app.messages.started() if r.kind == kind)

    async def quiet_for(seconds: float) -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < deadline:
            await pilot.pause()
            await asyncio.sleep(0.05)

    async with driven(app) as pilot:
        screen = app.screen
        await until(pilot, lambda: reads("fleet") >= 3, "the list re-read by the watch", 30)
        assert reads("snapshot") == 0  # nothing opened yet
        screen.table.select_key(str(GROWING))
        screen.table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: reads("snapshot") >= 3, "the open checkpoint re-read", 30)
        listed = reads("fleet")  # requests started: one still running is counted already
        await quiet_for(1.2)
        assert reads("fleet") == listed, "the hidden list was re-read"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the fleet list again")
        opened = reads("snapshot")
        await until(pilot, lambda: reads("fleet") >= listed + 2, "the list re-read again", 30)
        assert reads("snapshot") == opened, "the hidden checkpoint was re-read"


def test_cli_tui_refuses_a_progress_log_for_a_fleet(fleet, tmp_path):
    from tests.support.cli import run

    log = tmp_path / "p.jsonl"
    log.write_text("")
    code, _, stderr = run(["tui", *fleet["healthy"][:2], "--progress-log", str(log)])
    assert code == 2 and "one checkpoint" in stderr


def test_checkpoints_from_a_file(fleet, tmp_path):
    from statekit.cli.options import checkpoint_urls

    listing = tmp_path / "fleet.txt"
    listing.write_text("# ours\n" + "\n".join(fleet["healthy"][:3]) + "\n\n")
    with listing.open() as handle:
        assert checkpoint_urls((fleet["healthy"][0],), handle) == fleet["healthy"][:3]


# ---------------------------------------------------------------- the cursor and Enter
# Rows arrive in the order they are read (an unreadable checkpoint first: its error is
# instant), not in the order they are shown; the cursor and Enter must follow the screen.

@pytest.fixture
def small_fleet(tmp_path) -> dict[str, str]:
    """Four real checkpoints and a missing one, named so the list shows them in this order:
    ``a-…``, ``b-…``, ``c-demo``, ``d-…``, then ``zz-missing`` last (although it arrives
    first)."""
    golden = DATA / "golden" / "spark-4.1.4"
    sources = {"a-aggregation": golden / "aggregation_hdfs" / "checkpoint",
               "b-dedup-rocksdb": golden / "dedup_rocksdb_changelog" / "checkpoint",
               "c-demo": DATA / "demo" / "checkpoint",
               "d-session-window": golden / "session_window_hdfs" / "checkpoint"}
    urls = {}
    for name, source in sources.items():
        shutil.copytree(source, tmp_path / name)
        urls[name] = str(tmp_path / name)
    urls["zz-missing"] = str(tmp_path / "zz-missing")
    return urls


def listed_last_first(small_fleet: dict[str, str]) -> list[str]:
    """The URLs as given on the command line: the unreadable one first, the rest reversed,
    so that neither the arrival nor the argument order is the display order."""
    return [small_fleet["zz-missing"], *reversed([u for n, u in small_fleet.items()
                                                  if n != "zz-missing"])]


async def every_row_read(pilot, screen: FleetScreen) -> None:
    await until(pilot, lambda: screen.last_row_s is not None, "every row read", 60)
    await pilot.pause()


@asynccontextmanager
async def fleet_list_read(small_fleet: dict[str, str]) -> AsyncIterator[
        tuple[StatekitApp, Pilot[Any], FleetScreen, list[str]]]:
    """The app on the small fleet listed last first (opened with its second URL), once
    every row of the fleet list is read: (app, pilot, the fleet list, the URLs)."""
    urls = listed_last_first(small_fleet)
    app = StatekitApp(urls[1], cores=2, fleet=urls)
    async with driven(app) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await every_row_read(pilot, screen)
        yield app, pilot, screen, urls


def pane_text(app: StatekitApp) -> str:
    """Everything the shown tab says: its lines and its charts."""
    from textual.widgets import Static

    from statekit.tui.chart_widget import Chart

    pane = app.current_pane()
    lines = [str(s.render()) for s in pane.query(Static)]
    return "\n".join(lines + [c.rendered_text() for c in pane.query(Chart)])


def test_the_cursor_starts_on_the_first_row_shown_and_enter_opens_the_row_shown(small_fleet):
    asyncio.run(_cursor_scenario(small_fleet))


async def _cursor_scenario(small_fleet):
    async with fleet_list_read(small_fleet) as (app, pilot, screen, urls):
        shown = table_urls(screen)
        assert shown == sorted(urls) and shown[-1] == small_fleet["zz-missing"]
        # the first row arrived was the unreadable one; the cursor is on the first shown
        assert screen.table.cursor_row == 0 and screen.table.selected_key() == shown[0]
        await pilot.press("down", "down", "enter")
        await until(pilot, lambda: app.screen is not screen, "the checkpoint's screens")
        await app.messages.answer(pilot, "snapshot")
        assert shown[2] == small_fleet["c-demo"]
        assert app.url == shown[2] and app.snapshot is not None
        assert app.snapshot.ckpt.location.url == shown[2]


def test_the_cursor_stays_on_its_checkpoint_through_refresh_and_sorting(small_fleet):
    asyncio.run(_cursor_stays_scenario(small_fleet))


async def _cursor_stays_scenario(small_fleet):
    async with fleet_list_read(small_fleet) as (app, pilot, screen, _urls):
        await pilot.press("down")
        chosen = table_urls(screen)[1]
        assert screen.table.selected_key() == chosen
        await pilot.press("r")  # every row read again, arriving in another order
        await until(pilot, lambda: screen.generation == 2 and screen.last_row_s is not None,
                    "the list read again", 60)
        await pilot.pause()
        assert screen.table.selected_key() == chosen
        await pilot.press("S")  # reversed: the row moves, the cursor moves with it
        assert table_urls(screen).index(chosen) != 1
        assert screen.table.selected_key() == chosen
        while screen.sort_column != "keys":
            await pilot.press("s")
        assert screen.table.selected_key() == chosen
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is not screen, "the checkpoint's screens")
        assert app.url == chosen


def test_enter_on_an_unreadable_checkpoint_shows_its_error_and_esc_goes_back(small_fleet):
    asyncio.run(_unreadable_scenario(small_fleet))


async def _unreadable_scenario(small_fleet):
    missing = small_fleet["zz-missing"]
    async with fleet_list_read(small_fleet) as (app, pilot, screen, _urls):
        error = next(row.error for row in screen.rows.values() if row.url == missing)
        assert error and "no such file" in error
        last = len(table_urls(screen)) - 1
        assert table_urls(screen)[last] == missing
        await pilot.press(*["down"] * last, "enter")
        await until(pilot, lambda: app.screen is not screen, "the checkpoint's screens")
        await app.messages.answer(pilot, "snapshot")
        assert app.url == missing and app.snapshot is None
        await app.messages.idle(pilot)
        said = pane_text(app)
        assert error in said, said
        for progress in ("replaying", "loading the checkpoint", "checking"):
            assert progress not in said, said
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the fleet list again")
        assert screen.table.selected_key() == missing
