"""Properties of every byte-level reader, fed random bytes, damaged real files and damaged
files written by an independent model of Spark's writers (``builders``, ``zstandard``).

Damage is what real incidents produce: flipped bits, files cut short (a crash mid-write),
inserted or deleted bytes (bad copies). Every test checks, on every input:

* no exception but a statekit error escapes, and only of the classes the reader may raise;
* a statekit error carries the path it was given (``error.path``), and its message is one
  line, ``"<path>: <what is wrong>"`` (what the CLI prints after ``statekit: error:``);
* a success is well-formed, and exact where the answer is known: undamaged input reads back as
  what was written, the records re-encode to exactly the bytes read, a cut-off stream fails.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import re
import string
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import lz4.block
import zstandard
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from statekit.formats.compression import open_decompressed
from statekit.formats.modified_utf8 import decode_modified_utf8, write_utf
from statekit.formats.records import (
    StateRecord,
    iter_store_records,
    read_changelog,
    read_state_file,
)
from statekit.formats.rocksdb_keys import (
    split_multi_values,
    split_prefix_scan_key,
    strip_rocksdb_prefixes,
)
from statekit.formats.rocksdb_zip import LogFileRef, SstFileRef, read_zip_metadata
from statekit.formats.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    StructType,
    UserDefinedType,
    parse_spark_type,
    parse_struct_json,
)
from statekit.formats.schema_file import ColumnFamilySchema, read_schema_file
from statekit.formats.unsafe_row import RawValue, make_decoder, unique_field_names
from statekit.support.errors import CorruptFile, StatekitError, UnsupportedFormat
from tests.unit.formats.builders import (
    END,
    changelog_header,
    delete,
    lz4_stream,
    put,
    typed,
    unsafe_row,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "formats"
FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MEMFS = fsspec.filesystem("memory")
SHOWN = "s3://bucket/ck/state/0/3/9.delta"
"""The path handed to the readers that take one: every error must carry it."""


def real(*names: str) -> list[bytes]:
    return [(DATA / name).read_bytes() for name in names]


def decompressed(name: str, codec: str = "lz4") -> bytes:
    """A real file's content, decoded without statekit (the expected answer)."""
    data = (DATA / name).read_bytes()
    return lz4_java_decode(data) if codec == "lz4" else _zstd_reference(data)


def lz4_java_decode(data: bytes) -> bytes:
    """An undamaged lz4-java stream, decoded block by block with python-lz4 alone."""
    out, at = [], 0
    while at < len(data):
        _, token, clen, rlen, _ = struct.unpack_from("<8sBiii", data, at)
        payload = data[at + 21 : at + 21 + clen]
        at += 21 + clen
        if rlen:
            out.append(payload if token & 0xF0 == 0x10 else
                       lz4.block.decompress(payload, uncompressed_size=rlen))
    return b"".join(out)


def _zstd_reference(data: bytes) -> bytes:
    """What ``zstandard`` alone decodes from ``data`` (it does not notice a cut frame)."""
    return read_all(zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data),
                                                                read_across_frames=True))


def read_all(stream) -> bytes:
    parts = []
    while chunk := stream.read(65536):
        parts.append(chunk)
    return b"".join(parts)


def v1_keys(body: bytes) -> list[bytes]:
    """The keys of an undamaged v1 record stream, parsed without statekit."""
    keys, at = [], 0
    while (size := int.from_bytes(body[at : at + 4], "big", signed=True)) != -1:
        keys.append(body[at + 4 : at + 4 + size])
        at += 4 + size
        value = int.from_bytes(body[at : at + 4], "big", signed=True)
        at += 4 + max(value, 0)
    return keys


def _one(folder: str, pattern: str) -> str:
    return next(p.relative_to(DATA).as_posix() for p in (DATA / folder).glob(pattern))


LZ4_NAMES = ["aipws_hdfs/9.delta", "aipws_hdfs/8.delta", "agg_rocksdb_changelog_v1/1.changelog",
             "tws_rocksdb/1.changelog"]
ZSTD_NAMES = ["agg_zstd/1.delta", "agg_zstd/3.snapshot",
              "agg_rocksdb_changelog_v1/1.zstd.changelog"]
LZ4_FILES = real(*LZ4_NAMES)
ZSTD_FILES = real(*ZSTD_NAMES)
# Spark-written files and their content, decoded without statekit.
REAL_LZ4 = [(decompressed(n), (DATA / n).read_bytes()) for n in LZ4_NAMES]
REAL_ZSTD = [(decompressed(n, "zstd"), (DATA / n).read_bytes()) for n in ZSTD_NAMES]
RECORD_STREAMS = [decompressed("aipws_hdfs/9.delta"), decompressed("aipws_hdfs/8.delta"),
                  decompressed("agg_zstd/3.snapshot", "zstd")]
CHANGELOG_STREAMS = [
    decompressed("agg_rocksdb_changelog_v1/1.changelog"),
    decompressed("tws_rocksdb/1.changelog"),
    decompressed(_one("tws_rocksdb", "2_*.changelog")),
    decompressed(_one("aipws_rocksdb_changelog_v3", "3_*.changelog")),
]
ZIP_FILES = real("aipws_rocksdb/9.zip", "tws_rocksdb/1.zip")
SCHEMA_FILES = real("aipws_hdfs/schema", "agg_types/schema", "tws_rocksdb/schema_v3")


# --- damage -----------------------------------------------------------------------------------

@st.composite
def damaged_copy(draw, data: bytes, min_ops: int = 0) -> bytes:
    """``data`` with ``min_ops``-4 flips, byte changes, truncations, insertions or deletions
    (with ``min_ops`` 0, half the time none: the file as written)."""
    out = bytearray(data)
    count = draw(st.integers(1, 4)) if min_ops or draw(st.booleans()) else 0
    for _ in range(count):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "byte"]))
        pos = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and out:
            out[pos] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del out[pos:]
        elif kind == "insert":
            out[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del out[pos : pos + draw(st.integers(1, 16))]
    return bytes(out)


@st.composite
def damaged(draw, originals: list[bytes]) -> bytes:
    """A real file with at least one flip, truncation, insertion or deletion."""
    return draw(damaged_copy(draw(st.sampled_from(originals)), min_ops=1))


def inputs(originals: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), damaged(originals))


# --- what every outcome must satisfy ----------------------------------------------------------

def attempt(fn: Callable[[], Any], path: str, *allowed: type[StatekitError]
            ) -> tuple[Any, StatekitError | None]:
    """``(fn(), None)``, or ``(None, error)`` for a statekit error of an ``allowed`` class
    whose message is one line naming ``path``. Any other exception escapes: the test fails."""
    try:
        result = fn()
    except StatekitError as error:
        event(type(error).__name__)
        assert isinstance(error, allowed), f"{type(error).__name__} not in {allowed}: {error}"
        assert_one_line_naming(error, path)
        return None, error
    event("read")
    return result, None


def assert_one_line_naming(error: StatekitError, path: str) -> None:
    text = str(error)
    assert error.path == path, (error.path, path)
    assert text == f"{path}: {error.message}", text
    assert len(text.splitlines()) == 1, f"not one line: {text!r}"
    assert error.message.strip(), "an error that says nothing"


def assert_offset_within(error: StatekitError, data: bytes) -> None:
    """A CorruptFile with a byte offset: inside the file, and said in the message."""
    assert isinstance(error, CorruptFile) and error.offset is not None, error
    assert 0 <= error.offset <= len(data), (error.offset, len(data))
    assert str(error).endswith(f" at byte {error.offset}"), str(error)


def assert_decompressed_offset_within(error: StatekitError, data: bytes) -> None:
    """A record reader's CorruptFile names its position in the decompressed stream."""
    if isinstance(error, CorruptFile):
        found = re.search(r" at decompressed byte (\d+)", error.message)
        assert found, error.message
        assert int(found.group(1)) <= len(data), (error.message, len(data))


# --- codecs -----------------------------------------------------------------------------------

@st.composite
def lz4_case(draw):
    """``(payload, its lz4-java stream, what the reader is given)``; payload and stream are
    ``None`` for random bytes."""
    source = draw(st.sampled_from(["written", "spark", "random"]))
    if source == "random":
        return None, None, draw(st.binary(max_size=512))
    if source == "spark":
        payload, stream = draw(st.sampled_from(REAL_LZ4))
    else:
        payload = draw(st.one_of(st.binary(max_size=3000), st.sampled_from(RECORD_STREAMS)))
        stream = lz4_stream(payload, block_size=draw(st.sampled_from([64, 1024, 32 * 1024])))
    return payload, stream, draw(damaged_copy(stream))


@FUZZ
@given(lz4_case())
def test_lz4(case):
    payload, stream, data = case
    out, error = attempt(lambda: read_all(open_decompressed(io.BytesIO(data), "lz4", path=SHOWN)),
                         SHOWN, CorruptFile)
    if error is not None:
        assert_offset_within(error, data)
        assert error.message.startswith("lz4 stream: ")
    if not data.startswith(b"LZ4Block"):
        assert error is not None, "not an lz4-java stream, yet read"
    if stream is None:
        return
    if data == stream:
        assert error is None and out == payload
    elif stream.startswith(data):
        assert error is not None, f"a stream cut at byte {len(data)} of {len(stream)} reads"
    elif error is None:  # every block checksum held: the damage spared the data (a level bit)
        assert out == payload


def starts_a_zstd_frame(data: bytes) -> bool:
    """A zstd frame's magic or a skippable frame's."""
    magic = int.from_bytes(data[:4], "little")
    return len(data) >= 4 and (data[:4] == b"\x28\xb5\x2f\xfd" or magic & ~0xF == 0x184D2A50)


def _zstd_frame(payload: bytes, level: int, checksum: bool) -> bytes:
    """One frame as zstd-jni streams it: no content size."""
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=checksum).compressobj()
    return compressor.compress(payload) + compressor.flush()


@st.composite
def zstd_case(draw):
    source = draw(st.sampled_from(["written", "spark", "random", "magic"]))
    if source == "random":
        return None, None, draw(st.binary(max_size=512))
    if source == "magic":
        return None, None, b"\x28\xb5\x2f\xfd" + draw(st.binary(max_size=64))
    if source == "spark":
        payload, stream = draw(st.sampled_from(REAL_ZSTD))
    else:
        payload = draw(st.one_of(st.binary(max_size=3000), st.sampled_from(RECORD_STREAMS)))
        stream = _zstd_frame(payload, draw(st.sampled_from([1, 3, 9])), draw(st.booleans()))
    return payload, stream, draw(damaged_copy(stream))


@FUZZ
@given(zstd_case())
def test_zstd(case):
    payload, stream, data = case
    out, error = attempt(lambda: read_all(open_decompressed(io.BytesIO(data), "zstd",
                                                            path=SHOWN)), SHOWN, CorruptFile)
    if error is not None:
        assert_offset_within(error, data)
        assert error.message.startswith("zstd stream: ")
    if not starts_a_zstd_frame(data):
        assert error is not None, "no zstd frame, yet read"
    if stream is not None and data == stream:
        assert error is None and out == payload
    elif stream is not None and stream.startswith(data):
        assert error is not None, f"a frame cut at byte {len(data)} of {len(stream)} reads"
    elif error is None:  # zstd has no checksum of its own here: zstandard must agree
        assert out == _zstd_reference(data)


# --- records ----------------------------------------------------------------------------------

KEYS = st.binary(max_size=40)
VALUES = st.binary(max_size=80)


def v1_body(records) -> bytes:
    """HDFS delta/snapshot and changelog v1/v3 records, as Spark writes them."""
    return b"".join(delete(k) if v is None else put(k, v) for _, k, v in records) + END


_TYPE_BYTES = {"put": 0x01, "delete": 0x10, "merge": 0x11}


def v2_body(records) -> bytes:
    return b"".join(typed(_TYPE_BYTES[op], k, v) for op, k, v in records) + b"\x00"


def v1_records(*, deletes: bool = True):
    value = st.one_of(st.none(), VALUES) if deletes else VALUES
    return st.lists(st.tuples(KEYS, value).map(
        lambda kv: StateRecord("put" if kv[1] is not None else "delete", *kv)), max_size=20)


def v2_records():
    return st.lists(st.one_of(
        st.tuples(st.sampled_from(["put", "merge"]), KEYS, VALUES),
        st.tuples(st.just("delete"), KEYS, st.none())).map(lambda r: StateRecord(*r)),
        max_size=20)


def assert_well_formed(records, ops: set[str]) -> None:
    for record in records:
        assert record.op in ops, record
        assert isinstance(record.key, bytes)
        assert (record.value is None) == (record.op == "delete"), record
        assert record.value is None or isinstance(record.value, bytes)


@st.composite
def store_case(draw):
    """``(records written or None, the bytes given to the reader)``."""
    if draw(st.booleans()):
        records = draw(v1_records())
        return records, draw(damaged_copy(v1_body(records)))
    return None, draw(inputs(RECORD_STREAMS))


@FUZZ
@given(store_case(), st.booleans())
def test_store_records(case, allow_deletes):
    written, data = case
    records, error = attempt(lambda: list(iter_store_records(
        io.BytesIO(data), path=SHOWN, allow_deletes=allow_deletes)), SHOWN, CorruptFile)
    if error is not None:
        assert_decompressed_offset_within(error, data)
    else:
        assert_well_formed(records, {"put", "delete"} if allow_deletes else {"put"})
        # lossless: the records (their counts, lengths, bytes) are exactly the stream's
        assert v1_body(records) == data
    if written is not None and data == v1_body(written):
        if allow_deletes or all(r.value is not None for r in written):
            assert records == written
        else:
            assert error is not None, "a snapshot with a delete record reads"


LINEAGE = st.lists(st.fixed_dictionaries({
    "version": st.integers(1, 10**6), "checkpointUniqueId": st.uuids().map(str)}), max_size=3
).map(json.dumps)


@st.composite
def changelog_case(draw):
    """``((version, lineage, records) written or None, bytes written, bytes to read)``."""
    if not draw(st.booleans()):
        return None, None, draw(inputs(CHANGELOG_STREAMS))
    version = draw(st.one_of(st.integers(1, 4), st.sampled_from([0, 5, 99, -1])))  # or newer
    lineage = draw(LINEAGE) if version in (3, 4) else None
    records = draw(v1_records() if version in (1, 3) else v2_records())
    head = b"" if version == 1 else changelog_header(version, lineage)
    body = v1_body(records) if version in (1, 3) else v2_body(records)
    return (version, lineage, records), head + body, draw(damaged_copy(head + body))


def _declared_version(data: bytes) -> int | None:
    """The ``v<number>`` a changelog starts with (``writeUTF``), or None (then it is v1)."""
    size = int.from_bytes(data[:2], "big")
    try:
        tag = decode_modified_utf8(data[2 : 2 + size]) if len(data) >= 2 + size else ""
    except ValueError:
        return None
    number = tag[1:]
    if tag.startswith("v") and number.isascii() and number.lstrip("+-").isdigit():
        return int(number)
    return None


@FUZZ
@given(changelog_case())
def test_changelog(case):
    written, original, data = case

    def read():
        header, records = read_changelog(io.BytesIO(data), path=SHOWN)
        return header, list(records)

    result, error = attempt(read, SHOWN, CorruptFile, UnsupportedFormat)
    declared = _declared_version(data)
    if isinstance(error, UnsupportedFormat):
        assert declared is not None and declared not in (1, 2, 3, 4), (declared, error)
        assert f"v{declared}" in error.message
    if data == original and written[0] in (1, 2, 3, 4):
        assert error is None, f"a changelog as written does not read: {error}"
    elif data == original:
        assert isinstance(error, UnsupportedFormat), f"changelog v{written[0]} reads: {error}"
    if error is not None:
        assert_decompressed_offset_within(error, data)
        return
    header, records = result
    assert header.version in (1, 2, 3, 4)
    assert_well_formed(records, {"put", "delete", "merge"} if header.version in (2, 4)
                       else {"put", "delete"})
    # lossless: header and records re-encode to exactly the bytes read
    if header.version == 1:
        assert header.lineage_raw is None and v1_body(records) == data
    else:
        assert declared == header.version
        at = 2 + int.from_bytes(data[:2], "big")
        if header.version >= 3:
            size = int.from_bytes(data[at : at + 2], "big")
            assert decode_modified_utf8(data[at + 2 : at + 2 + size]) == header.lineage_raw
            assert json.dumps(header.lineage) == json.dumps(json.loads(header.lineage_raw))
            at += 2 + size
        body = v1_body if header.version == 3 else v2_body
        assert body(records) == data[at:]
    if data == original:
        assert (header.version, header.lineage_raw, records) == written


@st.composite
def state_file_case(draw):
    """``(kind, codec, records written or None, stream written or None, bytes to read)``."""
    if draw(st.integers(0, 2)) == 0:  # real files, read as any kind with any codec
        return (draw(st.sampled_from(["delta", "snapshot", "changelog"])),
                draw(st.sampled_from(["lz4", "zstd"])), None, None,
                draw(inputs(LZ4_FILES + ZSTD_FILES)))
    kind = draw(st.sampled_from(["delta", "snapshot", "changelog"]))
    codec = draw(st.sampled_from(["lz4", "zstd"]))
    if kind == "changelog" and draw(st.booleans()):
        records = draw(v2_records())
        payload = changelog_header(2) + v2_body(records)
    else:
        records = draw(v1_records(deletes=kind != "snapshot"))
        payload = v1_body(records)
    stream = lz4_stream(payload, block_size=256) if codec == "lz4" else \
        _zstd_frame(payload, 3, False)
    return kind, codec, records, stream, draw(damaged_copy(stream))


@FUZZ
@given(state_file_case())
def test_read_state_file_end_to_end(case):
    kind, codec, written, stream, data = case
    MEMFS.pipe("/fuzz/state", data)
    records, error = attempt(lambda: list(read_state_file(MEMFS, "/fuzz/state", codec, kind,
                                                          shown=SHOWN)),
                             SHOWN, CorruptFile, UnsupportedFormat)
    if not (data.startswith(b"LZ4Block") if codec == "lz4" else starts_a_zstd_frame(data)):
        assert isinstance(error, CorruptFile), f"{codec} read from {data[:8]!r}: {error}"
    if error is None:
        assert_well_formed(records, {"snapshot": {"put"}, "delta": {"put", "delete"},
                                     "changelog": {"put", "delete", "merge"}}[kind])
    if stream is None:
        return
    if data == stream:
        assert error is None and records == written
    elif stream.startswith(data):
        assert isinstance(error, CorruptFile), "a cut-off state file reads"
    elif error is None and codec == "lz4":  # checksummed: undamaged records or an error
        assert records == written
    elif error is None:  # zstd: the records of what zstandard decodes, read on their own
        plain = io.BytesIO(_zstd_reference(data))
        expected = list(read_changelog(plain, path=SHOWN)[1]) if kind == "changelog" else \
            list(iter_store_records(plain, path=SHOWN, allow_deletes=kind == "delta"))
        assert records == expected


# --- RocksDB checkpoint zips ------------------------------------------------------------------

NAMES = st.text(string.ascii_letters + string.digits + "-_.$", max_size=16)
SST_ENTRY = st.fixed_dictionaries({"localFileName": NAMES, "dfsSstFileName": NAMES,
                                   "sizeBytes": st.integers(0, 2**40)})
METADATA = st.fixed_dictionaries(
    {"sstFiles": st.lists(SST_ENTRY, max_size=4), "numKeys": st.integers(0, 2**40)},
    optional={"numInternalKeys": st.integers(0, 1000),
              "logFiles": st.lists(st.fixed_dictionaries(
                  {"localFileName": NAMES, "dfsLogFileName": NAMES,
                   "sizeBytes": st.integers(0, 2**20)}), max_size=2),
              "columnFamilyMapping": st.dictionaries(NAMES, st.integers(0, 100), max_size=3),
              "columnFamilyTypeMap": st.dictionaries(NAMES, st.booleans(), max_size=3),
              "maxColumnFamilyId": st.integers(0, 100)})
WRONG_TYPES = {"numKeys": ["12", True, 1.5, [1]], "numInternalKeys": ["0", False],
               "maxColumnFamilyId": [1.0, "x"], "sstFiles": ["a.sst", [1], [{"x": 1}]],
               "columnFamilyMapping": [[1], {"a": "1"}, {"a": True}],
               "columnFamilyTypeMap": [{"a": 1}, "x"]}


def _zip(metadata: bytes, method: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        archive.writestr("CURRENT", "MANIFEST-000005\n")
        archive.writestr("metadata", metadata)
        archive.writestr("OPTIONS-000007", "[Version]\n" * 20)
    return out.getvalue()


@st.composite
def zip_case(draw):
    """``(metadata object written or None, valid?, zip bytes written or None, bytes)``."""
    source = draw(st.sampled_from(["written", "wrong type", "spark"]))
    if source == "spark":
        return None, True, None, draw(inputs(ZIP_FILES))
    obj = draw(METADATA)
    if source == "wrong type":
        field = draw(st.sampled_from(sorted(WRONG_TYPES)))
        obj = {**obj, field: draw(st.sampled_from(WRONG_TYPES[field]))}
    archive = _zip(b"v1\n" + json.dumps(obj).encode(),
                   draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])))
    return obj, source == "written", archive, draw(damaged_copy(archive))


def _metadata_as_python_reads_it(data: bytes) -> Any:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return json.loads(archive.read("metadata").decode().partition("\n")[2])


@FUZZ
@given(zip_case())
@example((None, True, None, ZIP_FILES[0]))
@example((None, True, None, ZIP_FILES[1]))
def test_zip_metadata(case):
    obj, valid, archive, data = case
    MEMFS.pipe("/fuzz/1.zip", data)
    meta, error = attempt(lambda: read_zip_metadata(MEMFS, "/fuzz/1.zip"), "/fuzz/1.zip",
                          CorruptFile, UnsupportedFormat)
    if data in ZIP_FILES:  # as Spark wrote them (README: numKeys 65; 76 + 25 internal)
        assert error is None
        assert (meta.num_keys, meta.num_internal_keys) == {0: (65, 0), 1: (76, 25)}[
            ZIP_FILES.index(data)]
    if archive is not None and data == archive:
        if not valid:
            assert error is not None, f"metadata with a wrong type reads: {obj}"
        else:
            assert error is None
            assert meta.raw == obj and meta.num_keys == obj["numKeys"]
            assert meta.sst_files == tuple(SstFileRef(e["localFileName"], e["dfsSstFileName"],
                                                      e["sizeBytes"]) for e in obj["sstFiles"])
            assert meta.column_family_mapping == obj.get("columnFamilyMapping", {})
            assert meta.column_family_internal == obj.get("columnFamilyTypeMap", {})
    if error is not None:
        return
    # well-formed and exactly the member Python's own zipfile reads
    assert meta.format_version == "v1"
    assert meta.raw == _metadata_as_python_reads_it(data)
    raw = meta.raw
    assert isinstance(raw, dict)
    assert all(isinstance(r, SstFileRef) and isinstance(r.local_name, str)
               and isinstance(r.dfs_name, str) and type(r.size_bytes) is int and r.size_bytes >= 0
               for r in meta.sst_files)
    assert [r.dfs_name for r in meta.sst_files] == [
        e["dfsSstFileName"] for e in raw.get("sstFiles") or []]
    assert all(isinstance(r, LogFileRef) for r in meta.log_files)
    assert len(meta.log_files) == len(raw.get("logFiles") or [])
    for name in ("num_keys", "num_internal_keys", "max_column_family_id"):
        value = getattr(meta, name)
        assert value is None or type(value) is int, (name, value)
    assert meta.num_keys == raw.get("numKeys")
    assert all(isinstance(k, str) and type(v) is int
               for k, v in meta.column_family_mapping.items())
    assert all(isinstance(k, str) and type(v) is bool
               for k, v in meta.column_family_internal.items())


# --- schema files -----------------------------------------------------------------------------

ATOMIC = st.sampled_from(["string", "long", "integer", "double", "boolean", "date", "timestamp",
                          "binary", "decimal(10,2)"])
STRUCT_JSON = st.lists(st.tuples(st.text(string.ascii_letters + "_#", min_size=1, max_size=8),
                                 ATOMIC), max_size=6).map(lambda fields: json.dumps(
    {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}}
                                  for n, t in fields]}))


def _chunked(text: str, size: int) -> bytes:
    chunks = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    return struct.pack(">i", len(chunks)) + b"".join(write_utf(c) for c in chunks)


@st.composite
def schema_case(draw):
    """``((version, key JSON, value JSON) written or None, bytes)``."""
    if not draw(st.booleans()):
        return None, draw(inputs(SCHEMA_FILES))
    version, key, value = draw(st.sampled_from([1, 2])), draw(STRUCT_JSON), draw(STRUCT_JSON)
    if version == 1:
        data = write_utf("v1") + write_utf(key) + write_utf(value)
    else:
        size = draw(st.integers(1, 64))
        data = write_utf("v2") + _chunked(key, size) + _chunked(value, size)
    return (version, key, value, data), draw(damaged_copy(data))


_REAL_SCHEMAS = {  # README: what Spark wrote
    0: (2, ("user_id",), ("groupState", "timeoutTimestamp"), ()),
    1: (2, ("window", "user_id", "country"), ("count", "sum", "isEmpty", "sum", "isEmpty", "max",
                                               "max", "min", "sum", "count", "max", "max",
                                               "max", "max", "max", "max", "buf"), ()),
    2: (3, None, None, ("$rowCounter_amounts", "amounts", "count", "countries")),
}


@FUZZ
@given(schema_case())
@example((None, SCHEMA_FILES[0]))
@example((None, SCHEMA_FILES[1]))
@example((None, SCHEMA_FILES[2]))
def test_schema_file(case):
    written, data = case
    MEMFS.pipe("/fuzz/schema", data)
    schema, error = attempt(lambda: read_schema_file(MEMFS, "/fuzz/schema"), "/fuzz/schema",
                            CorruptFile, UnsupportedFormat)
    if data in SCHEMA_FILES:
        assert error is None
        names = (schema.version, schema.key_schema and schema.key_schema.names,
                 schema.value_schema and schema.value_schema.names,
                 tuple(cf.name for cf in schema.column_families))
        assert names == _REAL_SCHEMAS[SCHEMA_FILES.index(data)]
    if written is not None and data == written[3]:
        version, key, value, _ = written
        assert error is None
        assert (schema.version, schema.raw) == (version, {"key": key, "value": value})
        assert schema.key_schema == parse_struct_json(key)
        assert schema.value_schema == parse_struct_json(value)
    if error is not None:
        return
    assert schema.version in (1, 2, 3)
    if schema.version in (1, 2):
        assert data[2 : 2 + int.from_bytes(data[:2], "big")].decode("latin-1").startswith("v")
        assert isinstance(schema.key_schema, StructType)
        assert isinstance(schema.value_schema, StructType)
        assert schema.column_families == ()
        assert schema.key_schema == parse_struct_json(schema.raw["key"])
        assert schema.value_schema == parse_struct_json(schema.raw["value"])
    else:
        assert all(isinstance(cf, ColumnFamilySchema) and isinstance(cf.name, str)
                   and isinstance(cf.key_schema, StructType)
                   and isinstance(cf.value_schema, StructType)
                   and isinstance(cf.key_encoder_spec, dict) for cf in schema.column_families)
        default = [cf for cf in schema.column_families if cf.name == "default"]
        assert schema.key_schema == (default[0].key_schema if default else None)
        assert len(schema.raw["column_families"]) == len(schema.column_families)


# --- UnsafeRow --------------------------------------------------------------------------------

def _schema(*fields: tuple[str, object]) -> StructType:
    parsed = parse_spark_type({"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]})
    assert isinstance(parsed, StructType)
    return parsed


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
    _schema(("sum", "long"), ("sum", "double"), ("isEmpty", "boolean")),  # repeated names
]
ROWS = [key[1:] for key in v1_keys(decompressed("agg_rocksdb_changelog_v1/1.changelog"))][:5]

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
WRITABLE = _schema(  # every field a value strategy below can fill
    ("a", "long"), ("b", "double"), ("c", "date"), ("d", "timestamp"), ("e", "timestamp_ntz"),
    ("f", "decimal(10,2)"), ("g", "boolean"), ("h", "short"), ("i", "string"),
    ("j", "binary"), ("k", "decimal(38,4)"), ("l", "float"),
    ("s", {"type": "struct", "fields": [
        {"name": "x", "type": "string", "nullable": True, "metadata": {}},
        {"name": "y", "type": "integer", "nullable": True, "metadata": {}}]}),
    ("arr", {"type": "array", "elementType": "string", "containsNull": True}),
    ("m", {"type": "map", "keyType": "string", "valueType": "long",
           "valueContainsNull": True}))
_UTC = dt.timezone.utc
FIELD_VALUES = {
    "a": st.integers(-(2**63), 2**63 - 1),
    "b": st.floats(),
    "c": st.dates(),
    "d": st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                      timezones=st.just(_UTC)),
    "e": st.datetimes(),
    "f": st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=2),
    "g": st.booleans(),
    "h": st.integers(-(2**15), 2**15 - 1),
    "i": TEXT,
    "j": st.binary(max_size=20),
    "k": st.decimals(min_value=-(10**30), max_value=10**30, places=4),
    "l": st.floats(width=32),
    "s": st.fixed_dictionaries({"x": st.none() | TEXT,
                                "y": st.none() | st.integers(-(2**31), 2**31 - 1)}),
    "arr": st.lists(st.none() | TEXT, max_size=5),
    "m": st.dictionaries(TEXT, st.none() | st.integers(-(2**63), 2**63 - 1), max_size=4),
}
ROW_VALUES = st.fixed_dictionaries({name: st.none() | values
                                    for name, values in FIELD_VALUES.items()})

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "long": (int,), "integer": (int,), "short": (int,), "byte": (int,), "boolean": (bool,),
    "double": (float,), "float": (float,), "string": (str,), "binary": (bytes,),
    "date": (dt.date,), "timestamp": (dt.datetime,), "timestamp_ntz": (dt.datetime,),
    "calendarinterval": (dict,), "interval day to second": (dt.timedelta,),
    "interval year to month": (int,),
}
_MAY_BE_RAW = {"date", "timestamp", "timestamp_ntz", "interval day to second", "array", "map"}
"""Types whose values may come back undecoded (out of Python's range, unknown elements)."""
_SLOT_FORMATS = {"long": "<q", "integer": "<i", "short": "<h", "byte": "<b", "boolean": "<?",
                 "double": "<d", "float": "<f"}


def conforms(value: Any, t: DataType) -> bool:
    """``value`` is what the decoder may return for type ``t``."""
    if isinstance(t, UserDefinedType):
        return conforms(value, t.sql_type)
    if value is None:
        return True
    if isinstance(value, RawValue):
        known = (StructType, DecimalType)
        return t.name in _MAY_BE_RAW or (t.name not in (*_PY_TYPES, "null")
                                         and not isinstance(t, known))
    if isinstance(t, StructType):
        return (isinstance(value, dict) and tuple(value) == unique_field_names(t)
                and all(conforms(v, f.data_type) for v, f in zip(value.values(), t.fields,
                                                                  strict=True)))
    if isinstance(t, ArrayType):
        return isinstance(value, list) and all(conforms(v, t.element_type) for v in value)
    if isinstance(t, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        return isinstance(value, (dict, list)) and all(
            conforms(k, t.key_type) and conforms(v, t.value_type) for k, v in pairs)
    if isinstance(t, DecimalType):
        return isinstance(value, decimal.Decimal)
    if t.name not in _PY_TYPES:
        return False  # a null type decodes to None, an unknown one to a RawValue
    if type(value) is bool and t.name != "boolean":
        return False
    if t.name == "date":
        return type(value) is dt.date
    if t.name in ("timestamp", "timestamp_ntz"):
        return isinstance(value, dt.datetime) and (value.tzinfo is not None) == (
            t.name == "timestamp")
    return isinstance(value, _PY_TYPES[t.name])


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a float slot may hold one)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@st.composite
def row_case(draw):
    """``(schema, values written or None, bytes)``."""
    if draw(st.booleans()):
        values = draw(ROW_VALUES)
        data = unsafe_row(WRITABLE, values)
        return WRITABLE, values, data, draw(damaged_copy(data))
    return draw(st.sampled_from(SCHEMAS)), None, None, draw(inputs(ROWS))


@settings(FUZZ, suppress_health_check=list(HealthCheck))
@given(row_case())
def test_unsafe_row(case):
    schema, written, encoded, data = case
    row, error = attempt(lambda: make_decoder(schema, path=SHOWN)(data), SHOWN, CorruptFile)
    if encoded is not None and data == encoded:
        assert error is None and same(row, written), (row, written)
    if error is not None:
        assert error.message.startswith("UnsafeRow does not match the schema: ")
        _, again = attempt(lambda: make_decoder(schema, path=SHOWN, as_tuple=True)(data), SHOWN,
                           CorruptFile)
        assert again is not None, "as_tuple decodes a row the dict decoder refuses"
        return
    # one value per field, in order, of the field's type
    assert isinstance(row, dict) and tuple(row) == unique_field_names(schema)
    for value, field in zip(row.values(), schema.fields, strict=True):
        assert conforms(value, field.data_type), (field, value)
    assert same(list(make_decoder(schema, as_tuple=True)(data)), list(row.values()))
    # the fixed-width slots, read independently: null bits and plain numbers
    words = (len(schema.fields) + 63) // 64
    nulls = int.from_bytes(data[: 8 * words], "little")
    for i, (value, field) in enumerate(zip(row.values(), schema.fields, strict=True)):
        if nulls >> i & 1:
            assert value is None, (field.name, value)
        elif field.data_type.name in _SLOT_FORMATS:
            slot = struct.unpack_from(_SLOT_FORMATS[field.data_type.name], data,
                                      8 * words + 8 * i)[0]
            assert same(value, slot), (field.name, value, slot)


# --- RocksDB key and value prefixes -----------------------------------------------------------

def _entry(row: bytes) -> bytes:
    return (len(row) + 1).to_bytes(4, "little", signed=True) + b"\x00" + row


ROW = st.binary(max_size=24)
PREFIXED = st.one_of(
    st.binary(max_size=128),
    st.tuples(st.integers(-(2**15), 2**15 - 1), ROW).map(
        lambda c: c[0].to_bytes(2, "little", signed=True) + b"\x00" + c[1]),
    st.tuples(ROW, ROW).map(lambda p: (len(p[0]) + 1).to_bytes(4, "little", signed=True)
                            + b"\x00" + p[0] + b"\x00" + p[1]),
    st.lists(ROW, max_size=4).map(lambda rows: b"".join(map(_entry, rows))),
    st.lists(ROW, max_size=4).map(lambda rows: b"\xfe".join(map(_entry, rows))),
)


@FUZZ
@given(PREFIXED, st.booleans())
def test_rocksdb_prefixes(data, column_families):
    at = 3 if column_families else 1
    result, error = attempt(lambda: strip_rocksdb_prefixes(
        data, column_families=column_families, path=SHOWN), SHOWN, CorruptFile,
        UnsupportedFormat)
    # the outcome is fully determined by the first bytes
    if len(data) < at:
        assert isinstance(error, CorruptFile)
    elif data[at - 1] != 0:
        assert isinstance(error, UnsupportedFormat) and f"byte {data[at - 1]}" in error.message
    else:
        cf_id = int.from_bytes(data[:2], "little", signed=True) if column_families else None
        assert error is None and result == (cf_id, data[at:])

    parts, error = attempt(lambda: split_prefix_scan_key(data, path=SHOWN), SHOWN, CorruptFile,
                           UnsupportedFormat)
    if error is None:  # the key is exactly its two rows
        prefix, rest = parts
        assert (len(prefix) + 1).to_bytes(4, "little") + b"\x00" + prefix + b"\x00" + rest \
            == data

    rows, error = attempt(lambda: split_multi_values(data, path=SHOWN), SHOWN, CorruptFile,
                          UnsupportedFormat)
    if error is None:  # the value is exactly its entries
        assert b"".join(map(_entry, rows)) == data

    rows, error = attempt(lambda: split_multi_values(data, delimited=True, path=SHOWN), SHOWN,
                          CorruptFile, UnsupportedFormat)
    if error is None:  # entries with one delimiter byte between them (and maybe after)
        pos = 0
        for row in rows:
            assert data[pos : pos + len(row) + 5] == _entry(row)
            pos += len(row) + 6
        assert len(data) in (pos - 1, pos) if rows else data == b""
