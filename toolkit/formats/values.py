"""Decoded state values as a person sees them, and the marker for values left undecoded.

The decoders in :mod:`statekit.formats.unsafe_row` return plain Python values; the CLI, the TUI
and reports all need to show them the same compact way (``null``, ISO times with ``Z``, hex for
bytes), and to show, never drop, a value statekit could not turn into a Python object.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RawValue:
    """A value statekit does not turn into a Python object; shown, never silently dropped."""

    type_name: str
    raw: Any
    """The slot (an int) or the variable-length bytes."""
    reason: str = "not decoded"

    def __str__(self) -> str:
        shown = hex_preview(self.raw) if isinstance(self.raw, bytes) else repr(self.raw)
        return f"<{self.type_name}: {shown} ({self.reason})>"


def render_value(v: Any, *, max_len: int | None = 200) -> str:
    """Render a decoded value for a person: ``null``, ISO times, ``{a: 1, b: x}``, hex bytes."""
    return shorten(_render(v, top=True), max_len)


def shorten(text: str, max_len: int | None) -> str:
    """``text`` cut to ``max_len`` characters, the last one an ellipsis (None: whole)."""
    if max_len is not None and len(text) > max_len:
        return text[: max_len - 1] + "…"
    return text


def _render(v: Any, *, top: bool = False) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v if top else repr(v)
    if isinstance(v, bytes):
        return "0x" + v.hex() if len(v) <= 32 else f"0x{v[:32].hex()}… ({len(v)} bytes)"
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return v.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
        return v.isoformat()
    if isinstance(v, (dt.date, decimal.Decimal, RawValue)):
        return str(v)
    if isinstance(v, dt.timedelta):
        return f"{v.total_seconds():g}s"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)}: {_render(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_render(x) for x in v) + "]"
    return repr(v)


def _key(k: Any) -> str:
    return k if isinstance(k, str) else _render(k)


def hex_preview(data: bytes, limit: int = 64) -> str:
    """Hex of the first ``limit`` bytes in 8-byte groups, noting how many bytes were left out."""
    shown = bytes(data[:limit])
    groups = " ".join(shown[i : i + 8].hex() for i in range(0, len(shown), 8))
    more = len(data) - len(shown)
    return f"{groups} … (+{more} bytes)" if more > 0 else groups
