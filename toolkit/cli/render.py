"""The CLI's console and its one-line progress status (formatting: :mod:`statekit.presentation`).

rich is imported when a console is first asked for: a ``--json`` run never needs it (33 ms of
a fresh process's start).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def console() -> Console:
    """A console for stdout; wide enough for tables when piped into a file or pager."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False,
                   width=None if sys.stdout.isatty() else 160)


@contextmanager
def status(enabled: bool, first: str) -> Iterator[Callable[[str], None]]:
    """A one-line progress message on stderr, updated through the yielded function; never
    mixed into ``--json`` output (pass ``enabled=False`` there)."""
    if not enabled:
        yield lambda _message: None
        return
    from rich.console import Console
    from rich.markup import escape

    with Console(stderr=True).status(escape(first)) as line:
        yield lambda message: line.update(escape(message))
