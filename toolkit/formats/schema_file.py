"""Read state schema files: the key and value types of a state store, without Spark.

Decoding state rows needs their schema, and Spark writes it beside the state:
``state/<op>/0/[<store>/]_metadata/schema`` (v1/v2, one key and one value schema) or, for
transformWithState, ``state/<op>/_stateSchema/<store>/<batch>_<uuid>`` (v3, one entry per
column family). All are ``DataOutputStream`` writes:

* v1: ``writeUTF("v1")``, ``writeUTF(key JSON)``, ``writeUTF(value JSON)``.
* v2: ``writeUTF("v2")``, then key and value JSON each as ``int numChunks`` +
  ``numChunks × writeUTF(chunk)`` (chunks of at most 65535 characters).
* v3, as pyspark 4.3 writes it (verified on a real file): ``writeUTF("v3")``,
  ``int numColumnFamilies``, then per column family ``writeUTF(name)``,
  ``short keySchemaId`` + chunked key JSON, ``short valueSchemaId`` + chunked value JSON,
  chunked key-encoder-spec JSON, chunked user-key-encoder schema JSON (``"{    }"`` when
  none). Spark 4.0 wrote the same without the two schema ids, and early previews wrote a text
  file (``v3`` line + one JSON object per line); both are read too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from statekit.formats.jsontext import loads_json
from statekit.formats.modified_utf8 import decode_modified_utf8
from statekit.formats.opening import open_binary
from statekit.formats.schema import StructType, parse_struct_json
from statekit.support.errors import CorruptFile, UnsupportedFormat

if TYPE_CHECKING:
    from fsspec.spec import AbstractFileSystem

MAX_SCHEMA_FILE_BYTES = 64 << 20
"""Schema files are small; anything bigger is not one."""


@dataclass(frozen=True)
class ColumnFamilySchema:
    """One column family (state variable) of a v3 schema file."""

    name: str
    key_schema: StructType
    value_schema: StructType
    key_encoder_spec: dict[str, Any]
    """E.g. ``{"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 1}``."""
    user_key_encoder_schema: StructType | None = None
    """Map state: the user key's schema; ``None`` when the file holds the empty ``{    }``."""
    key_schema_id: int | None = None
    value_schema_id: int | None = None


@dataclass(frozen=True)
class StateSchemaFile:
    """A parsed schema file."""

    version: int
    key_schema: StructType | None
    """v1/v2: the key schema. v3: the ``default`` column family's, or ``None``."""
    value_schema: StructType | None
    column_families: tuple[ColumnFamilySchema, ...] = ()
    """v3 only: every column family, in file order."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The JSON strings as read (``{"key": …, "value": …}`` or ``{"column_families": […]}``)."""


class _Bytes:
    """A cursor over the file's bytes; every failure is a ``CorruptFile`` with the offset."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.pos = 0
        self.path = path

    def corrupt(self, message: str, at: int | None = None) -> CorruptFile:
        return CorruptFile(f"schema file: {message}", path=self.path,
                           offset=self.pos if at is None else at)

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.corrupt(f"truncated {what}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int(self, size: int, what: str) -> int:
        return int.from_bytes(self.take(size, what), "big", signed=True)

    def utf(self, what: str) -> str:
        start = self.pos
        n = self.int(2, what) & 0xFFFF
        body = self.take(n, what)
        try:
            return decode_modified_utf8(body)
        except ValueError as exc:
            raise self.corrupt(f"{what} is not modified UTF-8 ({exc})", start) from None

    def chunked(self, what: str) -> str:
        start = self.pos
        count = self.int(4, f"{what} chunk count")
        if count < 0 or count * 2 > len(self.data) - self.pos:
            raise self.corrupt(f"bad {what} chunk count {count}", start)
        return "".join(self.utf(what) for _ in range(count))


def read_schema_file(fs: AbstractFileSystem, path: str) -> StateSchemaFile:
    """Read and parse a state schema file (v1, v2 or v3).

    Raises
    ------
    BadInput
        The file is missing or unreadable.
    CorruptFile
        Truncated, not a schema file, or invalid JSON inside.
    UnsupportedFormat
        A version other than v1-v3.
    """
    with open_binary(fs, path, "schema file") as f:
        data = f.read(MAX_SCHEMA_FILE_BYTES + 1)
    if len(data) > MAX_SCHEMA_FILE_BYTES:
        raise CorruptFile(f"schema file larger than {MAX_SCHEMA_FILE_BYTES} bytes", path=path)
    return parse_schema_bytes(data, path=path)


def parse_schema_bytes(data: bytes, *, path: str) -> StateSchemaFile:
    """Parse the bytes of a schema file (see :func:`read_schema_file`)."""
    if data.startswith(b"v3\n") or data.startswith(b"v3\r\n"):
        return _parse_v3_text(data, path)
    cur = _Bytes(data, path)
    tag = cur.utf("version tag")
    if not tag.startswith("v") or not tag[1:].isascii() or not tag[1:].isdigit():
        raise CorruptFile(f"not a state schema file (version tag {tag[:20]!r})", path=path)
    version = int(tag[1:])
    if version == 1:
        key, value = cur.utf("key schema"), cur.utf("value schema")
    elif version == 2:
        key, value = cur.chunked("key schema"), cur.chunked("value schema")
    elif version == 3:
        return _parse_v3(cur)
    else:
        raise UnsupportedFormat(f"schema file version v{version} is not supported (v1-v3 are)",
                                path=path)
    return StateSchemaFile(version, parse_struct_json(key, path=path),
                           parse_struct_json(value, path=path), (),
                           {"key": key, "value": value})


def _parse_v3(cur: _Bytes) -> StateSchemaFile:
    return _v3_result(_with_or_without_ids(cur, _v3_entries))


_Entries = TypeVar("_Entries")


def _with_or_without_ids(cur: _Bytes, read: Callable[..., _Entries]) -> _Entries:
    """The column family entries read with schema ids (Spark 4.0+) and, when that does not
    fit the file exactly, without (the error of the first reading if neither fits)."""
    start = cur.pos
    try:
        entries = read(cur, with_ids=True)
        if cur.pos != len(cur.data):
            raise cur.corrupt("unexpected data after the last column family")
    except CorruptFile as first:
        cur.pos = start
        try:
            entries = read(cur, with_ids=False)
        except CorruptFile:
            raise first from None
    return entries


def v3_raw_entries(data: bytes, *, path: str) -> list[dict[str, Any]]:
    """The column families of a binary v3 schema file as their raw strings (the framing
    checked, nothing inside parsed): for a reader that judges the JSON its own way."""
    cur = _Bytes(data, path)
    tag = cur.utf("version tag")
    if tag != "v3":
        raise CorruptFile(f"not a v3 state schema file (version tag {tag[:20]!r})", path=path)
    return _with_or_without_ids(cur, _v3_framing)


def _v3_framing(cur: _Bytes, *, with_ids: bool) -> list[dict[str, Any]]:
    at = cur.pos
    count = cur.int(4, "column family count")
    if count < 0 or count > len(cur.data):
        raise cur.corrupt(f"bad column family count {count}", at)
    out = []
    for _ in range(count):
        name = cur.utf("column family name")
        key_id = cur.int(2, "key schema id") if with_ids else None
        key = cur.chunked("key schema")
        value_id = cur.int(2, "value schema id") if with_ids else None
        value = cur.chunked("value schema")
        spec = cur.chunked("key encoder spec")
        user_key = cur.chunked("user key encoder schema")
        out.append({"name": name, "keySchemaId": key_id, "keySchema": key,
                    "valueSchemaId": value_id, "valueSchema": value,
                    "keyStateEncoderSpec": spec, "userKeyEncoderSchema": user_key})
    return out


def _v3_entries(cur: _Bytes, *, with_ids: bool
                ) -> list[tuple[ColumnFamilySchema, dict[str, Any]]]:
    return [(_family(raw, cur.path), raw) for raw in _v3_framing(cur, with_ids=with_ids)]


def _family(raw: dict[str, Any], path: str) -> ColumnFamilySchema:
    def obj(text: Any, what: str) -> Any:
        if not isinstance(text, str):
            return text
        try:
            return loads_json(text)
        except ValueError as exc:
            raise CorruptFile(f"schema file: {what} is not JSON ({exc})", path=path) from None

    spec = obj(raw.get("keyStateEncoderSpec") or {}, "key encoder spec")
    if not isinstance(spec, dict):
        raise CorruptFile("schema file: key encoder spec is not a JSON object", path=path)
    user = obj(raw.get("userKeyEncoderSchema") or {}, "user key encoder schema")
    user_schema = None
    if isinstance(user, dict) and user.get("type") == "struct":
        user_schema = parse_struct_json(json.dumps(user), path=path)
    key, value = raw.get("keySchema"), raw.get("valueSchema")
    if not isinstance(raw.get("name"), str) or key is None or value is None:
        raise CorruptFile("schema file: column family without name/keySchema/valueSchema",
                          path=path)
    return ColumnFamilySchema(
        raw["name"],
        parse_struct_json(key if isinstance(key, str) else json.dumps(key), path=path),
        parse_struct_json(value if isinstance(value, str) else json.dumps(value), path=path),
        spec, user_schema, raw.get("keySchemaId"), raw.get("valueSchemaId"),
    )


def _parse_v3_text(data: bytes, path: str) -> StateSchemaFile:
    try:
        lines = data.decode("utf-8").splitlines()[1:]
    except UnicodeDecodeError:
        raise CorruptFile("schema file v3: not UTF-8 text", path=path) from None
    families = []
    for line in filter(str.strip, lines):
        try:
            obj = loads_json(line)
        except ValueError as exc:
            raise CorruptFile(f"schema file v3: a line is not JSON ({exc})", path=path) from None
        if not isinstance(obj, dict):
            raise CorruptFile("schema file v3: a line is not a JSON object", path=path)
        raw = {"name": obj.get("columnFamilyName"), "keySchema": obj.get("keySchema"),
               "valueSchema": obj.get("valueSchema"),
               "keyStateEncoderSpec": obj.get("keyStateEncoderSpec"),
               "userKeyEncoderSchema": obj.get("userKeyEncoderSchema")}
        families.append((_family(raw, path), obj))
    return _v3_result(families)


def _v3_result(families: list[tuple[ColumnFamilySchema, dict[str, Any]]]) -> StateSchemaFile:
    default = next((cf for cf, _ in families if cf.name == "default"), None)
    return StateSchemaFile(
        3,
        default.key_schema if default else None,
        default.value_schema if default else None,
        tuple(cf for cf, _ in families),
        {"column_families": [raw for _, raw in families]},
    )
