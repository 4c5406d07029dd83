"""The Overview: the dashboard an SRE keeps open on a checkpoint.

One screen (120×36) answers what a person opens a checkpoint for: per operator/store its
keys, bytes, growth verdict with a sparkline of the whole key history, worst snapshot lag,
unloadable partitions and orphan files; the restart estimate with its range against the
RTO; the last batch, its age and the watermark's; keys and bytes over versions per store as
charts (the Growth tab's); and the report's findings, explained, below. The file-level part
appears as soon as the listing is read (the first screen); the growth replay and the
recovery estimate fill in from workers (shared with the Growth and Recovery tabs). Colour
only marks ok / warning / error, and every coloured cell also says it in words.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from statekit.assess.findings import explain
from statekit.formats.values import shorten
from statekit.support.presentation import history_sparkline, human_bytes, human_duration
from statekit.tui.chart_widget import Chart, ChartSpec
from statekit.tui.model import Snapshot
from statekit.tui.pane import Pane, watermark_text, when
from statekit.tui.panes.operators import lag_text
from statekit.tui.panes.recovery import estimate_line
from statekit.tui.screen_charts import bytes_chart, keys_chart, store_series
from statekit.tui.sparkline import sparkline_text
from statekit.tui.table import Table
from statekit.tui.verdicts import ERROR, OK, WARNING, severity_text, verdict_text

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment
    from statekit.growth.analysis import GrowthReport
    from statekit.report.checkpoint_report import StoreReport
    from statekit.state.memory import ExecutorSizing

LAG_WARN = 10
MEANING_WIDTH = 90
"""The findings' explanation column fits a 120-column screen; the whole is shown below."""
SPARK_WIDTH = 8
REPLAYING = "replaying the state files…"
"""What a chart says until the growth replay answers (or an error says why it will not)."""


def ago(seconds: float | None) -> str:
    return "-" if seconds is None else f"{human_duration(max(0.0, seconds))} ago"


def history_cell(keys: list[int]) -> Text:
    """A sparkline of the whole history with its first and last value beside it:
    ``▁▃▅▇ 120→164`` (the line and the label cover the same versions); a flat series is a
    low line with its one value, so a bounded store never looks like a full bar. The bars
    are styled to stay bars in a picture (:mod:`statekit.tui.sparkline`)."""
    if not keys:
        return Text("-")
    low, high = min(keys), max(keys)
    line = ("▁" * min(len(keys), SPARK_WIDTH) if low == high
            else history_sparkline(keys, SPARK_WIDTH))
    span = f"{keys[0]:,}" if low == high else f"{keys[0]:,}→{keys[-1]:,}"
    return Text.assemble(sparkline_text(line), f" {span}")


def growth_or_reason(snapshot: Snapshot, sizing: ExecutorSizing | None = None
                     ) -> GrowthReport | str:
    """The growth analysis, or why there is none (shown in the verdict column: the rest of
    the dashboard stands without it)."""
    from statekit.support.errors import StatekitError

    try:
        return snapshot.growth(sizing)
    except StatekitError as error:
        return str(error)


class OverviewPane(Pane):
    """The checkpoint at a glance (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.explained: dict[str, Text] = {}
        self.growth: GrowthReport | None = None
        self.assessment: Assessment | None = None
        self.growth_error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("loading the checkpoint…", classes="status")
        yield Static("", id="overview-recovery", classes="status")
        # no cursor: its highlight would hide the colours that carry the verdicts
        yield Table(id="overview-stores", classes="stores", cursor_type="none")
        with Horizontal(classes="charts"):
            yield Chart(ChartSpec("live keys per state version", "state version", "keys",
                                  empty=REPLAYING), id="overview-keys")
            yield Chart(ChartSpec("state size per version", "state version", "size",
                                  empty=REPLAYING), id="overview-bytes")
        yield Static("findings", classes="caption")
        yield Table(classes="main")
        yield Static("", classes="detail")

    @property
    def stores_table(self) -> Table:
        return self.query_one("#overview-stores", Table)

    @property
    def recovery_line(self) -> Static:
        return self.query_one("#overview-recovery", Static)

    def describe(self, key: str) -> Text | None:
        return self.explained.get(key)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.growth = self.growth_error = self.assessment = None
        self._charts_say(REPLAYING)  # an earlier failure's words are no longer true
        super().show_snapshot(snapshot)
        # the growth replay and the restart check are pure-Python threads: holding the GIL
        # from the start, they slowed the first paint by a third on a 200-partition RocksDB
        # checkpoint, so they start once the screen has been painted
        self.call_after_refresh(self._analyse, snapshot)

    def _analyse(self, snapshot: Snapshot) -> None:
        cores, rto, sizing = self.tui.cores, self.tui.rto_s, self.tui.sizing
        self.ask("growth", lambda _progress: growth_or_reason(snapshot, sizing), self._grown,
                 describe="growth")
        self.ask("assessment", lambda _progress: snapshot.assessment(cores, rto, sizing),
                 self._assessed, describe="restart check")

    def show_error(self, message: str) -> None:
        """The error in the status line — and in whatever still waits for the growth replay
        when none is coming (the checkpoint could not be read, or the replay itself failed):
        a chart saying "replaying the state files…" would wait forever."""
        super().show_error(message)
        if self.growth is not None or self.asking("growth"):
            return  # another request failed: the replay still fills the charts
        self.growth_error = self.growth_error or message
        self._charts_say(message)
        self._stores()

    def _charts_say(self, words: str) -> None:
        """What the charts without data say in their title."""
        for chart in self.query(Chart):
            if not chart.spec.has_data:
                chart.show(replace(chart.spec, empty=words))

    def _assessed(self, assessment: Assessment) -> None:
        self.assessment = assessment
        self._recovery()
        self._stores()
        self._findings()

    def _grown(self, report: GrowthReport | str) -> None:
        if isinstance(report, str):
            self.growth_error = report
            self.show_error(f"growth: {report}")
            for chart in self.query(Chart):
                chart.show(ChartSpec(chart.spec.title, "", "", empty=f"growth: {report}"))
        else:
            self.growth = report
            stores = store_series(report)
            self.query_one("#overview-keys", Chart).show(keys_chart(stores, report.outlook))
            self.query_one("#overview-bytes", Chart).show(bytes_chart(stores))
        self._stores()

    def render_snapshot(self) -> None:
        r = self.shown.report
        committed = set(r.committed_batches)
        pending = [b for b in r.planned_batches if b not in committed]
        self.title_line.update(Text.assemble(
            "query ", (r.query_id, "bold"), " · provider ", (r.provider, "bold"),
            " · codec ", (r.codec, "bold"), " · ",
            (str(r.shuffle_partitions or "-"), "bold"), " shuffle partitions · ",
            (str(len(r.planned_batches)), "bold"), " batches retained"))
        now = self.shown.loaded_at
        batch_age = (now - r.last_batch_timestamp_ms / 1000
                     if r.last_batch_timestamp_ms is not None else None)
        behind = (f" ({human_duration((r.last_batch_timestamp_ms - r.watermark_ms) / 1000)}"
                  " behind the batch)" if r.watermark_ms and r.last_batch_timestamp_ms
                  else "")
        self.status.update(Text.assemble(
            f"last committed batch {r.last_committed_batch} at "
            f"{when(r.last_batch_timestamp_ms)} ({ago(batch_age)}) · watermark "
            f"{watermark_text(r.watermark_ms)}{behind} · uncommitted: ",
            (", ".join(map(str, pending)), ERROR) if pending else ("none", ""),
            f" · {r.state_files:,} state files, {human_bytes(r.state_bytes)} · "
            f"minDeltasForSnapshot {r.min_deltas_for_snapshot} · read in "
            f"{self.shown.seconds:.2f} s"))
        self._recovery()
        self._stores()
        self._findings()

    def _recovery(self) -> None:
        from statekit.assess.words import loaded_words

        a = self.assessment
        if a is None:
            self.recovery_line.update("restart: checking (decoding the files a restart "
                                      "loads)…")
            return
        health = a.diagnosis
        if not health.restarts:
            first = health.fatal[0]
            self.recovery_line.update(Text.assemble(
                ("WILL NOT RESTART", ERROR), f": {first.path}: {first.what}"
                + (f" (+{len(health.fatal) - 1} more)" if len(health.fatal) > 1 else ""),
                " · restart estimate: does not apply · 9: the fix"))
            return
        verdict = Text(a.verdict, style=OK if a.verdict == "restarts" else WARNING)
        if health.outcomes:  # it restarts into another outcome: that is the news
            first = health.outcome_problems[0]
            verdict = Text.assemble(
                verdict, ", but ", (str(a.outcome).upper(), ERROR),
                f" ({first.affects or first.path})" if first.affects or first.path else "")
        main = a.estimate.breakdown[0] if a.estimate and a.estimate.breakdown and \
            a.estimate.high_s >= 1.0 else None
        self.recovery_line.update(Text.assemble(
            "restart: ", verdict, f" · {loaded_words(a.loaded)} · ", estimate_line(a),
            f" · {main.share:.0%} {main.detail}" if main else "", " · details: 5"))

    def _store_row(self, s: StoreReport) -> tuple[Any, ...]:
        parts = s.partitions
        lags = [p.versions_since_snapshot for p in parts if p.versions_since_snapshot
                is not None]
        unloadable = sum(1 for p in parts if not p.loadable) + len(s.missing_partitions)
        orphans = sum(p.orphans for p in parts)
        grown = next((g for g in self.growth.stores if (g.operator_id, g.store) ==
                      (s.operator_id, s.store)), None) if self.growth else None
        loaded = self.assessment.loaded.store(s.operator_id, s.store) \
            if self.assessment is not None else None
        if loaded is not None and loaded.keys is not None:
            keys = f"{loaded.keys:,}"  # at the version a restart loads
        elif self.assessment is not None:
            keys = "?"
        else:
            keys = "…"
        if grown is not None:
            history = [v.keys for v in grown.history.versions] if grown.history else []
            verdict, trend = verdict_text(grown.verdict), history_cell(history)
            if grown.history.damaged:  # the verdict of the history up to the damage
                verdict = Text.assemble(verdict, (" DAMAGED", ERROR))
        elif self.growth_error or self.growth is not None:
            verdict, trend = Text("unknown", style="yellow"), Text("-")
        else:
            verdict, trend = Text("…"), Text("replaying…")
        return (f"{s.operator_id} {s.operator_name or '-'}", s.store, keys,
                human_bytes(sum(p.bytes for p in parts)), verdict, trend,
                lag_text(max(lags) if lags else None, LAG_WARN),
                Text(f"{unloadable} NOT LOADABLE", style=ERROR) if unloadable
                else Text("0", style=OK),
                Text(str(orphans), style="yellow" if orphans else ""))

    def _stores(self) -> None:
        if self.snapshot is None:
            return
        rows = [(f"{s.operator_id}/{s.store}", self._store_row(s))
                for s in self.shown.report.stores]
        # 120 columns hold every column: a wider table scrolls sideways and hides the last
        self.stores_table.load(("operator", "store", "keys", "bytes", "growth",
                                "key history", "snap lag", "unloadable", "orphans"), rows)

    def _findings(self) -> None:
        self.explained, rows = {}, []
        # the assessment's findings once it is there (what decoding found included), the
        # listing's until then — in the same words
        findings = [(f.severity, f.code, f.text) for f in self.assessment.findings] \
            if self.assessment is not None else \
            [(f.severity, f.code, explain(f.code, f.message))
             for f in self.shown.report.findings]
        for n, (severity, code, meaning) in enumerate(findings):
            self.explained[f"finding-{n}"] = Text.assemble(severity_text(severity),
                                                           f" {code}: ", meaning)
            rows.append((f"finding-{n}", (severity_text(severity), code,
                                          shorten(meaning, MEANING_WIDTH))))
        if not rows:
            rows = [("finding-none", (Text("ok", style=OK), "-", "no warnings"))]
        self.table.load(("severity", "finding", "what it means"), rows)
