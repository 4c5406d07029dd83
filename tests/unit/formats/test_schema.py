"""Spark type JSON, its renderings, schema files v1/v2/v3 and Java's modified UTF-8."""

from __future__ import annotations

import json
import struct

import fsspec
import pytest

from statekit.formats.modified_utf8 import decode_modified_utf8, encode_modified_utf8, write_utf
from statekit.formats.schema import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    UserDefinedType,
    parse_spark_type,
    parse_struct_json,
    simple_string,
    tree_string,
)
from statekit.formats.schema_file import parse_schema_bytes, read_schema_file
from statekit.support.errors import BadInput, CorruptFile, UnsupportedFormat


def field(name, t, nullable=True):
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}


def struct_json(*fields):
    return {"type": "struct", "fields": list(fields)}


ALL_TYPES = struct_json(
    field("s", "string"), field("l", "long"), field("i", "integer"), field("sh", "short"),
    field("b", "byte"), field("d", "double"), field("f", "float"), field("bo", "boolean"),
    field("dt", "date"), field("ts", "timestamp"), field("ntz", "timestamp_ntz"),
    field("bin", "binary"), field("n", "null"), field("dec", "decimal(38,4)"),
    field("arr", {"type": "array", "elementType": "long", "containsNull": False}),
    field("m", {"type": "map", "keyType": "string", "valueType": "double",
                "valueContainsNull": True}),
    field("st", struct_json(field("x", "integer", False))),
    field("iv", "interval day to second"),
)


def test_parse_every_type():
    t = parse_spark_type(ALL_TYPES)
    assert isinstance(t, StructType)
    assert t.names[:3] == ("s", "l", "i")
    assert t["dec"].data_type == DecimalType(38, 4)
    assert t["arr"].data_type == ArrayType(AtomicType("long"), False)
    assert t["m"].data_type == MapType(AtomicType("string"), AtomicType("double"), True)
    assert t["st"].data_type == StructType((StructField("x", AtomicType("integer"), False),))
    assert t["iv"].data_type == AtomicType("interval day to second")
    assert t["st"].type is t["st"].data_type
    assert not t["iv"].data_type.known and t["l"].data_type.known
    assert parse_spark_type("decimal") == DecimalType(10, 0)
    assert parse_spark_type("decimal( 5, 2)") == DecimalType(5, 2)


def test_simple_string_like_spark():
    t = parse_spark_type(ALL_TYPES)
    assert simple_string(t) == (
        "struct<s:string,l:bigint,i:int,sh:smallint,b:tinyint,d:double,f:float,bo:boolean,"
        "dt:date,ts:timestamp,ntz:timestamp_ntz,bin:binary,n:void,dec:decimal(38,4),"
        "arr:array<bigint>,m:map<string,double>,st:struct<x:int>,iv:interval day to second>"
    )
    udt = parse_spark_type({"type": "udt", "class": "a.B", "pyClass": "p.B",
                            "sqlType": {"type": "array", "elementType": "double",
                                        "containsNull": False}})
    assert isinstance(udt, UserDefinedType) and simple_string(udt) == "array<double>"


def test_tree_string_like_print_schema():
    t = parse_spark_type(struct_json(
        field("user_id", "string"),
        field("g", struct_json(field("n", "long", False))),
        field("a", {"type": "array", "elementType": "string", "containsNull": True}),
        field("m", {"type": "map", "keyType": "string", "valueType": "long",
                    "valueContainsNull": False}),
    ))
    assert tree_string(t) == "\n".join([
        "root",
        " |-- user_id: string (nullable = true)",
        " |-- g: struct (nullable = true)",
        " |    |-- n: long (nullable = false)",
        " |-- a: array (nullable = true)",
        " |    |-- element: string (containsNull = true)",
        " |-- m: map (nullable = true)",
        " |    |-- key: string",
        " |    |-- value: long (valueContainsNull = false)",
    ])


@pytest.mark.parametrize("bad", [
    42, None, [], "", {"type": "struct"}, {"type": "array"}, {"type": "wat"},
    {"type": "struct", "fields": [{"name": 1, "type": "long"}]},
    {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": "yes"}]},
    {"type": "struct", "fields": [{"name": "a", "type": "long", "metadata": []}]},
])
def test_bad_type_json_is_corrupt(bad):
    with pytest.raises(CorruptFile, match="bad Spark schema JSON"):
        parse_spark_type(bad, path="schema")


def test_parse_struct_json_rejects_non_struct():
    with pytest.raises(CorruptFile, match="expected a struct"):
        parse_struct_json('"long"')
    with pytest.raises(CorruptFile, match="not JSON"):
        parse_struct_json("{")


def test_modified_utf8():
    assert encode_modified_utf8("a\x00b") == b"a\xc0\x80b"
    assert decode_modified_utf8(b"a\xc0\x80b") == "a\x00b"
    # U+1F600 is a surrogate pair, each half 3 bytes (CESU-8), not UTF-8's 4 bytes
    encoded = encode_modified_utf8("\U0001F600")
    assert encoded == b"\xed\xa0\xbd\xed\xb8\x80"
    assert decode_modified_utf8(encoded) == "\U0001F600"
    for text in ["", "plain", "é ü ß", "日本語", "x\x00y\U0010FFFF"]:
        assert decode_modified_utf8(encode_modified_utf8(text)) == text
    assert decode_modified_utf8(b"\x00") == "\x00"  # Java accepts a raw NUL too
    assert decode_modified_utf8(b"\xed\xa0\xbdx") == "\ud83dx"  # a lone surrogate survives
    for bad in [b"\x80", b"\xc3", b"\xe6\x97", b"\xf0\x9f\x98\x80", b"\xc3\x28"]:
        with pytest.raises(ValueError):
            decode_modified_utf8(bad)
    assert write_utf("v2") == b"\x00\x02v2"


KEY = struct_json(field("user_id", "string"))
VALUE = struct_json(field("n", "long"))


def chunked(text: str, size: int = 65535) -> bytes:
    chunks = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    return struct.pack(">i", len(chunks)) + b"".join(write_utf(c) for c in chunks)


def test_schema_v1_and_v2():
    v1 = write_utf("v1") + write_utf(json.dumps(KEY)) + write_utf(json.dumps(VALUE))
    s = parse_schema_bytes(v1, path="s")
    assert (s.version, simple_string(s.key_schema), simple_string(s.value_schema)) == (
        1, "struct<user_id:string>", "struct<n:bigint>")
    v2 = write_utf("v2") + chunked(json.dumps(KEY)) + chunked(json.dumps(VALUE))
    s = parse_schema_bytes(v2, path="s")
    assert s.version == 2 and s.raw == {"key": json.dumps(KEY), "value": json.dumps(VALUE)}


def test_schema_v2_multi_chunk_and_nul_in_names():
    wide = struct_json(*[field(f"f\x00{i:05d}" + "x" * 40, "long") for i in range(2000)])
    text = json.dumps(wide)
    assert len(text) > 65535
    s = parse_schema_bytes(write_utf("v2") + chunked(text) + chunked(json.dumps(VALUE)),
                           path="s")
    assert len(s.key_schema) == 2000 and s.key_schema.fields[0].name.startswith("f\x0000000")


def v3_entry(name, key, value, spec, user_key="{    }", ids=True):
    sid = struct.pack(">h", 0) if ids else b""
    return (write_utf(name) + sid + chunked(json.dumps(key)) + sid + chunked(json.dumps(value))
            + chunked(json.dumps(spec)) + chunked(user_key))


@pytest.mark.parametrize("ids", [True, False])
def test_schema_v3_binary(ids):
    spec = {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}
    data = (write_utf("v3") + struct.pack(">i", 2) + v3_entry("count", KEY, VALUE, spec, ids=ids)
            + v3_entry("default", KEY, VALUE, spec, json.dumps(VALUE), ids=ids))
    s = parse_schema_bytes(data, path="s")
    assert s.version == 3
    assert [cf.name for cf in s.column_families] == ["count", "default"]
    assert s.column_families[0].key_encoder_spec == spec
    assert s.column_families[0].user_key_encoder_schema is None
    assert simple_string(s.column_families[1].user_key_encoder_schema) == "struct<n:bigint>"
    assert s.key_schema == s.column_families[1].key_schema  # "default" column family
    assert s.column_families[0].key_schema_id == (0 if ids else None)


def test_schema_v3_text_variant():
    line = {"columnFamilyName": "count", "keySchema": KEY, "valueSchema": VALUE,
            "keyStateEncoderSpec": {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}}
    s = parse_schema_bytes(b"v3\n" + json.dumps(line).encode(), path="s")
    assert s.version == 3 and s.column_families[0].name == "count"
    assert s.key_schema is None


@pytest.mark.parametrize(("data", "error", "match"), [
    (b"", CorruptFile, "truncated version tag"),
    (b"\x00\x02x1", CorruptFile, "not a state schema file"),
    (write_utf("v7") + b"...", UnsupportedFormat, "v7 is not supported"),
    (write_utf("v1") + write_utf("{"), CorruptFile, "truncated value schema"),
    (write_utf("v1") + write_utf("{") + write_utf("{}"), CorruptFile, "not JSON"),
    (write_utf("v2") + struct.pack(">i", 10**6), CorruptFile, "bad key schema chunk count"),
    (write_utf("v3") + struct.pack(">i", 3), CorruptFile, "truncated"),
    (write_utf("v1") + b"\x00\x01\xff" + write_utf("{}"), CorruptFile, "modified UTF-8"),
])
def test_schema_file_errors(data, error, match):
    with pytest.raises(error, match=match) as err:
        parse_schema_bytes(data, path="ck/state/0/0/_metadata/schema")
    assert err.value.path == "ck/state/0/0/_metadata/schema"


def test_read_schema_file_missing():
    fs = fsspec.filesystem("memory")
    with pytest.raises(BadInput, match="schema file not found"):
        read_schema_file(fs, "/nope/schema")
