"""Option values that need more than click's built-in types: durations, sizes, key counts.

Each is a click ``ParamType``, so a value that cannot be used is a usage error (exit 2)
reported before the command does any work — not a failure after a listing, a calibration or
a JVM start. The parsers stay plain functions for the tests and for callers outside click.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from statekit.support.errors import BadInput

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|sec|m|min|h)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0,
                   "h": 3600.0}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(i?)b?\s*$", re.IGNORECASE)


def parse_duration(text: str, option: str = "--rto") -> float:
    """``30s``, ``2m``, ``500ms``, ``1h`` or plain seconds → seconds."""
    match = _DURATION.match(text)
    if not match:
        raise BadInput(f"{option}: cannot read {text!r} as a duration (e.g. 30s, 2m)")
    number, unit = match.groups()
    return float(number) * _DURATION_UNITS[unit.lower() if unit else None]


def parse_size(text: str, option: str = "--max-bytes") -> float:
    """``10GiB``, ``500MB``, ``2e9`` or ``123`` → bytes (a positive, finite number)."""
    try:
        value = float(text)
    except ValueError:
        match = _SIZE.match(text)
        if not match:
            raise BadInput(f"{option}: cannot read {text!r} as a size (e.g. 10GiB, 500MB)"
                           ) from None
        number, prefix, binary = match.groups()
        power = "kmgtp".find(prefix.lower()) + 1 if prefix else 0
        value = float(number) * (1024 if binary else 1000) ** power
    if not math.isfinite(value) or value <= 0:
        raise BadInput(f"{option}: {text!r} is not a positive size")
    return value


_JVM_SIZE = re.compile(r"^\s*([0-9]+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)


def parse_jvm_size(text: str, option: str = "--executor-memory") -> float:
    """A JVM memory size as Spark reads ``spark.executor.memory``: ``4g`` = 4 GiB, ``512m``,
    ``1t``; a plain number is MiB, as Spark takes it."""
    match = _JVM_SIZE.match(text)
    if not match:
        raise BadInput(f"{option}: cannot read {text!r} as a JVM memory size (e.g. 4g, 512m)")
    number, unit = match.groups()
    power = "kmgt".find(unit.lower()) + 1 if unit else 2
    value = float(number) * float(1024 ** power)
    if value <= 0:
        raise BadInput(f"{option}: {text!r} is not a positive size")
    return value


def parse_count(text: str, option: str = "--max-keys") -> float:
    """A positive, finite number such as ``5e6`` (``nan``, ``inf`` and ``-1`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"{option}: cannot read {text!r} as a number (e.g. 5e6)") from None
    if not math.isfinite(value) or value <= 0:
        raise BadInput(f"{option}: {text!r} is not a positive number")
    return value


if TYPE_CHECKING:
    _FloatParamType = click.ParamType[float]
else:  # older clicks (8.1, 8.2) have a ParamType that cannot be subscripted at run time
    _FloatParamType = click.ParamType


class _Parsed(_FloatParamType):
    """A click type around one of the parsers above."""

    def __init__(self, name: str, parse: Callable[[str, str], float]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        option = param.opts[0] if param is not None and param.opts else self.name
        try:
            return self._parse(str(value), option)
        except BadInput as bad:
            self.fail(bad.message.removeprefix(f"{option}: "), param, ctx)


DURATION = _Parsed("duration", parse_duration)
"""Seconds from ``30s``, ``2m``, ``500ms``, ``1h`` or a plain number."""
SIZE = _Parsed("size", parse_size)
"""Bytes from ``10GiB``, ``500MB`` or a plain number."""
JVM_SIZE = _Parsed("size", parse_jvm_size)
"""Bytes from a JVM memory size: ``4g`` (GiB), ``512m``, or a plain number of MiB."""
COUNT = _Parsed("number", parse_count)
"""A positive, finite number (key counts)."""
