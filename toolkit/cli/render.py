"""The CLI's console; the formatting helpers live in :mod:`statekit.presentation`."""

from __future__ import annotations

import sys

from rich.console import Console


def console() -> Console:
    """A console for stdout; wide enough for tables when piped into a file or pager."""
    return Console(highlight=False, soft_wrap=False,
                   width=None if sys.stdout.isatty() else 160)
