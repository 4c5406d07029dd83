"""``?``: every key of the app on one screen (Esc or ``q`` closes it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

if TYPE_CHECKING:
    from statekit.tui.pane import Pane

#: Keys handled by widgets rather than app bindings (tables, the filter box).
WIDGET_KEYS = (
    ("↑ ↓ ← → / h j k l", "move in a table"),
    ("Enter", "drill down: store → partitions → files → decoded records; "
              "Repartition, Fix: plan (dry run)"),
    ("Esc", "leave a form field, clear the filter, back one level; at the top of a "
            "checkpoint opened from the fleet list: the list again"),
    ("ctrl+p", "command palette: every screen and action"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, bindings: Sequence[BindingType],
                 tabs: Sequence[tuple[str, str, type[Pane]]]) -> None:
        super().__init__()
        self.bindings_shown = bindings
        self.tabs = tabs

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static("statekit — keys", classes="title")
            table: DataTable[str] = DataTable(cursor_type="none", id="help-keys")
            table.add_columns("key", "does")
            for binding in self.bindings_shown:
                if not isinstance(binding, Binding):
                    continue  # the app declares Binding objects only
                if binding.action.startswith("show_tab") or binding.action == "back":
                    continue  # tabs are listed by number below, Esc with the table keys
                table.add_row(binding.key_display or binding.key, binding.description)
            for n, (_, title, _) in enumerate(self.tabs, 1):
                table.add_row(str(n), f"show {title}")
            for key, what in WIDGET_KEYS:
                table.add_row(key, what)
            for _, title, pane in self.tabs:
                for binding in vars(pane).get("BINDINGS", ()):
                    table.add_row(binding.key_display or binding.key,
                                  f"{binding.description} ({title} screen)")
            table.add_row("y / n", "answer a confirmation (Repartition, Fix: execute)")
            yield table
