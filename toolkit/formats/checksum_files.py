"""The checksum files Hadoop and Spark write beside state files, and how to check them.

Two kinds exist, and both are exact corruption checks that cost a small read, not a decode:

* Hadoop's hidden ``.<name>.crc`` (``ChecksumFileSystem``: the local filesystem and HDFS
  clients that use it): ``crc\\0``, a big-endian int ``bytesPerChecksum`` (512), then one
  big-endian CRC32 per chunk. Its *size* alone says how long the data file must be — a free
  truncation check from the listing — and Hadoop verifies the CRCs whenever Spark reads the
  file, so a mismatch is a file a restart fails on.
* Spark 4.1's visible ``<name>.crc``: one JSON object,
  ``{"algorithm":"CRC32C","value":…,"mainFileSize":…,"timestampMs":…,"creator":{…}}``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import NamedTuple

from statekit.formats.jsontext import loads_json
from statekit.support.errors import CorruptFile

HADOOP_CRC_MAGIC = b"crc\x00"
HADOOP_BYTES_PER_CHECKSUM = 512
"""Hadoop's default ``io.bytes.per.checksum``; the header of each file says its own."""


class ChecksumFile(NamedTuple):
    """A checksum file beside a data file, as the listing found it."""

    path: str
    size: int
    hadoop: bool
    """Hadoop's hidden ``.<name>.crc`` (else Spark 4.1's JSON ``<name>.crc``)."""


def data_name_of(crc_name: str) -> tuple[str, bool]:
    """The data file a checksum file belongs to, and whether it is Hadoop's hidden kind."""
    base = crc_name.removesuffix(".crc")
    if base.startswith("."):
        return base[1:], True
    return base, False


def hadoop_crc_size(data_size: int,
                    bytes_per_checksum: int = HADOOP_BYTES_PER_CHECKSUM) -> int:
    """The size of the Hadoop ``.crc`` file of a data file of ``data_size`` bytes: an 8-byte
    header and one CRC32 per started chunk."""
    return 8 + 4 * -(-data_size // bytes_per_checksum)


def hadoop_size_matches(data_size: int, crc_size: int,
                        bytes_per_checksum: int = HADOOP_BYTES_PER_CHECKSUM) -> bool:
    """Whether a data file of ``data_size`` bytes fits a Hadoop ``.crc`` of ``crc_size``."""
    return crc_size == hadoop_crc_size(data_size, bytes_per_checksum)


@dataclass(frozen=True)
class ChecksumMismatch:
    """Where a data file stops matching its checksum file."""

    message: str
    offset: int | None = None


def check_hadoop_crc(data: bytes, crc: bytes, crc_path: str) -> ChecksumMismatch | None:
    """Compare ``data`` with Hadoop's ``.crc`` bytes; ``None`` when they agree."""
    if len(crc) < 8 or crc[:4] != HADOOP_CRC_MAGIC:
        raise CorruptFile("not a Hadoop checksum file (no 'crc\\0' header)", path=crc_path)
    (per_chunk,) = struct.unpack(">i", crc[4:8])
    if per_chunk <= 0 or (len(crc) - 8) % 4:
        raise CorruptFile("damaged Hadoop checksum file header", path=crc_path)
    expected = [v for (v,) in struct.iter_unpack(">I", crc[8:])]
    chunks = (len(data) + per_chunk - 1) // per_chunk
    if chunks != len(expected):
        return ChecksumMismatch(f"is {len(data)} bytes but its checksum file covers "
                                f"{len(expected)} chunks of {per_chunk} (truncated or "
                                "extended after it was written)")
    for index, want in enumerate(expected):
        start = index * per_chunk
        if zlib.crc32(data[start:start + per_chunk]) != want:
            return ChecksumMismatch(f"CRC32 of bytes {start}..{start + per_chunk} differs "
                                    "from its checksum file (bytes changed on disk)", start)
    return None


def single_flip(data: bytes, crc: bytes) -> tuple[str, bytes | None] | None:
    """Which side of a Hadoop ``.crc`` mismatch one flipped bit explains (bit rot flips
    one): ``("checksum", None)`` when one stored CRC is one bit off the data's own — the
    checksum file rotted, the data is as written (or one bit of its ``bytesPerChecksum``
    header, with every CRC matching once it is back); ``("data", original)`` when flipping one
    bit of the data makes it match — and that is the data as written. ``None``: neither
    (more damage, or the sizes differ)."""
    if len(crc) < 8 or crc[:4] != HADOOP_CRC_MAGIC or (len(crc) - 8) % 4:
        return None
    (per_chunk,) = struct.unpack(">i", crc[4:8])
    expected = [v for (v,) in struct.iter_unpack(">I", crc[8:])]
    if _header_rotted(data, crc, expected):
        return "checksum", None
    if per_chunk <= 0 or (len(data) + per_chunk - 1) // per_chunk != len(expected):
        return None
    bad = [i for i, want in enumerate(expected)
           if zlib.crc32(data[i * per_chunk:(i + 1) * per_chunk]) != want]
    if len(bad) != 1:
        return None
    index = bad[0]
    start = index * per_chunk
    chunk = bytearray(data[start:start + per_chunk])
    want = expected[index]
    if bin(zlib.crc32(bytes(chunk)) ^ want).count("1") == 1:
        return "checksum", None
    for position in range(len(chunk)):
        for bit in range(8):
            chunk[position] ^= 1 << bit
            if zlib.crc32(bytes(chunk)) == want:
                return "data", data[:start] + bytes(chunk) + data[start + per_chunk:]
            chunk[position] ^= 1 << bit
    return None


def _header_rotted(data: bytes, crc: bytes, expected: list[int]) -> bool:
    """Whether one flipped bit of the header's ``bytesPerChecksum`` is all that is wrong:
    with the bit back, every stored CRC matches the data."""
    header = bytearray(crc[4:8])
    for position in range(4):
        for bit in range(8):
            header[position] ^= 1 << bit
            (per_chunk,) = struct.unpack(">i", bytes(header))
            header[position] ^= 1 << bit
            if per_chunk <= 0 or per_chunk == struct.unpack(">i", crc[4:8])[0] or \
                    (len(data) + per_chunk - 1) // per_chunk != len(expected):
                continue
            if all(zlib.crc32(data[i * per_chunk:(i + 1) * per_chunk]) == want
                   for i, want in enumerate(expected)):
                return True
    return False


def check_spark_crc(data: bytes, crc: bytes, crc_path: str) -> ChecksumMismatch | None:
    """Compare ``data`` with Spark's JSON ``<name>.crc`` (CRC32C and ``mainFileSize``)."""
    try:
        meta = loads_json(crc)
    except ValueError as bad:
        raise CorruptFile(f"checksum file is not JSON ({bad})", path=crc_path) from None
    if not isinstance(meta, dict):
        raise CorruptFile("checksum file is not a JSON object", path=crc_path)
    size = meta.get("mainFileSize")
    if isinstance(size, int) and size != len(data):
        return ChecksumMismatch(f"is {len(data)} bytes but its checksum file says {size} "
                                "(truncated or extended after it was written)")
    want = meta.get("value")
    if isinstance(want, int) and str(meta.get("algorithm", "CRC32C")).upper() == "CRC32C":
        got = crc32c(data)
        if got != want and got != want & 0xFFFFFFFF and (got - (1 << 32)) != want:
            return ChecksumMismatch("CRC32C differs from its checksum file (bytes changed "
                                    "on disk)")
    return None


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE: list[int] = []


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli): google-crc32c's C implementation when installed (the lookup the
    SST reader uses, :func:`statekit.formats.rocksdb_sst.crc32c_extend`), else a table
    (slow, but only Spark 4.1's checksum files need it)."""
    from statekit.formats.rocksdb_sst import crc32c_extend

    extend = crc32c_extend()
    if extend is not None:
        return int(extend(0, data))
    if not _TABLE:
        _TABLE.extend(_crc32c_table())
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
