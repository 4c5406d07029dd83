"""Decode Spark ``UnsafeRow`` bytes (state keys and values) into Python values, without Spark.

Every state store holds keys and values as UnsafeRows. Showing, diffing or exporting state
without a JVM means decoding them here, and fast: a state store can hold millions of rows. So
a schema is compiled once into a decoder (:func:`make_decoder`) that unpacks all fixed-width
slots of a row with one precompiled ``struct.Struct`` and converts only the fields that need
it.

Layout: ``ceil(n/64)*8`` bytes of null bits (little-endian words, bit i = field i), one 8-byte
little-endian slot per field, then a variable-length region. Fixed-width values sit in their
slot (an int in its low 4 bytes, and so on); variable-length values (string, binary, struct,
array, map, decimal with precision > 18, calendar interval, variant) store
``(offset << 32) | size`` with the offset from the start of the row (of the nested row, for
nested structs). Arrays are ``UnsafeArrayData``: an 8-byte element count, null bits, elements
of their natural width (1/2/4/8 bytes; 8-byte offset-and-size for variable-length ones, offsets
from the array start), padded to 8 bytes. Maps are an 8-byte key-array size, the key array,
then the value array.

A corrupt row raises :class:`CorruptFile` (out-of-bounds offsets or sizes, short rows), with
the ``path`` given to :func:`make_decoder`. Values Python cannot represent (a date outside years
1-9999, a type unknown here) come back as :class:`RawValue`, never as an error.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from statekit.formats.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    StructType,
    UserDefinedType,
)
from statekit.formats.values import RawValue, hex_preview, render_value
from statekit.support.errors import CorruptFile

__all__ = [
    "RawValue",
    "decode_unsafe_row",
    "hex_preview",
    "make_decoder",
    "render_value",
    "unique_field_names",
]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_DECIMAL_CONTEXT = decimal.Context(prec=100, Emax=10_000, Emin=-10_000)
_MASK32 = 0xFFFFFFFF


class _Bad(Exception):
    """Internal: a row does not fit its schema (turned into CorruptFile at the edge)."""


# A converter turns an unpacked slot/element into a value. Arguments: the buffer, the start
# and length of the container (row or array) the slot belongs to, and the unpacked slot.
Converter = Callable[[bytes, int, int, Any], Any]

# Type name -> (struct code in an 8-byte row slot, struct code as an array element).
_FIXED = {
    "boolean": ("?7x", "?"),
    "byte": ("b7x", "b"),
    "short": ("h6x", "h"),
    "integer": ("i4x", "i"),
    "date": ("i4x", "i"),
    "float": ("f4x", "f"),
    "long": ("q", "q"),
    "timestamp": ("q", "q"),
    "timestamp_ntz": ("q", "q"),
    "double": ("d", "d"),
    "interval year to month": ("i4x", "i"),
    "interval day to second": ("q", "q"),
}
_VAR = ("Q", "Q")


def _span(slot: int, length: int) -> tuple[int, int]:
    offset, size = slot >> 32, slot & _MASK32
    if offset + size > length:
        raise _Bad(f"offset {offset} + size {size} beyond the {length} bytes available")
    return offset, size


def _conv_string(buf: bytes, base: int, length: int, slot: int) -> str:
    off, size = _span(slot, length)
    return buf[base + off : base + off + size].decode("utf-8", "replace")


def _conv_binary(buf: bytes, base: int, length: int, slot: int) -> bytes:
    off, size = _span(slot, length)
    return bytes(buf[base + off : base + off + size])


def _guarded(type_name: str, unit: str, make: Callable[[int], Any]) -> Converter:
    """A converter from an integer slot, with a RawValue when Python's range is exceeded."""

    def conv(buf: bytes, base: int, length: int, number: int) -> Any:
        try:
            return make(number)
        except OverflowError:
            return RawValue(type_name, number, f"{unit}, outside Python's range")

    return conv


_conv_date = _guarded("date", "days since 1970-01-01",
                      lambda days: _EPOCH_DATE + dt.timedelta(days=days))
_conv_timestamp = _guarded("timestamp", "microseconds since the epoch",
                           lambda us: _EPOCH_UTC + dt.timedelta(microseconds=us))
_conv_timestamp_ntz = _guarded("timestamp_ntz", "microseconds since 1970-01-01T00:00",
                               lambda us: _EPOCH_NAIVE + dt.timedelta(microseconds=us))
_conv_day_time = _guarded("interval day to second", "microseconds",
                          lambda us: dt.timedelta(microseconds=us))


def _conv_null(buf: bytes, base: int, length: int, slot: Any) -> None:
    return None


def _conv_calendar_interval(buf: bytes, base: int, length: int, slot: int) -> dict[str, int]:
    off, size = _span(slot, length)
    if size < 16:
        raise _Bad(f"calendar interval of {size} bytes (expected 16)")
    months, days, micros = struct.unpack_from("<iiq", buf, base + off)
    return {"months": months, "days": days, "microseconds": micros}


def _small_decimal(scale: int) -> Converter:
    def conv(buf: bytes, base: int, length: int, unscaled: int) -> decimal.Decimal:
        return decimal.Decimal(unscaled).scaleb(-scale, _DECIMAL_CONTEXT)

    return conv


def _big_decimal(scale: int) -> Converter:
    def conv(buf: bytes, base: int, length: int, slot: int) -> decimal.Decimal:
        off, size = _span(slot, length)
        if size == 0 or size > 64:
            raise _Bad(f"decimal of {size} bytes")
        unscaled = int.from_bytes(buf[base + off : base + off + size], "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-scale, _DECIMAL_CONTEXT)

    return conv


def _raw_var(type_name: str) -> Converter:
    def conv(buf: bytes, base: int, length: int, slot: int) -> RawValue:
        off, size = _span(slot, length)
        return RawValue(type_name, bytes(buf[base + off : base + off + size]))

    return conv


def _raw_slot(type_name: str) -> Converter:
    def conv(buf: bytes, base: int, length: int, slot: int) -> RawValue:
        return RawValue(type_name, slot, "type not known to statekit; raw 8-byte slot")

    return conv


def _nested(decode_at: Callable[[bytes, int, int], Any]) -> Converter:
    def conv(buf: bytes, base: int, length: int, slot: int) -> Any:
        off, size = _span(slot, length)
        return decode_at(buf, base + off, size)

    return conv


def _plan(t: DataType) -> tuple[str, str, Converter | None, int]:
    """(row slot code, array element code, converter, array element size) for a type."""
    if isinstance(t, UserDefinedType):
        return _plan(t.sql_type)
    if isinstance(t, DecimalType):
        if t.precision <= 18:
            return "q", "q", _small_decimal(t.scale), 8
        return "Q", "Q", _big_decimal(t.scale), 8
    if isinstance(t, StructType):
        return "Q", "Q", _nested(_compile_struct(t)), 8
    if isinstance(t, ArrayType):
        return "Q", "Q", _nested(_compile_array(t.element_type)), 8
    if isinstance(t, MapType):
        return "Q", "Q", _nested(_compile_map(t)), 8
    name = t.name
    if name in _FIXED:
        slot_code, elem_code = _FIXED[name]
        conv = {
            "date": _conv_date,
            "timestamp": _conv_timestamp,
            "timestamp_ntz": _conv_timestamp_ntz,
            "interval day to second": _conv_day_time,
        }.get(name)
        return slot_code, elem_code, conv, struct.calcsize("<" + elem_code)
    if name == "string" or name.startswith(("char(", "varchar(")):
        return "Q", "Q", _conv_string, 8
    if name == "binary":
        return "Q", "Q", _conv_binary, 8
    if name == "null":
        return "Q", "B", _conv_null, 1
    if name == "calendarinterval":
        return "Q", "Q", _conv_calendar_interval, 8
    if name == "variant":
        return "Q", "Q", _raw_var("variant"), 8
    return "Q", "", _raw_slot(name), 0


def unique_field_names(schema: StructType) -> tuple[str, ...]:
    """Field names made unique for dict keys: a repeated name gets ``#2``, ``#3``… appended.

    Aggregation buffers repeat names (``sum``, ``isEmpty``, ``max``); without this, a dict
    would silently keep only the last of them.
    """
    seen: dict[str, int] = {}
    out = []
    for name in schema.names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return tuple(out)


@lru_cache(maxsize=256)
def _compile_struct(schema: StructType, as_tuple: bool = False) -> Callable[[bytes, int, int], Any]:
    n = len(schema.fields)
    words = (n + 63) // 64
    fixed = words * 8 + 8 * n
    plans = [_plan(f.data_type) for f in schema.fields]
    # One unpack reads the null-bit words and every slot.
    unpack = struct.Struct("<" + "Q" * words + "".join(p[0] for p in plans)).unpack_from
    # Strings are the common case: converted inline, without a call per field.
    strings = tuple(i for i, p in enumerate(plans) if p[2] is _conv_string)
    convs = tuple((i, p[2]) for i, p in enumerate(plans)
                  if p[2] is not None and p[2] is not _conv_string)
    names = unique_field_names(schema)

    def decode_at(buf: bytes, base: int, length: int) -> Any:
        if length < fixed:
            raise _Bad(f"row of {length} bytes, shorter than the {fixed} its {n} fields need")
        raw = unpack(buf, base)
        values = list(raw[words:])
        nulls = raw[0] if words == 1 else sum(w << (64 * k) for k, w in enumerate(raw[:words]))
        while nulls:
            low = nulls & -nulls
            i = low.bit_length() - 1
            if i < n:
                values[i] = None
            nulls ^= low
        for i in strings:
            slot = values[i]
            if slot is not None:
                start = slot >> 32
                end = start + (slot & _MASK32)
                if end > length:
                    raise _Bad(f"offset {start} + size {end - start} beyond the {length} bytes "
                               "available")
                values[i] = buf[base + start : base + end].decode("utf-8", "replace")
        for i, conv in convs:
            if values[i] is not None:
                values[i] = conv(buf, base, length, values[i])
        return tuple(values) if as_tuple else dict(zip(names, values, strict=False))

    return decode_at


@lru_cache(maxsize=256)
def _compile_array(element: DataType) -> Callable[[bytes, int, int], Any]:
    _, code, conv, size = _plan(element)

    def decode_at(buf: bytes, base: int, length: int) -> Any:
        if length < 8:
            raise _Bad(f"array of {length} bytes")
        count = int.from_bytes(buf[base : base + 8], "little", signed=True)
        if count < 0 or count > length * 8:
            raise _Bad(f"array with {count} elements in {length} bytes")
        header = 8 + ((count + 63) // 64) * 8
        if not code:
            return RawValue(f"array<{element.name}>", bytes(buf[base : base + length]))
        if header + count * size > length:
            raise _Bad(f"array of {count} elements does not fit in {length} bytes")
        values = list(struct.unpack_from(f"<{count}{code}", buf, base + header))
        nulls = int.from_bytes(buf[base + 8 : base + header], "little")
        while nulls:
            low = nulls & -nulls
            i = low.bit_length() - 1
            if i < count:
                values[i] = None
            nulls ^= low
        if conv is not None:
            values = [v if v is None else conv(buf, base, length, v) for v in values]
        return values

    return decode_at


def _compile_map(t: MapType) -> Callable[[bytes, int, int], Any]:
    keys_at = _compile_array(t.key_type)
    values_at = _compile_array(t.value_type)

    def decode_at(buf: bytes, base: int, length: int) -> Any:
        if length < 8:
            raise _Bad(f"map of {length} bytes")
        key_bytes = int.from_bytes(buf[base : base + 8], "little", signed=True)
        if key_bytes < 0 or 8 + key_bytes > length:
            raise _Bad(f"map key array of {key_bytes} bytes in a {length}-byte map")
        keys = keys_at(buf, base + 8, key_bytes)
        values = values_at(buf, base + 8 + key_bytes, length - 8 - key_bytes)
        if isinstance(keys, RawValue) or isinstance(values, RawValue):
            return RawValue(f"map<{t.key_type.name},{t.value_type.name}>",
                            bytes(buf[base : base + length]))
        if len(keys) != len(values):
            raise _Bad(f"map with {len(keys)} keys but {len(values)} values")
        try:
            return dict(zip(keys, values, strict=True))
        except TypeError:  # unhashable keys (structs, arrays): keep the pairs
            return list(zip(keys, values, strict=True))

    return decode_at


def make_decoder(
    schema: StructType, *, path: str | None = None, as_tuple: bool = False
) -> Callable[[bytes], Any]:
    """Compile ``schema`` into a fast ``decode(row_bytes)`` function.

    Parameters
    ----------
    schema
        The row's schema (from the state schema file).
    path
        The file the rows come from, named in :class:`CorruptFile` messages.
    as_tuple
        Return a tuple in field order instead of a dict keyed by :func:`unique_field_names`.

    Returns
    -------
    Callable
        ``decode(data: bytes) -> dict | tuple``; raises :class:`CorruptFile` for a row that
        does not fit the schema.
    """
    decode_at = _compile_struct(schema, as_tuple)

    def decode(data: bytes) -> Any:
        try:
            return decode_at(data, 0, len(data))
        except (_Bad, struct.error, ValueError, OverflowError, IndexError, MemoryError) as exc:
            raise CorruptFile(f"UnsafeRow does not match the schema: {exc}", path=path) from None

    return decode


def decode_unsafe_row(
    data: bytes, schema: StructType, *, path: str | None = None
) -> dict[str, object]:
    """Decode one UnsafeRow into ``{field name: value}`` (see :func:`make_decoder`)."""
    row: dict[str, object] = make_decoder(schema, path=path)(data)
    return row
