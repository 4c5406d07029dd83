"""Stacked bars (the Query tab's "batch duration by phase") stay one bar per batch: with more
batches than fit with a gap each, the chart shows the newest that do and says so — instead
of bars touching into solid blocks that span every batch (JVM-free, rendered as text)."""

from __future__ import annotations

import asyncio
import re

import pytest
from textual.app import App, ComposeResult

from statekit.tui.chart_widget import Chart, ChartSpec, Series


def _spec(batches: int) -> ChartSpec:
    xs = tuple(float(i) for i in range(batches))
    return ChartSpec("batch duration by phase", "batch", "duration", (
        Series("addBatch", xs, tuple(100.0 + (i % 5) * 20 for i in range(batches))),
        Series("queryPlanning", xs, tuple(30.0 for _ in range(batches)))),
        unit="ms", stacked=True)


def _rendered(spec: ChartSpec, width: int) -> str:
    class One(App):
        def compose(self) -> ComposeResult:
            yield Chart(spec)

    async def scenario() -> str:
        app = One()
        async with app.run_test(size=(width, 20)) as pilot:
            await pilot.pause()
            return app.query_one(Chart).rendered_text()

    return asyncio.run(scenario())


@pytest.mark.parametrize(("batches", "width"), [(36, 80), (120, 160), (8, 80)])
def test_one_bar_per_batch_with_gaps(batches, width):
    text = _rendered(_spec(batches), width)
    base = next(line for line in text.splitlines() if re.match(r"\s*0 ms┤", line))
    plot = base.split("┤", 1)[1].rstrip("│ ")
    bars = re.findall(r"█+", plot)
    shown = re.search(r"last (\d+) of (\d+)", text)
    if shown:
        assert int(shown.group(2)) == batches
        assert len(bars) == int(shown.group(1)) < batches
    else:
        assert len(bars) == batches
    assert len(bars) > 1, plot
