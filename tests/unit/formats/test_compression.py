"""Decompression of Spark state files: lz4-java block streams and zstd, with exact errors."""

from __future__ import annotations

import io
import random

import pytest
import xxhash
import zstandard

from statekit.formats.compression import (
    CODECS_SUPPORTED,
    decompress_prefix,
    normalize_codec,
    open_decompressed,
    sniff_codec,
)
from statekit.support.errors import CorruptFile, UnsupportedFormat
from tests.unit.formats.builders import lz4_block, lz4_stream

PAYLOAD = bytes(range(256)) * 300  # 76800 bytes: three 32 KiB blocks


def read_all(data: bytes, codec: str = "lz4") -> bytes:
    return open_decompressed(io.BytesIO(data), codec, path="f.delta").read()


@pytest.mark.parametrize(("value", "expected"), [
    (None, "lz4"), ("", "lz4"), ("lz4", "lz4"), ("ZSTD", "zstd"), (" snappy ", "snappy"),
    ("org.apache.spark.io.LZ4CompressionCodec", "lz4"),
    ("org.apache.spark.io.ZStdCompressionCodec", "zstd"),
    ("org.apache.spark.io.SnappyCompressionCodec", "snappy"),
    ("org.apache.spark.io.LZFCompressionCodec", "lzf"),
    ("com.example.MyCodec", "com.example.mycodec"),
])
def test_normalize_codec(value, expected):
    assert normalize_codec(value) == expected


def test_sniff_codec():
    assert sniff_codec(lz4_stream(b"abc")[:8]) == "lz4"
    assert sniff_codec(zstandard.ZstdCompressor().compress(b"abc")) == "zstd"
    assert sniff_codec(b"\x82SNAPPY\x00\x00\x00\x00\x01") == "snappy"
    assert sniff_codec(b"\x00\x00\x00\x18") is None
    assert sniff_codec(b"") is None


def test_lz4_round_trip_multi_block_and_raw_blocks():
    assert read_all(lz4_stream(PAYLOAD)) == PAYLOAD
    raw_stream = lz4_block(b"hello", raw=True) + lz4_block(b" world") + lz4_block(b"")
    assert read_all(raw_stream) == b"hello world"


def test_lz4_empty_stream_and_concatenated_streams():
    assert read_all(lz4_block(b"")) == b""
    assert read_all(lz4_stream(b"ab") + lz4_stream(b"cd")) == b"abcd"


def test_lz4_checksum_mismatch_reports_the_bad_blocks_offset():
    good = lz4_block(PAYLOAD[:32768])
    bad = lz4_block(PAYLOAD[32768:65536], checksum=0x1234567)
    with pytest.raises(CorruptFile, match="checksum mismatch") as err:
        read_all(good + bad + lz4_block(b""))
    assert err.value.offset == len(good)
    assert err.value.path == "f.delta"
    assert f"at byte {len(good)}" in str(err.value)


def test_lz4_checksum_is_masked_to_28_bits():
    data = next(d for d in (bytes([i]) * 100 for i in range(256))
                if xxhash.xxh32_intdigest(d, seed=0x9747B28C) > 0x0FFFFFFF)
    full = xxhash.xxh32_intdigest(data, seed=0x9747B28C)
    assert read_all(lz4_block(data, checksum=full & 0x0FFFFFFF) + lz4_block(b"")) == data
    with pytest.raises(CorruptFile, match="checksum mismatch"):
        read_all(lz4_block(data, checksum=full) + lz4_block(b""))


def test_lz4_truncated_block():
    stream = lz4_stream(PAYLOAD)
    second = len(lz4_block(PAYLOAD[:32768]))
    with pytest.raises(CorruptFile, match="truncated block") as err:
        read_all(stream[: second + 30])
    assert err.value.offset == second


def test_lz4_truncated_header():
    stream = lz4_stream(b"abc")
    with pytest.raises(CorruptFile, match="truncated block header"):
        read_all(stream[:-5])


def test_lz4_missing_end_block():
    stream = lz4_stream(PAYLOAD, end=False)
    with pytest.raises(CorruptFile, match="without an end block") as err:
        read_all(stream)
    assert err.value.offset == len(stream)


def test_lz4_bad_magic_and_bad_token():
    with pytest.raises(CorruptFile, match="bad block magic") as err:
        read_all(b"LZ4Blocx" + lz4_stream(b"abc")[8:])
    assert err.value.offset == 0
    with pytest.raises(CorruptFile, match="bad block token 0x35"):
        read_all(lz4_block(b"abc", token=0x35) + lz4_block(b""))


def test_lz4_bad_lengths():
    block = bytearray(lz4_block(b"abc" * 50))
    block[13:17] = (10**8).to_bytes(4, "little")  # raw length beyond the 32 KiB block size
    with pytest.raises(CorruptFile, match="bad block header"):
        read_all(bytes(block) + lz4_block(b""))


def test_lz4_payload_that_does_not_decode():
    block = bytearray(lz4_block(b"abcdefgh" * 100))
    block[21:] = b"\xff" * (len(block) - 21)
    with pytest.raises(CorruptFile, match=r"does not decompress|checksum"):
        read_all(bytes(block) + lz4_block(b""))


def test_trailing_garbage_after_end_block_is_corrupt():
    with pytest.raises(CorruptFile, match=r"magic|truncated"):
        read_all(lz4_stream(b"abc") + b"garbage!")


class CountingReader(io.RawIOBase):
    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)
        self.consumed = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = self._inner.readinto(b)
        self.consumed += n
        return n


def test_lz4_is_streamed_not_read_whole():
    data = lz4_stream(bytes(2_000_000))
    raw = CountingReader(data)
    stream = open_decompressed(raw, "lz4", path="big")
    assert stream.read(10) == bytes(10)
    assert raw.consumed < len(data) // 4


def test_zstd_round_trip_and_multiple_frames():
    c = zstandard.ZstdCompressor()
    assert read_all(c.compress(PAYLOAD), "zstd") == PAYLOAD
    assert read_all(c.compress(b"ab") + c.compress(b"cd"), "zstd") == b"abcd"


def test_zstd_truncated_is_corrupt():
    data = zstandard.ZstdCompressor().compress(PAYLOAD)
    for cut in (len(data) - 1, len(data) // 2, 5):
        with pytest.raises(CorruptFile, match="zstd stream: truncated frame"):
            read_all(data[:cut], "zstd")


def test_zstd_bad_magic_empty_file_and_bad_checksum():
    with pytest.raises(CorruptFile, match="bad zstd frame magic"):
        read_all(b"not zstd at all", "zstd")
    with pytest.raises(CorruptFile, match="empty file"):
        read_all(b"", "zstd")
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(PAYLOAD))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptFile, match="zstd"):
        read_all(bytes(data), "zstd")


def test_zstd_is_streamed_not_read_whole():
    plain = random.Random(0).randbytes(2_000_000)
    data = zstandard.ZstdCompressor(level=1).compress(plain)
    raw = CountingReader(data)
    assert open_decompressed(raw, "zstd", path="big").read(10) == plain[:10]
    assert raw.consumed < len(data) // 4


@pytest.mark.parametrize("codec", ["snappy", "lzf", "org.apache.spark.io.SnappyCompressionCodec",
                                   "brotli"])
def test_unsupported_codec_names_the_codec(codec):
    with pytest.raises(UnsupportedFormat) as err:
        open_decompressed(io.BytesIO(b""), codec, path="x/1.delta")
    assert f"codec '{codec}'" in str(err.value)
    assert all(name in str(err.value) for name in CODECS_SUPPORTED)
    assert err.value.path == "x/1.delta"


def test_prefix_of_a_cut_lz4_stream_keeps_every_whole_block():
    data = lz4_stream(PAYLOAD)  # three blocks
    first_two = len(lz4_block(PAYLOAD[:32768])) * 2
    decoded, covered = decompress_prefix(data[:first_two + 100], "lz4", path="f.delta")
    assert decoded == PAYLOAD[:65536]
    assert covered == first_two
    assert decompress_prefix(data, "lz4", path="f.delta") == (PAYLOAD, len(data))
    assert decompress_prefix(data[:10], "lz4", path="f.delta") == (b"", 0)


def test_prefix_of_a_cut_zstd_stream_decodes_what_arrived():
    payload = random.Random(7).randbytes(600_000)
    data = zstandard.ZstdCompressor().compress(payload)
    decoded, covered = decompress_prefix(data[:300_000], "zstd", path="f.delta")
    assert payload.startswith(decoded)
    assert len(decoded) > 150_000 and 0 < covered <= 300_000
