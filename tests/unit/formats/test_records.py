"""Record layouts of HDFS deltas/snapshots and RocksDB changelogs v1-v4, from hand-built bytes."""

from __future__ import annotations

import io
import json
import tracemalloc

import fsspec
import pytest

from statekit.formats.records import (
    ChangelogHeader,
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
from statekit.support.errors import BadInput, CorruptFile, UnsupportedFormat
from tests.unit.formats.builders import (
    END,
    changelog_header,
    delete,
    lz4_stream,
    put,
    typed,
)


def records(data: bytes, **kw) -> list[StateRecord]:
    return list(iter_store_records(io.BytesIO(data), path="p/1.delta", **kw))


def changelog(data: bytes) -> tuple[ChangelogHeader, list[StateRecord]]:
    header, recs = read_changelog(io.BytesIO(data), path="p/1.changelog")
    return header, list(recs)


def test_put_delete_end():
    data = put(b"k1", b"v1") + delete(b"k2") + put(b"", b"") + END
    assert records(data) == [
        StateRecord("put", b"k1", b"v1"),
        StateRecord("delete", b"k2", None),
        StateRecord("put", b"", b""),
    ]


def test_empty_file_with_only_the_end_marker():
    assert records(END) == []


def test_missing_end_marker():
    data = put(b"k1", b"v1")
    with pytest.raises(CorruptFile, match=f"without the end-of-file marker.*decompressed byte "
                                          f"{len(data)}") as err:
        records(data)
    assert err.value.path == "p/1.delta"


def test_truncated_key_and_value_report_the_record_start():
    first = put(b"k1", b"v1")
    second = put(b"key-two", b"value-two")
    with pytest.raises(CorruptFile, match=f"truncated record \\(value: 3 of 9 bytes\\) starting "
                                          f"at decompressed byte {len(first)}"):
        records(first + second[:-6])
    with pytest.raises(CorruptFile, match="truncated record \\(key: 2 of 7"):
        records(first + second[:6])
    with pytest.raises(CorruptFile, match="truncated record \\(key length\\)"):
        records(first + b"\x00\x00")


def test_bogus_negative_lengths():
    with pytest.raises(CorruptFile, match=r"bad key length -5 .*decompressed byte 0"):
        records(b"\xff\xff\xff\xfb" + b"x" * 10)
    with pytest.raises(CorruptFile, match="bad value length -2"):
        records(b"\x00\x00\x00\x01k\xff\xff\xff\xfe")


def test_snapshot_rejects_deletes():
    with pytest.raises(CorruptFile, match="bad value length -1"):
        records(delete(b"k") + END, allow_deletes=False)


def test_data_after_end_marker_is_corrupt():
    with pytest.raises(CorruptFile, match="after the end-of-file marker"):
        records(put(b"k", b"v") + END + b"\x00")


def test_absurd_length_does_not_allocate():
    data = b"\x7f\xff\xff\xff" + b"x" * 100
    tracemalloc.start()
    try:
        with pytest.raises(CorruptFile, match="truncated record"):
            records(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_changelog_v1_has_no_header():
    header, recs = changelog(put(b"k", b"v") + delete(b"d") + END)
    assert header == ChangelogHeader(1)
    assert [r.op for r in recs] == ["put", "delete"]


def test_changelog_v1_with_a_key_longer_than_65535_bytes():
    key = b"v" * 70_000  # its length's top bytes read as a UTF length; Spark falls back to v1
    header, recs = changelog(put(key, b"x") + END)
    assert header.version == 1
    assert recs == [StateRecord("put", key, b"x")]


def test_changelog_v1_empty():
    assert changelog(END) == (ChangelogHeader(1), [])


def test_changelog_v2_put_delete_merge():
    data = (changelog_header(2) + typed(0x01, b"k", b"v") + typed(0x10, b"d", None)
            + typed(0x11, b"m", b"appended") + b"\x00")
    header, recs = changelog(data)
    assert header == ChangelogHeader(2)
    assert recs == [StateRecord("put", b"k", b"v"), StateRecord("delete", b"d", None),
                    StateRecord("merge", b"m", b"appended")]


def test_changelog_v2_errors():
    with pytest.raises(CorruptFile, match="unknown record type 0x07"):
        changelog(changelog_header(2) + b"\x07")
    with pytest.raises(CorruptFile, match="delete record with value length 3"):
        changelog(changelog_header(2) + b"\x10\x00\x00\x00\x01k\x00\x00\x00\x03abc\x00")
    with pytest.raises(CorruptFile, match="without the end-of-file record"):
        changelog(changelog_header(2) + typed(0x01, b"k", b"v"))


def test_changelog_v3_and_v4_lineage():
    lineage = [{"version": 3, "checkpointUniqueId": "abc"}]
    header, recs = changelog(changelog_header(3, json.dumps(lineage)) + put(b"k", b"v") + END)
    assert (header.version, header.lineage) == (3, lineage)
    assert header.lineage_raw == json.dumps(lineage)
    assert recs == [StateRecord("put", b"k", b"v")]
    header, recs = changelog(changelog_header(4, "[]") + typed(0x11, b"k", b"v") + b"\x00")
    assert (header.version, header.lineage, recs) == (4, [], [StateRecord("merge", b"k", b"v")])


def test_changelog_bad_lineage():
    with pytest.raises(CorruptFile, match="lineage is not JSON"):
        changelog(changelog_header(3, "[{") + END)
    with pytest.raises(CorruptFile, match="truncated changelog lineage"):
        changelog(changelog_header(3) + b"\x00")


@pytest.mark.parametrize("version", [5, 9, 0])
def test_changelog_unknown_version(version):
    with pytest.raises(UnsupportedFormat, match=f"changelog format v{version} is not supported"):
        changelog(changelog_header(version) + END)


def test_changelog_version_tag_that_is_not_a_number_means_v1():
    # Spark's reader: "vX" raises NumberFormatException -> version 1, replayed from byte 0.
    data = b"\x00\x02vX" + b"\x00\x00\x00\x01" + b"v" + END
    with pytest.raises(CorruptFile):
        changelog(data)


@pytest.fixture()
def memfs():
    fs = fsspec.filesystem("memory")
    yield fs
    fs.rm("/rf", recursive=True) if fs.exists("/rf") else None


def test_read_state_file_all_kinds(memfs):
    memfs.pipe("/rf/1.delta", lz4_stream(put(b"k", b"v") + delete(b"x") + END))
    memfs.pipe("/rf/1.snapshot", lz4_stream(put(b"k", b"v") + END))
    memfs.pipe("/rf/1.changelog", lz4_stream(changelog_header(2) + typed(1, b"k", b"v") + b"\0"))
    assert [r.op for r in read_state_file(memfs, "/rf/1.delta", "lz4", "delta")] == [
        "put", "delete"]
    assert len(list(read_state_file(memfs, "/rf/1.snapshot", "lz4", "snapshot"))) == 1
    assert len(list(read_state_file(memfs, "/rf/1.changelog", None, "changelog"))) == 1
    memfs.pipe("/rf/2.snapshot", lz4_stream(delete(b"x") + END))
    with pytest.raises(CorruptFile, match="bad value length -1"):
        list(read_state_file(memfs, "/rf/2.snapshot", "lz4", "snapshot"))


def test_read_state_file_missing_is_bad_input(memfs):
    with pytest.raises(BadInput, match="not found") as err:
        read_state_file(memfs, "/rf/nope.delta", "lz4", "delta")
    assert err.value.path == "/rf/nope.delta"


def test_read_state_file_permission_denied():
    class Denied:
        def open(self, path, mode):
            raise PermissionError(path)

    with pytest.raises(BadInput, match="permission denied"):
        read_state_file(Denied(), "/x/1.delta", "lz4", "delta")


class TrackingFS:
    """Wraps a filesystem; remembers every file it opened and whether it was closed."""

    def __init__(self, inner):
        self.inner = inner
        self.opened = []

    def open(self, path, mode="rb"):
        f = self.inner.open(path, mode)
        closed = []
        real_close = f.close

        def close():
            closed.append(True)
            real_close()

        f.close = close
        self.opened.append(closed)
        return f


def test_read_state_file_unsupported_codec_closes_the_file(memfs):
    memfs.pipe("/rf/3.delta", b"\x82SNAPPY\x00")
    fs = TrackingFS(memfs)
    with pytest.raises(UnsupportedFormat, match="codec 'snappy'"):
        read_state_file(fs, "/rf/3.delta", "snappy", "delta")
    assert fs.opened == [[True]]


def test_read_state_file_closes_after_iteration_and_on_error(memfs):
    memfs.pipe("/rf/4.delta", lz4_stream(put(b"k", b"v") + END))
    memfs.pipe("/rf/5.delta", lz4_stream(put(b"k", b"v")))
    fs = TrackingFS(memfs)
    assert len(list(read_state_file(fs, "/rf/4.delta", "lz4", "delta"))) == 1
    with pytest.raises(CorruptFile):
        list(read_state_file(fs, "/rf/5.delta", "lz4", "delta"))
    assert fs.opened == [[True], [True]]


def test_strip_rocksdb_prefixes():
    row = b"\x00" * 8 + b"row!"
    assert strip_rocksdb_prefixes(b"\x00" + row, column_families=False) == (None, row)
    assert strip_rocksdb_prefixes(b"\x04\x00\x00" + row, column_families=True) == (4, row)
    assert strip_rocksdb_prefixes(b"\x01\x01\x00" + row, column_families=True) == (257, row)
    assert strip_rocksdb_prefixes(row, column_families=False, version_byte=False) == (None, row)
    with pytest.raises(UnsupportedFormat, match="encoding version byte 7"):
        strip_rocksdb_prefixes(b"\x07" + row, column_families=False)
    with pytest.raises(CorruptFile, match="too short"):
        strip_rocksdb_prefixes(b"", column_families=False, path="x")
    with pytest.raises(CorruptFile, match="column family id"):
        strip_rocksdb_prefixes(b"\x01", column_families=True)


def test_split_prefix_scan_key():
    prefix, rest = b"\x00PREFIXROW", b"\x00RESTROW"
    key = len(prefix).to_bytes(4, "little") + prefix + rest
    assert split_prefix_scan_key(key) == (b"PREFIXROW", b"RESTROW")
    with pytest.raises(CorruptFile, match="bad prefix length"):
        split_prefix_scan_key(b"\xff\x00\x00\x00" + prefix + rest)


def test_split_multi_values():
    entries = [b"\x00" + b"a" * 16, b"\x00" + b"b" * 16]
    packed = b"".join(len(e).to_bytes(4, "little") + e for e in entries)
    assert split_multi_values(packed) == [b"a" * 16, b"b" * 16]
    delimited = b",".join(len(e).to_bytes(4, "little") + e for e in entries)
    assert split_multi_values(delimited, delimited=True) == [b"a" * 16, b"b" * 16]
    with pytest.raises(CorruptFile, match="bad length"):
        split_multi_values(packed[:-1])
