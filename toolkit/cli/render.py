"""The CLI's console and its one-line progress status (formatting:
:mod:`statekit.support.presentation`).

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


def command_line(*, without: tuple[str, ...] = ()) -> str | None:
    """The command being run, as typed (``statekit …``), minus the flags in ``without``;
    ``None`` outside the ``statekit`` group (a command invoked on its own)."""
    import shlex

    import click

    from statekit.cli.lazy import ARGV_KEY

    context = click.get_current_context(silent=True)
    argv = context.meta.get(ARGV_KEY) if context is not None else None
    if argv is None:
        return None
    return shlex.join(["statekit", *(a for a in argv if a not in without)])


def print_next(command: str | None, why: str = "") -> None:
    """One line saying what to run next (a verdict that calls for action, a dry run)."""
    if command:
        from rich.markup import escape

        console().print(f"[bold]next:[/] {escape(command)}" + (f"  [dim]# {escape(why)}[/]"
                                                                  if why else ""),
                        soft_wrap=True)  # one line to copy, whatever its length
