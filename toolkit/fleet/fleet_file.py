"""``--checkpoints-from FILE``: a fleet as a text file, one checkpoint per line.

A fleet spans buckets, accounts and endpoints, so a line may carry the storage options of
its own checkpoint after the URL, as ``KEY=VALUE`` words (the same options as
``--storage-option``, which they override for that line), and a note after a ``#``::

    # payments
    s3://prod-payments/checkpoints/fraud   profile=prod      # the big one
    s3://lab/ck  endpoint_url=http://minio.lab:9000 key=lab secret=lab-secret
    /data/checkpoints/sessions

A ``#`` starts a comment at the start of a line or after whitespace; inside a word it is
part of it (an object key may hold one). The URL is everything before the first trailing
``KEY=VALUE`` word, so a local path with spaces stays whole; a value that parses as JSON is
taken as JSON (``anon=true``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_OPTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*=")
_COMMENT = re.compile(r"(^|\s)#")
_LAST_WORD = re.compile(r"\s+(\S+)$")


@dataclass(frozen=True)
class FleetEntry:
    """One checkpoint of the file: its URL and the storage options its line gave."""

    url: str
    options: dict[str, Any] = field(default_factory=dict)


def strip_comment(line: str) -> str:
    """``line`` without its ``# comment`` (a ``#`` inside a word stays), stripped."""
    found = _COMMENT.search(line)
    return (line[:found.start()] if found else line).strip()


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_line(line: str) -> FleetEntry | None:
    """The entry of one line, ``None`` for a blank or comment-only line."""
    rest = strip_comment(line)
    if not rest:
        return None
    options: list[tuple[str, Any]] = []
    while (last := _LAST_WORD.search(rest)) is not None and _OPTION.match(last.group(1)):
        key, _, value = last.group(1).partition("=")
        options.append((key, _value(value)))
        rest = rest[:last.start()]
    return FleetEntry(rest, dict(reversed(options)))  # a repeated key: the last one wins


def parse_fleet_file(text: str) -> list[FleetEntry]:
    """Every entry of a fleet file, in order (a URL listed twice: its first line)."""
    entries: dict[str, FleetEntry] = {}
    for line in text.splitlines():
        entry = parse_line(line)
        if entry is not None and entry.url not in entries:
            entries[entry.url] = entry
    return list(entries.values())


def options_for(entries: list[FleetEntry], common: Mapping[str, Any]
                ) -> dict[str, dict[str, Any]]:
    """Each URL's storage options: the common ones (``--storage-option``) with its line's
    on top; a URL listed twice keeps its first line."""
    found: dict[str, dict[str, Any]] = {}
    for entry in entries:
        found.setdefault(entry.url, {**common, **entry.options})
    return found
