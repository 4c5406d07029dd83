"""``statekit.formats.state_writer``: Spark's snapshot bytes, written without a JVM.

The strongest checks re-encode the real Spark-written files under ``tests/data/formats`` and
demand identical bytes; the rest round-trip through statekit's own readers and check the
lz4-java block layout (block sizes, tokens, raw blocks, end block) directly.
"""

from __future__ import annotations

import ctypes
import io
import random
import struct
from pathlib import Path

import fsspec
import lz4.block
import pytest
import xxhash

from statekit.formats import lz4_compress
from statekit.formats.compression import open_decompressed
from statekit.formats.lz4_compress import lz4_compress_block, lz4_compress_block_py
from statekit.formats.records import iter_store_records, read_state_file, records_from_bytes
from statekit.formats.state_writer import CompressedWriter, SnapshotWriter, write_snapshot
from statekit.support.errors import CorruptFile, UnsupportedFormat
from tests.support.tools import unavailable

DATA = Path(__file__).resolve().parents[1] / "data" / "formats"
HEADER = struct.Struct("<8sBiii")
SEED = 0x9747B28C


def spark_files(magic: bytes) -> list[Path]:
    """Every real Spark-written state file (delta, snapshot, changelog) starting with ``magic``."""
    found = [p for p in sorted(DATA.rglob("*")) if p.is_file() and p.suffix != ".zip"
             and p.read_bytes().startswith(magic)]
    assert found, f"no golden files start with {magic!r}"
    return found


LZ4_FILES = spark_files(b"LZ4Block")
ZSTD_FILES = spark_files(b"\x28\xb5\x2f\xfd")
SNAPSHOTS = [p for p in LZ4_FILES + ZSTD_FILES if p.suffix == ".snapshot"]


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(DATA)) for p in paths]


def lz4_blocks(data: bytes) -> list[tuple[int, int, int, int, bytes]]:
    """``(token, compressed length, raw length, checksum, payload)`` of every lz4-java block."""
    blocks, i = [], 0
    while i < len(data):
        magic, token, clen, rlen, check = HEADER.unpack_from(data, i)
        assert magic == b"LZ4Block"
        i += HEADER.size
        blocks.append((token, clen, rlen, check, data[i:i + clen]))
        i += clen
    assert i == len(data)
    return blocks


def read_back(data: bytes, codec: str) -> list[tuple[bytes, bytes | None]]:
    return [(r.key, r.value) for r in records_from_bytes(data, codec, "snapshot", shown="t")]


def sample_records(n: int, seed: int = 7, value_size: int = 60) -> list[tuple[bytes, bytes]]:
    """UnsafeRow-like entries: repetitive but not trivially compressible."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = b"\0" * 8 + struct.pack("<q", i) + f"user-{i % 97:05d}".encode()
        value = (struct.pack("<qq", rnd.randrange(1000), i * 3)
                 + rnd.choice([b"Watching", b"Flagged", b"Idle"]) * 2).ljust(value_size, b"\0")
        out.append((key, value))
    return out


def encode(records, codec="lz4", **options) -> tuple[bytes, SnapshotWriter]:
    out = io.BytesIO()
    writer = write_snapshot(out, records, codec, **options)
    return out.getvalue(), writer


# --- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_records_round_trip_through_the_readers(codec):
    records = [(b"k1", b"v1"), (b"key-2", b""), (bytes(range(256)), b"\xff" * 300)]
    data, writer = encode(records, codec)
    assert read_back(data, codec) == records
    stream = open_decompressed(io.BytesIO(data), codec, path="t")
    assert [(r.op, r.key, r.value) for r in iter_store_records(stream, path="t",
                                                                 allow_deletes=False)] == \
        [("put", k, v) for k, v in records]
    assert writer.records == 3


def test_bytearray_and_memoryview_fields_as_pyspark_hands_them_over():
    out = io.BytesIO()
    with SnapshotWriter(out) as writer:
        writer.write(bytearray(b"key"), memoryview(b"value"))
        writer.write(bytearray(b"big"), bytearray(70_000))
    assert read_back(out.getvalue(), "lz4") == [(b"key", b"value"), (b"big", bytes(70_000))]


def test_empty_lz4_snapshot_is_the_end_marker_in_one_raw_block():
    data, writer = encode([])
    marker = b"\xff\xff\xff\xff"
    check = xxhash.xxh32_intdigest(marker, seed=SEED) & 0x0FFFFFFF
    assert data == (HEADER.pack(b"LZ4Block", 0x15, 4, 4, check) + marker
                    + HEADER.pack(b"LZ4Block", 0x15, 0, 0, 0))
    assert read_back(data, "lz4") == []
    assert (writer.records, writer.raw_bytes, writer.bytes_written) == (0, 4, len(data))


def test_empty_zstd_snapshot_is_one_frame_ending_with_an_empty_last_block():
    data, _ = encode([], "zstd")
    assert data.startswith(b"\x28\xb5\x2f\xfd\x00")  # no content size, no checksum
    assert data.endswith(b"\x01\x00\x00")  # ZSTD_e_end after the flush: empty raw last block
    assert read_back(data, "zstd") == []


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_many_records_span_many_blocks(codec):
    records = sample_records(4000)
    data, writer = encode(records, codec)
    assert read_back(data, codec) == records
    raw_size = sum(8 + len(k) + len(v) for k, v in records) + 4
    assert writer.raw_bytes == raw_size
    if codec == "lz4":
        blocks = lz4_blocks(data)
        assert len(blocks) == -(-raw_size // 32768) + 1
        assert all(b[2] == 32768 for b in blocks[:-2]) and 0 < blocks[-2][2] <= 32768
        assert {b[0] for b in blocks[:-1]} == {0x25}  # compressed, level 5
        assert blocks[-1] == (0x15, 0, 0, 0, b"")
        assert sum(b[2] for b in blocks) == raw_size


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_a_value_larger_than_a_block(codec):
    big = b"".join(struct.pack(">I", i % 5000) for i in range(40_000))  # 160 KB
    records = [(b"a", b"x"), (b"big", big), (b"z", b"y" * 10)]
    data, _ = encode(records, codec)
    assert read_back(data, codec) == records
    if codec == "lz4":
        assert len(lz4_blocks(data)) == 6  # 160 KB / 32 KiB, rounded up, + end block


def test_incompressible_blocks_are_stored_raw():
    rnd = random.Random(3)
    records = [(rnd.randbytes(16), rnd.randbytes(5000)) for _ in range(20)]
    data, _ = encode(records)
    blocks = lz4_blocks(data)
    assert len(blocks) == 5
    for token, clen, rlen, check, payload in blocks[:-1]:
        assert token == 0x15 and clen == rlen and len(payload) == rlen
        assert check == xxhash.xxh32_intdigest(payload, seed=SEED) & 0x0FFFFFFF
    assert read_back(data, "lz4") == records


# --- byte for byte against Spark --------------------------------------------------------------


@pytest.mark.parametrize("path", SNAPSHOTS, ids=ids(SNAPSHOTS))
def test_real_spark_snapshots_are_rewritten_byte_for_byte(path):
    spark = path.read_bytes()
    codec = "lz4" if spark.startswith(b"LZ4Block") else "zstd"
    records = read_back(spark, codec)
    ours, writer = encode(records, codec)
    assert ours == spark
    assert writer.records == len(records) and writer.bytes_written == len(spark)


@pytest.mark.parametrize("path", LZ4_FILES, ids=ids(LZ4_FILES))
def test_real_spark_lz4_streams_are_recompressed_byte_for_byte(path):
    """Deltas and changelogs too: the whole decompressed stream through CompressedWriter, and
    every block through both compressors (the lz4.frame path and the pure-Python port)."""
    spark = path.read_bytes()
    raw = open_decompressed(io.BytesIO(spark), "lz4", path=str(path)).read()
    out = io.BytesIO()
    with CompressedWriter(out, "lz4") as stream:
        stream.write(raw)
    assert out.getvalue() == spark
    compressed = [b for b in lz4_blocks(spark) if b[0] & 0xF0 == 0x20]
    assert compressed
    for _, _, rlen, _, payload in compressed:
        block = lz4.block.decompress(payload, uncompressed_size=rlen)
        assert lz4_compress_block(block) == payload
        assert lz4_compress_block_py(block) == payload


@pytest.mark.parametrize("path", ZSTD_FILES, ids=ids(ZSTD_FILES))
def test_real_spark_zstd_streams_are_recompressed_byte_for_byte(path):
    spark = path.read_bytes()
    raw = open_decompressed(io.BytesIO(spark), "zstd", path=str(path)).read()
    out = io.BytesIO()
    with CompressedWriter(out, "zstd") as stream:
        stream.write(raw)
    assert out.getvalue() == spark


# --- the lz4 compressor itself ----------------------------------------------------------------


def compressor_inputs() -> list[bytes]:
    """Edge sizes (the 13-byte minimum, the 64 KiB + 11 switch to the 32-bit table), runs,
    two-letter noise, far and near repeats."""
    rnd = random.Random(11)
    text = b"".join(b"".join(r) for r in sample_records(1200))
    inputs = [b"", b"a" * 12, b"a" * 13, b"a" * 14, b"ab" * 9, b"abc" * 100, bytes(5000)]
    inputs += [bytes(rnd.choice(b"ab") for _ in range(n)) for n in (13, 17, 29, 300)]
    inputs += [text[:n] for n in (13, 100, 4096, 32768, 65546, 65547, 70_000)]
    inputs.append((rnd.randbytes(3000) * 30)[:80_000])
    return inputs


def liblz4_compress_default():
    """liblz4's own ``LZ4_compress_default``, as exported by python-lz4's extension (if it is)."""
    try:
        lib = ctypes.CDLL(lz4.block._block.__file__)
        function = lib.LZ4_compress_default
    except (OSError, AttributeError):
        return None

    def compress(src: bytes) -> bytes:
        capacity = len(src) + len(src) // 255 + 16
        dest = ctypes.create_string_buffer(capacity)
        size = function(src, dest, len(src), capacity)
        assert size > 0 or not src
        return dest.raw[:size]

    return compress


def test_the_pure_python_port_is_liblz4s_compress_default():
    reference = liblz4_compress_default()
    if reference is None:  # PyPI's lz4 wheels export it: a CI run must not pass without it
        unavailable("this lz4 build does not export LZ4_compress_default (pip install lz4)")
    for src in compressor_inputs():
        assert lz4_compress_block_py(src) == reference(src), len(src)


def test_the_frame_path_agrees_with_the_port_and_both_decompress():
    for src in compressor_inputs():
        ours = lz4_compress_block_py(src)
        assert lz4.block.decompress(ours, uncompressed_size=len(src)) == src
        framed = lz4_compress._lz4_compress_block_frame(src)
        assert framed is None or framed == ours, len(src)
        assert lz4_compress_block(src) == ours


def test_python_lz4s_block_api_is_not_lz4_compress_default():
    """Why the module cannot simply call ``lz4.block.compress``: real Spark bytes differ."""
    spark = (DATA / "aipws_hdfs" / "6.snapshot").read_bytes()
    _, _, rlen, _, payload = lz4_blocks(spark)[0]
    block = lz4.block.decompress(payload, uncompressed_size=rlen)
    assert lz4.block.compress(block, store_size=False) != payload
    assert lz4_compress_block(block) == payload


def test_a_frame_path_that_disagrees_is_not_used(monkeypatch):
    monkeypatch.setattr(lz4_compress, "_frame_ok", {})
    monkeypatch.setattr(lz4_compress, "_lz4_compress_block_frame", lambda src: b"bogus")
    src = b"".join(b"".join(r) for r in sample_records(50))
    assert lz4_compress_block(src) == lz4_compress_block_py(src)
    assert lz4_compress._frame_ok == {True: False}


# --- options, errors, counters ----------------------------------------------------------------


@pytest.mark.parametrize(("block_size", "level"),
                         [(64, 0), (1024, 0), (1025, 1), (2048, 1), (32768, 5), (65536, 6),
                          (100_000, 7)])
def test_block_size_sets_block_lengths_and_the_token_level(block_size, level):
    records = sample_records(3000)
    data, _ = encode(records, lz4_block_size=block_size)
    blocks = lz4_blocks(data)
    assert {b[0] & 0x0F for b in blocks} == {level}
    assert all(b[2] == block_size for b in blocks[:-2])
    assert read_back(data, "lz4") == records


@pytest.mark.parametrize("block_size", [0, 63, (1 << 25) + 1])
def test_block_sizes_lz4_java_refuses_are_refused(block_size):
    with pytest.raises(ValueError, match="lz4 block size"):
        SnapshotWriter(io.BytesIO(), lz4_block_size=block_size)


@pytest.mark.parametrize("codec", ["snappy", "lzf", "gzip",
                                   "org.apache.spark.io.SnappyCompressionCodec"])
def test_other_codecs_are_refused(codec):
    with pytest.raises(UnsupportedFormat, match=f"codec '{codec}'") as info:
        SnapshotWriter(io.BytesIO(), codec, path="state/0/0/5.snapshot")
    assert info.value.exit_code == 5
    assert "state/0/0/5.snapshot" in str(info.value)


@pytest.mark.parametrize(("codec", "short"),
                         [(None, "lz4"), ("LZ4", "lz4"), ("org.apache.spark.io.LZ4CompressionCodec",
                                                         "lz4"),
                          ("org.apache.spark.io.ZStdCompressionCodec", "zstd")])
def test_codec_names_as_spark_confs_spell_them(codec, short):
    writer = SnapshotWriter(io.BytesIO(), codec)
    assert writer.codec == short


def test_zstd_level_is_applied():
    records = sample_records(2000)
    fast, _ = encode(records, "zstd")
    strong, _ = encode(records, "zstd", zstd_level=5)
    assert fast != strong
    assert read_back(strong, "zstd") == records


def test_counters_follow_the_writes():
    out = io.BytesIO()
    writer = SnapshotWriter(out)
    writer.write(b"key", b"value")
    writer.write(b"k", b"")
    assert (writer.records, writer.raw_bytes) == (2, 8 + 3 + 5 + 8 + 1)
    assert writer.bytes_written == 0  # still in the first block
    writer.close()
    assert (writer.records, writer.raw_bytes) == (2, 29)
    assert writer.bytes_written == len(out.getvalue()) > 0


def test_the_context_manager_finishes_the_file_and_leaves_out_open():
    out = io.BytesIO()
    with SnapshotWriter(out, "zstd") as writer:
        writer.write(b"k", b"v")
    assert writer.closed and not out.closed
    assert read_back(out.getvalue(), "zstd") == [(b"k", b"v")]


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_an_exception_leaves_a_file_no_reader_accepts(codec):
    out = io.BytesIO()
    with pytest.raises(RuntimeError), SnapshotWriter(out, codec) as writer:
        for key, value in sample_records(2000):
            writer.write(key, value)
        raise RuntimeError("boom")
    assert writer.closed and out.getvalue()
    with pytest.raises(CorruptFile):
        read_back(out.getvalue(), codec)


def test_close_is_idempotent_and_writing_after_it_fails():
    out = io.BytesIO()
    writer = SnapshotWriter(out)
    writer.write(b"k", b"v")
    writer.close()
    size = len(out.getvalue())
    writer.close()
    assert len(out.getvalue()) == size
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"k", b"v")


def test_a_field_java_cannot_hold_is_refused():
    class Huge(bytes):
        def __len__(self) -> int:
            return 1 << 31

    with pytest.raises(ValueError, match="2 GiB"):
        SnapshotWriter(io.BytesIO()).write(b"k", Huge())


def test_writes_an_fsspec_file_spark_readers_accept():
    fs = fsspec.filesystem("memory")
    records = sample_records(1500)
    with fs.open("/ckpt/state/0/3/12.snapshot", "wb") as f:
        write_snapshot(f, records, "lz4")
    back = read_state_file(fs, "/ckpt/state/0/3/12.snapshot", "lz4", "snapshot")
    assert [(r.key, r.value) for r in back] == records
    fs.rm("/ckpt", recursive=True)


class TrickleWriter(io.RawIOBase):
    """A raw stream that takes at most 7 bytes per call, as raw streams may."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        chunk = bytes(b[:7])
        self.data += chunk
        return len(chunk)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_short_writes_are_completed(codec):
    records = sample_records(800)
    expected, _ = encode(records, codec)
    trickle = TrickleWriter()
    write_snapshot(trickle, records, codec)  # type: ignore[arg-type]
    assert bytes(trickle.data) == expected


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_output_does_not_depend_on_how_bytes_are_handed_in(codec):
    """Spark's DataOutputStream hands the codec 4-byte ints and whole rows; BufferedOutputStream
    passes large writes straight to zstd. None of that may change the bytes."""
    raw = b"".join(struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v
                   for k, v in sample_records(3000)) + b"\xff\xff\xff\xff"
    whole = io.BytesIO()
    with CompressedWriter(whole, codec) as stream:
        assert stream.write(raw) == len(raw)
    rnd = random.Random(5)
    pieces = io.BytesIO()
    with CompressedWriter(pieces, codec) as stream:
        i = 0
        while i < len(raw):
            n = rnd.choice([1, 4, 100, 40_000, 70_000])
            stream.write(memoryview(raw)[i:i + n])
            i += n
    assert pieces.getvalue() == whole.getvalue()
    assert stream.bytes_in == len(raw) and stream.bytes_written == len(whole.getvalue())
