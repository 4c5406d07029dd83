"""Property: every byte-level reader, fed random bytes or damaged real files, fails only with a
statekit error (CorruptFile / UnsupportedFormat / BadInput), never a bare Python exception.

Damage is what real incidents produce: flipped bits, files cut short (a crash mid-write),
inserted or deleted bytes (bad copies).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import fsspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.errors import StatekitError
from statekit.formats.compression import open_decompressed
from statekit.formats.records import iter_store_records, read_changelog, read_state_file
from statekit.formats.rocksdb_keys import (
    split_multi_values,
    split_prefix_scan_key,
    strip_rocksdb_prefixes,
)
from statekit.formats.rocksdb_zip import read_zip_metadata
from statekit.formats.schema import parse_spark_type
from statekit.formats.schema_file import read_schema_file
from statekit.formats.unsafe_row import make_decoder

DATA = Path(__file__).resolve().parents[2] / "data" / "formats"
FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MEMFS = fsspec.filesystem("memory")


def real(*names: str) -> list[bytes]:
    return [(DATA / name).read_bytes() for name in names]


def decompressed(name: str, codec: str = "lz4") -> bytes:
    with (DATA / name).open("rb") as raw:
        return open_decompressed(raw, codec, path=name).read()


LZ4_FILES = real("aipws_hdfs/9.delta", "aipws_hdfs/8.delta", "agg_rocksdb_changelog_v1/1.changelog",
                 "tws_rocksdb/1.changelog")
ZSTD_FILES = real("agg_zstd/1.delta", "agg_zstd/3.snapshot",
                  "agg_rocksdb_changelog_v1/1.zstd.changelog")
RECORD_STREAMS = [decompressed("aipws_hdfs/9.delta"), decompressed("aipws_hdfs/8.delta"),
                  decompressed("agg_zstd/3.snapshot", "zstd")]
CHANGELOG_STREAMS = [
    decompressed("agg_rocksdb_changelog_v1/1.changelog"),
    decompressed("tws_rocksdb/1.changelog"),
    decompressed(next(p.relative_to(DATA).as_posix()
                      for p in (DATA / "tws_rocksdb").glob("2_*.changelog"))),
    decompressed(next(p.relative_to(DATA).as_posix()
                      for p in (DATA / "aipws_rocksdb_changelog_v3").glob("3_*.changelog"))),
]
ZIP_FILES = real("aipws_rocksdb/9.zip", "tws_rocksdb/1.zip")
SCHEMA_FILES = real("aipws_hdfs/schema", "agg_types/schema", "tws_rocksdb/schema_v3")


@st.composite
def damaged(draw, originals: list[bytes]) -> bytes:
    """A real file with a few flips, truncations, insertions or deletions."""
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "byte"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 16))]
    return bytes(data)


def inputs(originals: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), damaged(originals))


def only_statekit_errors(fn: Callable[[], object]) -> None:
    with contextlib.suppress(StatekitError):
        fn()


def drain(stream) -> None:
    while stream.read(65536):
        pass


@FUZZ
@given(inputs(LZ4_FILES))
def test_lz4(data):
    only_statekit_errors(lambda: drain(open_decompressed(io.BytesIO(data), "lz4", path="f")))


@FUZZ
@given(st.one_of(st.binary(max_size=512), damaged(ZSTD_FILES),
                 st.binary(max_size=64).map(lambda b: b"\x28\xb5\x2f\xfd" + b)))
def test_zstd(data):
    only_statekit_errors(lambda: drain(open_decompressed(io.BytesIO(data), "zstd", path="f")))


@FUZZ
@given(inputs(RECORD_STREAMS), st.booleans())
def test_store_records(data, allow_deletes):
    only_statekit_errors(lambda: list(iter_store_records(io.BytesIO(data), path="f",
                                                         allow_deletes=allow_deletes)))


@FUZZ
@given(inputs(CHANGELOG_STREAMS))
def test_changelog(data):
    def run():
        _, records = read_changelog(io.BytesIO(data), path="f")
        list(records)

    only_statekit_errors(run)


@FUZZ
@given(inputs(LZ4_FILES + ZSTD_FILES), st.sampled_from(["delta", "snapshot", "changelog"]),
       st.sampled_from(["lz4", "zstd"]))
def test_read_state_file_end_to_end(data, kind, codec):
    MEMFS.pipe("/fuzz/state", data)
    only_statekit_errors(lambda: list(read_state_file(MEMFS, "/fuzz/state", codec, kind)))


@FUZZ
@given(inputs(ZIP_FILES))
def test_zip_metadata(data):
    MEMFS.pipe("/fuzz/1.zip", data)
    only_statekit_errors(lambda: read_zip_metadata(MEMFS, "/fuzz/1.zip"))


@FUZZ
@given(inputs(SCHEMA_FILES))
def test_schema_file(data):
    MEMFS.pipe("/fuzz/schema", data)
    only_statekit_errors(lambda: read_schema_file(MEMFS, "/fuzz/schema"))


def _schema(*fields: tuple[str, object]):
    return parse_spark_type({"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]})


SCHEMAS = [
    _schema(("user_id", "string")),
    _schema(("a", "long"), ("b", "double"), ("c", "date"), ("d", "timestamp"),
            ("e", "timestamp_ntz"), ("f", "decimal(10,2)"), ("g", "boolean"), ("h", "short")),
    _schema(("big", "decimal(38,4)"), ("bin", "binary"),
            ("s", {"type": "struct", "fields": [
                {"name": "x", "type": "string", "nullable": True, "metadata": {}},
                {"name": "y", "type": "float", "nullable": True, "metadata": {}}]})),
    _schema(("arr", {"type": "array", "elementType": "string", "containsNull": True}),
            ("m", {"type": "map", "keyType": "string", "valueType": {
                "type": "array", "elementType": "long", "containsNull": True},
                "valueContainsNull": True}),
            ("n", "null"), ("ci", "calendarinterval"), ("u", "some_future_type")),
]
ROWS = [rec.key[1:] for rec in read_state_file(
    fsspec.filesystem("file"), str(DATA / "agg_rocksdb_changelog_v1/1.changelog"), "lz4",
    "changelog")][:5]


@settings(FUZZ, suppress_health_check=list(HealthCheck))
@given(inputs(ROWS), st.sampled_from(SCHEMAS))
def test_unsafe_row(data, schema):
    only_statekit_errors(lambda: make_decoder(schema, path="f")(data))


@FUZZ
@given(st.binary(max_size=128), st.booleans())
def test_rocksdb_prefixes(data, column_families):
    only_statekit_errors(lambda: strip_rocksdb_prefixes(data, column_families=column_families))
    only_statekit_errors(lambda: split_prefix_scan_key(data))
    only_statekit_errors(lambda: split_multi_values(data))
    only_statekit_errors(lambda: split_multi_values(data, delimited=True))
