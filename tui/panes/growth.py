"""The Growth tab (``statekit growth``): live keys and state size per version for every
store as charts with axes, then the verdict and evidence per store — computed from the
files in a worker (shared with the Overview's dashboard), no JVM."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from statekit.formats.values import shorten
from statekit.support.presentation import history_sparkline, human_bytes
from statekit.tui.chart_widget import Chart
from statekit.tui.model import Snapshot
from statekit.tui.pane import LazyPane
from statekit.tui.screen_charts import bytes_chart, keys_chart, store_series
from statekit.tui.table import Table
from statekit.tui.verdicts import verdict_text
from statekit.tui.work import Progress

if TYPE_CHECKING:
    from statekit.growth.analysis import GrowthReport


EVIDENCE_WIDTH = 40
"""The evidence column's share of a 120-column screen (the highlighted store's whole
evidence is shown below the table): a wider table would scroll sideways."""


class GrowthPane(LazyPane["GrowthReport"]):
    """Keys and bytes over versions per store, the verdict and its evidence."""

    loading_message = "replaying the state files for the key history…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        with Horizontal(classes="charts"):
            yield Chart(id="growth-keys")
            yield Chart(id="growth-bytes")
        yield Table(classes="main")
        yield Static("", classes="detail")

    def describe(self, key: str) -> str | None:
        for store in self.result.stores if self.result else ():
            if store.label == key:
                values = f", values {store.value_verdict}" if store.value_verdict else ""
                return "\n".join([f"{store.label}: {store.verdict} (keys "
                                   f"{store.key_verdict}{values})",
                                  *(f"• {line}" for line in store.evidence)])
        return None

    def compute(self, snapshot: Snapshot, progress: Progress) -> GrowthReport:
        return snapshot.growth(self.tui.sizing)

    def show_result(self, report: GrowthReport) -> None:
        self.title_line.update(Text.assemble("verdict: ", verdict_text(report.verdict),
                                             " — ", " ".join(report.summary)))
        total = report.total_keys.last_value if report.total_keys else None
        size = report.total_bytes.last_value if report.total_bytes else None
        damaged = [s.history.damaged for s in report.stores if s.history.damaged]
        self.status.update(Text.assemble(
            f"{'-' if total is None else f'{total:,.0f}'} keys, "
            f"{human_bytes(size)} at the last version",
            *((" · ", ("DAMAGED", "bold red"), f": {damaged[0]}") if damaged else ())))
        stores = store_series(report)
        self.query_one("#growth-keys", Chart).show(keys_chart(stores, report.outlook))
        self.query_one("#growth-bytes", Chart).show(bytes_chart(stores))
        rows = []
        for store in report.stores:
            history = store.history
            keys = [v.keys for v in history.versions] if history else []
            verdict = verdict_text(store.verdict)
            if history.damaged:
                verdict = Text.assemble(verdict, (" DAMAGED", "bold red"))
            rows.append((store.label, (
                store.label, verdict,
                "-" if store.keys.last_value is None else f"{store.keys.last_value:,.0f}",
                history_sparkline(keys, 24),
                shorten("; ".join(store.evidence[:2]), EVIDENCE_WIDTH))))
        self.table.load(("store", "verdict", "keys", "keys over versions", "evidence"), rows)
