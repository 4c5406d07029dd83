"""The dashboard's behaviour on the frozen reference checkpoint (no JVM): the Overview holds
the analyses, every chart has labelled axes, charts of different sizes differ, and a slow
answer to a question the user has left never reaches the screen."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import statekit.tui.panes.operators as operators_pane
from statekit.tui.app import StatekitApp
from statekit.tui.chart_widget import Chart
from statekit.tui.panes.operators import OperatorsPane
from statekit.tui.panes.overview import OverviewPane
from statekit.tui.screen_charts import StoreSeries, keys_chart, store_series, what_if_chart
from tests.tui.helpers import Messages, show_tab

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = str(ROOT / "tests" / "data" / "tui" / "reference_hdfs")
PROGRESS = FIXTURE + ".progress.jsonl"
SIZE = (120, 36)


def test_overview_holds_keys_growth_recovery_and_findings():
    async def scenario():
        app = StatekitApp(FIXTURE, cores=2, rto_s=30.0)
        messages = Messages()
        async with app.run_test(size=SIZE, message_hook=messages.hook) as pilot:
            await messages.answer(pilot, "growth")
            await messages.answer(pilot, "assessment")
            await messages.idle(pilot)
            overview = app.query_one(OverviewPane)
            growth = app.snapshot.growth()
            assessment = app.snapshot.assessment(2, 30.0)
            store = growth.stores[0]
            row = [str(c) for c in overview.stores_table.get_row_at(0)]
            # keys at the version a restart loads, from the replay at exactly that version
            loaded = next(v.keys for v in store.history.versions
                          if v.version == assessment.loaded.version)
            assert row[2] == f"{loaded:,}" == f"{assessment.loaded.keys:,}"
            assert row[4] == "GROWING"  # the leaky fixture, in words, not only red
            assert row[5].endswith(f"{store.history.versions[0].keys:,}→"
                                   f"{store.history.versions[-1].keys:,}")
            # every column on the screen: no sideways scrolling hides the last ones
            table = overview.stores_table
            assert table.virtual_size.width <= table.size.width, \
                (table.virtual_size, table.size)
            # the rest of the screen: keys and bytes over versions, then the findings
            charts = list(overview.query(Chart))
            # the store's keys saturate (its values grow): its projection is drawn
            assert [c.spec.title for c in charts] == [
                "live keys per state version, dashed: projected",
                "state size per version (key + value bytes)"]
            assert all(c.spec.has_data and c.size.height >= 10 for c in charts)
            recovery = " ".join(str(overview.recovery_line.render()).split())
            from statekit.assess.words import loaded_words, range_words, rto_words

            assert assessment.estimate is not None and assessment.rto is not None
            for words in (f"restart: {assessment.verdict}", loaded_words(assessment.loaded),
                          range_words(assessment.estimate), rto_words(assessment.rto)):
                assert words in recovery, (words, recovery)
            assert overview.table.row_count == len(app.snapshot.report.findings)
            # the Growth and Recovery tabs reuse the Overview's analyses (computed once)
            await pilot.press("4")
            await messages.answer(pilot, "analysis")
            pane = app.query_one("GrowthPane")
            assert pane.result is growth
            await pilot.pause()
            # the store's row fits the screen; its whole evidence is shown below the table
            assert pane.table.virtual_size.width <= pane.table.size.width, \
                (pane.table.virtual_size, pane.table.size)

    asyncio.run(scenario())


def test_every_chart_has_labelled_axes():
    async def scenario():
        app = StatekitApp(FIXTURE, cores=2, progress=PROGRESS, rto_s=30.0)
        messages = Messages()
        async with app.run_test(size=SIZE, message_hook=messages.hook) as pilot:
            await messages.idle(pilot)
            checked = 0
            for key, count in (("1", 2), ("4", 2), ("5", 1), ("8", 6)):
                await show_tab(pilot, app, key)
                await messages.idle(pilot)
                charts = list(app.current_pane().query(Chart))
                assert len(charts) == count
                for chart in charts:  # each read as shown, at its size on the screen
                    spec = chart.spec
                    assert spec.title and spec.x_label and spec.y_label, chart.id
                    assert spec.has_data, f"{chart.id}: {spec.title} has no data"
                    text = chart.rendered_text()
                    assert spec.x_label in text and spec.y_label in text, (chart.id, text)
                    assert text.count("┤") >= 2, f"{chart.id}: no y ticks"  # labelled ticks
                    checked += 1
            assert checked == len(app.query(Chart))
            # the RTO: a line when it is near the curve, named in the title when far above
            estimate = app.snapshot.recovery(2, 30.0)
            # this small state restarts no slower than a new query's first batch (every
            # what-if row 0 s): the line is checked on the load alone
            from dataclasses import replace

            from statekit.checkpoint import open_checkpoint
            from statekit.recovery.cost_model import default_model
            from statekit.recovery.estimate import estimate_recovery

            ckpt = open_checkpoint(str(FIXTURE))
            load_only = estimate_recovery(ckpt, cores=2, model=replace(
                default_model(ckpt), restart_s=0.0))
            top = max(w.worst_high_s for w in load_only.what_if)
            assert top > 0
            near = what_if_chart(load_only, round(top * 2, 3))
            assert [r.y for r in near.references] == [round(top * 2, 3)]
            far = what_if_chart(estimate, 30.0)
            assert not far.references and "RTO 30 s" in far.title
            assert app.query_one("#recovery-what-if", Chart).spec == far

    asyncio.run(scenario())


class OneChart(App):
    def __init__(self, chart: Chart) -> None:
        super().__init__()
        self.chart = chart

    def compose(self) -> ComposeResult:
        yield self.chart


def render_alone(spec) -> str:
    async def scenario() -> str:
        app = OneChart(Chart(spec))
        async with app.run_test(size=(60, 16)) as pilot:
            await pilot.pause()
            return app.chart.rendered_text()

    return asyncio.run(scenario())


def test_stores_of_different_sizes_give_different_charts():
    """Bounded at 900 keys and bounded at 9 M keys: both flat, and visibly not the same."""
    versions = tuple(range(1, 21))
    small = render_alone(keys_chart([StoreSeries("0/default", versions, (900,) * 20, ())]))
    large = render_alone(keys_chart([StoreSeries("0/default", versions, (9_000_000,) * 20,
                                                 ())]))
    assert small != large
    assert "900" in small and "9.0 M" not in small
    assert "9.0 M" in large and "900┤" not in large
    # a growing store spanning decades is drawn on a log scale, with its range on the axis
    growing = render_alone(keys_chart([StoreSeries("1/default", versions,
                                                   tuple(10 ** (v // 4) for v in versions),
                                                   ())]))
    assert "1.0 k" in growing and "100.0 k" in growing


@pytest.fixture
def slow_first_decode(monkeypatch):
    """The decoder holds the first file it is asked for until the test releases it."""
    release = threading.Event()
    real = operators_pane.first_records
    first: list[str] = []

    def decode(ckpt, file, *args):
        if not first or first[0] == file.path:
            first[:1] = [file.path]
            release.wait(120)  # the test releases it; the bound only catches a hang
        return real(ckpt, file, *args)

    monkeypatch.setattr(operators_pane, "first_records", decode)
    yield release, first
    release.set()  # a test that failed before releasing it leaves no decode waiting


def test_a_slow_decode_of_a_file_left_never_lands(slow_first_decode):
    release, first = slow_first_decode

    async def scenario():
        app = StatekitApp(FIXTURE, cores=2)
        messages = Messages()
        async with app.run_test(size=SIZE, message_hook=messages.hook) as pilot:
            await messages.answer(pilot, "snapshot")
            await show_tab(pilot, app, "2")
            ops = app.query_one(OperatorsPane)
            await pilot.press("enter", "enter")  # store → partition 0 → its files
            files = [str(ops.table.get_row_at(i)[0]) for i in range(ops.table.row_count)]
            await pilot.press("enter")  # file A: its decode hangs
            await messages.wait(pilot, lambda: first, "the decode of file A start")
            await pilot.press("escape")  # the user leaves A …
            assert len(ops.path) == 2 and ops.table.row_count == len(files)
            await pilot.press("j", "enter")  # … and opens file B, which answers at once
            await messages.answer(pilot, "records")
            b_title = str(ops.title_line.render())
            assert files[1] in b_title and files[0] not in b_title
            b_rows = [list(map(str, ops.table.get_row_at(i))) for i in
                      range(ops.table.row_count)]
            assert b_rows and "records shown" in str(ops.status.render())
            release.set()  # A's answer arrives late …
            await messages.wait(pilot, lambda: messages.ignored("records"),
                                "file A's late answer")
            await pilot.pause()
            # … and is dropped: B is still on screen, whole
            assert str(ops.title_line.render()) == b_title
            assert [list(map(str, ops.table.get_row_at(i))) for i in
                    range(ops.table.row_count)] == b_rows
            assert messages.ignored("records")[0].describe.endswith(files[0])

    asyncio.run(scenario())


def test_a_saturating_store_is_drawn_with_its_projection_and_range():
    """The Growth chart of a finite population still being discovered: the history, then the
    projection to its plateau (dashed) between the range's ends (dotted)."""
    from statekit.growth.analysis import GrowthReport, analyse_store
    from tests.support.histories import finite, history_of

    store = analyse_store(history_of(finite(120_000, 12_000)), {})
    assert store.verdict == "saturating"
    report = GrowthReport(None, store.verdict, None, None, (store,), (), (), ())
    (series,) = store_series(report)
    band = series.projection
    assert band is not None and band.x[0] == series.versions[-1]
    assert band.y[0] == series.keys[-1] and band.y[-1] <= store.saturation.plateau
    assert all(lo <= mid <= hi for lo, mid, hi in zip(band.low, band.y, band.high,
                                                      strict=True))
    assert band.y[-1] > series.keys[-1]  # it goes on rising towards the plateau
    plain = render_alone(keys_chart([StoreSeries(series.label, series.versions, series.keys,
                                                 ())]))
    drawn = render_alone(keys_chart([series]))
    assert plain != drawn
    assert "projected" in drawn and "range" in drawn and "projected" not in plain
    # the x axis runs on past the last version
    ticks = next(line for line in reversed(drawn.splitlines()) if re.search(r"\d", line))
    last = max(int(t) for t in re.findall(r"\b(\d+)\b", ticks))
    assert last > series.versions[-1]


def test_a_leaking_store_is_drawn_at_its_rate_up_to_the_executor_memory():
    """The Growth chart of a leak behind a saturated population: the projection rises at the
    leak's rate, and with --executor-memory the keys at which the busiest executor is full
    are a line, the time to it in the title."""
    from statekit.growth.analysis import GrowthReport, analyse_store
    from statekit.growth.outlook import StorePath, outlook
    from tests.support.histories import history_of, one_a_minute, saturated_with_leak

    store = analyse_store(history_of(saturated_with_leak(2_000)), one_a_minute(16))
    assert store.key_verdict == "growing" and store.saturation.outcome == "leak"
    report = GrowthReport(None, store.verdict, None, None, (store,), (), (), ())
    (series,) = store_series(report)
    band = series.projection
    assert band is not None and band.x[0] == series.versions[-1]
    rate = (band.y[-1] - band.y[0]) / (band.x[-1] - band.x[0])
    assert rate == pytest.approx(store.saturation.leak_keys_per_batch)
    last = store.history.versions[-1]
    path = StorePath(float(last.keys), store.key_verdict, store.keys, store.saturation,
                     last.bytes / last.keys, 0.0, {0: float(last.keys)})
    # a limit just above today's state: full within the chart's reach
    ahead = outlook([path], provider="rocksdb", hours_per_batch=1 / 60, last_ms=0,
                    limit_bytes=int(last.bytes * 1.2))
    assert ahead is not None and ahead.limit_days is not None and ahead.limit_keys
    spec = keys_chart([series], ahead)
    assert "executor memory" in spec.title and "full in" in spec.title
    assert [r.y for r in spec.references] == [pytest.approx(ahead.limit_keys)]
    drawn = render_alone(spec)
    assert "executor memory" in drawn
    far = outlook([path], provider="rocksdb", hours_per_batch=1 / 60, last_ms=0,
                  limit_bytes=int(last.bytes * 1_000))
    assert keys_chart([series], far).references == ()  # far above: named, not drawn
