"""The checkpoint's small files read the way Spark reads them on restart — not the way
statekit's own parsers (:mod:`statekit.checkpoint.logs`) read them.

statekit's parsers are strict on purpose: a report should name anything odd. Predicting a
restart needs the opposite — Spark's own leniency and its own failures, byte for byte:

* text is decoded as Java's ``InputStreamReader`` does: invalid UTF-8 becomes U+FFFD, it
  does not fail;
* lines split on ``\\n``, ``\\r\\n`` and ``\\r`` (``BufferedReader.readLine``);
* JSON is parsed as Jackson (through json4s) parses it: the first value is read and what
  follows it ignored, ``NaN``/``Infinity`` are errors, nesting deeper than 1000 is an error;
* the ``vN`` line follows ``MetadataVersionUtil.validateVersion``: ``v`` then Java's
  ``Integer.parseInt`` of the rest, greater than 0, at most the supported version;
* a commit entry without its JSON line is valid (Spark takes ``{}``); an offsets entry
  needs a metadata line, and its source lines are parsed only when a source reads them.

Each reader returns the parsed value or raises :class:`SparkReadError` with the message
Spark's own failure carries (or its meaning, where Spark's is a bare exception).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

OFFSET_LOG_VERSION = 1
"""The offsets log version pyspark 4.3 writes and reads (``v1``)."""
COMMIT_LOG_VERSION = 2
"""Commit entries: ``v1``, or ``v2`` (checkpoint format version 2)."""
SOURCE_LOG_VERSION = 1
MAX_JSON_DEPTH = 1000
"""Jackson's default ``maxNestingDepth`` (StreamReadConstraints)."""


class SparkReadError(Exception):
    """What Spark fails with reading a file; ``str()`` is its message (or its meaning)."""


def java_text(data: bytes) -> str:
    """Bytes decoded as Java's UTF-8 reader decodes them: malformed input replaced."""
    return data.decode("utf-8", "replace")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def java_lines(text: str) -> list[str]:
    """``BufferedReader.readLine`` over ``text``: no empty last line for a final break."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Non-standard token '{name}'")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_WHITESPACE = " \t\n\r"


def jackson_value(text: str) -> Any:
    """The first JSON value of ``text`` as Jackson reads it (trailing content ignored).

    Raises
    ------
    SparkReadError
        No content, invalid JSON, a non-standard token, or nesting deeper than Jackson's
        limit.
    """
    stripped = text.lstrip(_WHITESPACE)
    if not stripped:
        raise SparkReadError("No content to map due to end-of-input")
    if _depth(stripped) > MAX_JSON_DEPTH:
        raise SparkReadError(f"Document nesting depth exceeds the maximum allowed "
                             f"({MAX_JSON_DEPTH})")
    try:
        value, _end = _DECODER.raw_decode(stripped)
    except RecursionError:
        raise SparkReadError("Document nesting depth exceeds the maximum allowed") from None
    except ValueError as bad:
        raise SparkReadError(f"invalid JSON ({bad})") from None
    return value


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings, counted cheaply (the decoder
    would recurse past Python's limit first)."""
    if len(text) < 2 * MAX_JSON_DEPTH:
        return 0
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _java_int(text: str) -> int | None:
    """Java's ``Integer.parseInt``: optional sign, ASCII digits, 32-bit range."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(1 << 31) <= value < (1 << 31) else None


def log_version(line: str, supported: int) -> int:
    """``MetadataVersionUtil.validateVersion``."""
    if line.startswith("v"):
        version = _java_int(line[1:])
        if version is None:
            raise SparkReadError(f"Log file was malformed: failed to read correct log version "
                                 f"from {line[:40]!r}")
        if version > 0:
            if version > supported:
                raise SparkReadError(f"[INVALID_LOG_VERSION.MAX_SUPPORTED_VERSION] the log "
                                     f"is v{version}, this Spark reads up to v{supported}")
            return version
    raise SparkReadError(f"Log file was malformed: failed to read correct log version from "
                         f"{line[:40]!r}")


# ------------------------------------------------------------------------------ the files
_UUID = re.compile(r"[0-9a-fA-F]{1,8}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,4}-"
                   r"[0-9a-fA-F]{1,12}")


def query_id(data: bytes) -> str:
    """The ``metadata`` file: ``StreamMetadata`` read with json4s; the id is then parsed
    with Java's ``UUID.fromString``."""
    value = jackson_value(java_text(data))
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise SparkReadError("No usable value for id")
    text = str(value["id"])
    if len(text) > 36 or not _UUID.fullmatch(text):
        raise SparkReadError(f"Invalid UUID string: {text[:40]}")
    return text


@dataclass(frozen=True)
class SparkOffsets:
    """An offsets entry as Spark reads it."""

    metadata: dict[str, Any] | None
    """The batch metadata (watermark, timestamp, conf); ``None`` for an empty line."""
    sources: tuple[str | None, ...]
    """One raw offset per source (``None``: ``-``), parsed later by each source."""

    @property
    def conf(self) -> dict[str, str]:
        raw = (self.metadata or {}).get("conf") or {}
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def offsets_entry(data: bytes) -> SparkOffsets:
    """``OffsetSeqLog.deserialize``: a version line, a metadata line, a line per source."""
    lines = java_lines(java_text(data))
    if not lines:
        raise SparkReadError("Incomplete log file")
    log_version(lines[0], OFFSET_LOG_VERSION)
    if len(lines) < 2:
        raise SparkReadError("next on empty iterator (no batch metadata line)")
    raw = lines[1].strip()
    metadata = None
    if raw:
        value = jackson_value(raw)
        if not isinstance(value, dict):
            raise SparkReadError("the batch metadata is not a JSON object")
        for key in ("batchWatermarkMs", "batchTimestampMs"):
            if key in value and not isinstance(value[key], int):
                raise SparkReadError(f"{key} is not a number")
        if "conf" in value and not isinstance(value["conf"], dict):
            raise SparkReadError("conf is not a JSON object")
        metadata = value
    return SparkOffsets(metadata, tuple(None if line == "-" else line for line in lines[2:]))


def commit_entry(data: bytes) -> dict[str, Any]:
    """``CommitLog.deserialize``: a (trimmed) version line, then JSON (``{}`` if absent)."""
    lines = java_lines(java_text(data))
    if not lines:
        raise SparkReadError("Incomplete log file in the offset commit log")
    log_version(lines[0].strip(), COMMIT_LOG_VERSION)
    if len(lines) < 2:
        return {}
    value = jackson_value(lines[1])
    if not isinstance(value, dict):
        raise SparkReadError("the commit metadata is not a JSON object")
    return value


@dataclass(frozen=True)
class SourceFileEntry:
    path: str
    timestamp: int
    batch_id: int


def _file_log_lines(data: bytes) -> list[str]:
    """The lines after the version line of a ``CompactibleFileStreamLog`` entry (a file
    source's or a file sink's: both are version 1)."""
    lines = java_lines(java_text(data))
    if not lines:
        raise SparkReadError("Incomplete log file")
    log_version(lines[0], SOURCE_LOG_VERSION)
    return lines[1:]


def source_log_entry(data: bytes) -> list[SourceFileEntry]:
    """A file source log entry or compact file (``FileStreamSourceLog``): a version line,
    then one ``FileEntry`` JSON per line."""
    entries = []
    for line in _file_log_lines(data):
        value = jackson_value(line)
        if not isinstance(value, dict) or not isinstance(value.get("path"), str):
            raise SparkReadError("a file entry without a path")
        stamp, batch = value.get("timestamp"), value.get("batchId")
        if not isinstance(stamp, int) or not isinstance(batch, int):
            raise SparkReadError("a file entry without a numeric timestamp or batchId")
        entries.append(SourceFileEntry(value["path"], stamp, batch))
    return entries


SINK_FIELDS = {"path": str, "size": int, "isDir": bool, "modificationTime": int,
               "blockReplication": int, "blockSize": int, "action": str}
"""``SinkFileStatus``: what json4s needs of each line of a file sink's log."""


def sink_log_entry(data: bytes) -> list[str]:
    """A file sink's log entry or compact file (``FileStreamSinkLog``): a version line, then
    one ``SinkFileStatus`` JSON per line; the paths it adds."""
    paths = []
    for line in _file_log_lines(data):
        if not line.strip():
            continue
        value = jackson_value(line)
        if not isinstance(value, dict):
            raise SparkReadError("a sink file status that is not a JSON object")
        for name, kind in SINK_FIELDS.items():
            if not isinstance(value.get(name), kind) or (kind is int and isinstance(
                    value.get(name), bool)):
                raise SparkReadError(f"No usable value for {name}")
        if value["action"] == "add":
            paths.append(str(value["path"]))
    return paths


def file_source_offset(raw: str) -> int:
    """``FileStreamSourceOffset``: ``{"logOffset": N}`` (or, from old Spark, a bare
    number)."""
    value = jackson_value(raw)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, dict) and isinstance(value.get("logOffset"), int):
        return int(value["logOffset"])
    raise SparkReadError(f"not a file source offset: {raw[:60]!r}")
