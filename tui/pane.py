"""The base of every tab: :class:`Pane` (a view over the shared :class:`Snapshot`) and
:class:`LazyPane` (a pane whose analysis runs in a worker the first time it is opened).

A pane shows a title line, a status line, a table (filterable with ``/``) and the
highlighted row in full below it. Anything slow goes through :meth:`Asks.ask`
(:mod:`statekit.tui.work`): a pane never touches its widgets from a thread, a late answer to
a question the user has left is dropped, and every failure lands in :meth:`show_error`.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Static

from statekit.tui.model import Snapshot
from statekit.tui.table import Table
from statekit.tui.work import Asks, Progress

if TYPE_CHECKING:
    from statekit.tui.app import StatekitApp


def watermark_text(ms: int | None) -> str:
    """Spark's watermark: 0 until the first one exists (the query's progress says 1970)."""
    return "none yet (0)" if ms == 0 else when(ms)


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


class Pane(Asks, Vertical):
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

    def main_widget(self) -> Widget | None:
        """What the tab's keys go to (None: nothing to focus)."""
        return self.table

    def focus_main(self) -> None:
        widget = self.main_widget()
        if widget is not None:
            widget.focus()

    def on_show(self) -> None:
        """Shown (its tab opened): take the focus now that it can be given. A focus asked
        for while the tab was still hidden is refused, and nothing else would move it."""
        self.tui.focus_current(self)

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

    def show_progress(self, text: str) -> None:
        self.status.update(text)

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

    def back(self) -> bool:
        """Esc: one level up (panes with drill-down override it); False when already at the
        top (the app then returns to the fleet list, if it has one)."""
        return False

    def activated(self) -> None:
        """The tab was opened (panes that load lazily start here)."""


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
        if self.snapshot is not None and self.result is None and not self.asking("analysis"):
            self._start()

    def render_snapshot(self) -> None:
        self.result = None
        if self.wanted:
            self._start()
        else:
            self.status.update("opens when shown")

    def _start(self) -> None:
        self.status.update(self.loading_message)
        snapshot = self.shown
        self.ask("analysis", lambda progress: self.compute(snapshot, progress), self._done,
                 describe=type(self).__name__)

    def _done(self, result: Result) -> None:
        self.result = result
        self.show_result(result)

    def compute(self, snapshot: Snapshot, progress: Progress) -> Result:
        """The analysis (in a worker thread: no widgets here)."""
        raise NotImplementedError

    def show_result(self, result: Result) -> None:
        raise NotImplementedError
