"""The TUI's screens, one pane per tab, each a view over the shared :class:`Snapshot`.

A pane shows a table (filterable with ``/``), drills down with Enter and back with Esc, and
loads anything slow (growth replay, recovery estimate, decoded records) in a thread worker
with a visible message. A failure is shown in the pane; the other panes keep working.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from rich.cells import cell_len
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowDoesNotExist

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.presentation import human_bytes, human_duration
from statekit.tui.model import Snapshot, explain

if TYPE_CHECKING:
    from statekit.tui.app import StatekitApp


def watermark_text(ms: int | None) -> str:
    """Spark's watermark: 0 until the first one exists (the query's progress says 1970)."""
    return "none yet (0)" if ms == 0 else when(ms)


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


MAX_COLUMN_WIDTH = 120


def _cell_width(cell: Any) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


class Table(DataTable):
    """A DataTable that keeps its rows so ``/`` can filter them, with vim keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", show=False), Binding("k", "cursor_up", show=False),
        Binding("h", "cursor_left", show=False), Binding("l", "cursor_right", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.all_rows: list[tuple[str, tuple[Any, ...]]] = []
        self.filter_text = ""

    def load(self, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Replace columns and rows (``(row key, cells)``), keeping the current filter."""
        self.clear(columns=True)
        self.all_rows = [(key, tuple(cells)) for key, cells in rows]
        # Explicit widths: DataTable's auto width, after clear(columns=True), renders the first
        # frame of Text cells at the previous table's column widths and keeps that cut.
        for n, label in enumerate(columns):
            widest = max((_cell_width(cells[n]) for _, cells in self.all_rows
                          if n < len(cells)), default=0)
            self.add_column(label, width=min(max(len(label), widest), MAX_COLUMN_WIDTH))
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

    def select_key(self, key: str) -> None:
        """Put the cursor on the row ``key`` (if shown)."""
        with contextlib.suppress(RowDoesNotExist):  # filtered out, or gone after a refresh
            self.move_cursor(row=self.get_row_index(key))

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return key.value


class Pane(Vertical):
    """One tab: a title line, a status line, a table, and the highlighted row in full.

    Table cells are cut to the column width; a finding's explanation or a record's value is
    only useful whole, so panes that have such rows describe the highlighted one below the
    table (:meth:`describe`).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot: Snapshot | None = None

    @property
    def shown(self) -> Snapshot:
        """The snapshot on screen (panes render only after the first one arrived)."""
        if self.snapshot is None:
            raise RuntimeError(f"{type(self).__name__} rendered before a snapshot arrived")
        return self.snapshot

    @property
    def tui(self) -> StatekitApp:
        """The app, typed: its options (``storage_options``, ``cores``, ``allow_write``)."""
        return cast("StatekitApp", self.app)

    def compose(self) -> ComposeResult:
        yield Static("", classes="title")
        yield Static("loading the checkpoint…", classes="status")
        yield Table(classes="main")
        yield Static("", classes="detail")

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
        self.clear_detail()
        self.render_snapshot()

    def clear_detail(self) -> None:
        for detail in self.query(".detail").results(Static):
            detail.update("")
            detail.display = False

    def render_snapshot(self) -> None:
        raise NotImplementedError

    def show_error(self, message: str) -> None:
        self.status.update(Text(f"✗ {message}", style="bold red"))

    def describe(self, key: str) -> str | Text | None:
        """The whole of the highlighted row, for rows cut short in the table (or None)."""
        return None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        details = self.query(".detail")
        if not details:
            return
        text = self.describe(event.row_key.value) if event.row_key.value else None
        details.first(Static).update(text or "")
        details.first(Static).display = bool(text)

    def apply_filter(self, text: str) -> None:
        """The filter was submitted (Enter) or cleared (Esc)."""
        self.table.apply_filter(text)

    def filter_typed(self, text: str) -> None:
        """The filter box changed: panes whose table holds everything filter as you type."""
        self.apply_filter(text)

    def back(self) -> None:
        """Esc: one level up (panes with drill-down override it)."""

    def activated(self) -> None:
        """The tab was opened (panes that load lazily start here)."""


class OverviewPane(Pane):
    """The query at a glance and every warning of ``statekit report``, explained."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.explained: dict[str, Text] = {}

    def describe(self, key: str) -> Text | None:
        return self.explained.get(key)

    def render_snapshot(self) -> None:
        r = self.shown.report
        pending = [b for b in r.planned_batches if b not in set(r.committed_batches)]
        self.title_line.update(Text.assemble(
            ("query ", "dim"), (r.query_id, "bold"), ("  provider ", "dim"), (r.provider, "bold"),
            ("  codec ", "dim"), (r.codec, "bold"), ("  partitions ", "dim"),
            (str(r.shuffle_partitions or "-"), "bold")))
        facts = [
            f"last committed batch {r.last_committed_batch} at {when(r.last_batch_timestamp_ms)}",
            f"watermark {watermark_text(r.watermark_ms)}",
            f"{len(r.planned_batches)} batches retained",
            f"uncommitted: {', '.join(map(str, pending)) or 'none'}",
            f"{r.state_files:,} state files, {human_bytes(r.state_bytes)}",
            f"minDeltasForSnapshot {r.min_deltas_for_snapshot} ({r.min_deltas_source})",
            f"read in {self.shown.seconds:.2f} s",
        ]
        self.status.update("  ·  ".join(facts))
        severity = {"error": "bold red", "warning": "yellow", "info": "cyan"}
        self.explained, rows = {}, []
        for n, f in enumerate(self.shown.report.findings):
            style, meaning = severity.get(f.severity, ""), explain(f.code, f.message)
            self.explained[f"finding-{n}"] = Text.assemble((f"{f.severity} {f.code}: ", style),
                                                           meaning)
            rows.append((f"finding-{n}", (Text(f.severity, style=style), f.code, meaning)))
        if not rows:
            rows = [("finding-none", (Text("ok", style="green"), "-", "no warnings"))]
        self.table.load(("severity", "finding", "what it means"), rows)


class OperatorsPane(Pane):
    """Operators → partitions → files → decoded records (Enter), and back (Esc)."""

    LAG_WARN = 10

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path: list[str] = []  # the selected store, partition, file (row keys)
        self.files: dict[str, StateFile] = {}  # the shown partition's files by path
        self.records: dict[str, str] = {}  # row key → the whole decoded record
        #: store → live keys per partition in this snapshot, or why they cannot be counted
        self.key_counts: dict[str, dict[int, int] | str] = {}

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.key_counts = {}
        super().show_snapshot(snapshot)

    def describe(self, key: str) -> str | None:
        return self.records.get(key) if len(self.path) == 3 else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if len(self.path) < 3 and event.row_key.value:
            self.path.append(event.row_key.value)
            self.table.filter_text = ""
            self.tui.clear_filter_box()
            self.render_snapshot()

    def back(self) -> None:
        if self.path:
            came_from = self.path.pop()
            self.render_snapshot()
            self.table.select_key(came_from)  # the cursor returns to the row left

    def render_snapshot(self) -> None:
        if self.snapshot is None:
            return
        self.clear_detail()
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
        for s in self.shown.report.stores:
            if s.operator_id == int(op) and s.store == store:
                return s
        return None

    def _stores(self) -> None:
        self.title_line.update("operators and stores — Enter: partitions")
        self.status.update(f"{len(self.shown.report.stores)} stores")
        rows = []
        for s in self.shown.report.stores:
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
        counted = self.key_counts.get(key)
        keys_note = ""
        if any(p.keys is None for p in store.partitions):
            if counted is None:
                keys_note = " · counting keys (replaying the state files)…"
                self._count_keys(self.snapshot, key)
            elif isinstance(counted, str):
                keys_note = f" · keys: {counted}"
        self.status.update(f"{len(store.partitions)} partitions, committed version "
                           f"{store.committed_version}{keys_note}")
        rows = []
        for p in store.partitions:
            keys = p.keys if p.keys is not None else (
                counted.get(p.partition) if isinstance(counted, dict) else None)
            big = mean and p.bytes > 1.5 * mean
            rows.append((str(p.partition), (
                str(p.partition), str(p.deltas), str(p.snapshots),
                _lag_text(p.versions_since_snapshot, self.LAG_WARN),
                Text(human_bytes(p.bytes), style="yellow" if big else ""),
                "-" if keys is None else f"{keys:,}",
                Text("yes" if p.loadable else "NO", style="" if p.loadable else "bold red"),
                str(p.orphans))))
        self.table.load(("partition", "deltas", "snapshots", "deltas since snapshot", "bytes",
                         "keys", "loadable", "orphans"), rows)

    @work(thread=True, exclusive=True, group="keys")
    def _count_keys(self, snapshot: Snapshot, key: str) -> None:
        """Live keys per partition at the committed version, from a replay of the files
        (the report knows them only for RocksDB zips)."""
        from statekit.errors import StatekitError
        from statekit.state_history import store_history

        op, store = key.split("/", 1)
        try:
            history = store_history(snapshot.ckpt, int(op), store)
            counted: dict[int, int] | str = (
                {p: keys[-1] for p, keys in history.partition_keys.items() if keys}
                if history.partition_keys else "; ".join(history.notes) or "unknown")
        except StatekitError as error:
            counted = str(error)
        self.app.call_from_thread(self._keys_counted, snapshot, key, counted)

    def _keys_counted(self, snapshot: Snapshot, key: str, counted: dict[int, int] | str
                      ) -> None:
        if snapshot is not self.snapshot:
            return  # a refresh came first: its own count is under way
        self.key_counts[key] = counted
        if self.path == [key]:
            row = self.table.cursor_row
            self._partitions(key)
            self.table.move_cursor(row=row)

    def _files(self, key: str, partition: int) -> None:
        op, store = key.split("/", 1)
        instance = self.shown.ckpt.inventory.instance(int(op), store, partition)
        self.title_line.update(f"operator {key} partition {partition}: files — Enter: records "
                               "· Esc: back")
        files = instance.files if instance else ()
        self.files = {f.path: f for f in files}
        self.status.update(f"{len(files)} files")
        rel = self.shown.ckpt.location.relative
        self.table.load(("file", "kind", "version", "bytes"), [
            (f.path, (rel(f.path), f.kind, "-" if f.version is None else str(f.version),
                      human_bytes(f.size))) for f in files])

    def _records(self, path: str) -> None:
        rel = self.shown.ckpt.location.relative(path)
        self.title_line.update(f"{rel}: decoded records (first {RECORD_LIMIT}) · Esc: back")
        file = self.files.get(path)
        if file is None:
            self.show_error(f"{rel} is gone after the refresh")
            return
        self.status.update("decoding…")
        self.table.load(("#", "op", "key", "value"), [])
        self._decode(self.shown.ckpt, file)

    @work(thread=True, exclusive=True, group="records")
    def _decode(self, ckpt: Checkpoint, file: StateFile) -> None:
        from itertools import islice

        from statekit.errors import StatekitError
        from statekit.formats.values import shorten
        from statekit.state_files import open_file, record_text

        try:
            opened = open_file(ckpt, file)
            rows, whole = [], {}
            for n, r in enumerate(islice(opened.records, RECORD_LIMIT), 1):
                key, value = record_text(r, DETAIL_LIMIT)
                rows.append((str(n), (str(n), r.op, key, shorten(value, 200))))
                whole[str(n)] = f"#{n} {r.op} key {key}\nvalue {value}"
        except StatekitError as error:
            self.app.call_from_thread(self.show_error, str(error))
            return
        self.app.call_from_thread(self._records_loaded, rows, whole)

    def _records_loaded(self, rows, whole: dict[str, str]) -> None:
        if len(self.path) == 3:
            self.records = whole
            self.table.load(("#", "op", "key", "value"), rows)
            self.status.update(f"{len(rows)} records shown")


RECORD_LIMIT = 500
DETAIL_LIMIT = 2000


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
        rows = self.shown.timeline.rows
        self.title_line.update("batches — newest last")
        self.status.update(f"{len(rows)} batches retained, last committed "
                           f"{self.shown.timeline.last_committed}")
        previous = None
        out = []
        for r in rows:
            watermark = r.watermark_ms or None  # 0: no watermark yet, nothing moved
            moved = "" if previous is None or watermark is None or watermark == previous \
                else f"+{human_duration((watermark - previous) / 1000)}"
            previous = watermark if watermark is not None else previous
            out.append((str(r.batch_id), (
                str(r.batch_id),
                Text("committed", style="green") if r.committed else
                Text("NOT committed", style="bold red"),
                when(r.timestamp_ms),
                "-" if r.interval_ms is None else f"{r.interval_ms / 1000:.1f} s",
                watermark_text(r.watermark_ms), moved, str(r.shuffle_partitions or "-"),
                "; ".join(r.sources))))
        self.table.load(("batch", "state", "started", "interval", "watermark",
                         "watermark moved", "partitions", "sources"), out)
        if self.table.row_count:
            self.table.move_cursor(row=self.table.row_count - 1)


Result = TypeVar("Result")


class LazyPane(Pane, Generic[Result]):
    """A pane whose analysis (a ``Result``) runs in a worker the first time it is opened
    (and on refresh while it is open)."""

    loading_message = "working…"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result: Result | None = None
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
        self._run(self.shown)

    @work(thread=True, exclusive=True)
    def _run(self, snapshot: Snapshot) -> None:
        from statekit.errors import StatekitError

        try:
            result = self.compute(snapshot)
        except StatekitError as error:
            self.app.call_from_thread(self.show_error, str(error))
            return
        self.app.call_from_thread(self._done, result)

    def _done(self, result: Result) -> None:
        self.result = result
        self.show_result(result)

    def compute(self, snapshot: Snapshot) -> Result:
        raise NotImplementedError

    def show_result(self, result: Result) -> None:
        raise NotImplementedError


__all__ = ["BatchesPane", "LazyPane", "OperatorsPane", "OverviewPane", "Pane", "Table"]
