"""``y`` / ``n``: the confirmation every action that writes asks for."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    """y / n for an action that writes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "Yes"),
                                         Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(self.question)
            yield Static("y: yes · n / Esc: no", classes="status")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
