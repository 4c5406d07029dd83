"""Small formatting helpers shared by the table renderers (sizes, times, durations)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from rich.console import Console


def console() -> Console:
    """A console for stdout; wide enough for tables when piped into a file or pager."""
    return Console(highlight=False, soft_wrap=False,
                   width=None if sys.stdout.isatty() else 160)


def human_bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def iso_ms(epoch_ms: int | None) -> str:
    """Epoch milliseconds as UTC ISO-8601 (``-`` for missing, ``0`` watermark included)."""
    if epoch_ms is None:
        return "-"
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def dash(value: object) -> str:
    return "-" if value is None else str(value)
