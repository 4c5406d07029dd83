"""The Recovery tab (``statekit recovery``): the restart estimate with its range, the
what-if curve (restart time against minDeltasForSnapshot, with the RTO as a line) and the
slowest partitions — from the files, in a worker shared with the Overview, no JVM."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from statekit.support.presentation import human_bytes
from statekit.tui.chart_widget import Chart
from statekit.tui.model import Snapshot
from statekit.tui.pane import LazyPane
from statekit.tui.screen_charts import what_if_chart
from statekit.tui.table import Table
from statekit.tui.verdicts import ERROR, OK
from statekit.tui.work import Progress

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment


def estimate_line(assessment: Assessment) -> Text:
    """``estimated restart 3.2 s (range 2.1 s – 5.0 s) · meets the RTO of 30.0 s``, in the
    assessment's words (the RTO judged by its one rule)."""
    from statekit.assess.words import estimate_words, range_words, rto_words

    e = assessment.estimate
    if e is None:
        return Text(f"restart estimate: {estimate_words(assessment)}")
    text = Text.assemble("estimated restart ", (range_words(e), "bold"))
    if assessment.rto is not None:
        text.append(f" · {rto_words(assessment.rto)}",
                    style=OK if assessment.rto.meets else ERROR)
    return text


class RecoveryPane(LazyPane["Assessment"]):
    """The restart estimate, the what-if chart and the slowest partitions."""

    loading_message = "estimating the restart from the files…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        yield Chart(id="recovery-what-if", classes="whatif-chart")
        yield Static("slowest partitions: the critical path of each stateful stage",
                     classes="caption")
        yield Table(classes="main")

    def compute(self, snapshot: Snapshot, progress: Progress) -> Assessment:
        snapshot.recovery(self.tui.cores, self.tui.rto_s, self.tui.sizing)  # raises if none
        return snapshot.assessment(self.tui.cores, self.tui.rto_s, self.tui.sizing)

    def show_result(self, assessment: Assessment) -> None:
        from statekit.assess.words import duration_words

        e = assessment.estimate
        assert e is not None
        rto = assessment.rto_s
        self.title_line.update(Text.assemble(
            estimate_line(assessment), f" · first batch {duration_words(e.restart_s)} "
            f"(Spark's state load {duration_words(e.state_load_s)}) + re-run "
            f"{duration_words(e.rerun_s) if e.rerun_s else 'none'} · {e.cores} task slots · "
            f"version {e.version}"))
        memory = e.memory
        held = (f"state in memory ≈ {human_bytes(int(memory.bytes))} per executor "
                f"({'heap' if memory.on_heap else 'native'})" if memory else "")
        advice = (f"largest minDeltasForSnapshot within the RTO: {e.recommendation}"
                  if rto and e.recommendation else "")
        self.status.update(" · ".join(x for x in [e.explanation, held, *e.notes, advice]
                                      if x))
        self.query_one("#recovery-what-if", Chart).show(what_if_chart(e, rto))
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
