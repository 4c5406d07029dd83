"""statekit's pure-Python ``hash()`` against values Spark 4.3's ``hash()`` returned (the
Spark suite compares thousands of random keys of every type: tests/spark/test_spark_hash.py),
and packed snapshot records against one-by-one writes."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import pytest

from statekit.formats.schema import AtomicType, DecimalType, StructField, StructType
from statekit.formats.spark_hash import columns_hasher
from statekit.formats.state_writer import SnapshotWriter, pack_record

UTC = dt.timezone.utc

# (types, values, Spark's hash(...) of them), from `spark.sql("select hash(...)")`
SPARK = [
    (["string"], ("",), 142593372),
    (["string"], ("a",), 1485273170),
    (["string"], ("abcd",), -396302900),
    (["string"], ("abcde✓",), 574309637),
    (["integer"], (0,), 933211791),
    (["integer"], (-1,), -1604776387),
    (["long"], (1,), -1712319331),
    (["long"], (-9223372036854775808,), -853646085),
    (["boolean"], (True,), -559580957),
    (["boolean"], (False,), 933211791),
    (["double"], (-0.0,), -1670924195),
    (["double"], (1.5,), 1290763749),
    (["float"], (1.5,), -221251528),
    (["date"], (dt.date(2026, 1, 5),), -1036763930),
    (["timestamp"], (dt.datetime(2026, 1, 5, 8, tzinfo=UTC),), -986541131),
    ([DecimalType(10, 3)], (Decimal("12.345"),), 1416086240),
    (["string", "integer", "date"], ("k07", 2, dt.date(2026, 1, 6)), -1283781676),
    ([StructType((StructField("a", AtomicType("string")),
                  StructField("b", AtomicType("integer"))))], (("x", None),), -80340190),
    (["string"], (None,), 42),
]


@pytest.mark.parametrize(("types", "values", "expected"), SPARK)
def test_hash_equals_sparks(types, values, expected):
    resolved = [AtomicType(t) if isinstance(t, str) else t for t in types]
    hasher = columns_hasher(resolved)
    assert hasher is not None
    assert hasher(values) == expected


def test_pmod_of_a_negative_hash_is_sparks():
    hasher = columns_hasher([AtomicType("string")])
    assert hasher is not None
    assert hasher(("abcd",)) % 7 == (-396302900 % 7 + 7) % 7


def test_packed_records_write_the_same_snapshot_bytes():
    rng_rows = [(f"key-{i}".encode() * (i % 5 + 1), bytes(range(i % 200)) * (i % 3 + 1))
                for i in range(3000)]
    one, packed = io.BytesIO(), io.BytesIO()
    with SnapshotWriter(one, "lz4") as writer:
        for key, value in rng_rows:
            writer.write(key, value)
    with SnapshotWriter(packed, "lz4") as writer:
        for start in range(0, len(rng_rows), 700):
            chunk = rng_rows[start:start + 700]
            writer.write_packed(b"".join(pack_record(k, v) for k, v in chunk), len(chunk))
        assert writer.records == len(rng_rows)
    assert one.getvalue() == packed.getvalue()


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 200, 1000])
def test_routing_ints_land_in_their_partition_by_sparks_hash(partitions):
    from statekit.formats.spark_hash import routing_ints

    routes = routing_ints(partitions)
    hasher = columns_hasher([AtomicType("integer")])
    assert len(routes) == partitions and len(set(routes)) == partitions
    assert [hasher((x,)) % partitions for x in routes] == list(range(partitions))
    assert all(0 <= x < 2**31 for x in routes)


def test_routing_ints_match_a_hash_spark_returned():
    from statekit.formats.spark_hash import routing_ints

    # Spark's hash(0) is 933211791 (above): pmod(933211791, 2) = 1, so 0 routes to 1
    assert routing_ints(2)[1] == 0
    with pytest.raises(ValueError):
        routing_ints(0)
