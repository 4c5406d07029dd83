"""Test-only writers for the byte formats statekit reads: lz4-java streams, record streams,
UnsafeRows. They follow Spark's writers (not statekit's readers), so a test that builds bytes
here and reads them back checks the reader against an independent model of the format.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import lz4.block
import xxhash

from statekit.formats.modified_utf8 import write_utf
from statekit.formats.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    StructType,
)

SEED = 0x9747B28C
_CTX = decimal.Context(prec=100)


def lz4_block(data: bytes, *, level: int = 5, raw: bool = False, checksum: int | None = None,
              token: int | None = None) -> bytes:
    """One lz4-java block (``LZ4BlockOutputStream``); an empty ``data`` makes the end block."""
    if not data:
        return b"LZ4Block" + bytes([0x10 | level]) + struct.pack("<iii", 0, 0, 0)
    payload = data if raw else lz4.block.compress(data, store_size=False)
    method = 0x10 if raw else 0x20
    check = xxhash.xxh32_intdigest(data, seed=SEED) & 0x0FFFFFFF if checksum is None else checksum
    tok = (method | level) if token is None else token
    header = struct.pack("<iiI", len(payload), len(data), check)
    return b"LZ4Block" + bytes([tok]) + header + payload


def lz4_stream(data: bytes, *, block_size: int = 32 * 1024, end: bool = True) -> bytes:
    """A whole lz4-java stream of ``data`` in blocks of ``block_size``."""
    blocks = [lz4_block(data[i : i + block_size]) for i in range(0, len(data), block_size)]
    return b"".join(blocks) + (lz4_block(b"") if end else b"")


def put(key: bytes, value: bytes) -> bytes:
    return struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value


def delete(key: bytes) -> bytes:
    return struct.pack(">i", len(key)) + key + struct.pack(">i", -1)


END = struct.pack(">i", -1)


def typed(kind: int, key: bytes, value: bytes | None) -> bytes:
    """A changelog v2/v4 record: type byte then key/value (value ``None`` = delete)."""
    tail = struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return bytes([kind]) + struct.pack(">i", len(key)) + key + tail


def changelog_header(version: int, lineage: str | None = None) -> bytes:
    return write_utf(f"v{version}") + (write_utf(lineage) if lineage is not None else b"")


# --- UnsafeRow ---------------------------------------------------------------------------

_FIXED = {
    "boolean": "<?7x", "byte": "<b7x", "short": "<h6x", "integer": "<i4x", "date": "<i4x",
    "float": "<f4x", "long": "<q", "timestamp": "<q", "timestamp_ntz": "<q", "double": "<d",
}
_ELEM = {
    "boolean": "?", "byte": "b", "short": "h", "integer": "i", "date": "i", "float": "f",
    "long": "q", "timestamp": "q", "timestamp_ntz": "q", "double": "d",
}


def _pad8(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 8)


def _fixed_value(t: DataType, v: Any) -> Any:
    if t.name == "date" and isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    if t.name in ("timestamp", "timestamp_ntz") and isinstance(v, dt.datetime):
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc if v.tzinfo else None)
        delta = v - epoch
        return delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds
    if isinstance(t, DecimalType):
        return int(decimal.Decimal(v).scaleb(t.scale, _CTX))
    return v


def _is_fixed(t: DataType) -> bool:
    return t.name in _FIXED or (isinstance(t, DecimalType) and t.precision <= 18)


def _var_bytes(t: DataType, v: Any) -> bytes:
    if isinstance(t, StructType):
        return unsafe_row(t, v)
    if isinstance(t, ArrayType):
        return unsafe_array(t.element_type, v)
    if isinstance(t, MapType):  # a dict, or a list of (key, value) pairs
        pairs = list(v.items()) if isinstance(v, dict) else list(v)
        keys = unsafe_array(t.key_type, [k for k, _ in pairs])
        values = unsafe_array(t.value_type, [x for _, x in pairs])
        return struct.pack("<q", len(keys)) + keys + values
    if isinstance(t, DecimalType):
        unscaled = int(decimal.Decimal(v).scaleb(t.scale, _CTX))
        n = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(n, "big", signed=True)
    if t.name == "string":
        return v.encode("utf-8")
    if t.name == "binary":
        return bytes(v)
    raise TypeError(f"builder cannot encode {t.name}")


def unsafe_row(schema: StructType, values: Any) -> bytes:
    """Encode ``values`` (a dict by field name, or a sequence in field order) as UnsafeRow."""
    if isinstance(values, dict):
        values = [values[f.name] for f in schema.fields]
    n = len(schema.fields)
    nb = ((n + 63) // 64) * 8
    fixed = bytearray(nb + 8 * n)
    var = bytearray()
    for i, (f, v) in enumerate(zip(schema.fields, values, strict=True)):
        if v is None:
            fixed[i // 8] |= 1 << (i % 8)
            continue
        t = f.data_type
        at = nb + 8 * i
        if _is_fixed(t):
            fmt = "<q" if isinstance(t, DecimalType) else _FIXED[t.name]
            struct.pack_into(fmt, fixed, at, _fixed_value(t, v))
        else:
            data = _var_bytes(t, v)
            offset = len(fixed) + len(var)
            struct.pack_into("<Q", fixed, at, (offset << 32) | len(data))
            var += _pad8(data)
    return bytes(fixed + var)


def unsafe_array(element: DataType, values: list) -> bytes:
    """Encode ``values`` as UnsafeArrayData."""
    count = len(values)
    header = 8 + ((count + 63) // 64) * 8
    if _is_fixed(element):
        code = "q" if isinstance(element, DecimalType) else _ELEM[element.name]
        size = struct.calcsize(code)
    else:
        code, size = "Q", 8
    head = bytearray(header)
    struct.pack_into("<q", head, 0, count)
    body = bytearray(_pad8(bytes(count * size)))
    var = bytearray()
    for i, v in enumerate(values):
        if v is None:
            head[8 + i // 8] |= 1 << (i % 8)
            continue
        if code != "Q":
            struct.pack_into("<" + code, body, i * size, _fixed_value(element, v))
        else:
            data = _var_bytes(element, v)
            offset = header + len(body) + len(var)
            struct.pack_into("<Q", body, i * size, (offset << 32) | len(data))
            var += _pad8(data)
    return bytes(head + body + var)
