"""The TUI's screens, one pane per tab, each a view over the shared :class:`Snapshot`.

A pane shows a table (filterable with ``/``), drills down with Enter and back with Esc, and
loads anything slow (growth replay, recovery estimate, decoded records) in a thread worker
with a visible message. A failure is shown in the pane; the other panes keep working.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Sparkline, Static

from tui.model import Snapshot, explain


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class Table(DataTable):
    """A DataTable that keeps its rows so ``/`` can filter them, with vim keys."""

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("j", "cursor_down", show=False), Binding("k", "cursor_up", show=False),
        Binding("h", "cursor_left", show=False), Binding("l", "cursor_right", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.all_rows: list[tuple[str, tuple[Any, ...]]] = []
        self.filter_text = ""

    def load(self, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Replace columns and rows (``(row key, cells)``), keeping the current filter."""
        self.clear(columns=True)
        self.add_columns(*columns)
        self.all_rows = [(key, tuple(cells)) for key, cells in rows]
        self._show()

    def apply_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._show()

    def _show(self) -> None:
        self.clear()
        for key, cells in self.all_rows:
            if self.filter_text and not any(self.filter_text in str(c).lower() for c in cells):
                continue
            self.add_row(*cells, key=key)

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return key.value


class Pane(Vertical):
    """One tab: a title line, a status line, and a table."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("loading the checkpoint…", classes="status")
        yield Table(classes="main")

    @property
    def title_line(self) -> Static:
        return self.query_one(".title", Static)

    @property
    def status(self) -> Static:
        return self.query_one(".status", Static)

    @property
    def table(self) -> Table:
        return self.query_one(".main", Table)

    def focus_main(self) -> None:
        self.table.focus()

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.render_snapshot()

    def render_snapshot(self) -> None:
        raise NotImplementedError

    def show_error(self, message: str) -> None:
        self.status.update(Text(f"✗ {message}", style="bold red"))

    def apply_filter(self, text: str) -> None:
        self.table.apply_filter(text)

    def back(self) -> None:
        """Esc: one level up (panes with drill-down override it)."""

    def activated(self) -> None:
        """The tab was opened (panes that load lazily start here)."""


class OverviewPane(Pane):
    """The query at a glance and every warning of ``statekit report``, explained."""

    def render_snapshot(self) -> None:
        r = self.snapshot.report
        pending = [b for b in r.planned_batches if b not in set(r.committed_batches)]
        self.title_line.update(Text.assemble(
            ("query ", "dim"), (r.query_id, "bold"), ("  provider ", "dim"), (r.provider, "bold"),
            ("  codec ", "dim"), (r.codec, "bold"), ("  partitions ", "dim"),
            (str(r.shuffle_partitions or "-"), "bold")))
        facts = [
            f"last committed batch {r.last_committed_batch} at {when(r.last_batch_timestamp_ms)}",
            f"watermark {when(r.watermark_ms)}",
            f"{len(r.planned_batches)} batches retained",
            f"uncommitted: {', '.join(map(str, pending)) or 'none'}",
            f"{r.state_files:,} state files, {human_bytes(r.state_bytes)}",
            f"minDeltasForSnapshot {r.min_deltas_for_snapshot} ({r.min_deltas_source})",
            f"read in {self.snapshot.seconds:.2f} s",
        ]
        self.status.update("  ·  ".join(facts))
        severity = {"error": "bold red", "warning": "yellow", "info": "cyan"}
        rows = [(f"finding-{n}", (Text(f.severity, style=severity.get(f.severity, "")),
                                  f.code, explain(f.code, f.message)))
                for n, f in enumerate(self.snapshot.report.findings)]
        if not rows:
            rows = [("finding-none", (Text("ok", style="green"), "-", "no warnings"))]
        self.table.load(("severity", "finding", "what it means"), rows)


class OperatorsPane(Pane):
    """Operators → partitions → files → decoded records (Enter), and back (Esc)."""

    LAG_WARN = 10

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path: list[str] = []  # the selected store, partition, file (row keys)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if len(self.path) < 3 and event.row_key.value:
            self.path.append(event.row_key.value)
            self.table.filter_text = ""
            self.app.clear_filter_box()
            self.render_snapshot()

    def back(self) -> None:
        if self.path:
            self.path.pop()
            self.render_snapshot()

    def render_snapshot(self) -> None:
        if self.snapshot is None:
            return
        level = len(self.path)
        if level == 0:
            self._stores()
        elif level == 1:
            self._partitions(self.path[0])
        elif level == 2:
            self._files(self.path[0], int(self.path[1]))
        else:
            self._records(self.path[2])

    def _store(self, key: str):
        op, store = key.split("/", 1)
        for s in self.snapshot.report.stores:
            if s.operator_id == int(op) and s.store == store:
                return s
        return None

    def _stores(self) -> None:
        self.title_line.update("operators and stores — Enter: partitions")
        self.status.update(f"{len(self.snapshot.report.stores)} stores")
        rows = []
        for s in self.snapshot.report.stores:
            lags = [p.versions_since_snapshot for p in s.partitions
                    if p.versions_since_snapshot is not None]
            sizes = [p.bytes for p in s.partitions]
            lag = max(lags) if lags else None
            rows.append((f"{s.operator_id}/{s.store}", (
                str(s.operator_id), s.operator_name or "-", s.store, str(len(s.partitions)),
                sum(p.files for p in s.partitions), human_bytes(sum(sizes)),
                _lag_text(lag, self.LAG_WARN), _skew_text(sizes))))
        self.table.load(("op", "operator", "store", "partitions", "files", "bytes",
                         "max deltas since snapshot", "skew (max/mean bytes)"), rows)

    def _partitions(self, key: str) -> None:
        store = self._store(key)
        if store is None:
            self.status.update(Text(f"store {key} is gone after the refresh", style="red"))
            return
        self.title_line.update(f"operator {key}: partitions — Enter: files · Esc: back")
        sizes = [p.bytes for p in store.partitions]
        mean = sum(sizes) / len(sizes) if sizes else 0
        self.status.update(f"{len(store.partitions)} partitions, committed version "
                           f"{store.committed_version}")
        rows = []
        for p in store.partitions:
            big = mean and p.bytes > 1.5 * mean
            rows.append((str(p.partition), (
                str(p.partition), str(p.deltas), str(p.snapshots),
                _lag_text(p.versions_since_snapshot, self.LAG_WARN),
                Text(human_bytes(p.bytes), style="yellow" if big else ""),
                "-" if p.keys is None else f"{p.keys:,}",
                Text("yes" if p.loadable else "NO", style="" if p.loadable else "bold red"),
                str(p.orphans))))
        self.table.load(("partition", "deltas", "snapshots", "deltas since snapshot", "bytes",
                         "keys", "loadable", "orphans"), rows)

    def _files(self, key: str, partition: int) -> None:
        op, store = key.split("/", 1)
        instance = self.snapshot.ckpt.inventory.instance(int(op), store, partition)
        self.title_line.update(f"operator {key} partition {partition}: files — Enter: records "
                               "· Esc: back")
        files = instance.files if instance else ()
        self.status.update(f"{len(files)} files")
        rel = self.snapshot.ckpt.location.relative
        self.table.load(("file", "kind", "version", "bytes"), [
            (f.path, (rel(f.path), f.kind, "-" if f.version is None else str(f.version),
                      human_bytes(f.size))) for f in files])

    def _records(self, path: str) -> None:
        rel = self.snapshot.ckpt.location.relative(path)
        self.title_line.update(f"{rel}: decoded records (first {RECORD_LIMIT}) · Esc: back")
        self.status.update("decoding…")
        self.table.load(("#", "op", "key", "value"), [])
        self._decode(path)

    @work(thread=True, exclusive=True, group="records")
    def _decode(self, path: str) -> None:
        from itertools import islice

        from toolkit.errors import StatekitError
        from toolkit.formats.values import hex_preview, render_value
        from toolkit.state_files import open_state_file

        ckpt = self.snapshot.ckpt
        url = ckpt.location.display(path)
        try:
            opened = open_state_file(url, dict(self.app.storage_options))
            rows = []
            for n, r in enumerate(islice(opened.records, RECORD_LIMIT), 1):
                key = render_value(r.key) if r.key is not None else hex_preview(r.key_bytes)
                value = (render_value(r.value, max_len=200) if r.value is not None else
                         "" if r.value_bytes is None else hex_preview(r.value_bytes))
                rows.append((str(n), (str(n), r.op, key, value)))
        except StatekitError as error:
            self.app.call_from_thread(self.show_error, str(error))
            return
        self.app.call_from_thread(self._records_loaded, rows)

    def _records_loaded(self, rows) -> None:
        if len(self.path) == 3:
            self.table.load(("#", "op", "key", "value"), rows)
            self.status.update(f"{len(rows)} records shown")


RECORD_LIMIT = 500


def _lag_text(lag: int | None, warn: int) -> Text:
    if lag is None:
        return Text("-")
    style = "bold red" if lag >= 2 * warn else "yellow" if lag >= warn else ""
    return Text(str(lag), style=style)


def _skew_text(sizes: Sequence[int]) -> Text:
    if not sizes or not sum(sizes):
        return Text("-")
    skew = max(sizes) / (sum(sizes) / len(sizes))
    return Text(f"{skew:.2f}", style="yellow" if skew >= 1.5 else "")


class BatchesPane(Pane):
    """Every retained batch: committed or not, interval, watermark progression."""

    def render_snapshot(self) -> None:
        rows = self.snapshot.timeline.rows
        self.title_line.update("batches — newest last")
        self.status.update(f"{len(rows)} batches retained, last committed "
                           f"{self.snapshot.timeline.last_committed}")
        previous = None
        out = []
        for r in rows:
            moved = "" if previous is None or r.watermark_ms is None or \
                r.watermark_ms == previous else f"+{(r.watermark_ms - previous) / 1000:.0f} s"
            previous = r.watermark_ms if r.watermark_ms is not None else previous
            out.append((str(r.batch_id), (
                str(r.batch_id),
                Text("committed", style="green") if r.committed else
                Text("NOT committed", style="bold red"),
                when(r.timestamp_ms),
                "-" if r.interval_ms is None else f"{r.interval_ms / 1000:.1f} s",
                when(r.watermark_ms), moved, str(r.shuffle_partitions or "-"),
                "; ".join(r.sources))))
        self.table.load(("batch", "state", "started", "interval", "watermark",
                         "watermark moved", "partitions", "sources"), out)
        if self.table.row_count:
            self.table.move_cursor(row=self.table.row_count - 1)


class _LazyPane(Pane):
    """A pane whose analysis runs in a worker the first time it is opened (and on refresh
    while it is open)."""

    loading_message = "working…"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result: Any = None
        self.wanted = False

    def activated(self) -> None:
        self.wanted = True
        if self.snapshot is not None and self.result is None:
            self._start()

    def render_snapshot(self) -> None:
        self.result = None
        if self.wanted:
            self._start()
        else:
            self.status.update("opens when shown")

    def _start(self) -> None:
        self.status.update(self.loading_message)
        self._run(self.snapshot)

    @work(thread=True, exclusive=True)
    def _run(self, snapshot: Snapshot) -> None:
        from toolkit.errors import StatekitError

        try:
            result = self.compute(snapshot)
        except StatekitError as error:
            self.app.call_from_thread(self.show_error, str(error))
            return
        self.app.call_from_thread(self._done, result)

    def _done(self, result: Any) -> None:
        self.result = result
        self.show_result(result)

    def compute(self, snapshot: Snapshot) -> Any:
        raise NotImplementedError

    def show_result(self, result: Any) -> None:
        raise NotImplementedError


class GrowthPane(_LazyPane):
    """Keys over versions per store, the verdict and its evidence (``statekit growth``)."""

    loading_message = "replaying the state files for the key history…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        yield Sparkline([], classes="chart")
        yield Table(classes="main")

    def compute(self, snapshot: Snapshot) -> Any:
        from toolkit.growth import analyse

        return analyse(snapshot.ckpt)

    def show_result(self, report: Any) -> None:
        self.title_line.update(Text.assemble(("verdict ", "dim"), (
            report.verdict.upper(), "bold red" if report.is_growth else "bold green"),
            ("  ", ""), (" ".join(report.summary), "")))
        keys = report.total_keys.last_value if report.total_keys else None
        size = report.total_bytes.last_value if report.total_bytes else None
        self.status.update(f"{'-' if keys is None else f'{keys:,.0f}'} keys, "
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
                _sparkline(keys), "; ".join(store.evidence[:2]))))
        self.query_one(".chart", Sparkline).data = chart
        self.table.load(("store", "verdict", "keys", "keys over versions", "evidence"), rows)


def _sparkline(values: Sequence[float], width: int = 32) -> str:
    bars = "▁▂▃▄▅▆▇█"
    values = list(values)[-width:]
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1
    return "".join(bars[min(7, int((v - low) / span * 7.999))] for v in values)


class RecoveryPane(_LazyPane):
    """The restart estimate, its slowest partitions and the minDeltasForSnapshot what-if."""

    loading_message = "estimating the restart from the files…"

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("", classes="status")
        yield Table(classes="main")
        yield Table(classes="whatif")

    def compute(self, snapshot: Snapshot) -> Any:
        import os

        from toolkit.recovery import estimate_recovery

        return estimate_recovery(snapshot.ckpt, cores=len(os.sched_getaffinity(0)))

    def show_result(self, e: Any) -> None:
        self.title_line.update(Text.assemble(
            ("estimated recovery ", "dim"), (f"{e.estimate_s:.2f} s", "bold"),
            (f"  (state load {e.state_load_s:.2f} s + re-run {e.rerun_s:.2f} s) · "
             f"{e.cores} task slots · version {e.version}", "")))
        self.status.update(" · ".join(e.notes) or "no warnings")
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
        whatif.load(("minDeltasForSnapshot", "worst case", "typical",
                     "snapshot bytes per batch"), [
            (str(w.min_deltas), (str(w.min_deltas), f"{w.worst_s:.2f} s", f"{w.typical_s:.2f} s",
                                 human_bytes(w.snapshot_bytes_per_batch))) for w in e.what_if])





class StatePane(Pane):
    """State rows through Spark's own reader: the JVM starts the first time this tab opens,
    in a worker, with each step shown. Rows stream in pages (``n`` next, ``p`` previous);
    ``o`` switches to the next operator."""

    BINDINGS: ClassVar[list[Binding]] = [
        Binding("n", "page(1)", "Next page"), Binding("p", "page(-1)", "Previous page"),
        Binding("o", "next_operator", "Next operator")]
    PAGE = 100

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started = False
        self.operator: int | None = None
        self.pages: list[list[tuple]] = []
        self.columns: list[str] = []
        self.page = 0
        self.rows_iter: Any = None
        self.exhausted = False
        self.spark: Any = None

    def render_snapshot(self) -> None:
        self.title_line.update("state rows through Spark's statestore reader")
        if not self.started:
            self.status.update("opens Spark when shown (the JVM starts only here)")

    def activated(self) -> None:
        if not self.started and self.snapshot is not None:
            self.started = True
            self._open(self.operator)

    def action_next_operator(self) -> None:
        operators = sorted(self.snapshot.ckpt.operators) if self.snapshot else []
        if not operators:
            return
        current = self.operator if self.operator is not None else operators[0]
        later = [o for o in operators if o > current]
        self._open(later[0] if later else operators[0])

    def action_page(self, step: int) -> None:
        target = self.page + step
        if target < 0:
            return
        if target < len(self.pages):
            self.page = target
            self._show_page()
        elif not self.exhausted and self.rows_iter is not None:
            self._fetch()

    @work(thread=True, exclusive=True, group="state")
    def _open(self, operator: int | None) -> None:
        from toolkit.errors import StatekitError

        def say(message: str) -> None:
            self.app.call_from_thread(self.status.update, message)

        try:
            from jobs.state_reader import flatten, read_state, reader_confs, resolve_target

            target = resolve_target(self.snapshot.ckpt, operator=operator)
            if self.spark is None:
                say("starting Spark (the JVM takes a few seconds)…")
                from jobs.session import build_session

                self.spark = build_session("statekit-tui")
                for key, value in reader_confs(self.snapshot.ckpt).items():
                    self.spark.conf.set(key, value)
            say(f"planning the read of {target.label}…")
            frame = flatten(read_state(self.spark, target))
            columns = list(frame.columns)
            rows_iter = frame.toLocalIterator()
        except StatekitError as error:
            self.app.call_from_thread(self.show_error, str(error))
            return
        except Exception as error:  # a Spark failure: one line, shown in place
            from jobs.errors import first_line

            self.app.call_from_thread(self.show_error, f"Spark: {first_line(error)}")
            return
        self.app.call_from_thread(self._opened, target, columns, rows_iter)

    def _opened(self, target: Any, columns: list[str], rows_iter: Any) -> None:
        self.operator = target.operator_id
        self.title_line.update(f"{target.label} — n/p: pages · o: next operator · /: filter")
        self.columns, self.rows_iter = columns, rows_iter
        self.pages, self.page, self.exhausted = [], 0, False
        self._fetch()

    @work(thread=True, exclusive=True, group="state-page")
    def _fetch(self) -> None:
        from itertools import islice

        self.app.call_from_thread(self.status.update, "reading rows…")
        try:
            rows = [tuple(str(v) for v in r) for r in islice(self.rows_iter, self.PAGE)]
        except Exception as error:
            from jobs.errors import first_line

            self.app.call_from_thread(self.show_error, f"Spark: {first_line(error)}")
            return
        self.app.call_from_thread(self._fetched, rows)

    def _fetched(self, rows: list[tuple]) -> None:
        if len(rows) < self.PAGE:
            self.exhausted = True
        if rows or not self.pages:
            self.pages.append(rows)
            self.page = len(self.pages) - 1
        self._show_page()

    def _show_page(self) -> None:
        rows = self.pages[self.page] if self.pages else []
        first = self.page * self.PAGE
        self.table.load(self.columns, [(str(first + n), r) for n, r in enumerate(rows)])
        more = "" if self.exhausted and self.page == len(self.pages) - 1 else " · n: more"
        self.status.update(f"rows {first + 1 if rows else 0}–{first + len(rows)}{more}")


__all__ = ["BatchesPane", "GrowthPane", "OperatorsPane", "OverviewPane", "Pane",
           "RecoveryPane", "StatePane", "Table"]
