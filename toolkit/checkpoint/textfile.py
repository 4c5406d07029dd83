"""The shared shape of Spark's small metadata files: a ``vN`` line, then JSON.

Offsets, commits, operator metadata and the query ``metadata`` file all follow it. Parsing it
in one place means every one of them reports an empty, non-UTF-8, wrongly versioned or
non-JSON file the same way: a ``CorruptFile`` naming the file and the line.
"""

from __future__ import annotations

import json
from typing import Any

from statekit.formats.jsontext import loads_json
from statekit.support.errors import CorruptFile, UnsupportedFormat


def text_lines(data: bytes, path: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as bad:
        raise CorruptFile(f"not UTF-8 text ({bad.reason})", path=path, offset=bad.start) from bad
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[0].strip():
        raise CorruptFile("empty log file (an interrupted write?)", path=path)
    return lines


def log_version(line: str, path: str, kind: str, supported: tuple[int, ...]) -> int:
    head = line.strip()
    if not (head.startswith("v") and head[1:].isdigit()):
        raise CorruptFile(f"first line is {head[:40]!r}, expected a {kind} version like 'v1'",
                          path=path)
    version = int(head[1:])
    if version not in supported:
        names = " and ".join(f"v{v}" for v in supported)
        raise UnsupportedFormat(f"{kind} version v{version}; statekit reads {names} "
                                "(written by a newer Spark?)", path=path)
    return version


def json_object(text: str, path: str, line_no: int) -> dict[str, Any]:
    try:
        value = loads_json(text)
    except json.JSONDecodeError as bad:
        raise CorruptFile(f"invalid JSON on line {line_no}: {bad.msg} (column {bad.colno})",
                          path=path) from bad
    if not isinstance(value, dict):
        raise CorruptFile(f"line {line_no} is JSON but not an object", path=path)
    return value
