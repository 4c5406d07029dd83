"""The State tab: state rows through Spark's own ``statestore`` reader, paged.

The JVM starts in a worker the first time this tab opens (never for the other tabs), with
each step on the status line. Rows stream in pages (``n`` next, ``p`` previous); ``o``
switches to the next operator; ``/`` + Enter asks Spark for the rows containing a text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.binding import Binding, BindingType

from statekit.formats.values import render_value
from statekit.tui.pane import Pane
from statekit.tui.spark_session import LazySession
from statekit.tui.work import Progress

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import Row

    from statekit.jobs.state_reader import StateTarget


class StatePane(Pane):
    """State rows through Spark's own reader: the JVM starts the first time this tab opens,
    in a worker, with each step shown. Rows stream in pages (``n`` next, ``p`` previous);
    ``o`` switches to the next operator."""

    BINDINGS: ClassVar[list[BindingType]] = [
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
        self.rows_iter: Iterator[Row] | None = None
        self.exhausted = False
        self.session = LazySession()
        self.confs: dict[str, str] = {}  # the reader confs, set while Spark reads
        self.spark_filter = ""  # rows shown contain this (evaluated by Spark over all rows)

    def filter_typed(self, text: str) -> None:
        self.table.apply_filter(text)  # as you type: this page only; Enter asks Spark

    def apply_filter(self, text: str) -> None:
        text = text.strip()
        self.table.apply_filter("")
        if text != self.spark_filter and self.started:
            self.spark_filter = text
            self.pages, self.page, self.exhausted = [], 0, False
            self._open(self.operator)

    def back(self) -> bool:
        filtered = bool(self.spark_filter)
        self.apply_filter("")  # Esc: all rows again
        return filtered

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

    def _open(self, operator: int | None) -> None:
        snapshot = self.snapshot
        if snapshot is None:
            return
        self.forget("state-page")  # a page of the previous read must not land on this one
        wanted = self.spark_filter

        def open_rows(say: Progress) -> tuple[StateTarget, list[str], Iterator[Row]]:
            from statekit.jobs.state_reader import (
                flatten,
                read_state,
                reader_confs,
                resolve_target,
                rows_containing,
                session_confs,
            )

            target = resolve_target(snapshot.ckpt, operator=operator)
            spark = self.session.get(say)
            say(f"planning the read of {target.label}"
                + (f" (rows containing {wanted!r})" if wanted else "") + "…")
            self.confs = reader_confs(snapshot.ckpt)
            with session_confs(spark, self.confs):
                frame = flatten(read_state(spark, target))
                if wanted:
                    frame = rows_containing(frame, wanted)
                return target, list(frame.columns), frame.toLocalIterator()

        self.ask("state", open_rows, lambda opened: self._opened(*opened),
                 describe=f"operator {operator}")

    def _opened(self, target: StateTarget, columns: list[str], rows_iter: Iterator[Row]
                ) -> None:
        self.operator = target.operator_id
        shown = (f"rows containing {self.spark_filter!r} (Esc: all rows)" if self.spark_filter
                 else "/: rows containing a text, searched by Spark")
        self.title_line.update(f"{target.label} — n/p: pages · o: next operator · {shown}")
        self.columns, self.rows_iter = columns, rows_iter
        self.pages, self.page, self.exhausted = [], 0, False
        self._fetch()

    def _fetch(self) -> None:
        spark, rows_iter, confs = self.session.spark, self.rows_iter, self.confs
        if spark is None or rows_iter is None:
            return

        def page(say: Progress) -> list[tuple]:
            from itertools import islice

            from statekit.jobs.state_reader import session_confs

            say("reading rows…")
            with session_confs(spark, confs):
                return [tuple(map(cell_text, r)) for r in islice(rows_iter, self.PAGE)]

        self.ask("state-page", page, self._fetched, describe=f"page {len(self.pages) + 1}")

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


def cell_text(value: object) -> str:
    """A state value as ``statekit state show`` prints it (``{user_id: u1, …}``, ``null``,
    ISO times), not as PySpark's ``Row(user_id='u1', …)``: Spark's rows become the plain
    dicts and lists the CLI reads through Arrow."""
    return render_value(_plain(value), max_len=None)


def _plain(value: object) -> object:
    """``value`` with every PySpark ``Row`` in it, at any depth (in lists, in map values),
    turned into a dict."""
    as_dict = getattr(value, "asDict", None)
    if callable(as_dict):
        value = as_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
