"""The SST reader against real RocksDB files (see tests/data/formats/README.md, rocksdb_sst).

Ground truth is independent of statekit: Spark's own state reader (``format("statestore")``)
for the checkpoints written by streaming queries, and rocksdbjni itself (what was written
with ``SstFileWriter``, what a database iterator returned) for the variants.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.formats import rocksdb_sst
from statekit.formats.rocksdb_keys import strip_rocksdb_prefixes
from statekit.formats.rocksdb_sst import (
    SstEntry,
    iter_sst_entries,
    live_state,
    read_sst_footer,
    sst_properties,
)
from statekit.formats.rocksdb_zip import read_zip_metadata
from statekit.formats.schema_file import read_schema_file
from statekit.formats.unsafe_row import make_decoder
from statekit.support.errors import BadInput, CorruptFile, StatekitError, UnsupportedFormat

SST_DATA = Path(__file__).resolve().parents[2] / "data" / "formats" / "rocksdb_sst"
SPARK_SETS = ["window_lz4", "window_zstd", "window_none", "window_fv6", "window_zlib",
              "dedup_lz4"]
VARIANTS = SST_DATA / "variants"
MEMFS = fsspec.filesystem("memory")


def expected(name: str) -> dict:
    return json.loads((SST_DATA / name / "expected.json").read_text())


def version_paths(fs, name: str, version: str | int) -> list[str]:
    folder = SST_DATA / name
    meta = read_zip_metadata(fs, str(folder / f"{version}.zip"))
    return [str(folder / "SSTs" / ref.dfs_name) for ref in meta.sst_files]


def all_ssts(name: str) -> list[Path]:
    return sorted((SST_DATA / name / "SSTs").glob("*.sst"))


def jsonable(value):
    """A decoded row as Spark's ``to_json`` writes it (timestamps with the generator's format,
    null fields left out)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def row_digest(rows: list[list[object]]) -> str:
    """The same digest as generate_sst_fixtures.row_digest."""
    lines = sorted(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@pytest.fixture
def without_crc32c(monkeypatch):
    """As if google-crc32c were not installed (the optional ``rocksdb`` extra)."""
    monkeypatch.setitem(sys.modules, "google_crc32c", None)
    monkeypatch.setattr(rocksdb_sst, "_OPTIONAL", {})
    assert rocksdb_sst.crc32c_extend() is None


@pytest.fixture
def without_cramjam(monkeypatch):
    """As if cramjam were not installed (the optional ``rocksdb`` extra)."""
    monkeypatch.setitem(sys.modules, "cramjam", None)
    monkeypatch.setattr(rocksdb_sst, "_OPTIONAL", {})
    assert rocksdb_sst._snappy_raw() is None


def variant_entries(n: int = 80) -> list[tuple[bytes, str, bytes | None]]:
    """Copy of generate_sst_fixtures.variant_entries (checked against its digest)."""
    out: list[tuple[bytes, str, bytes | None]] = []
    for i in range(n):
        key = b"key%05d" % i
        if i % 7 == 3:
            out.append((key, "delete", None))
        elif i % 11 == 5:
            out.append((key, "merge", b"m%d" % i))
        else:
            out.append((key, "put", (b"value-%d;" % i) * (1 + i % 5)))
    return out


# -- Spark-written checkpoints --------------------------------------------------------------


@pytest.mark.parametrize("name", SPARK_SETS)
def test_live_state_equals_spark_state_reader(fs, name):
    assert len(expected(name)["versions"]) >= 2
    check_against_spark_state_reader(fs, name)


def check_against_spark_state_reader(fs, name: str) -> None:
    """live_state of every version of a Spark set == what Spark's state reader returned."""
    exp = expected(name)
    schema = read_schema_file(fs, str(SST_DATA / name / "schema"))
    key_row, value_row = make_decoder(schema.key_schema), make_decoder(schema.value_schema)
    for version, want in exp["versions"].items():
        live = live_state(fs, version_paths(fs, name, version))
        assert len(live) == want["numKeys"] == want["rows"], version
        rows = [
            [jsonable(key_row(strip_rocksdb_prefixes(k, column_families=False)[1])),
             jsonable(value_row(strip_rocksdb_prefixes(v, column_families=False,
                                                       what="value")[1]))]
            for k, v in live.items()
        ]
        assert row_digest(rows) == want["sha256"], version


@pytest.mark.parametrize("name", ["window_lz4", "window_zstd", "window_fv6", "dedup_lz4"])
def test_versions_overlap_and_hold_tombstones(fs, name):
    """What makes live_state non-trivial really occurs: several SSTs per version (L0 files over
    a compacted one) and delete tombstones shadowing puts of older files."""
    exp = expected(name)
    assert max(len(version_paths(fs, name, v)) for v in exp["versions"]) >= 3
    kinds = collections.Counter(e.kind for p in all_ssts(name)
                                for e in iter_sst_entries(fs, str(p)))
    assert set(kinds) == {"put", "delete"} and kinds["delete"] > 50


@pytest.mark.parametrize("name", [*SPARK_SETS, "snappy"])
def test_entries_are_sane(fs, name):
    for path in all_ssts(name):
        entries = list(iter_sst_entries(fs, str(path)))
        props = sst_properties(fs, str(path))
        assert len(entries) == props["rocksdb.num.entries"] > 0
        assert sum(e.kind == "delete" for e in entries) == props["rocksdb.deleted.keys"]
        assert all(isinstance(e, SstEntry) for e in entries)
        keys = [e.user_key for e in entries]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)  # one entry per key
        seqs = {e.sequence for e in entries}
        # Flushed (L0) files: distinct positive sequences; compaction output: all zeroed.
        assert seqs == {0} or (0 not in seqs and len(seqs) == len(entries))
        assert seqs == {0} or max(seqs) == props["rocksdb.key.largest.seqno"]
        for e in entries:
            assert e.user_key[:1] == b"\x00"  # Spark's encoding version byte, no CF id
            assert (e.value is None) == (e.kind == "delete")
            assert e.value is None or e.value[:1] == b"\x00"


@pytest.mark.parametrize(("name", "codec", "version", "most_blocks"), [
    ("window_lz4", b"LZ4", 5, 4), ("window_zstd", b"ZSTD", 5, 4),
    ("window_none", b"NoCompression", 5, 2), ("window_zlib", b"Zlib", 5, 1),
    ("window_fv6", b"LZ4", 6, 3), ("dedup_lz4", b"LZ4", 5, 3),
])
def test_format_facts_of_spark_files(fs, name, codec, version, most_blocks):
    blocks = []
    for path in all_ssts(name):
        footer = read_sst_footer(fs, str(path))
        assert (footer.format_version, footer.checksum_type) == (version, 4)  # XXH3
        assert (footer.index is None) == (version >= 6)
        props = sst_properties(fs, str(path))
        assert props["rocksdb.compression"] == codec
        assert props["rocksdb.format.version"] == version
        assert props["rocksdb.block.based.table.index.type"] == 0  # binary search
        assert props["rocksdb.index.value.is.delta.encoded"] == 1
        assert props["rocksdb.index.key.is.user.key"] == 1
        assert props["rocksdb.comparator"] == b"leveldb.BytewiseComparator"
        assert props["rocksdb.merge.operator"] == b"StringAppendOperator"
        assert props["rocksdb.num.range-deletions"] == 0
        blocks.append(props["rocksdb.num.data.blocks"])
    assert max(blocks) == most_blocks  # 4 KiB blocks: the larger files span several


def test_snappy_is_refused_naming_the_file(fs, without_cramjam):
    (path,) = all_ssts("snappy")
    assert sst_properties(fs, str(path))["rocksdb.compression"] == b"Snappy"
    with pytest.raises(UnsupportedFormat, match="snappy-compressed SST blocks") as err:
        list(iter_sst_entries(fs, str(path), shown="s3://b/SSTs/x.sst"))
    assert err.value.path == "s3://b/SSTs/x.sst"
    message = str(err.value)
    assert message.startswith("s3://b/SSTs/x.sst: ") and "\n" not in message
    assert "pip install 'statekit[rocksdb]'" in message
    with pytest.raises(UnsupportedFormat, match="snappy"):
        live_state(fs, version_paths(fs, "snappy", 1))


def test_snappy_live_state_equals_spark_state_reader(fs):
    """With cramjam (the ``rocksdb`` extra), Spark's snappy files are read."""
    (path,) = all_ssts("snappy")
    assert compression_types(path.read_bytes())[1] >= 1  # really a snappy-compressed block
    check_against_spark_state_reader(fs, "snappy")


# -- rocksdbjni-written variants --------------------------------------------------------------


def test_variant_entries_match_the_generator():
    digest = hashlib.sha256(repr(variant_entries()).encode()).hexdigest()
    assert digest == json.loads((VARIANTS / "expected.json").read_text())["entries_sha256"]


CHECKSUMS = {"kCRC32c": 1, "kxxHash": 2, "kxxHash64": 3, "kXXH3": 4}


def compression_types(data: bytes) -> collections.Counter:
    """How many blocks of a file have each compression type (from their trailers)."""
    _, handles = block_handles(data)
    return collections.Counter(data[h.offset + h.size] for h in handles)


@pytest.mark.parametrize("name", sorted(json.loads(
    (VARIANTS / "expected.json").read_text())["sst_writer"]))
def test_sst_writer_variants(fs, name):
    spec = json.loads((VARIANTS / "expected.json").read_text())["sst_writer"][name]
    path = str(VARIANTS / f"sst_{name}.sst")
    footer = read_sst_footer(fs, path)
    assert footer.format_version == spec["format_version"]
    assert footer.checksum_type == CHECKSUMS[spec["checksum"]]
    if spec["index"] == "kTwoLevelIndexSearch":
        with pytest.raises(UnsupportedFormat, match="partitioned index"):
            list(iter_sst_entries(fs, path))
        return
    entries = list(iter_sst_entries(fs, path))
    assert [(e.user_key, e.kind, e.value) for e in entries] == variant_entries()
    assert {e.sequence for e in entries} == {0}  # SstFileWriter: the global seqno applies
    assert sst_properties(fs, path)["rocksdb.num.data.blocks"] > 10


def db_files(name: str) -> tuple[list[str], dict[bytes, bytes]]:
    spec = json.loads((VARIANTS / "expected.json").read_text())["db"][name]
    live = {bytes.fromhex(k): bytes.fromhex(v) for k, v in spec["live"].items()}
    return [str(VARIANTS / f) for f in spec["files"]], live


def test_snappy_variant_holds_what_the_lz4_and_zstd_variants_hold(fs):
    snappy = str(VARIANTS / "sst_fv6_crc32c_snappy.sst")
    types = compression_types((VARIANTS / "sst_fv6_crc32c_snappy.sst").read_bytes())
    assert types[1] > 10  # data and index blocks are snappy-compressed
    want = live_state(fs, [snappy], merge_delimiter=b",")
    assert len(want) > 50
    for other in ("sst_fv5_crc32c_lz4.sst", "sst_fv4_xxhash64_zstd.sst"):
        assert live_state(fs, [str(VARIANTS / other)], merge_delimiter=b",") == want
    assert list(iter_sst_entries(fs, snappy)) == list(
        iter_sst_entries(fs, str(VARIANTS / "sst_fv5_crc32c_lz4.sst")))


def test_snappy_variant_is_refused_without_cramjam(fs, without_cramjam):
    path = str(VARIANTS / "sst_fv6_crc32c_snappy.sst")
    assert read_sst_footer(fs, path).format_version == 6  # the footer needs no snappy
    with pytest.raises(UnsupportedFormat, match=r"statekit\[rocksdb\]") as err:
        list(iter_sst_entries(fs, path))
    assert err.value.path == path


def test_database_versions_single_deletes_and_snapshots(fs):
    paths, want = db_files("versions")
    assert len(paths) == 2 and len(want) > 50
    assert live_state(fs, paths) == want
    assert live_state(fs, paths[::-1]) == want  # file order does not matter
    entries = list(iter_sst_entries(fs, paths[0]))
    kinds = collections.Counter(e.kind for e in entries)
    assert kinds["single_delete"] > 0 and kinds["delete"] > 0 and kinds["put"] > 0
    by_key = collections.defaultdict(list)
    for e in entries:
        by_key[e.user_key].append(e.sequence)
    versions = [s for s in by_key.values() if len(s) > 1]
    assert versions and all(s == sorted(s, reverse=True) for s in versions)  # newest first


def test_merge_operands_refused_or_resolved(fs):
    paths, want = db_files("merge")
    kinds = collections.Counter(e.kind for e in iter_sst_entries(fs, paths[0]))
    assert kinds["merge"] > 0 and kinds["put"] > 0
    with pytest.raises(UnsupportedFormat, match="merge") as err:
        live_state(fs, paths)
    assert err.value.path == paths[0]
    assert live_state(fs, paths, merge_delimiter=b",") == want  # RocksDB's own merge result
    assert any(b"," in v for v in want.values())


def test_range_deletions_refused(fs):
    paths, _ = db_files("range_del")
    assert sst_properties(fs, paths[1])["rocksdb.num.range-deletions"] == 1
    assert [e.kind for e in iter_sst_entries(fs, paths[1])] == ["put"]
    with pytest.raises(UnsupportedFormat, match="range deletions") as err:
        live_state(fs, paths)
    assert err.value.path == paths[1]


# -- damaged input --------------------------------------------------------------------------

SAMPLE = all_ssts("window_lz4")[-1]


def memory_file(name: str, data: bytes) -> str:
    path = f"/sst-tests/{name}"
    MEMFS.pipe(path, data)
    return path


def read_everything(fs, path: str) -> None:
    sst_properties(fs, path)
    read_sst_footer(fs, path)
    list(iter_sst_entries(fs, path))
    live_state(fs, [path])


def test_missing_file_is_bad_input(fs):
    with pytest.raises(BadInput, match="SST file not found"):
        iter_sst_entries(fs, str(SST_DATA / "nope.sst"))


@pytest.mark.parametrize("cut", [0, 1, 20, 47, 52, 100, -1, -8, -53, -54, -200])
def test_truncated_file(cut):
    data = SAMPLE.read_bytes()
    path = memory_file("cut.sst", data[:cut])
    with pytest.raises(CorruptFile) as err:
        read_everything(MEMFS, path)
    assert err.value.path == path


def test_bad_magic():
    data = bytearray(SAMPLE.read_bytes())
    data[-1] ^= 0xFF
    path = memory_file("magic.sst", bytes(data))
    with pytest.raises(CorruptFile, match=r"not an SST file \(bad magic number"):
        next(iter_sst_entries(MEMFS, path))


@pytest.mark.parametrize("other", ["window_lz4/1.zip", "window_lz4/schema",
                                   "window_lz4/expected.json"])
def test_not_an_sst(fs, other):
    with pytest.raises(CorruptFile, match="not an SST file") as err:
        list(iter_sst_entries(fs, str(SST_DATA / other)))
    assert err.value.path == str(SST_DATA / other)


@pytest.mark.parametrize("where", [10, 500, 2000])
def test_flipped_byte_in_a_data_block_fails_its_checksum(where):
    data = bytearray(SAMPLE.read_bytes())
    data[where] ^= 0x04
    path = memory_file("flip.sst", bytes(data))
    with pytest.raises(CorruptFile, match="data block checksum mismatch"):
        list(iter_sst_entries(MEMFS, path))


def test_footer_checksum_of_format_version_6():
    data = bytearray(all_ssts("window_fv6")[0].read_bytes())
    data[-53 + 20] ^= 1  # unchecked reserved padding, still covered by the footer checksum
    path = memory_file("fv6.sst", bytes(data))
    with pytest.raises(CorruptFile, match="footer checksum mismatch"):
        read_sst_footer(MEMFS, path)


def test_entry_count_checked_against_properties(without_crc32c):
    """A crc32c file (checksum not verified: google-crc32c missing) with a flipped entry byte
    in an uncompressed block is still caught by the structure checks."""
    data = bytearray((VARIANTS / "sst_fv5_crc32c_lz4.sst").read_bytes())
    assert read_sst_footer(MEMFS, memory_file("c.sst", bytes(data))).checksum_type == 1
    caught = 0
    for where in range(0, 400, 7):
        damaged = bytearray(data)
        damaged[where] ^= 0x10
        with contextlib.suppress(CorruptFile):
            entries = list(iter_sst_entries(MEMFS, memory_file("c.sst", bytes(damaged))))
            assert len(entries) == 80  # undetected damage can only alter keys or values
            continue
        caught += 1
    assert caught > 10


CRC32C_FILES = ["sst_fv5_crc32c_lz4.sst", "sst_fv6_crc32c_snappy.sst"]


@pytest.mark.parametrize("name", CRC32C_FILES)
def test_flipped_byte_in_a_crc32c_block_fails_its_checksum(name):
    """With google-crc32c (the ``rocksdb`` extra), crc32c files are verified like XXH3 ones."""
    data = (VARIANTS / name).read_bytes()
    assert read_sst_footer(MEMFS, memory_file(name, data)).checksum_type == 1
    data_blocks = rocksdb_sst._Table(io.BytesIO(data), "t").data_handles()
    for h in (data_blocks[0], data_blocks[len(data_blocks) // 2], data_blocks[-1]):
        for where in (h.offset, h.offset + h.size // 2, h.offset + h.size - 1):
            damaged = bytearray(data)
            damaged[where] ^= 0x10
            path = memory_file(name, bytes(damaged))
            with pytest.raises(CorruptFile, match="data block checksum mismatch") as err:
                list(iter_sst_entries(MEMFS, path))
            assert (err.value.path, err.value.offset) == (path, h.offset)
            assert str(err.value) == (f"{path}: data block checksum mismatch at byte "
                                      f"{h.offset}")


def test_flipped_byte_in_the_crc32c_index_block():
    data = bytearray((VARIANTS / "sst_fv5_crc32c_lz4.sst").read_bytes())
    footer = read_sst_footer(MEMFS, memory_file("i.sst", bytes(data)))
    data[footer.index.offset + 3] ^= 1
    path = memory_file("i.sst", bytes(data))
    with pytest.raises(CorruptFile, match="index block checksum mismatch") as err:
        list(iter_sst_entries(MEMFS, path))
    assert (err.value.path, err.value.offset) == (path, footer.index.offset)


def test_footer_checksum_of_a_crc32c_format_version_6_file():
    data = bytearray((VARIANTS / "sst_fv6_crc32c_snappy.sst").read_bytes())
    data[-53 + 20] ^= 1  # unchecked reserved padding, still covered by the footer checksum
    path = memory_file("fv6c.sst", bytes(data))
    with pytest.raises(CorruptFile, match="footer checksum mismatch") as err:
        read_sst_footer(MEMFS, path)
    assert (err.value.path, err.value.offset) == (path, len(data) - 53)


@pytest.mark.parametrize("name", CRC32C_FILES)
def test_crc32c_files_read_without_google_crc32c(fs, name, without_crc32c):
    """Without the library: read as before, checksums unverified, key order checked."""
    entries = list(iter_sst_entries(fs, str(VARIANTS / name)))
    assert [(e.user_key, e.kind, e.value) for e in entries] == variant_entries()
    data = bytearray((VARIANTS / name).read_bytes())
    footer, _ = block_handles(bytes(data))
    if footer.format_version >= 6:  # the footer checksum is not verified either
        data[-53 + 20] ^= 1
        assert read_sst_footer(MEMFS, memory_file(name, bytes(data))).checksum_type == 1


def test_optional_libraries_are_not_imported_with_the_module():
    code = ("import sys, statekit.formats.rocksdb_sst; "
            "print(sorted({'google_crc32c', 'cramjam'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_reads_without_the_optional_libraries(without_crc32c, without_cramjam):
    """The module imports and reads XXH3/lz4 files with neither library installed."""
    assert rocksdb_sst._checksum(1, b"x", 0) is None
    assert len(list(iter_sst_entries(MEMFS, memory_file("s.sst", SAMPLE.read_bytes())))) > 0


FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_SEEDS = [p.read_bytes() for p in (
    all_ssts("window_lz4")[:2] + all_ssts("window_zstd")[:1] + all_ssts("window_fv6")[:1]
    + all_ssts("window_none")[:1] + all_ssts("window_zlib")[:1]
    + [VARIANTS / "sst_fv3_xxhash_none.sst", VARIANTS / "sst_fv5_crc32c_lz4.sst",
       VARIANTS / "sst_fv5_first_key_index.sst", VARIANTS / "sst_fv5_hash_data_index.sst",
       VARIANTS / "sst_fv5_index_restart16.sst", VARIANTS / "sst_fv6_bzip2_xxhash64.sst",
       VARIANTS / "sst_fv6_crc32c_snappy.sst", *all_ssts("snappy"),
       VARIANTS / "db_versions_1.sst", VARIANTS / "db_range_del_2.sst"])]


@st.composite
def damaged(draw, originals: list[bytes]) -> bytes:
    """A real SST with a few flips, truncations, insertions or deletions (as in test_fuzz)."""
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "byte"]))
        # Bias towards the tail: footer, index and metaindex live there.
        pos = draw(st.one_of(st.integers(0, max(len(data) - 1, 0)),
                             st.integers(max(len(data) - 300, 0), max(len(data) - 1, 0))))
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


@FUZZ
@given(st.one_of(st.binary(max_size=512), damaged(FUZZ_SEEDS)))
def test_damaged_files_fail_only_with_statekit_errors(data):
    path = memory_file("fuzz.sst", data)
    try:
        read_everything(MEMFS, path)
    except StatekitError as exc:
        assert isinstance(exc, (CorruptFile, UnsupportedFormat))
        assert exc.path == path


# -- checksums, independently -----------------------------------------------------------------


def block_handles(data: bytes) -> tuple[rocksdb_sst.SstFooter, list[rocksdb_sst.BlockHandle]]:
    """Every block of a file (the reader's internals locate them; the test checks the sums)."""
    table = rocksdb_sst._Table(io.BytesIO(data), "t")
    handles = [table.footer.metaindex, table.index_handle(), *table.metaindex.values(),
               *table.data_handles()]
    return table.footer, handles


def xxh3_block_checksum(body: bytes, compression: int, base: int, offset: int) -> int:
    """RocksDB's kXXH3 block checksum, written out from the documented rule."""
    mask = 0xFFFFFFFF
    value = (xxhash.xxh3_64_intdigest(body) & mask) ^ ((compression * 0x6B9083D9) & mask)
    if base:  # format_version 6: the block's offset is mixed in
        value = (value + (base ^ ((offset & mask) + (offset >> 32)))) & mask
    return value


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), bit by bit: slow, independent."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def crc32c_block_checksum(body: bytes, compression: int, base: int, offset: int) -> int:
    """RocksDB's kCRC32c block checksum: crc32c::Mask of crc32c(block + type byte)."""
    mask = 0xFFFFFFFF
    crc = crc32c(body + bytes((compression,)))
    value = ((((crc >> 15) | (crc << 17)) & mask) + 0xA282EAD8) & mask
    if base:  # format_version 6: the block's offset is mixed in
        value = (value + (base ^ ((offset & mask) + (offset >> 32)))) & mask
    return value


def test_crc32c_reference():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C


@pytest.mark.parametrize("name", CRC32C_FILES)
def test_crc32c_checksum_rule_on_every_block(name):
    data = (VARIANTS / name).read_bytes()
    footer, handles = block_handles(data)
    assert footer.checksum_type == 1
    assert (footer.base_context_checksum != 0) == (footer.format_version >= 6)
    for h in handles:
        body, trailer = data[h.offset : h.offset + h.size], data[h.offset + h.size :][:5]
        stored = int.from_bytes(trailer[1:], "little")
        assert stored == crc32c_block_checksum(body, trailer[0], footer.base_context_checksum,
                                               h.offset)
    assert len(handles) > 12
    if footer.format_version >= 6:
        tail = bytearray(data[-53:])
        stored = int.from_bytes(tail[5:9], "little")
        tail[5:9] = bytes(4)
        assert stored == crc32c_block_checksum(bytes(tail[:-1]), tail[-1],
                                               footer.base_context_checksum, len(data) - 53)


@pytest.mark.parametrize("name", ["window_lz4", "window_zstd", "window_fv6"])
def test_xxh3_checksum_rule_on_every_block(name):
    blocks = 0
    for path in all_ssts(name):
        data = path.read_bytes()
        footer, handles = block_handles(data)
        assert (footer.base_context_checksum != 0) == (footer.format_version >= 6)
        for h in handles:
            body, trailer = data[h.offset : h.offset + h.size], data[h.offset + h.size :][:5]
            stored = int.from_bytes(trailer[1:], "little")
            assert stored == xxh3_block_checksum(body, trailer[0], footer.base_context_checksum,
                                                 h.offset)
            blocks += 1
    assert blocks > 20


RESEAL_SEEDS = [p.read_bytes() for p in (
    all_ssts("window_lz4")[:2] + all_ssts("window_none")[:1] + all_ssts("snappy")
    + [VARIANTS / "sst_fv5_first_key_index.sst", VARIANTS / "sst_fv5_index_restart16.sst",
       VARIANTS / "sst_fv5_hash_data_index.sst", VARIANTS / "db_versions_1.sst"])]


@FUZZ
@given(st.data())
def test_damage_under_a_valid_checksum_fails_only_with_statekit_errors(draw):
    """Bytes changed inside one block whose checksum is then recomputed: the parsers behind
    the checksum see the damage (as with a buggy writer, or a crc32c file)."""
    data = bytearray(draw.draw(st.sampled_from(RESEAL_SEEDS)))
    _, handles = block_handles(bytes(data))
    h = draw.draw(st.sampled_from(handles))
    for _ in range(draw.draw(st.integers(1, 3))):
        data[h.offset + draw.draw(st.integers(0, h.size - 1))] = draw.draw(st.integers(0, 255))
    body = bytes(data[h.offset : h.offset + h.size])
    fixed = xxh3_block_checksum(body, data[h.offset + h.size], 0, h.offset)
    data[h.offset + h.size + 1 : h.offset + h.size + 5] = fixed.to_bytes(4, "little")
    path = memory_file("resealed.sst", bytes(data))
    try:
        read_everything(MEMFS, path)
    except StatekitError as exc:
        assert isinstance(exc, (CorruptFile, UnsupportedFormat))
        assert exc.path == path


def test_damaged_snappy_block_under_a_valid_checksum():
    """The snappy decoder's own checks, behind a checksum that passes."""
    (sst,) = all_ssts("snappy")
    original = sst.read_bytes()
    _, handles = block_handles(original)
    (h,) = [h for h in handles if original[h.offset + h.size] == 1]

    def resealed(body: bytes) -> str:
        data = bytearray(original)
        data[h.offset : h.offset + h.size] = body
        fixed = xxh3_block_checksum(body, 1, 0, h.offset)
        data[h.offset + h.size + 1 : h.offset + h.size + 5] = fixed.to_bytes(4, "little")
        return memory_file("snappy.sst", bytes(data))

    body = original[h.offset : h.offset + h.size]
    size = body[:2]
    assert size == b"\xa6\x03"  # snappy's own varint32 header: 422 bytes, no RocksDB prefix
    for damaged, message in [
        (b"\xff\xff\xff\x7f" + body[4:], "impossible uncompressed size"),
        (b"\xa7\x03" + body[2:], "does not decompress"),  # one byte more than it holds
        (size + bytes(len(body) - 2), "does not decompress"),  # 196 literals of 1 byte
        (b"\xa5\x03" + body[2:], "does not decompress"),  # one byte less
    ]:
        path = resealed(damaged)
        with pytest.raises(CorruptFile, match=message) as err:
            list(iter_sst_entries(MEMFS, path))
        assert err.value.path == path
