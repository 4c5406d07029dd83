"""The fleet list: one row per checkpoint, the first screen of ``statekit tui CKPT CKPT…``.

k9s-style: a sortable, filterable table of every checkpoint an SRE owns — the doctor's
verdict, the last batch's age, keys and bytes, the growth verdict, the restart estimate
against the RTO, snapshot lag — read in parallel (:func:`statekit.fleet.readings.read_fleet`), each
row shown as soon as it is read. A checkpoint that cannot be read shows its one-line error in
its row; the others are unaffected. Enter opens the checkpoint's own screens, Esc there
comes back here. Words carry every verdict; colour only repeats them.

Rows arrive in the order they are read — an unreadable checkpoint first, its error being
instant — not in the order they are shown, and every arrival redraws the table. So the cursor
is placed by checkpoint, never left where the last redraw put it: until the user moves it, it
rests on the first row shown; once they have, it stays on their checkpoint (by URL) through
arrivals, refreshes and re-sorts, and Enter opens the row it highlights.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from statekit.assess.words import duration_words
from statekit.fleet.readings import FleetRow, read_fleet
from statekit.formats.values import shorten
from statekit.support.presentation import distinct_names, human_bytes, human_duration
from statekit.tui.table import Table
from statekit.tui.verdicts import ERROR, OK, WARNING, verdict_text
from statekit.tui.work import Asks, Progress

COLUMNS = ("checkpoint", "health", "growth", "restart", "RTO", "age", "keys", "bytes",
           "snap lag", "last batch", "read")
"""The verdicts first: on 120 columns they are on screen, the rest scrolls sideways."""
NAME_WIDTH = 32
"""A checkpoint's name in its row: the part of its path that tells it from the others."""
ERROR_WIDTH = 60
SORTS = ("checkpoint", "health", "age", "keys", "bytes", "growth", "restart", "snap lag")
"""The columns ``s`` cycles through, in that order."""
HEALTH_RANK = {"will not restart": 0, "unreadable": 1, "restarts, but": 2,
               "restarts with warnings": 3, "restarts": 4, None: 5}
GROWTH_RANK = {"accelerating": 0, "growing": 1, "saturating": 2, "bounded": 3,
               "insufficient-history": 4, None: 5}


RENDER_EVERY_S = 0.1


class RowRead(Message):
    """A checkpoint's row arrived from a reading worker."""

    def __init__(self, index: int, row: FleetRow, generation: int) -> None:
        super().__init__()
        self.index, self.row, self.generation = index, row, generation


def health_text(row: FleetRow) -> Text:
    if row.error is not None:
        return Text("UNREADABLE", style=ERROR)
    if row.health == "will not restart":
        return Text("WILL NOT RESTART", style=ERROR)
    if row.outcome not in (None, "same"):  # it restarts, into another outcome
        return Text(f"restarts, {str(row.outcome).upper()}", style=ERROR)
    if row.health == "restarts with warnings":
        return Text("restarts, warnings", style=WARNING)
    if row.health is None:  # the first step's row: the assessment is still to come
        return Text("checking…", style="dim")
    if row.health != "restarts":  # "not checked"
        return Text(row.health, style=WARNING)
    return Text(row.health, style=OK)


def rto_text(row: FleetRow) -> Text:
    if row.over_rto is None:
        return Text("")
    return Text("OVER RTO", style=ERROR) if row.over_rto else Text("within", style=OK)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def cells(row: FleetRow, now: float, name: str | None = None) -> tuple[Any, ...]:
    """The row's cells; ``name``: what the checkpoint column shows (default: its URL). An
    unreadable checkpoint's error stands where its verdicts would, on screen."""
    name = name or row.url
    if row.error is not None:
        # the row already names the checkpoint: its error without the path in front
        error = row.error.removeprefix(f"{row.url}: ")
        return (name, health_text(row), Text(shorten(error, ERROR_WIDTH), style=ERROR),
                "", "", "", "", "", "", "", f"{row.seconds:.2f} s")
    age = row.age_s(now)
    pending = Text("…", style="dim")  # the second step (growth, restart) still runs
    return (name, health_text(row),
            pending if not row.complete else
            verdict_text(row.growth) if row.growth else Text(""),
            pending if not row.complete else
            "" if row.restart_s is None else duration_words(row.restart_s),
            rto_text(row), "" if age is None else f"{human_duration(age)} ago",
            pending if not row.complete else _number(row.keys), human_bytes(row.bytes),
            "" if row.snapshot_lag is None else str(row.snapshot_lag),
            "" if row.last_batch is None else str(row.last_batch), f"{row.seconds:.2f} s")


def sort_key(column: str, now: float) -> Callable[[FleetRow], Any]:
    """Most alarming first for verdicts, largest first for sizes, oldest first for ages."""
    def key(row: FleetRow) -> Any:
        health = "unreadable" if row.error is not None else \
            "restarts, but" if row.outcome not in (None, "same") else row.health
        if column == "health":
            return (HEALTH_RANK.get(health, 5), row.url)
        if column == "growth":
            return (GROWTH_RANK.get(row.growth, 5), row.url)
        values = {"age": row.age_s(now), "keys": row.keys, "bytes": row.bytes,
                  "restart": row.restart_s, "snap lag": row.snapshot_lag}
        if column in values:
            value = values[column]
            return (value is None, -(value or 0), row.url)
        return (row.url,)
    return key


class FleetScreen(Asks, Screen[str]):
    """Every checkpoint's row; dismissed with the URL to open."""

    DEFAULT_CSS = """
    FleetScreen #fleet-filter { dock: top; margin: 0 1; display: none; }
    FleetScreen #fleet-filter.shown { display: block; }
    FleetScreen > .title { height: auto; padding: 0 1; text-style: bold; }
    FleetScreen > .status { height: auto; padding: 0 1; color: $text-muted; }
    FleetScreen > Table { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open"),
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse", "Reverse", key_display="S"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("r", "refresh", "Refresh"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, urls: Sequence[str], *, storage_options: dict[str, Any] | None = None,
                 per_url: Mapping[str, dict[str, Any]] | None = None,
                 timeout_s: float | None = None,
                 cores: int, rto_s: float | None = None, watch: float | None = None,
                 workers: int | None = None, now: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.urls = list(dict.fromkeys(urls))
        self.names = distinct_names(self.urls, NAME_WIDTH)
        """What each row's checkpoint column shows (the urls never change: named once)."""
        self.storage_options = storage_options or {}
        self.per_url = dict(per_url or {})
        """Each checkpoint's own storage options (a fleet file's lines)."""
        self.timeout_s = timeout_s
        """Each checkpoint's deadline (``--timeout``): past it, its row says so."""
        self.cores, self.rto_s = cores, rto_s
        self.watch_seconds, self.reading_workers = watch, workers
        self.now = now
        self.rows: dict[int, FleetRow] = {}
        self.chosen: str | None = None
        """The checkpoint the user put the cursor on (None: they have not moved it)."""
        self._placed: str | None = None
        """Where the list itself last put the cursor: found elsewhere, the user moved it."""
        self._read_again = False
        """A refresh was asked while the fleet was being read: read again when it ends."""
        self.sort_column = "checkpoint"
        self.descending = False
        self.generation = 0
        self._render_pending = False
        self.started = 0.0
        self.first_row_s: float | None = None
        """Seconds from the start of a reading to its first row on screen."""
        self.listed_s: float | None = None
        """… to every checkpoint's row on screen (growth and restart may still be coming)."""
        self.last_row_s: float | None = None
        """… to every row complete."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter checkpoints (Enter to apply, Esc to clear)",
                    id="fleet-filter")
        yield Static("", id="fleet-title", classes="title")
        yield Table(id="fleet-table", classes="main")
        yield Static("", id="fleet-status", classes="status")
        yield Footer()

    @property
    def table(self) -> Table:
        return self.query_one("#fleet-table", Table)

    def on_mount(self) -> None:
        self.sub_title = f"{len(self.urls)} checkpoints"
        self.table.load(COLUMNS, [])
        self.table.focus()
        self.read()
        if self.watch_seconds:
            self.set_interval(self.watch_seconds, self._watched)

    def _watched(self) -> None:
        if self.is_current:  # a checkpoint opened over the list re-reads itself
            self.read()

    # ------------------------------------------------------------------ reading
    def read(self) -> None:
        """(Re)read every checkpoint; rows replace the old ones as they arrive.

        One reading of the fleet at a time: a refresh (``r``, or ``--watch`` ticking
        faster than the fleet reads) asked while one runs starts when it ends. A thread
        cannot be stopped, so starting another would only stack readings — threads and
        memory growing with time, and each checkpoint read twice at once."""
        if self.asking("fleet"):
            self._read_again = True
            return
        self._read_again = False
        self.generation += 1
        generation = self.generation
        self.started = time.perf_counter()
        self.first_row_s = self.listed_s = self.last_row_s = None
        urls, options = self.urls, self.storage_options

        def arrived(index: int, row: FleetRow) -> None:
            self.post_message(RowRead(index, row, generation))

        def job(_progress: Progress) -> int:
            read_fleet(urls, options, cores=self.cores, rto_s=self.rto_s,
                       workers=self.reading_workers, on_row=arrived, per_url=self.per_url,
                       timeout_s=self.timeout_s)
            return generation

        self.show_status(f"reading {len(urls)} checkpoints…")
        self.ask("fleet", job, self._all_read, describe=f"{len(urls)} checkpoints")

    def on_row_read(self, message: RowRead) -> None:
        message.stop()
        if message.generation != self.generation:
            return  # a row of a reading a refresh replaced
        elapsed = time.perf_counter() - self.started
        if self.first_row_s is None:
            self.first_row_s = elapsed
        self.rows[message.index] = message.row
        if self.listed_s is None and len(self.rows) == len(self.urls):
            self.listed_s = elapsed
        self._render_soon()

    def _render_soon(self) -> None:
        """Rows arrive by the dozen: the table is redrawn at most every RENDER_EVERY_S (the
        first row at once), not once per row."""
        if self._render_pending:
            return
        self._render_pending = True

        def render() -> None:
            self._render_pending = False
            self.render_rows()

        if len(self.rows) == 1:
            self.call_later(render)  # not set_timer(0): a zero-length Textual timer divides by it
        else:
            self.set_timer(RENDER_EVERY_S, render)

    def _all_read(self, generation: int) -> None:
        if generation != self.generation:
            return
        self.last_row_s = time.perf_counter() - self.started
        self._render_pending = False
        self.render_rows()
        if self._read_again:  # a refresh asked meanwhile
            self.call_later(self.read)

    def render_rows(self) -> None:
        now = self.now()
        shown = sorted(self.rows.values(), key=sort_key(self.sort_column, now),
                       reverse=self.descending)
        table = self.table
        self._note_choice()
        table.load(COLUMNS, [(row.url, cells(row, now, self.names.get(row.url)))
                             for row in shown])
        self._place_cursor()
        counts = self.counts()
        self.query_one("#fleet-title", Static).update(
            f"{len(self.urls)} checkpoints · {counts}")
        self.show_status(self.timing_line())

    def _note_choice(self) -> None:
        """A cursor that is not where the list put it was moved by the user (a key, a
        click, a filter): from now on it stays on that checkpoint."""
        selected = self.table.selected_key()
        if selected is not None and selected != self._placed:
            self.chosen = selected

    def _place_cursor(self) -> None:
        """The user's checkpoint wherever the sort put it (if shown), else the first row."""
        table = self.table
        if not table.row_count:
            return
        table.move_cursor(row=0)
        if self.chosen is not None:
            table.select_key(self.chosen)
        self._placed = table.selected_key()

    def counts(self) -> str:
        rows = list(self.rows.values())
        words = [("will not restart", sum(r.error is None and r.health == "will not restart"
                                          for r in rows)),
                 ("unreadable", sum(r.error is not None for r in rows)),
                 ("with warnings", sum(r.health == "restarts with warnings" for r in rows)),
                 ("growing", sum(r.growth in ("growing", "accelerating") for r in rows)),
                 ("over RTO", sum(bool(r.over_rto) for r in rows))]
        said = [f"{count} {word}" for word, count in words if count]
        return ", ".join(said) if said else "all restart"

    def timing_line(self) -> str:
        read = f"{len(self.rows)}/{len(self.urls)} listed"
        if self.listed_s is not None:
            read += f" in {self.listed_s:.2f} s (first after {self.first_row_s or 0:.2f} s)"
        if self.last_row_s is not None:
            read += f", complete in {self.last_row_s:.2f} s"
        else:
            read += ", growth and restart estimates coming…"
        order = f"sorted by {self.sort_column}" + (" (reversed)" if self.descending else "")
        return f"{read} · {order} · Enter open · s sort · / filter · r refresh"

    def show_status(self, text: str) -> None:
        self.query_one("#fleet-status", Static).update(text)

    def show_error(self, message: str) -> None:
        self.show_status(f"reading failed: {message}")

    def show_progress(self, text: str) -> None:
        self.show_status(text)

    # ------------------------------------------------------------------ actions
    def action_open(self) -> None:
        url = self.table.selected_key()
        if url is not None:
            self.dismiss(url)

    def action_sort(self) -> None:
        self.sort_column = SORTS[(SORTS.index(self.sort_column) + 1) % len(SORTS)]
        self.descending = False
        self.render_rows()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.render_rows()

    def action_refresh(self) -> None:
        self.read()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.add_class("shown")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.table.apply_filter("")
        self.table.focus()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.table.apply_filter(event.value)
        self.table.focus()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.table.apply_filter(event.value)

    @on(Table.RowSelected, "#fleet-table")
    def _row_selected(self, event: Table.RowSelected) -> None:
        event.stop()
        self.action_open()
