"""The checkpoint's files read the way Spark reads them (no JVM): where Spark is lenient and
statekit's own parsers are strict, and the reverse. Each case is one the doctor campaign met
on a real restart (benchmarks/doctor_campaign.py); the rules here are what made the doctor
agree with Spark on it."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest

from statekit.checkpoint.spark_reads import (
    SparkReadError,
    commit_entry,
    file_source_offset,
    jackson_value,
    java_lines,
    log_version,
    offsets_entry,
    query_id,
    source_log_entry,
)
from statekit.formats.compression import LZ4_HEADER
from statekit.formats.records import records_from_bytes, spark_read_failure
from statekit.formats.schema import spark_type_error
from statekit.formats.zip_stream import java_zip_entries
from statekit.support.errors import CorruptFile


@pytest.mark.parametrize(("text", "value"), [
    ('{"a":1}', {"a": 1}),
    ('{"a":1}garbage', {"a": 1}),  # Jackson stops after the first value
    ('  [1, 2] ', [1, 2]),
])
def test_json_is_read_as_jackson_reads_it(text, value):
    assert jackson_value(text) == value


@pytest.mark.parametrize("text", ["", "   ", '{"a":NaN}', '{"a":Infinity}', '{"a":01}',
                                  '{"a":1', "[" * 1500 + "]" * 1500])
def test_json_jackson_refuses(text):
    with pytest.raises(SparkReadError):
        jackson_value(text)


@pytest.mark.parametrize(("line", "supported", "version"), [
    ("v1", 1, 1), ("v01", 1, 1), ("v+1", 1, 1), ("v2", 2, 2)])
def test_a_version_line_follows_validate_version(line, supported, version):
    assert log_version(line, supported) == version


@pytest.mark.parametrize(("line", "message"), [
    (" v1", "malformed"), ("v0", "malformed"), ("vx", "malformed"), ("1", "malformed"),
    ("v9", "INVALID_LOG_VERSION")])
def test_a_bad_version_line(line, message):
    with pytest.raises(SparkReadError, match=message):
        log_version(line, 1)


def test_lines_split_as_buffered_reader_splits_them():
    assert java_lines("a\r\nb\rc\n") == ["a", "b", "c"]


def test_an_offsets_entry_needs_its_metadata_line_but_not_its_conf():
    with pytest.raises(SparkReadError, match="Incomplete"):
        offsets_entry(b"")
    with pytest.raises(SparkReadError, match="empty iterator"):
        offsets_entry(b"v1")
    entry = offsets_entry(b'v1\n\n{"logOffset":3}')
    assert entry.metadata is None and entry.sources == ('{"logOffset":3}',)
    entry = offsets_entry(b'v1\n{"batchWatermarkMs":0,"conf":{"a":"b"}}\n-\n{"x":1}')
    assert entry.conf == {"a": "b"} and entry.sources == (None, '{"x":1}')
    with pytest.raises(SparkReadError):
        offsets_entry(b'v1\n{"batchWatermarkMs":"soon"}\n-')


def test_a_commit_entry_with_only_its_version_line_is_valid():
    """statekit's own parser calls it incomplete; Spark takes ``{}`` and restarts."""
    assert commit_entry(b"v1\n") == {}
    assert commit_entry(b'v2\n{"nextBatchWatermarkMs":5}') == {"nextBatchWatermarkMs": 5}
    with pytest.raises(SparkReadError):
        commit_entry(b"")


def test_undecodable_bytes_are_replaced_not_fatal():
    """Java's reader puts U+FFFD where UTF-8 is invalid; the JSON still parses."""
    assert commit_entry(b'v1\n{"nextBatchWatermarkMs":0,"x":"\xff"}')["x"] == "\ufffd"


@pytest.mark.parametrize(("data", "ok"), [
    (b'{"id":"f007e750-5434-4813-89c0-3e63cb54b126"}', True),
    (b'{"id":"f007e750,5434-4813-89c0-3e63cb54b126"}', False),  # a flipped bit, measured
    (b'{"id":123}', False), (b"", False), (b'{"id":"f007e750-5434-4813-89c0-3e63cb5"', False),
])
def test_the_query_id_is_a_uuid(data, ok):
    if ok:
        assert query_id(data)
    else:
        with pytest.raises(SparkReadError):
            query_id(data)


def test_source_log_entries_and_offsets():
    data = b'v1\n{"path":"file:/in/a.json","timestamp":1,"batchId":4}\n'
    assert source_log_entry(data)[0].batch_id == 4
    with pytest.raises(SparkReadError):
        source_log_entry(b'v1\n{"path":"file:/in/a.json","timestamp":1,"batchId":04}')
    assert file_source_offset('{"logOffset":5}') == 5 and file_source_offset("7") == 7
    with pytest.raises(SparkReadError, match="not a file source offset"):
        file_source_offset('{"lngOffset":5}')


@pytest.mark.parametrize(("schema", "error"), [
    ({"type": "struct", "fields": [{"name": "n", "type": "void", "nullable": True,
                                    "metadata": {}}]}, None),
    ({"type": "struct", "fields": [{"name": "n", "type": "decimal(10,2)", "nullable": True,
                                    "metadata": {}}]}, None),
    ({"type": "struct", "fields": [{"name": "n", "type": "lonf", "nullable": True,
                                    "metadata": {}}]}, "unsupported data type 'lonf'"),
    ({"type": "struct", "fields": [{"name": "n", "type": "long", "nullable": True,
                                    "letadata": {}}]}, "to a field"),  # a flipped key
    ({"type": "struct", "fieldr": []}, "unsupported data type"),
])
def test_a_schema_is_judged_as_data_type_from_json_judges_it(schema, error):
    found = spark_type_error(schema)
    assert (found is None) if error is None else (error in (found or "")), found


# ------------------------------------------------------------------ binary state files
def _lz4_stream(records: bytes) -> bytes:
    """A one-block lz4-java stream (raw block) and its closing block."""
    import xxhash

    checksum = xxhash.xxh32_intdigest(records, seed=0x9747B28C) & 0x0FFFFFFF
    block = LZ4_HEADER.pack(b"LZ4Block", 0x10 | 0x0A, len(records), len(records), checksum)
    return block + records + LZ4_HEADER.pack(b"LZ4Block", 0x10 | 0x0A, 0, 0, 0)


def _delta(*pairs: tuple[bytes, bytes]) -> bytes:
    body = b"".join(struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v
                    for k, v in pairs)
    return body + struct.pack(">i", -1)


def test_damage_after_the_end_marker_is_not_spark_s_problem():
    """Spark stops at the -1 marker and never reads the closing block: a flipped bit there
    restarts (measured); statekit's full decode still sees it."""
    data = bytearray(_lz4_stream(_delta((b"k", b"v"))))
    data[-3] ^= 0x01  # in the closing block's header
    assert spark_read_failure(bytes(data), "lz4", "delta", shown="d") is None
    with pytest.raises(CorruptFile):
        list(records_from_bytes(bytes(data), "lz4", "delta", shown="d"))
    # a replay stops where Spark stops
    records = list(records_from_bytes(bytes(data), "lz4", "delta", shown="d",
                                      check_end=False))
    assert [(r.key, r.value) for r in records] == [(b"k", b"v")]


def test_damage_in_the_records_is():
    import xxhash

    records = _delta((b"k", b"v"))
    data = bytearray(_lz4_stream(records))
    data[LZ4_HEADER.size + 2] ^= 0x01  # the key length, inside the first block
    damaged = bytes(data[LZ4_HEADER.size : LZ4_HEADER.size + len(records)])

    def checksum(block: bytes) -> int:
        return xxhash.xxh32_intdigest(block, seed=0x9747B28C) & 0x0FFFFFFF

    failure = spark_read_failure(bytes(data), "lz4", "delta", shown="d")
    assert isinstance(failure, CorruptFile) and (failure.path, failure.offset) == ("d", 0)
    assert str(failure) == (f"d: lz4 stream: block checksum mismatch (stored "
                            f"0x{checksum(records):08x}, computed 0x{checksum(damaged):08x}) "
                            "at byte 0")
    cut = spark_read_failure(bytes(data[:LZ4_HEADER.size + 4]), "lz4", "delta", shown="d")
    assert isinstance(cut, CorruptFile) and (cut.path, cut.offset) == ("d", 0)
    assert str(cut) == f"d: lz4 stream: truncated block (4 of {len(records)} bytes) at byte 0"


def _spark_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata", 'v1\n{"sstFiles":[],"numKeys":0}')
        archive.writestr("CURRENT", "MANIFEST-000005\n")
    return buffer.getvalue()


def test_a_zip_is_read_front_to_back():
    data = _spark_zip()
    assert set(java_zip_entries(data, path="z")) == {"metadata", "CURRENT"}
    central = data.rfind(b"PK\x01\x02")
    damaged = bytearray(data)
    damaged[central + 20] ^= 0x01  # the central directory: Python's zipfile stops on it
    assert set(java_zip_entries(bytes(damaged), path="z")) == {"metadata", "CURRENT"}
    damaged = bytearray(data)
    damaged[14] ^= 0x01  # the first entry's CRC in its local header
    with pytest.raises(CorruptFile, match="CRC"):
        java_zip_entries(bytes(damaged), path="z")
    with pytest.raises(CorruptFile):
        java_zip_entries(data[:40], path="z")


def test_a_zip_entry_with_a_data_descriptor():
    """Spark's zips set flag bit 3: sizes and CRC come after the data."""
    content = b"v1\n{}"
    deflate = zlib.compressobj(-1, zlib.DEFLATED, -zlib.MAX_WBITS)
    packed = deflate.compress(content) + deflate.flush()
    name = b"metadata"
    header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x808, 8, 0, 0, 0, 0, 0, len(name), 0)
    descriptor = struct.pack("<IIII", 0x08074B50, zlib.crc32(content), len(packed),
                             len(content))
    assert java_zip_entries(header + name + packed + descriptor, path="z") == \
        {"metadata": content}
