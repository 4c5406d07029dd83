"""Parsers for the checkpoint's metadata logs: ``metadata``, ``offsets/<N>``, ``commits/<N>``.

These small text files are the query's ledger: ``offsets/N`` says batch N was *planned* (with
its watermark, timestamp, source offsets and the SQL confs Spark pins for the life of the
query), ``commits/N`` says it *finished*. Everything statekit says about batches, partition
counts, providers and codecs starts here, so the parsers are strict about structure (a broken
file is reported with its name, never half-read) and lenient about content (unknown fields
from newer Spark versions are kept in ``raw``, as pyspark's ``StreamingQueryProgress`` does).

Formats, as pyspark 4.3 writes them: offsets v1 = ``v1`` / metadata JSON / one line per
source (``-`` for none); offsets v2 ("OffsetMap") = ``v2`` / metadata JSON /
``sourceId:offset`` lines; commits v1 = ``v1`` / ``{"nextBatchWatermarkMs":…}``; commits v2
add ``stateUniqueIds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from statekit.checkpoint.textfile import json_object, log_version, text_lines
from statekit.formats.jsontext import loads_json
from statekit.support.errors import CorruptFile

VOID_OFFSET = "-"

CONF_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
CONF_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CONF_CODEC = "spark.sql.streaming.stateStore.compression.codec"
CONF_MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def provider_short_name(provider_class: str | None) -> str:
    """``hdfs`` / ``rocksdb`` for Spark's two built-in providers, else the class name.

    Spark does not pin the provider when the session left it at its default, so ``None``
    means the HDFS-backed provider.
    """
    if not provider_class or provider_class.endswith("HDFSBackedStateStoreProvider"):
        return "hdfs"
    if provider_class.endswith("RocksDBStateStoreProvider"):
        return "rocksdb"
    return provider_class


def _optional_int(raw: Mapping[str, Any], key: str, path: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptFile(f"{key} is {value!r}, expected an integer", path=path)
    return value


def _freeze(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class SourceOffset:
    """One source's end offset for a batch: its id (position or name) and raw JSON."""

    source: str
    offset: str | None


@dataclass(frozen=True)
class OffsetEntry:
    """``offsets/<batch_id>``: what batch ``batch_id`` was planned to read, under which confs."""

    batch_id: int
    version: int
    watermark_ms: int | None
    timestamp_ms: int | None
    conf: Mapping[str, str]
    sources: tuple[SourceOffset, ...]
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def shuffle_partitions(self) -> int | None:
        value = self.conf.get(CONF_SHUFFLE_PARTITIONS)
        return int(value) if value is not None and str(value).isdigit() else None

    @property
    def provider_class(self) -> str:
        return self.conf.get(CONF_PROVIDER) or HDFS_PROVIDER

    @property
    def provider(self) -> str:
        return provider_short_name(self.conf.get(CONF_PROVIDER))

    @property
    def codec(self) -> str:
        """The state store compression codec Spark pinned (``lz4`` when not pinned)."""
        return self.conf.get(CONF_CODEC) or "lz4"

    @property
    def state_format_versions(self) -> dict[str, str]:
        """Every pinned conf naming a state/format version, keyed by its short name."""
        return {key.removeprefix("spark.sql.streaming."): value
                for key, value in sorted(self.conf.items())
                if key.endswith(("stateFormatVersion", "formatVersion", "encodingFormat"))}

    def to_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "version": self.version,
                "watermark_ms": self.watermark_ms, "timestamp_ms": self.timestamp_ms,
                "conf": dict(self.conf),
                "sources": [{"source": s.source, "offset": s.offset} for s in self.sources]}


def parse_offset_entry(batch_id: int, data: bytes, path: str) -> OffsetEntry:
    """Parse ``offsets/<batch_id>`` (v1 or v2)."""
    lines = text_lines(data, path)
    version = log_version(lines[0], path, "offset log", (1, 2))
    # Spark: "Incomplete log file" — every entry has a metadata line and one line per
    # source (a query has at least one source).
    if len(lines) < 2:
        raise CorruptFile("incomplete offsets entry: no batch metadata line (an interrupted "
                          "write?)", path=path)
    raw = json_object(lines[1].strip(), path, 2)
    if len(lines) < 3:
        raise CorruptFile("incomplete offsets entry: no source offsets (an interrupted "
                          "write?)", path=path)
    conf = raw.get("conf") or {}
    if not isinstance(conf, dict):
        raise CorruptFile("'conf' in the batch metadata is not an object", path=path)
    sources: list[SourceOffset] = []
    for position, line in enumerate(lines[2:]):
        if version == 1:
            name, offset = str(position), line
        else:
            name, colon, offset = line.partition(":")
            if not colon:
                raise CorruptFile(f"line {position + 3} is not 'sourceId:offset'", path=path)
        offset = offset.strip()
        if offset != VOID_OFFSET:
            try:  # every source's offset is JSON (Spark's SerializedOffset)
                loads_json(offset)
            except ValueError as bad:
                raise CorruptFile(f"the source offset on line {position + 3} is not JSON "
                                  f"({bad})", path=path) from None
        sources.append(SourceOffset(name, None if offset == VOID_OFFSET else offset))
    return OffsetEntry(
        batch_id=batch_id,
        version=version,
        watermark_ms=_optional_int(raw, "batchWatermarkMs", path),
        timestamp_ms=_optional_int(raw, "batchTimestampMs", path),
        conf=_freeze({str(k): str(v) for k, v in conf.items()}),
        sources=tuple(sources),
        raw=_freeze(raw),
    )


@dataclass(frozen=True)
class CommitEntry:
    """``commits/<batch_id>``: batch ``batch_id`` finished; its successor's watermark."""

    batch_id: int
    version: int
    next_watermark_ms: int | None
    state_unique_ids: Mapping[str, Any] | None
    raw: Mapping[str, Any] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "version": self.version,
                "next_watermark_ms": self.next_watermark_ms,
                "state_unique_ids": (dict(self.state_unique_ids)
                                     if self.state_unique_ids is not None else None)}


def parse_commit_entry(batch_id: int, data: bytes, path: str) -> CommitEntry:
    """Parse ``commits/<batch_id>`` (v1, or v2 with checkpoint format version 2)."""
    lines = text_lines(data, path)
    version = log_version(lines[0], path, "commit log", (1, 2))
    if len(lines) < 2 or not lines[1].strip():
        raise CorruptFile("incomplete commit entry: no metadata line after the version "
                          "(an interrupted write?)", path=path)
    raw = json_object(lines[1].strip(), path, 2)
    unique_ids = raw.get("stateUniqueIds")
    if unique_ids is not None and not isinstance(unique_ids, dict):
        raise CorruptFile("'stateUniqueIds' is not an object", path=path)
    return CommitEntry(
        batch_id=batch_id,
        version=version,
        next_watermark_ms=_optional_int(raw, "nextBatchWatermarkMs", path),
        state_unique_ids=_freeze(unique_ids) if unique_ids is not None else None,
        raw=_freeze(raw),
    )


def parse_query_id(data: bytes, path: str) -> str:
    """The query id from the checkpoint's ``metadata`` file (``{"id": "<uuid>"}``)."""
    lines = text_lines(data, path)
    raw = json_object(lines[0], path, 1)
    query_id = raw.get("id")
    if not isinstance(query_id, str) or not query_id:
        raise CorruptFile("no query 'id' in the checkpoint metadata", path=path)
    return query_id


def batch_id_of(name: str) -> int | None:
    """The batch id a log file name stands for; ``None`` for temp, ``.crc`` and other files.

    Spark's file-stream and compacted logs use ``N.compact``; offsets and commits never do,
    but tolerating it costs nothing.
    """
    base = name.rsplit("/", 1)[-1].removesuffix(".compact")
    if not (base.isascii() and base.isdigit()):
        return None
    batch = int(base)
    return batch if batch <= MAX_BATCH_ID else None


MAX_BATCH_ID = 2**63 - 1
"""Spark's batch ids are Java longs: a longer all-digit name is not a batch to Spark."""
