"""The Query tab (``statekit tui --progress-log FILE``): the charts of Spark's own Structured
Streaming UI, per batch, from a StreamingQueryProgress log — input and process rate, batch
duration stacked by phase, state rows, state memory, state rows updated and removed, and
the watermark delay. The log is
read again on every refresh (a listener keeps appending to it)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Grid
from textual.widget import Widget
from textual.widgets import Static

from statekit.checkpoint.progress_log import QueryBatch
from statekit.support.presentation import human_bytes
from statekit.tui.chart_widget import Chart
from statekit.tui.model import Snapshot
from statekit.tui.pane import LazyPane
from statekit.tui.screen_charts import query_charts
from statekit.tui.work import Progress

CHARTS = ("query-rates", "query-durations", "query-state-rows", "query-state-memory",
          "query-state-changes", "query-watermark")


class QueryPane(LazyPane[Sequence[QueryBatch]]):
    """Spark-UI charts from ``--progress-log``."""

    loading_message = "reading the progress log…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        with Grid(classes="query-charts"):
            for name in CHARTS:
                yield Chart(id=name)

    def main_widget(self) -> Widget | None:
        """Nothing to focus: the tab is charts only."""
        return None

    def render_snapshot(self) -> None:
        if self.tui.progress_path is None:
            self.title_line.update("query metrics need a progress log")
            self.status.update("start with --progress-log FILE (StreamingQueryProgress as JSON "
                               "lines, as a StreamingQueryListener writes them)")
            return
        super().render_snapshot()

    def activated(self) -> None:
        if self.tui.progress_path is not None:
            super().activated()

    def compute(self, snapshot: Snapshot, progress: Progress) -> Sequence[QueryBatch]:
        from statekit.checkpoint.progress_log import parse_query, read_text

        path = self.tui.progress_path
        assert path is not None
        return parse_query(read_text(path, self.tui.storage_options), shown=path)

    def show_result(self, batches: Sequence[QueryBatch]) -> None:
        last = batches[-1]
        self.title_line.update(
            f"{len(batches)} batches ({batches[0].batch_id}–{last.batch_id}) from "
            f"{self.tui.progress_path}")
        self.status.update(
            f"last batch {last.batch_id}: {last.input_rows or 0:,} rows in "
            f"{(last.trigger_ms or 0) / 1000:.2f} s · "
            f"{last.state_rows if last.state_rows is not None else '-'} state rows · "
            f"{human_bytes(last.state_memory_bytes)} state memory")
        for name, spec in zip(CHARTS, query_charts(batches), strict=True):
            self.query_one(f"#{name}", Chart).show(spec)
