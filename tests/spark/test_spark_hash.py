"""statekit's pure-Python Spark hash equals Spark's ``hash()`` on random keys of every
supported type (the placement of re-bucketed HDFS state depends on it)."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

from statekit.formats.schema import parse_struct_json
from statekit.formats.spark_hash import columns_hasher

pytestmark = [pytest.mark.spark]

DDL = ("s STRING, i INT, l BIGINT, b BOOLEAN, d DOUBLE, f FLOAT, day DATE, ts TIMESTAMP, "
       "dec DECIMAL(12,3), sh SMALLINT, by TINYINT, bin BINARY, "
       "st STRUCT<a: STRING, n: BIGINT>")


def _random_row(rng: random.Random) -> tuple:
    def maybe(value):
        return None if rng.random() < 0.1 else value

    alphabet = "abcXYZ019 é✓𝄞-_"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 23)))
    special = [0.0, -0.0, float("nan"), float("inf"), -1.5, 1e300]
    return (
        maybe(text), maybe(rng.randrange(-2**31, 2**31)), maybe(rng.randrange(-2**63, 2**63)),
        maybe(rng.random() < 0.5),
        maybe(rng.choice(special) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6)),
        maybe(rng.choice(special[:5]) if rng.random() < 0.3 else rng.uniform(-1e3, 1e3)),
        maybe(dt.date(1970, 1, 1) + dt.timedelta(days=rng.randrange(-30000, 30000))),
        maybe(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
              + dt.timedelta(microseconds=rng.randrange(-10**15, 10**15))),
        maybe(Decimal(rng.randrange(-10**11, 10**11)) / 1000),
        maybe(rng.randrange(-2**15, 2**15)), maybe(rng.randrange(-128, 128)),
        maybe(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 11)))),
        maybe((maybe(text[:5]), maybe(rng.randrange(-10**12, 10**12)))),
    )


def test_python_hash_equals_spark_hash(spark):
    from pyspark.sql import functions as F

    rng = random.Random(7)
    rows = [_random_row(rng) for _ in range(3000)]
    frame = spark.createDataFrame(rows, DDL)
    columns = frame.columns
    singles = [F.hash(F.col(c)).alias(f"h_{c}") for c in columns]
    got = frame.select("*", *singles, F.hash(*columns).alias("h_all"),
                       F.hash("s", "l").alias("h_sl")).collect()
    schema = parse_struct_json(frame.schema.json())
    types = {f.name: f.data_type for f in schema.fields}
    every = columns_hasher([types[c] for c in columns])
    pair = columns_hasher([types["s"], types["l"]])
    assert every is not None and pair is not None
    for collected in got:
        row = collected.asDict()
        if row["ts"] is not None:  # collected naive in the session's zone; decoded in UTC
            row["ts"] = row["ts"].astimezone(dt.timezone.utc)
        values = tuple(row[c] for c in columns)
        for c in columns:
            one = columns_hasher([types[c]])
            assert one is not None
            assert one((row[c],)) == row[f"h_{c}"], (c, row[c])
        assert every(values) == row["h_all"]
        assert pair((row["s"], row["l"])) == row["h_sl"]


def test_unsupported_types_fall_back_to_spark():
    schema = parse_struct_json('{"type":"struct","fields":['
                               '{"name":"a","type":{"type":"array","elementType":"integer",'
                               '"containsNull":true},"nullable":true,"metadata":{}},'
                               '{"name":"d","type":"decimal(30,2)","nullable":true,'
                               '"metadata":{}}]}')
    assert columns_hasher([schema.fields[0].data_type]) is None
    assert columns_hasher([schema.fields[1].data_type]) is None
