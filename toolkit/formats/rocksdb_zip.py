"""Read the ``metadata`` member of a RocksDB state checkpoint zip (``<v>.zip``).

Every RocksDB state version that is a full checkpoint is a small zip beside shared
``SSTs/*.sst`` files; its ``metadata`` member lists the SSTs the version needs and the number
of keys. That is enough to check that a checkpoint is complete (every referenced SST present,
with the recorded size) and to size state, without RocksDB itself. Only the zip's central
directory and that one member are read (``zipfile`` seeks), never the whole archive.

Member layout (``RocksDBCheckpointMetadata``): a line ``v1``, then one JSON object::

    {"sstFiles": [{"localFileName": "000008.sst",
                   "dfsSstFileName": "000008-<uuid>.sst", "sizeBytes": 1964}, …],
     "numKeys": 96, "numInternalKeys": 0,
     "columnFamilyMapping": {"default": 1, …}, "columnFamilyTypeMap": {…},
     "maxColumnFamilyId": 0}

pyspark 4.3 writes no ``logFiles`` key (older versions did); ``numInternalKeys`` and the column
family fields are newer. Unknown fields are kept in ``raw``.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TypeVar

from statekit.formats.jsontext import loads_json
from statekit.formats.opening import open_binary
from statekit.support.errors import CorruptFile, UnsupportedFormat

if TYPE_CHECKING:
    from fsspec.spec import AbstractFileSystem

_V = TypeVar("_V", int, bool)

METADATA_MEMBER = "metadata"
MAX_METADATA_BYTES = 256 << 20


@dataclass(frozen=True)
class SstFileRef:
    """An SST file a version needs: its name inside RocksDB and under ``SSTs/``."""

    local_name: str
    dfs_name: str
    size_bytes: int


@dataclass(frozen=True)
class LogFileRef:
    """A RocksDB WAL file listed by older checkpoints (``logFiles``), kept under ``logs/``."""

    local_name: str
    dfs_name: str
    size_bytes: int


_Ref = TypeVar("_Ref", SstFileRef, LogFileRef)


@dataclass(frozen=True)
class RocksDBCheckpointMetadata:
    """The parsed ``metadata`` member of a RocksDB checkpoint zip."""

    format_version: str
    """The first line, ``"v1"``."""
    sst_files: tuple[SstFileRef, ...]
    log_files: tuple[LogFileRef, ...]
    num_keys: int | None
    """Keys in the version (all column families together); ``None`` when absent."""
    num_internal_keys: int | None = None
    """Keys in internal column families (transformWithState row counters, timers, …)."""
    column_family_mapping: dict[str, int] = field(default_factory=dict, compare=False)
    """Column family name -> the 2-byte id that prefixes its keys."""
    column_family_internal: dict[str, bool] = field(default_factory=dict, compare=False)
    """Column family name -> True when Spark uses it internally (``columnFamilyTypeMap``)."""
    max_column_family_id: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The whole JSON object, unknown fields included."""


def read_zip_metadata(fs: AbstractFileSystem, path: str) -> RocksDBCheckpointMetadata:
    """Read and parse ``metadata`` from the checkpoint zip at ``path`` on fsspec ``fs``.

    Raises
    ------
    BadInput
        The zip is missing or unreadable.
    CorruptFile
        Not a zip, no ``metadata`` member, or a member that does not parse.
    UnsupportedFormat
        A metadata version other than ``v1``.
    """
    f = open_binary(fs, path, "RocksDB checkpoint zip")
    with f:
        return metadata_from_zip(f, path=path)


def metadata_from_zip(fileobj: IO[bytes], *, path: str) -> RocksDBCheckpointMetadata:
    """Parse ``metadata`` from an open, seekable zip (a file or ``io.BytesIO`` of its bytes).

    Callers that fetched many zips at once (one concurrent ``fs.cat`` on object stores) pass
    ``io.BytesIO(data)``.
    """
    try:
        with zipfile.ZipFile(fileobj) as zf:
            try:
                info = zf.getinfo(METADATA_MEMBER)
            except KeyError:
                raise CorruptFile("zip has no 'metadata' member", path=path) from None
            if info.file_size > MAX_METADATA_BYTES:
                raise CorruptFile(f"zip 'metadata' member claims {info.file_size} bytes",
                                  path=path)
            with zf.open(info) as member:
                data = member.read(MAX_METADATA_BYTES + 1)
    except CorruptFile:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error,
            NotImplementedError, RuntimeError, ValueError, OverflowError) as exc:
        raise CorruptFile(f"not a readable zip ({exc})", path=path) from None
    return parse_metadata_bytes(data, path=path)


def parse_metadata_bytes(data: bytes, *, path: str) -> RocksDBCheckpointMetadata:
    """Parse the bytes of a ``metadata`` member (see :func:`read_zip_metadata`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptFile("zip 'metadata' member is not UTF-8", path=path) from None
    version, _, body = text.partition("\n")
    version = version.strip()
    if not (version.startswith("v") and version[1:].isdigit()):
        raise CorruptFile(f"zip 'metadata' member has no version line ({version[:20]!r})",
                          path=path)
    if version != "v1":
        raise UnsupportedFormat(f"RocksDB checkpoint metadata {version} is not supported "
                                "(v1 is)", path=path)
    try:
        obj = loads_json(body)
    except ValueError as exc:
        raise CorruptFile(f"zip 'metadata' member is not JSON ({exc})", path=path) from None
    if not isinstance(obj, dict):
        raise CorruptFile("zip 'metadata' member is not a JSON object", path=path)
    return RocksDBCheckpointMetadata(
        format_version=version,
        sst_files=tuple(_refs(obj, "sstFiles", "dfsSstFileName", SstFileRef, path)),
        log_files=tuple(_refs(obj, "logFiles", "dfsLogFileName", LogFileRef, path)),
        num_keys=_opt_int(obj, "numKeys", path),
        num_internal_keys=_opt_int(obj, "numInternalKeys", path),
        column_family_mapping=_typed_map(obj, "columnFamilyMapping", int, path),
        column_family_internal=_typed_map(obj, "columnFamilyTypeMap", bool, path),
        max_column_family_id=_opt_int(obj, "maxColumnFamilyId", path),
        raw=obj,
    )


def _opt_int(obj: dict[str, Any], key: str, path: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptFile(f"zip 'metadata': {key} is not an integer", path=path)
    return value


def _typed_map(obj: dict[str, Any], key: str, kind: type[_V], path: str) -> dict[str, _V]:
    value = obj.get(key) or {}
    ok = isinstance(value, dict) and all(
        isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in value.values()
    )
    if not ok:
        raise CorruptFile(f"zip 'metadata': {key} is not a map of {kind.__name__}", path=path)
    return dict(value)


def _refs(obj: dict[str, Any], key: str, dfs_key: str, cls: type[_Ref], path: str
          ) -> list[_Ref]:
    entries = obj.get(key) or []
    if not isinstance(entries, list):
        raise CorruptFile(f"zip 'metadata': {key} is not a list", path=path)
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise CorruptFile(f"zip 'metadata': an entry of {key} is not an object", path=path)
        local, dfs, size = entry.get("localFileName"), entry.get(dfs_key), entry.get("sizeBytes")
        if not (isinstance(local, str) and isinstance(dfs, str) and isinstance(size, int)
                and not isinstance(size, bool) and size >= 0):
            raise CorruptFile(f"zip 'metadata': bad {key} entry {entry!r:.120}", path=path)
        out.append(cls(local, dfs, size))
    return out
