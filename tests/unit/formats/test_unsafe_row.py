"""UnsafeRow decoding for every supported type, built by an independent test encoder."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest

from statekit.formats.schema import parse_spark_type
from statekit.formats.unsafe_row import (
    RawValue,
    decode_unsafe_row,
    hex_preview,
    make_decoder,
    render_value,
    unique_field_names,
)
from statekit.support.errors import CorruptFile
from tests.unit.formats.builders import unsafe_row

UTC = dt.timezone.utc


def schema(**fields):
    return parse_spark_type({"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields.items()]})


INNER = {"type": "struct", "fields": [
    {"name": "x", "type": "integer", "nullable": False, "metadata": {}},
    {"name": "s", "type": "string", "nullable": True, "metadata": {}}]}

EVERYTHING = schema(
    s="string", bin="binary", bo="boolean", b="byte", sh="short", i="integer", l="long",
    f="float", d="double", dt="date", ts="timestamp", ntz="timestamp_ntz",
    dsmall="decimal(10,2)", dbig="decimal(38,6)", nested=INNER,
    arr={"type": "array", "elementType": "integer", "containsNull": True},
    sarr={"type": "array", "elementType": "string", "containsNull": True},
    starr={"type": "array", "elementType": INNER, "containsNull": True},
    m={"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
    n="null",
)

ROW = {
    "s": "ünïcödé 🎉", "bin": b"\x00\xff\x10", "bo": True, "b": -7, "sh": -300, "i": 70000,
    "l": -(2**62), "f": 1.5, "d": -2.25, "dt": dt.date(2026, 1, 5),
    "ts": dt.datetime(2026, 1, 5, 8, 6, 20, 150000, tzinfo=UTC),
    "ntz": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    "dsmall": Decimal("-12345678.90"), "dbig": Decimal("-12345678901234567890123456789.123456"),
    "nested": {"x": 3, "s": "inner"}, "arr": [1, None, -3], "sarr": ["a", None, "ccc" * 10],
    "starr": [{"x": 1, "s": None}, None], "m": {"k1": 1, "k2": None}, "n": None,
}


def test_every_type_round_trips():
    data = unsafe_row(EVERYTHING, ROW)
    assert decode_unsafe_row(data, EVERYTHING) == ROW


def test_all_nulls():
    data = unsafe_row(EVERYTHING, dict.fromkeys(EVERYTHING.names))
    assert decode_unsafe_row(data, EVERYTHING) == dict.fromkeys(EVERYTHING.names)


def test_the_documented_example_key():
    data = bytes.fromhex("0000000000000000" "0300000010000000" "7531300000000000")
    assert decode_unsafe_row(data, schema(user_id="string")) == {"user_id": "u10"}


def test_more_than_64_fields_use_two_null_words():
    wide = schema(**{f"f{i}": "long" for i in range(70)})
    values = {f"f{i}": (None if i in (3, 65, 69) else i) for i in range(70)}
    data = unsafe_row(wide, values)
    assert len(data) == 16 + 70 * 8
    assert decode_unsafe_row(data, wide) == values


def test_empty_schema_and_duplicate_names():
    assert decode_unsafe_row(b"", schema()) == {}
    dup = parse_spark_type({"type": "struct", "fields": [
        {"name": "sum", "type": "long", "nullable": True, "metadata": {}},
        {"name": "sum", "type": "double", "nullable": True, "metadata": {}}]})
    assert unique_field_names(dup) == ("sum", "sum#2")
    data = unsafe_row(dup, [1, 2.5])
    assert decode_unsafe_row(data, dup) == {"sum": 1, "sum#2": 2.5}
    assert make_decoder(dup, as_tuple=True)(data) == (1, 2.5)


def test_decimal_edges():
    s = schema(a="decimal(18,0)", b="decimal(38,0)", c="decimal(20,10)")
    values = {"a": Decimal(10**18 - 1), "b": Decimal(-(10**38) + 1), "c": Decimal("0E-10")}
    assert decode_unsafe_row(unsafe_row(s, values), s) == values


def test_nested_array_of_arrays_and_map_with_struct_keys():
    s = schema(
        aa={"type": "array", "elementType": {"type": "array", "elementType": "long",
                                              "containsNull": True}, "containsNull": True},
        m={"type": "map", "keyType": INNER, "valueType": "string", "valueContainsNull": True},
        e={"type": "array", "elementType": "double", "containsNull": False},
    )
    raw = unsafe_row(s, {"aa": [[1, 2], [], None], "m": None, "e": []})
    assert decode_unsafe_row(raw, s) == {"aa": [[1, 2], [], None], "m": None, "e": []}
    # struct keys are unhashable: the pairs are kept as a list
    pairs = [({"x": 1, "s": "a"}, "v"), ({"x": 2, "s": None}, None)]
    raw = unsafe_row(s, {"aa": None, "m": pairs, "e": [0.5]})
    assert decode_unsafe_row(raw, s) == {"aa": None, "m": pairs, "e": [0.5]}


def test_out_of_range_and_unknown_types_are_raw_values():
    s = schema(d="date", t="timestamp", v="variant", iv="interval year to month", x="geometry")
    data = bytearray(8 + 5 * 8)
    struct.pack_into("<i", data, 8, 10**9)  # date far beyond year 9999
    struct.pack_into("<q", data, 16, 2**62)
    struct.pack_into("<i", data, 32, 14)  # 14 months
    struct.pack_into("<q", data, 40, 12345)
    out = decode_unsafe_row(bytes(data), s)
    assert isinstance(out["d"], RawValue) and out["d"].raw == 10**9
    assert isinstance(out["t"], RawValue)
    assert out["v"] == RawValue("variant", b"", "not decoded")
    assert out["iv"] == 14
    assert out["x"].raw == 12345 and "geometry" in str(out["x"])


@pytest.mark.parametrize("mutate", [
    lambda b: b[:-8],  # variable-length data cut off
    lambda b: b[:12],  # shorter than the fixed region
    lambda b: b[:8] + struct.pack("<Q", (4096 << 32) | 3) + b[16:],  # offset past the end
    lambda b: b[:8] + struct.pack("<Q", (16 << 32) | 0xFFFFFFFF) + b[16:],  # huge size
])
def test_out_of_bounds_is_corrupt_with_path(mutate):
    s = schema(user_id="string")
    data = mutate(unsafe_row(s, {"user_id": "u0000123"}))
    with pytest.raises(CorruptFile, match="UnsafeRow does not match the schema") as err:
        make_decoder(s, path="ck/state/0/1/4.delta")(data)
    assert err.value.path == "ck/state/0/1/4.delta"


def test_corrupt_nested_array():
    s = schema(arr={"type": "array", "elementType": "long", "containsNull": True})
    data = bytearray(unsafe_row(s, {"arr": [1, 2, 3]}))
    struct.pack_into("<q", data, 16, 10**6)  # element count
    with pytest.raises(CorruptFile):
        decode_unsafe_row(bytes(data), s)
    struct.pack_into("<q", data, 16, -1)
    with pytest.raises(CorruptFile):
        decode_unsafe_row(bytes(data), s)


def test_render_value():
    assert render_value(None) == "null"
    assert render_value("u1") == "u1"
    assert render_value({"a": "x", "b": [1, None, True]}) == "{a: 'x', b: [1, null, true]}"
    assert render_value(dt.datetime(2026, 1, 5, 8, 0, tzinfo=UTC)) == "2026-01-05T08:00:00Z"
    assert render_value(dt.datetime(2026, 1, 5, 8, 0)) == "2026-01-05T08:00:00"
    assert render_value(dt.date(2026, 1, 5)) == "2026-01-05"
    assert render_value(Decimal("1.50")) == "1.50"
    assert render_value(b"USD") == "0x555344"
    assert render_value("x" * 500, max_len=10) == "xxxxxxxxx…"
    assert render_value(RawValue("variant", b"\x01")) == "<variant: 01 (not decoded)>"


def test_hex_preview():
    data = bytes.fromhex("0000000000000000" "0300000010000000" "7531300000000000")
    assert hex_preview(data) == "0000000000000000 0300000010000000 7531300000000000"
    assert hex_preview(bytes(100), limit=8) == "0000000000000000 … (+92 bytes)"
    assert hex_preview(b"") == ""
