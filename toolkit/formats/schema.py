"""A small model of Spark SQL data types, parsed from the schema JSON Spark writes.

State schema files, operator metadata and the decoders of state rows all speak Spark's type
JSON (``StructType.json``). statekit's core must not import pyspark (a JVM-free CLI that starts
in milliseconds), so this is the minimum needed: parse the JSON, keep every type (types this
module does not know are kept by name, never rejected), and render types the way Spark prints
them (``simpleString`` and ``printSchema``'s tree).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statekit.formats.jsontext import loads_json
from statekit.support.errors import CorruptFile

# Spark's JSON type name -> simpleString name (the DDL spelling).
_SIMPLE_NAMES = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "null": "void",
}
ATOMIC_TYPE_NAMES = (
    "string", "long", "integer", "short", "byte", "double", "float", "boolean", "date",
    "timestamp", "timestamp_ntz", "binary", "null",
)
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")


@dataclass(frozen=True)
class DataType:
    """Base of all types; ``name`` is Spark's JSON ``typeName``."""

    @property
    def name(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class AtomicType(DataType):
    """A type without children: ``string``, ``long``, …, or any type unknown here."""

    type_name: str
    """Spark's JSON name, e.g. ``"long"``, ``"timestamp_ntz"``, ``"varchar(10)"``."""

    @property
    def name(self) -> str:
        return self.type_name

    @property
    def known(self) -> bool:
        """False for a type this module only carries by name (interval, variant, …)."""
        return self.type_name in ATOMIC_TYPE_NAMES


@dataclass(frozen=True)
class DecimalType(DataType):
    """``decimal(precision, scale)``; values with precision <= 18 fit in a long."""

    precision: int = 10
    scale: int = 0

    @property
    def name(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class ArrayType(DataType):
    """``array<element>``."""

    element_type: DataType
    contains_null: bool = True

    @property
    def name(self) -> str:
        return "array"


@dataclass(frozen=True)
class MapType(DataType):
    """``map<key, value>``."""

    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True

    @property
    def name(self) -> str:
        return "map"


@dataclass(frozen=True)
class UserDefinedType(DataType):
    """A UDT: stored as its ``sql_type``; the class names are kept for display."""

    sql_type: DataType
    class_name: str = ""
    py_class: str | None = None

    @property
    def name(self) -> str:
        return "udt"


@dataclass(frozen=True)
class StructField:
    """One field of a struct."""

    name: str
    data_type: DataType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Field metadata JSON (e.g. ``{"spark.timeWindow": true}``); not part of equality."""

    @property
    def type(self) -> DataType:
        """The field's type (alias of ``data_type``)."""
        return self.data_type


@dataclass(frozen=True)
class StructType(DataType):
    """``struct<…>``: an ordered tuple of fields (names may repeat in aggregation buffers)."""

    fields: tuple[StructField, ...] = ()

    @property
    def name(self) -> str:
        return "struct"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, name: str) -> StructField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def _bad(message: str, path: str | None) -> CorruptFile:
    return CorruptFile(f"bad Spark schema JSON: {message}", path=path)


def parse_spark_type(json_obj: Any, *, path: str | None = None) -> DataType:
    """Build a type from Spark's schema JSON (already ``json.loads``-ed).

    Parameters
    ----------
    json_obj
        A type name string (``"long"``, ``"decimal(10,2)"``) or a dict with ``"type"``
        ``struct`` / ``array`` / ``map`` / ``udt``.
    path
        The file the JSON came from, for error messages.

    Raises
    ------
    CorruptFile
        The JSON does not have the shape of a Spark type. Unknown type *names* are not an
        error: they come back as :class:`AtomicType` with ``known == False``.
    """
    if isinstance(json_obj, str):
        text = json_obj.strip()
        if text == "decimal":
            return DecimalType(10, 0)
        match = _DECIMAL.match(text)
        if match:
            return DecimalType(int(match.group(1)), int(match.group(2)))
        if not text:
            raise _bad("empty type name", path)
        return AtomicType(text)
    if not isinstance(json_obj, dict):
        raise _bad(f"expected a type name or object, got {type(json_obj).__name__}", path)
    kind = json_obj.get("type")
    try:
        if kind == "struct":
            fields = json_obj.get("fields")
            if not isinstance(fields, list):
                raise _bad("struct without a 'fields' list", path)
            return StructType(tuple(_parse_field(f, path) for f in fields))
        if kind == "array":
            return ArrayType(parse_spark_type(json_obj["elementType"], path=path),
                             _bool(json_obj.get("containsNull", True), "containsNull", path))
        if kind == "map":
            return MapType(parse_spark_type(json_obj["keyType"], path=path),
                           parse_spark_type(json_obj["valueType"], path=path),
                           _bool(json_obj.get("valueContainsNull", True), "valueContainsNull",
                                 path))
        if kind == "udt":
            py_class = json_obj.get("pyClass")
            return UserDefinedType(parse_spark_type(json_obj["sqlType"], path=path),
                                   str(json_obj.get("class", "")),
                                   py_class if isinstance(py_class, str) else None)
    except KeyError as exc:
        raise _bad(f"{kind} type without {exc.args[0]!r}", path) from None
    raise _bad(f"unknown complex type {kind!r}", path)


def _bool(value: Any, what: str, path: str | None) -> bool:
    if not isinstance(value, bool):
        raise _bad(f"'{what}' is not a boolean", path)
    return value


def _parse_field(obj: Any, path: str | None) -> StructField:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or "type" not in obj:
        raise _bad("struct field without a name and type", path)
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise _bad(f"field {obj['name']!r} has non-object metadata", path)
    return StructField(obj["name"], parse_spark_type(obj["type"], path=path),
                       _bool(obj.get("nullable", True), "nullable", path), metadata)


def parse_struct_json(text: str, *, path: str | None = None) -> StructType:
    """Parse a ``StructType.json`` string (as found in schema files) into a :class:`StructType`.

    Raises
    ------
    CorruptFile
        Not JSON, or not a struct.
    """
    try:
        obj = loads_json(text)
    except ValueError as exc:
        raise _bad(f"not JSON ({exc})", path) from None
    result = parse_spark_type(obj, path=path)
    if not isinstance(result, StructType):
        raise _bad(f"expected a struct, got {result.name}", path)
    return result


def simple_string(t: DataType) -> str:
    """Spark's ``simpleString``: ``struct<user_id:string,n:bigint>``, ``array<int>``…"""
    if isinstance(t, StructType):
        inner = ",".join(f"{f.name}:{simple_string(f.data_type)}" for f in t.fields)
        return f"struct<{inner}>"
    if isinstance(t, ArrayType):
        return f"array<{simple_string(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{simple_string(t.key_type)},{simple_string(t.value_type)}>"
    if isinstance(t, UserDefinedType):
        return simple_string(t.sql_type)
    return _SIMPLE_NAMES.get(t.name, t.name)


def tree_string(t: DataType, *, root: str = "root") -> str:
    """A multi-line tree like ``printSchema()``::

        root
         |-- user_id: string (nullable = true)
         |-- groupState: struct (nullable = true)
         |    |-- phase: string (nullable = true)
    """
    lines = [root]
    if isinstance(t, StructType):
        for f in t.fields:
            _tree_lines(f.name, f.data_type, f"nullable = {_lower(f.nullable)}", " |", lines)
    else:
        _tree_lines("value", t, "nullable = true", " |", lines)
    return "\n".join(lines)


def _lower(flag: bool) -> str:
    return "true" if flag else "false"


def _tree_lines(name: str, t: DataType, note: str, prefix: str, lines: list[str]) -> None:
    lines.append(f"{prefix}-- {name}: {t.name} ({note})")
    _tree_children(t, f"{prefix}    |", lines)


def _tree_children(t: DataType, prefix: str, lines: list[str]) -> None:
    if isinstance(t, StructType):
        for f in t.fields:
            _tree_lines(f.name, f.data_type, f"nullable = {_lower(f.nullable)}", prefix, lines)
    elif isinstance(t, ArrayType):
        _tree_lines("element", t.element_type, f"containsNull = {_lower(t.contains_null)}",
                    prefix, lines)
    elif isinstance(t, MapType):
        lines.append(f"{prefix}-- key: {t.key_type.name}")
        _tree_children(t.key_type, f"{prefix}    |", lines)
        _tree_lines("value", t.value_type,
                    f"valueContainsNull = {_lower(t.value_contains_null)}", prefix, lines)


# ------------------------------------------------------------------ as Spark reads it
_SPARK_TYPE_NAMES = frozenset({
    "null", "void", "date", "timestamp", "binary", "integer", "boolean", "long", "double",
    "float", "short", "byte", "string", "interval", "timestamp_ntz", "variant", "decimal"})
_SPARK_TYPE_PATTERNS = (
    _DECIMAL, re.compile(r"^char\(\s*\d+\s*\)$"), re.compile(r"^varchar\(\s*\d+\s*\)$"),
    re.compile(r"^string\s+collate\s+\w+$"), re.compile(r"^time\(\s*\d+\s*\)$"),
    re.compile(r"^interval (day|hour|minute|second)( to (day|hour|minute|second))?$"),
    re.compile(r"^interval (year|month)( to (year|month))?$"),
    re.compile(r"^(geometry|geography)(\(.*\))?$"))
_FIELD_KEYS = ({"metadata", "name", "nullable", "type"}, {"name", "nullable", "type"},
               {"name", "type"})


def spark_type_error(json_obj: Any) -> str | None:
    """Why Spark's ``DataType.fromJson`` rejects this schema JSON (``None``: it parses it).

    Spark matches each object on its exact set of keys (a struct field is ``name``, ``type``
    and ``nullable``/``metadata``, nothing else) and each type name against the names it
    knows, where :func:`parse_spark_type` keeps whatever it finds."""
    if isinstance(json_obj, str):
        name = json_obj
        if name in _SPARK_TYPE_NAMES or any(p.match(name) for p in _SPARK_TYPE_PATTERNS):
            return None
        return f"unsupported data type {name!r}"
    if not isinstance(json_obj, dict):
        return f"a type that is neither a name nor an object ({json_obj!r:.40})"
    keys = set(json_obj)
    kind = json_obj.get("type")
    if kind == "struct" and keys == {"fields", "type"} and isinstance(
            json_obj["fields"], list):
        for field_obj in json_obj["fields"]:
            problem = _spark_field_error(field_obj)
            if problem:
                return problem
        return None
    if kind == "array" and keys == {"containsNull", "elementType", "type"} and \
            isinstance(json_obj["containsNull"], bool):
        return spark_type_error(json_obj["elementType"])
    if kind == "map" and keys == {"keyType", "type", "valueContainsNull", "valueType"} and \
            isinstance(json_obj["valueContainsNull"], bool):
        return spark_type_error(json_obj["keyType"]) or spark_type_error(json_obj["valueType"])
    if kind == "udt" and {"class", "sqlType", "type"} <= keys:
        return None
    return f"unsupported data type {json_obj!r:.80}"


def _spark_field_error(obj: Any) -> str | None:
    if not isinstance(obj, dict) or set(obj) not in _FIELD_KEYS:
        return f"failed to convert {obj!r:.80} to a field"
    if not isinstance(obj["name"], str):
        return f"a field name that is not a string ({obj['name']!r:.40})"
    if "nullable" in obj and not isinstance(obj["nullable"], bool):
        return "a field's 'nullable' that is not a boolean"
    if "metadata" in obj and not isinstance(obj["metadata"], dict):
        return "a field's 'metadata' that is not an object"
    return spark_type_error(obj["type"])
