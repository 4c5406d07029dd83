"""The table every screen shows: a DataTable that keeps its rows so ``/`` can filter them,
with vim keys and column widths fitted to the cells."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

MAX_COLUMN_WIDTH = 120


def _cell_width(cell: Any) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


class Table(DataTable):
    """A DataTable that keeps its rows so ``/`` can filter them, with vim keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", show=False), Binding("k", "cursor_up", show=False),
        Binding("h", "cursor_left", show=False), Binding("l", "cursor_right", show=False)]

    def __init__(self, cursor_type: str = "row", **kwargs: Any) -> None:
        super().__init__(cursor_type=cursor_type, zebra_stripes=True,  # type: ignore[arg-type]
                         **kwargs)
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
