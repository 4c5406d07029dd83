"""The analysis tabs: Growth (``statekit growth``) and Recovery (``statekit recovery``), each
computed from the files in a worker the first time its tab opens — no JVM."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Sparkline, Static

from statekit.presentation import human_bytes, sparkline
from statekit.tui.model import Snapshot
from statekit.tui.panes import LazyPane, Table

if TYPE_CHECKING:
    from statekit.growth import GrowthReport
    from statekit.recovery import RecoveryEstimate


class GrowthPane(LazyPane["GrowthReport"]):
    """Keys over versions per store, the verdict and its evidence (``statekit growth``)."""

    loading_message = "replaying the state files for the key history…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        yield Sparkline([], classes="chart")
        yield Table(classes="main")
        yield Static("", classes="detail")

    def describe(self, key: str) -> str | None:
        for store in self.result.stores if self.result else ():
            if store.label == key:
                return "\n".join([f"{store.label}: {store.verdict}",
                                  *(f"• {line}" for line in store.evidence)])
        return None

    def compute(self, snapshot: Snapshot) -> GrowthReport:
        from statekit.growth import analyse

        return analyse(snapshot.ckpt)

    def show_result(self, report: GrowthReport) -> None:
        self.title_line.update(Text.assemble(("verdict ", "dim"), (
            report.verdict.upper(), "bold red" if report.is_growth else "bold green"),
            ("  ", ""), (" ".join(report.summary), "")))
        total = report.total_keys.last_value if report.total_keys else None
        size = report.total_bytes.last_value if report.total_bytes else None
        self.status.update(f"{'-' if total is None else f'{total:,.0f}'} keys, "
                           f"{human_bytes(size)} — the chart: the first store's keys per "
                           "version")
        rows = []
        chart: list[float] = []
        for store in report.stores:
            history = store.history
            keys = [v.keys for v in history.versions] if history else []
            chart = chart or [float(k) for k in keys]
            rows.append((store.label, (
                store.label, Text(store.verdict, style="bold red" if store.verdict in
                                  ("growing", "accelerating") else "green"),
                "-" if store.keys.last_value is None else f"{store.keys.last_value:,.0f}",
                sparkline(keys, 32), "; ".join(store.evidence[:2]))))
        self.query_one(".chart", Sparkline).data = chart
        self.table.load(("store", "verdict", "keys", "keys over versions", "evidence"), rows)


class RecoveryPane(LazyPane["RecoveryEstimate"]):
    """The restart estimate, its slowest partitions and the minDeltasForSnapshot what-if."""

    loading_message = "estimating the restart from the files…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        yield Static("slowest partitions: the critical path of each stateful stage",
                     classes="caption")
        yield Table(classes="main")
        yield Static("what if minDeltasForSnapshot were… (restart time and snapshot bytes "
                     "written per batch)", classes="caption")
        yield Table(classes="whatif")

    def compute(self, snapshot: Snapshot) -> RecoveryEstimate:
        from statekit.recovery import estimate_recovery

        return estimate_recovery(snapshot.ckpt, cores=self.tui.cores)

    def show_result(self, e: RecoveryEstimate) -> None:
        self.title_line.update(Text.assemble(
            ("estimated recovery ", "dim"), (f"{e.estimate_s:.2f} s", "bold"),
            (f"  (range {e.low_s:.2f}–{e.high_s:.2f} s; state load {e.state_load_s:.2f} s + "
             f"re-run {e.rerun_s:.2f} s) · {e.cores} task slots · version {e.version}", "")))
        self.status.update(" · ".join([e.explanation, *e.notes]))
        rows = []
        for stage in e.stages:
            for w in stage.critical:
                rows.append((f"{w.operator_id}/{w.store}/{w.partition}", (
                    f"{w.operator_id}/{w.store}", str(w.partition),
                    "-" if w.base_version is None else str(w.base_version), str(w.files),
                    human_bytes(w.bytes), f"{w.records:,.0f}", str(w.changes),
                    f"{w.seconds:.3f}")))
        self.table.load(("operator/store", "partition", "base version", "files", "bytes",
                         "records", "changes", "seconds"), rows)
        whatif = self.query_one(".whatif", Table)
        whatif.load(("minDeltasForSnapshot", "worst case", "worst-case range", "typical",
                     "snapshot bytes per batch"), [
            (str(w.min_deltas), (str(w.min_deltas), f"{w.worst_s:.2f} s",
                                 f"{w.worst_low_s:.2f}–{w.worst_high_s:.2f} s",
                                 f"{w.typical_s:.2f} s",
                                 human_bytes(w.snapshot_bytes_per_batch))) for w in e.what_if])
