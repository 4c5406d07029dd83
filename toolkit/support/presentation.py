"""Numbers, times and series as a person reads them, the same in every front end.

The CLI's tables, the TUI's panes and the reports' notes all show sizes (``1.5 MiB``),
durations (``2.3 s``), instants (``2026-01-05T13:44:58.064Z``) and short trends (``▁▂▅█``).
They live here, below both front ends, so a number never reads one way in the terminal and
another in the TUI, and neither front end has to import the other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone

SPARK_BARS = "▁▂▃▄▅▆▇█"


def human_bytes(size: float | None) -> str:
    """``1536`` → ``1.5 KiB`` (binary units; ``-`` for unknown)."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns


def human_duration(seconds: float | None) -> str:
    """``0.25`` → ``250 ms``, ``90`` → ``90.0 s``, ``7200`` → ``2.0 h`` (``-`` for unknown)."""
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


def iso_ms(epoch_ms: int | None) -> str:
    """Epoch milliseconds as UTC ISO-8601 (``-`` for missing, ``0`` watermark included)."""
    if epoch_ms is None:
        return "-"
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def dash(value: object) -> str:
    """``str(value)``, or ``-`` for None."""
    return "-" if value is None else str(value)


def sparkline(values: Sequence[float], width: int = 48) -> str:
    """The newest ``width`` values as a row of block characters scaled from min to max."""
    shown = list(values)[-width:] if width > 0 else []
    if not shown:
        return ""
    low, high = min(shown), max(shown)
    span = (high - low) or 1
    return "".join(SPARK_BARS[min(7, int((v - low) / span * 7.999))] for v in shown)


def resampled(values: Sequence[float], width: int) -> list[float]:
    """The whole series in at most ``width`` evenly spaced points, its first and its last
    value included (so that a label ``first→last`` describes both ends of the line)."""
    values = list(values)
    if width <= 0:
        return []
    if len(values) <= width:
        return values
    if width == 1:
        return [values[-1]]
    last = len(values) - 1
    return [values[round(i * last / (width - 1))] for i in range(width)]


def history_sparkline(values: Sequence[float], width: int) -> str:
    """The whole history (not its newest ``width`` values) as a sparkline: so that a label
    saying where it started and ended describes the line drawn beside it."""
    return sparkline(resampled(values, width), width)


def distinct_names(paths: Sequence[str], width: int) -> dict[str, str]:
    """Short names that still tell ``paths`` apart, each at most ``width`` characters: the
    folders they all share in front dropped, and a last folder several of them end in (such
    as ``checkpoint``) where the names stay distinct without it; then a name still too long
    is cut from the left — its end is the part that differs."""
    parts = [p.rstrip("/").split("/") for p in paths]
    if len(parts) > 1:
        front = 0
        while all(len(p) > front + 1 for p in parts) and len({p[front] for p in parts}) == 1:
            front += 1
        parts = [p[front:] for p in parts]
        shared = Counter(p[-1] for p in parts)
        droppable = {last for last, count in shared.items() if count > 1 and
                     all(len(p) > 1 for p in parts if p[-1] == last)}
        shorter = [p[:-1] if p[-1] in droppable else p for p in parts]
        if len({tuple(p) for p in shorter}) == len({tuple(p) for p in parts}):
            parts = shorter
    names = {}
    for path, kept in zip(paths, parts, strict=True):
        name = "/".join(kept) or path
        names[path] = name if len(name) <= width else "…" + name[-(width - 1):]
    return names


def printable(text: str) -> str:
    """``text`` as UTF-8 can carry it: a path that is not valid UTF-8 (its bytes reached
    Python as surrogate escapes) shows those bytes as ``\\xNN`` — in a terminal, in JSON and
    in a Prometheus label alike."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
