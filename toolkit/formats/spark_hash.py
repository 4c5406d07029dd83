"""Spark's ``hash()`` (Murmur3 x86_32, seed 42) of key columns, in pure Python.

A stateful operator's state partition is ``pmod(hash(<grouping columns>), n)``: Spark's
``HashPartitioning``. Re-bucketing HDFS state in the JVM costs one shuffle of every row
through Arrow and Spark's row format; computing the same hash where the row is replayed lets
the executors pack each new partition's records themselves, and Spark only moves large
chunks. The hash must be Spark's exactly, so this module follows ``Murmur3_x86_32`` and
``Murmur3HashFunction`` as Spark 3.5–4.3 implement them, including their quirks:

* strings and binary use ``hashUnsafeBytes``: 4-byte little-endian words, then every
  remaining byte mixed on its own as a *signed* int (not the reference Murmur3 tail);
* ``-0.0`` hashes as ``0`` (float and double); floats hash their IEEE bits as an int,
  doubles as a long; booleans as the int 1 or 0; dates as their day count, timestamps as
  their microseconds;
* decimals of precision ≤ 18 hash their unscaled long (larger ones are not supported here);
* a null leaves the running hash unchanged; a struct hashes its fields in order, each with
  the running hash as seed; several columns the same way.

Types this module does not cover (arrays, maps, large decimals, intervals …) make
:func:`hasher_for` return None, and the caller uses Spark's own hash instead. The unit tests
check values against Spark's ``hash()`` over many random keys of every supported type.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from statekit.formats.schema import DataType, DecimalType, StructType

SEED = 42
_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)
_WORDS = struct.Struct("<I")
_FLOAT = struct.Struct(">f")
_INT_BITS = struct.Struct(">I")
_DOUBLE = struct.Struct(">d")
_LONG_BITS = struct.Struct(">Q")

Hasher = Callable[[Any, int], int]
"""``(value, seed) -> hash`` (unsigned 32-bit)."""


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _MASK
    k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
    return (k1 * _C2) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
    return (h1 * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def hash_int(value: int, seed: int) -> int:
    return _fmix(_mix_h1(seed, _mix_k1(value & _MASK)), 4)


def hash_long(value: int, seed: int) -> int:
    h1 = _mix_h1(seed, _mix_k1(value & _MASK))
    h1 = _mix_h1(h1, _mix_k1((value >> 32) & _MASK))
    return _fmix(h1, 8)


def hash_bytes(data: bytes, seed: int) -> int:
    """``Murmur3_x86_32.hashUnsafeBytes``: whole little-endian words, then each remaining
    byte as a signed int."""
    length = len(data)
    aligned = length - length % 4
    h1 = seed
    for (word,) in _WORDS.iter_unpack(data[:aligned]):
        h1 = _mix_h1(h1, _mix_k1(word))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1(byte - 256 if byte > 127 else byte))
    return _fmix(h1, length)


def _hash_string(value: str, seed: int) -> int:
    return hash_bytes(value.encode("utf-8"), seed)


def _hash_bool(value: bool, seed: int) -> int:
    return hash_int(1 if value else 0, seed)


def _hash_float(value: float, seed: int) -> int:
    if value == 0.0:  # -0.0 too
        return hash_int(0, seed)
    if value != value:  # NaN: Java's canonical floatToIntBits
        return hash_int(0x7FC00000, seed)
    return hash_int(_INT_BITS.unpack(_FLOAT.pack(value))[0], seed)


def _hash_double(value: float, seed: int) -> int:
    if value == 0.0:
        return hash_long(0, seed)
    if value != value:  # Java's canonical doubleToLongBits
        return hash_long(0x7FF8000000000000, seed)
    return hash_long(_LONG_BITS.unpack(_DOUBLE.pack(value))[0], seed)


def _hash_date(value: dt.date | int, seed: int) -> int:
    days = value if isinstance(value, int) else (value - _EPOCH_DATE).days
    return hash_int(days, seed)


def _hash_timestamp(value: dt.datetime | int, seed: int) -> int:
    micros = value if isinstance(value, int) else \
        (value - _EPOCH_UTC) // dt.timedelta(microseconds=1)
    return hash_long(micros, seed)


def _decimal_hasher(scale: int) -> Hasher:
    def run(value: Decimal, seed: int) -> int:
        return hash_long(int(value.scaleb(scale)), seed)

    return run


def _struct_hasher(fields: list[Hasher]) -> Hasher:
    def run(value: Any, seed: int) -> int:
        for hasher, item in zip(fields, value, strict=True):
            if item is not None:
                seed = hasher(item, seed)
        return seed

    return run


_SIMPLE: dict[str, Hasher] = {
    "string": _hash_string, "binary": lambda v, s: hash_bytes(bytes(v), s),
    "integer": hash_int, "short": hash_int, "byte": hash_int, "long": hash_long,
    "boolean": _hash_bool, "float": _hash_float, "double": _hash_double,
    "date": _hash_date, "timestamp": _hash_timestamp,
}


def hasher_for(data_type: DataType) -> Hasher | None:
    """Spark's hash of one value of ``data_type``, or None where this module does not
    reproduce it (the caller then lets Spark hash)."""
    if isinstance(data_type, StructType):
        parts = [hasher_for(f.data_type) for f in data_type.fields]
        if any(p is None for p in parts):
            return None
        return _struct_hasher([p for p in parts if p is not None])
    if isinstance(data_type, DecimalType):
        return _decimal_hasher(data_type.scale) if data_type.precision <= 18 else None
    return _SIMPLE.get(data_type.name)


def columns_hasher(types: list[DataType]) -> Callable[[tuple[Any, ...]], int] | None:
    """``hash(c1, c2, …)`` of a tuple of column values as a *signed* 32-bit int, as Spark's
    ``hash()`` returns it; None if a type is not supported."""
    row = hasher_for(StructType(tuple(_field(t) for t in types)))
    if row is None:
        return None

    def run(values: tuple[Any, ...]) -> int:
        h = row(values, SEED)
        return h - (1 << 32) if h & 0x80000000 else h

    return run


def routing_ints(partitions: int) -> list[int]:
    """For each partition ``p`` of ``partitions``, the smallest int ``x ≥ 0`` whose Spark hash
    places it there: ``pmod(hash(x), partitions) == p``. An int column holding ``x`` sends a
    row to exactly partition ``p`` of ``repartition(partitions, column)`` — the DataFrame
    API's way to a chosen partition (an RDD's ``partitionBy`` has no Spark Connect form)."""
    if partitions < 1:
        raise ValueError(f"partitions must be ≥ 1, got {partitions}")
    found: dict[int, int] = {}
    x = 0
    while len(found) < partitions:
        h = hash_int(x, SEED)
        signed = h - (1 << 32) if h & 0x80000000 else h
        found.setdefault(signed % partitions, x)  # Python's % is Spark's pmod for n > 0
        x += 1
    return [found[p] for p in range(partitions)]


def _field(data_type: DataType) -> Any:
    from statekit.formats.schema import StructField

    return StructField("c", data_type)
