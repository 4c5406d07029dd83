"""Read the SST files of a RocksDB state checkpoint (block-based tables) without RocksDB.

A RocksDB state version is a ``<v>.zip`` that lists shared ``SSTs/*.sst`` files (see
:mod:`statekit.formats.rocksdb_zip`). Reading the state itself therefore means reading SSTs,
and doing it in pure Python keeps statekit's core free of a JVM and of native RocksDB: the
files can be inspected where they lie (an object store, a copied folder, a broken checkpoint).
Files are read block by block through a seekable file object, never whole.

Layout (all integers little-endian). Verified on files written by pyspark 4.3 / rocksdbjni
9.8.4 with Spark's options (``stateStore.rocksdb.formatVersion`` 5, the default, and 6;
``stateStore.rocksdb.compression`` lz4, the default, zstd, ``z`` (zlib), snappy and none),
and on files rocksdbjni wrote with options Spark never sets (format_version 2-4, checksums
crc32c, xxHash, xxHash64, LZ4HC, bzip2 and snappy, index restart interval 16, first-key
index, data block hash index, partitioned index, single deletes, merges, range deletions);
see tests/data/formats/README.md:

* **Footer** (last 53 bytes): checksum type (1 byte; Spark's files: 4 = XXH3), 40 bytes,
  ``uint32 format_version``, ``uint64`` magic ``0x88e241b785f4cff7``. For format_version
  1-5 the 40 bytes are the metaindex and index block handles (each ``varint64 offset,
  varint64 size``) and zero padding. For format_version 6: extended magic ``3e 00 7a 00``,
  ``uint32`` footer checksum, ``uint32`` base context checksum, ``uint32`` metaindex size
  (the metaindex ends right before the footer, after its 5-byte trailer), 24 zero bytes; the
  index handle is then the metaindex entry ``rocksdb.index``. The legacy 48-byte footer
  (magic ``0xdb4775248b80fb57``, format_version 0) is parsed as RocksDB documents it, but no
  real file of that kind was at hand (rocksdbjni 9.8.4 cannot write one).
* **Blocks** are followed by a 5-byte trailer: compression type (0 none, 1 snappy, 2 zlib,
  3 bzip2, 4 LZ4, 5 LZ4HC, 7 ZSTD) and a ``uint32`` checksum. Compressed blocks of
  format_version >= 2 start with ``varint32`` uncompressed size, then the codec's raw block
  (LZ4 block, zstd frame carrying its content size, raw deflate, bzip2 stream). Snappy blocks
  are a raw snappy block (not the framed format) in every format_version, with no size before
  it: snappy's own header is that ``varint32``. In Spark's lz4/zstd/snappy files the data and
  index blocks are compressed (when that saves space); metaindex, properties and filter
  blocks are not. XPRESS and dictionary compression are refused (UnsupportedFormat).
* **Checksums** verified: XXH3 (type 4, Spark's): low 32 bits of ``XXH3_64(block)`` XOR
  ``(compression_type * 0x6b9083d9) mod 2**32``; xxHash32 (2) and the low 32 bits of xxHash64
  (3) over block + type byte; CRC32c (1, RocksDB's default before XXH3): the *masked* crc32c
  of block + type byte, ``(rotr32(crc, 15) + 0xa282ead8) mod 2**32``. With format_version 6
  the stored value is that plus (mod 2**32) ``base_context_checksum ^ (low32(offset) +
  high32(offset))`` for the block's file offset, and the footer carries its own checksum (the
  same, over the 53 footer bytes with the checksum field zeroed, at the footer's offset).
  Files with no checksum (type 0), and crc32c files when no crc32c library is installed, are
  parsed with the order of internal keys checked instead; a damaged compressed block may then
  go unnoticed. Nothing reports that a file was read this way (its footer's checksum type
  tells).
* **Data and meta blocks**: entries ``varint32 shared, varint32 non_shared, varint32
  value_length, key bytes after the shared prefix, value``, then ``uint32`` restart offsets
  and a ``uint32`` whose low 31 bits count them (the high bit marks a data block hash index:
  ``uint8`` buckets + ``uint16`` bucket count between the restarts and that word). Data block
  keys are internal keys: user key + 8 bytes ``(sequence << 8) | type`` (0 delete, 1 put,
  2 merge, 7 single delete, ...).
* **Index block**: one entry per data block, its value the block's handle. With the table
  property ``rocksdb.index.value.is.delta.encoded`` (1 from format_version 4, Spark's files
  included) entries have no ``value_length``; an entry with ``shared == 0`` holds a full
  handle, one with shared key bytes a zigzag ``varint64`` size delta (offset = previous
  offset + size + 5). Spark's index restart interval is 1, so its handles are all full. Index
  type (property ``rocksdb.block.based.table.index.type``, ``uint32``): 0 binary search
  (Spark's) and 1 hash search are read alike, 3 (a length-prefixed first key after each
  handle) is read, 2 (partitioned index) is refused.
* **Metaindex**: meta block name -> handle: ``rocksdb.properties`` (table properties:
  numbers as ``varint64``, the index type as ``uint32``, the rest strings), filters
  (ignored), ``rocksdb.range_del`` (range tombstones), ``rocksdb.compression_dict``.
  ``rocksdb.num.entries`` counts data block entries plus range tombstones; it is checked
  against the entries read, as ``rocksdb.num.data.blocks`` is against the index.

What Spark stores (verified): deletes are type 0 (``kDeletion``), never single deletes; files
flushed from the memtable have distinct positive sequence numbers, compaction output has them
all zeroed; keys and values are exactly the state-store bytes (the ``0x00`` encoding version
byte + UnsafeRow; transformWithState adds a 2-byte column family id before the key; see
:mod:`statekit.formats.rocksdb_keys`), left untouched here. The merge operator recorded is
``StringAppendOperator``: list state (transformWithState) writes merge operands, which
:func:`live_state` refuses unless told the delimiter.

Optional libraries (``pip install 'statekit[rocksdb]'``, imported on first need, never at
import): ``google-crc32c`` verifies crc32c checksums (its C implementation only: the
pure-Python fallback runs at about 2 MB/s, too slow for state files) and ``cramjam`` reads
snappy blocks. Without cramjam, snappy blocks are refused (UnsupportedFormat naming the
extra); a pure-Python snappy decoder would be the slowest step of every read.

Malformed input raises :class:`CorruptFile` naming the file (with the byte offset of the block
at fault where there is one), valid features not read here :class:`UnsupportedFormat`.
"""

from __future__ import annotations

import bz2
import warnings
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import lz4.block
import xxhash
import zstandard

from statekit.formats.opening import open_binary
from statekit.support.errors import CorruptFile, UnsupportedFormat

__all__ = [
    "SstEntry",
    "SstFooter",
    "iter_sst_entries",
    "live_state",
    "read_sst_footer",
    "sst_properties",
]

MAGIC = 0x88E241B785F4CFF7
"""``kBlockBasedTableMagicNumber``."""
LEGACY_MAGIC = 0xDB4775248B80FB57
"""``kLegacyBlockBasedTableMagicNumber`` (format_version 0, 48-byte footer)."""
_OTHER_TABLE_MAGICS = {
    0x8242229663BF9564: "plain table",
    0x4F3418EB7A8F13B8: "legacy plain table",
    0x926789D0C5F17873: "cuckoo table",
}
FOOTER_BYTES = 53
LEGACY_FOOTER_BYTES = 48
BLOCK_TRAILER_BYTES = 5
EXTENDED_MAGIC = b"\x3e\x00\x7a\x00"
MAX_BLOCK_BYTES = 1 << 30
"""Largest (decompressed) block accepted: a bigger claim means a corrupt size field."""

PROPERTIES_BLOCK = "rocksdb.properties"
INDEX_BLOCK = "rocksdb.index"
RANGE_DEL_BLOCK = "rocksdb.range_del"
COMPRESSION_DICT_BLOCK = "rocksdb.compression_dict"

CHECKSUM_TYPES = {0: "none", 1: "crc32c", 2: "xxhash", 3: "xxhash64", 4: "xxh3"}
COMPRESSION_TYPES = {0: "none", 1: "snappy", 2: "zlib", 3: "bzip2", 4: "lz4", 5: "lz4hc",
                     6: "xpress", 7: "zstd"}
INDEX_TYPES = {0: "binary search", 1: "hash search", 2: "two-level (partitioned)",
               3: "binary search with first key"}

VALUE_TYPES = {
    0x00: "delete",
    0x01: "put",
    0x02: "merge",
    0x07: "single_delete",
    0x0F: "range_delete",
    0x11: "blob_index",
    0x14: "delete_with_timestamp",
    0x16: "wide_column_entity",
    0x18: "value_preferred_seqno",
}
"""RocksDB ``ValueType`` codes that can appear in SST data blocks -> ``SstEntry.kind``."""
_DELETE_TYPES = frozenset({0x00, 0x07})
_PUT, _MERGE = 0x01, 0x02

_XXH3_LAST_BYTE_PRIME = 0x6B9083D9
_CRC32C_MASK_DELTA = 0xA282EAD8
_MASK32 = 0xFFFFFFFF
_EXTRA_HINT = "pip install 'statekit[rocksdb]'"
"""How to install the optional libraries (crc32c checksums, snappy blocks)."""

# Table properties RocksDB stores as varint64 numbers (``rocksdb.`` prefix omitted); every
# other property is a string, except the index type below (fixed uint32).
_NUMERIC_PROPERTIES = frozenset(
    "rocksdb." + name for name in (
        "data.size", "index.size", "index.partitions", "top-level.index.size",
        "index.key.is.user.key", "index.value.is.delta.encoded", "filter.size",
        "raw.key.size", "raw.value.size", "num.data.blocks", "num.entries",
        "num.filter_entries", "deleted.keys", "merge.operands", "num.range-deletions",
        "format.version", "fixed.key.length", "column.family.id", "creation.time",
        "oldest.key.time", "newest.key.time", "file.creation.time",
        "slow.compression.estimated.data.size", "fast.compression.estimated.data.size",
        "original.file.number", "tail.start.offset", "key.largest.seqno",
        "key.smallest.seqno", "user.defined.timestamps.persisted",
    )
)
_INDEX_TYPE_PROPERTY = "rocksdb.block.based.table.index.type"
_BYTEWISE = b"leveldb.BytewiseComparator"


@dataclass(frozen=True, slots=True)
class SstEntry:
    """One internal entry of an SST data block."""

    user_key: bytes
    """The key as the application (Spark) wrote it: the internal key minus its 8-byte trailer."""
    sequence: int
    """RocksDB sequence number (0 once compaction moved the entry to the bottommost level)."""
    kind: str
    """``"put"``, ``"delete"``, ``"merge"``, ``"single_delete"``, … (:data:`VALUE_TYPES`), or
    ``"type_0xNN"`` for a code not known here."""
    value: bytes | None
    """The value; ``None`` for deletions."""


@dataclass(frozen=True, slots=True)
class BlockHandle:
    """Where a block lies: ``offset`` and ``size`` (without the 5-byte trailer)."""

    offset: int
    size: int


@dataclass(frozen=True)
class SstFooter:
    """The parsed footer of a block-based table."""

    format_version: int
    checksum_type: int
    metaindex: BlockHandle
    index: BlockHandle | None
    """``None`` for format_version >= 6 (the handle is the metaindex entry ``rocksdb.index``)."""
    base_context_checksum: int = 0
    """format_version >= 6: mixed with block offsets into every checksum."""
    file_size: int = 0


class _Bad(Exception):
    """A structural problem inside one block (turned into CorruptFile with the block offset)."""


def _varint(buf: bytes, pos: int, limit: int, max_bits: int = 64) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= limit:
            raise _Bad("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> max_bits:
                raise _Bad(f"varint exceeds {max_bits} bits")
            return result, pos
        shift += 7
        if shift >= max_bits + 7:
            raise _Bad("varint too long")


def _handle(buf: bytes, pos: int, limit: int) -> tuple[BlockHandle, int]:
    offset, pos = _varint(buf, pos, limit)
    size, pos = _varint(buf, pos, limit)
    return BlockHandle(offset, size), pos


def _context_modifier(base: int, offset: int) -> int:
    if not base:
        return 0
    return (base ^ ((offset & _MASK32) + (offset >> 32))) & _MASK32


# -- optional libraries -------------------------------------------------------------------------

_OPTIONAL: dict[str, Callable[..., Any] | None] = {}
"""Functions of the optional libraries, looked up on first need: name -> function, or ``None``
when the library is missing (tests replace this dict to simulate either case)."""


def crc32c_extend() -> Callable[[int, bytes], int] | None:
    """``google_crc32c.extend`` (``crc32c(A + data)`` from ``crc32c(A)``), or ``None``."""
    if "crc32c" not in _OPTIONAL:
        extend: Callable[[int, bytes], int] | None = None
        try:
            with warnings.catch_warnings():  # the slow-fallback warning; refused below
                warnings.simplefilter("ignore", RuntimeWarning)
                import google_crc32c
        except ImportError:
            pass
        else:
            if getattr(google_crc32c, "implementation", None) == "c":
                extend = google_crc32c.extend
        _OPTIONAL["crc32c"] = extend
    return _OPTIONAL["crc32c"]


def _snappy_raw() -> Callable[[bytes], bytes] | None:
    """A raw (unframed) snappy block decoder raising ``ValueError``, or ``None``."""
    if "snappy" not in _OPTIONAL:
        try:
            import cramjam
        except ImportError:
            _OPTIONAL["snappy"] = None
        else:
            def decode(data: bytes) -> bytes:
                try:
                    return bytes(cramjam.snappy.decompress_raw(data))
                except cramjam.DecompressionError as exc:
                    raise ValueError(str(exc)) from None

            _OPTIONAL["snappy"] = decode
    return _OPTIONAL["snappy"]


def _verified(checksum_type: int) -> bool:
    """Whether block checksums of this type are verified here (xxHash, xxHash64 and XXH3
    always, crc32c with google-crc32c installed)."""
    return _checksum(checksum_type, b"", 0) is not None


def _checksum(kind: int, data: bytes, last_byte: int) -> int | None:
    """RocksDB's ``ComputeBuiltinChecksumWithLastByte``; ``None`` when not verified here."""
    if kind == 4:
        return (xxhash.xxh3_64_intdigest(data) & _MASK32) ^ (
            (last_byte * _XXH3_LAST_BYTE_PRIME) & _MASK32)
    if kind == 2:
        h32 = xxhash.xxh32(data)
        h32.update(bytes((last_byte,)))
        return h32.intdigest()
    if kind == 3:
        h64 = xxhash.xxh64(data)
        h64.update(bytes((last_byte,)))
        return h64.intdigest() & _MASK32
    if kind == 1:
        extend = crc32c_extend()
        if extend is None:
            return None
        crc = extend(extend(0, data), bytes((last_byte,)))
        return ((((crc >> 15) | (crc << 17)) & _MASK32) + _CRC32C_MASK_DELTA) & _MASK32
    return None


class _Table:
    """An open SST file: footer, metaindex and properties read; blocks read on demand."""

    def __init__(self, f: BinaryIO, path: str) -> None:
        self.f = f
        self.path = path
        try:
            f.seek(0, 2)
            self.size = f.tell()
        except (OSError, ValueError) as exc:
            raise CorruptFile(f"SST file is not seekable ({exc})", path=path) from None
        self.metaindex: dict[str, BlockHandle] = {}
        self.footer = self._read_footer()
        self.data_end = self.size - (FOOTER_BYTES if self.footer.format_version else
                                     LEGACY_FOOTER_BYTES)
        self.metaindex = self._read_metaindex()
        self.properties = (self._read_properties(self.metaindex[PROPERTIES_BLOCK])
                           if PROPERTIES_BLOCK in self.metaindex else {})

    # -- low level -------------------------------------------------------------------------

    def corrupt(self, message: str, offset: int | None = None) -> CorruptFile:
        return CorruptFile(message, path=self.path, offset=offset)

    def _read_at(self, offset: int, n: int) -> bytes:
        try:
            self.f.seek(offset)
            data = self.f.read(n)
        except (OSError, ValueError) as exc:
            raise self.corrupt(f"cannot read {n} bytes ({exc})", offset) from None
        return data or b""

    def _read_footer(self) -> SstFooter:
        if self.size < LEGACY_FOOTER_BYTES:
            raise self.corrupt(f"not an SST file: {self.size} bytes is shorter than a footer")
        tail = self._read_at(max(self.size - FOOTER_BYTES, 0), FOOTER_BYTES)
        if len(tail) < min(self.size, FOOTER_BYTES):
            raise self.corrupt("truncated footer", self.size - len(tail))
        magic = int.from_bytes(tail[-8:], "little")
        if magic == LEGACY_MAGIC:
            part = tail[-LEGACY_FOOTER_BYTES:-8]
            try:
                meta, pos = _handle(part, 0, len(part))
                index, _ = _handle(part, pos, len(part))
            except _Bad as exc:
                raise self.corrupt(f"bad footer ({exc})", self.size - LEGACY_FOOTER_BYTES
                                   ) from None
            return self._checked(SstFooter(0, 1, meta, index, 0, self.size))
        if magic in _OTHER_TABLE_MAGICS:
            raise UnsupportedFormat(f"SST file is a RocksDB {_OTHER_TABLE_MAGICS[magic]} "
                                    "(only block-based tables are read)", path=self.path)
        if magic != MAGIC:
            raise self.corrupt(f"not an SST file (bad magic number 0x{magic:016x})",
                               self.size - 8)
        if self.size < FOOTER_BYTES:
            raise self.corrupt(f"not an SST file: {self.size} bytes is shorter than a footer")
        footer_offset = self.size - FOOTER_BYTES
        version = int.from_bytes(tail[-12:-8], "little")
        checksum_type = tail[0]
        if version > 6 or version < 1:
            raise (UnsupportedFormat(f"SST format_version {version} is not supported "
                                     "(1-6 are)", path=self.path) if 6 < version < 64 else
                   self.corrupt(f"bad SST format_version {version}", footer_offset + 41))
        if checksum_type not in CHECKSUM_TYPES:
            raise self.corrupt(f"unknown checksum type {checksum_type} in the footer",
                               footer_offset)
        if version < 6:
            try:
                meta, pos = _handle(tail, 1, 41)
                index, _ = _handle(tail, pos, 41)
            except _Bad as exc:
                raise self.corrupt(f"bad footer ({exc})", footer_offset) from None
            return self._checked(SstFooter(version, checksum_type, meta, index, 0, self.size))
        if tail[1:5] != EXTENDED_MAGIC:
            raise self.corrupt("bad footer (format_version 6 without its extended magic)",
                               footer_offset + 1)
        stored = int.from_bytes(tail[5:9], "little")
        base = int.from_bytes(tail[9:13], "little")
        meta_size = int.from_bytes(tail[13:17], "little")
        if any(tail[33:41]):
            raise UnsupportedFormat("SST footer uses a future feature (reserved bytes set)",
                                    path=self.path)
        if _context_modifier(base, 0) == 0:
            raise self.corrupt("bad footer (invalid base context checksum)", footer_offset)
        unsummed = tail[:5] + b"\0\0\0\0" + tail[9:]
        computed = _checksum(checksum_type, unsummed[:-1], unsummed[-1])
        if computed is not None and (
            (computed + _context_modifier(base, footer_offset)) & _MASK32 != stored
        ):
            raise self.corrupt("footer checksum mismatch", footer_offset)
        meta_offset = footer_offset - BLOCK_TRAILER_BYTES - meta_size
        meta = BlockHandle(meta_offset, meta_size)
        return self._checked(SstFooter(version, checksum_type, meta, None, base, self.size))

    def _checked(self, footer: SstFooter) -> SstFooter:
        end = self.size - (FOOTER_BYTES if footer.format_version else LEGACY_FOOTER_BYTES)
        for name, h in (("metaindex", footer.metaindex), ("index", footer.index)):
            if h is not None and (h.offset < 0 or h.offset + h.size + BLOCK_TRAILER_BYTES > end):
                raise self.corrupt(f"footer points the {name} block outside the file "
                                   f"(offset {h.offset}, size {h.size}, file {self.size} bytes)",
                                   self.size - FOOTER_BYTES)
        return footer

    def check_handle(self, h: BlockHandle, what: str, at: int | None = None) -> None:
        if h.offset + h.size + BLOCK_TRAILER_BYTES > self.data_end:
            raise self.corrupt(f"{what} handle (offset {h.offset}, size {h.size}) points past "
                               f"the data of the file ({self.size} bytes)", at)

    def read_block(self, h: BlockHandle, what: str, *, raw: bytes | None = None) -> bytes:
        """The block's contents: read (unless ``raw`` holds block + trailer), checked,
        decompressed."""
        self.check_handle(h, what, h.offset)
        n = h.size + BLOCK_TRAILER_BYTES
        data = self._read_at(h.offset, n) if raw is None else raw
        if len(data) < n:
            raise self.corrupt(f"truncated {what} ({len(data)} of {n} bytes)", h.offset)
        comp = data[h.size]
        body = data[: h.size]
        expected = _checksum(self.footer.checksum_type, body, comp)
        if expected is not None:
            expected = (expected + _context_modifier(self.footer.base_context_checksum,
                                                     h.offset)) & _MASK32
            if expected != int.from_bytes(data[h.size + 1 : n], "little"):
                raise self.corrupt(f"{what} checksum mismatch", h.offset)
        if comp == 0:
            return body
        return self._decompress(body, comp, what, h.offset)

    def _decompress(self, body: bytes, comp: int, what: str, at: int) -> bytes:
        name = COMPRESSION_TYPES.get(comp)
        if comp == 6 or name is None:
            label = f"{name}-compressed" if name else f"compression type {comp} in"
            raise UnsupportedFormat(f"{label} SST blocks are not supported", path=self.path)
        if COMPRESSION_DICT_BLOCK in self.metaindex:
            raise UnsupportedFormat("SST blocks compressed with a dictionary are not supported",
                                    path=self.path)
        if comp == 1:
            return self._snappy(body, what, at)
        if self.footer.format_version < 2:
            raise UnsupportedFormat(f"{name}-compressed blocks of SST format_version "
                                    f"{self.footer.format_version} are not supported",
                                    path=self.path)
        try:
            n, pos = _varint(body, 0, len(body), 32)
        except _Bad as exc:
            raise self.corrupt(f"{what}: bad uncompressed size ({exc})", at) from None
        payload = body[pos:]
        bound = MAX_BLOCK_BYTES
        if comp in (4, 5):
            bound = min(bound, 255 * len(payload) + 64)  # LZ4's maximum ratio
        if n > bound:
            raise self.corrupt(f"{what}: impossible uncompressed size {n} for "
                               f"{len(payload)} {name} bytes", at)
        out: bytes
        try:
            if comp in (4, 5):
                out = lz4.block.decompress(payload, uncompressed_size=n)
            elif comp == 7:
                # RocksDB's zstd frames carry their content size (verified); requiring it
                # bounds the output buffer by what the frame really holds.
                params = zstandard.get_frame_parameters(payload)
                if params.content_size != n:
                    raise ValueError(f"frame says {params.content_size} bytes")
                out = zstandard.ZstdDecompressor().decompress(payload, max_output_size=n)
            elif comp == 2:
                d = zlib.decompressobj(-15)
                out = d.decompress(payload, n or 1)  # 0 would mean "no limit"
                if not d.eof:
                    raise ValueError("incomplete deflate stream")
            else:
                d2 = bz2.BZ2Decompressor()
                out = d2.decompress(payload, n or 1)
                if not d2.eof:
                    raise ValueError("incomplete bzip2 stream")
        except (lz4.block.LZ4BlockError, zstandard.ZstdError, zlib.error, OSError, ValueError,
                MemoryError, EOFError) as exc:
            raise self.corrupt(f"{what} does not decompress ({name}: {exc})", at) from None
        if len(out) != n:
            raise self.corrupt(f"{what} decompresses to {len(out)} bytes, not {n}", at)
        return out

    def _snappy(self, body: bytes, what: str, at: int) -> bytes:
        """A raw snappy block (the same in every format_version: no size prefix of RocksDB's,
        snappy's own header is the ``varint32`` uncompressed size)."""
        decode = _snappy_raw()
        if decode is None:
            raise UnsupportedFormat("snappy-compressed SST blocks are not supported without "
                                    f"cramjam ({_EXTRA_HINT})", path=self.path)
        try:
            n, _ = _varint(body, 0, len(body), 32)
        except _Bad as exc:
            raise self.corrupt(f"{what}: bad uncompressed size ({exc})", at) from None
        # Checked before decoding, which allocates what the header claims. A snappy element
        # of 3 bytes yields at most 64.
        if n > min(MAX_BLOCK_BYTES, 22 * len(body)):
            raise self.corrupt(f"{what}: impossible uncompressed size {n} for {len(body)} "
                               "snappy bytes", at)
        try:
            out = decode(body)
        except (ValueError, MemoryError) as exc:
            raise self.corrupt(f"{what} does not decompress ({exc})", at) from None
        if len(out) != n:
            raise self.corrupt(f"{what} decompresses to {len(out)} bytes, not {n}", at)
        return out

    # -- blocks of entries ------------------------------------------------------------------

    def entries_end(self, block: bytes, what: str, at: int) -> int:
        """Where the entries of ``block`` end (the restart array begins)."""
        if len(block) < 4:
            raise self.corrupt(f"{what} too short ({len(block)} bytes)", at)
        packed = int.from_bytes(block[-4:], "little")
        restarts = packed & 0x7FFFFFFF
        end = len(block) - 4 - 4 * restarts
        if packed >> 31:  # data block hash index: uint8 buckets + uint16 count before it
            if len(block) < 6:
                raise self.corrupt(f"{what} too short for its hash index", at)
            end -= 2 + int.from_bytes(block[-6:-4], "little")
        if restarts == 0 or end < 0:
            raise self.corrupt(f"{what} has a bad restart array ({restarts} restarts in "
                               f"{len(block)} bytes)", at)
        return end

    def kv_block(self, block: bytes, what: str, at: int) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` of every entry of a block with standard entries."""
        end = self.entries_end(block, what, at)
        try:
            yield from _entries(block, end)
        except _Bad as exc:
            raise self.corrupt(f"{what}: {exc}", at) from None

    def _read_metaindex(self) -> dict[str, BlockHandle]:
        h = self.footer.metaindex
        block = self.read_block(h, "metaindex block")
        out: dict[str, BlockHandle] = {}
        for key, value in self.kv_block(block, "metaindex block", h.offset):
            try:
                handle, _ = _handle(value, 0, len(value))
            except _Bad as exc:
                raise self.corrupt(f"metaindex entry {key[:60]!r}: {exc}", h.offset) from None
            self.check_handle(handle, f"metaindex entry {key[:60]!r}", h.offset)
            out[key.decode("utf-8", "replace")] = handle
        return out

    def _read_properties(self, h: BlockHandle) -> dict[str, bytes | int]:
        block = self.read_block(h, "properties block")
        props: dict[str, bytes | int] = {}
        for key, value in self.kv_block(block, "properties block", h.offset):
            name = key.decode("utf-8", "replace")
            if name in _NUMERIC_PROPERTIES:
                try:
                    props[name], _ = _varint(value, 0, len(value))
                except _Bad as exc:
                    raise self.corrupt(f"property {name}: {exc}", h.offset) from None
            elif name == _INDEX_TYPE_PROPERTY and len(value) == 4:
                props[name] = int.from_bytes(value, "little")
            else:
                props[name] = value
        return props

    def index_handle(self) -> BlockHandle:
        if self.footer.index is not None:
            return self.footer.index
        if INDEX_BLOCK not in self.metaindex:
            raise self.corrupt(f"format_version {self.footer.format_version} SST without "
                               f"an {INDEX_BLOCK!r} metaindex entry")
        return self.metaindex[INDEX_BLOCK]

    def data_handles(self) -> list[BlockHandle]:
        """The handles of the data blocks, in file order, from the index block."""
        index_type = self.properties.get(_INDEX_TYPE_PROPERTY, 0)
        delta = self.properties.get("rocksdb.index.value.is.delta.encoded", 0)
        if not isinstance(index_type, int) or not isinstance(delta, int):
            raise self.corrupt("bad index type or index encoding in the table properties",
                               self.metaindex[PROPERTIES_BLOCK].offset)
        if index_type == 2:
            raise UnsupportedFormat("SST with a partitioned index (kTwoLevelIndexSearch) "
                                    "is not supported", path=self.path)
        if index_type not in INDEX_TYPES:
            raise UnsupportedFormat(f"SST index type {index_type} is not supported",
                                    path=self.path)
        first_key = index_type == 3
        h = self.index_handle()
        block = self.read_block(h, "index block")
        end = self.entries_end(block, "index block", h.offset)
        try:
            handles = _index_handles(block, end, delta=bool(delta), first_key=first_key)
        except _Bad as exc:
            raise self.corrupt(f"index block: {exc}", h.offset) from None
        previous_end = 0
        for handle in handles:
            self.check_handle(handle, "index entry", h.offset)
            if handle.offset < previous_end:
                raise self.corrupt(f"index block lists data blocks out of order (offset "
                                   f"{handle.offset} after {previous_end})", h.offset)
            previous_end = handle.offset + handle.size + BLOCK_TRAILER_BYTES
        expected = self.properties.get("rocksdb.num.data.blocks")
        if isinstance(expected, int) and expected != len(handles):
            raise self.corrupt(f"index block lists {len(handles)} data blocks, the table "
                               f"properties say {expected}", h.offset)
        return handles

    def raw_entries(self) -> Iterator[tuple[bytes, int, bytes]]:
        """``(user_key, trailer, value)`` of every data block entry, in file order."""
        handles = self.data_handles()
        # Where checksums are not verified (none; crc32c without google-crc32c), check the
        # key order instead.
        check_order = (not _verified(self.footer.checksum_type)
                       and self.properties.get("rocksdb.comparator", _BYTEWISE) == _BYTEWISE)
        count = 0
        i = 0
        while i < len(handles):
            # Read runs of adjacent blocks with one request (data blocks are contiguous).
            j = i + 1
            start = handles[i].offset
            stop = start + handles[i].size + BLOCK_TRAILER_BYTES
            while (j < len(handles) and handles[j].offset == stop
                   and stop - start < _READ_AHEAD):
                stop += handles[j].size + BLOCK_TRAILER_BYTES
                j += 1
            chunk = self._read_at(start, stop - start)
            for h in handles[i:j]:
                rel = h.offset - start
                block = self.read_block(
                    h, "data block", raw=chunk[rel : rel + h.size + BLOCK_TRAILER_BYTES])
                entries = _data_entries(block, self.entries_end(block, "data block", h.offset))
                try:
                    if check_order:
                        count += yield from _ordered(entries, count)
                    else:
                        count += yield from entries
                except _Bad as exc:
                    raise self.corrupt(f"data block: {exc}", h.offset) from None
            i = j
        expected = self.properties.get("rocksdb.num.entries")
        ranges = self.properties.get("rocksdb.num.range-deletions", 0)
        if isinstance(expected, int) and isinstance(ranges, int) and expected - ranges != count:
            # num.entries counts range tombstones too (verified with rocksdbjni 9.8.4)
            raise self.corrupt(f"data blocks hold {count} entries, the table properties say "
                               f"{expected - ranges}")

    def range_deletions(self) -> int:
        """How many range tombstones the file holds (0 when none)."""
        n = self.properties.get("rocksdb.num.range-deletions", 0)
        if isinstance(n, int) and n:
            return n
        h = self.metaindex.get(RANGE_DEL_BLOCK)
        if h is None:
            return 0
        block = self.read_block(h, "range deletion block")
        return sum(1 for _ in self.kv_block(block, "range deletion block", h.offset))


_READ_AHEAD = 1 << 20
"""Adjacent data blocks are fetched in requests of up to this many bytes."""


def _entries(block: bytes, end: int) -> Iterator[tuple[bytes, bytes]]:
    """Decode ``shared, non_shared, value_length, key delta, value`` entries up to ``end``."""
    pos = 0
    key = b""
    try:
        while pos < end:
            shared = block[pos]
            if shared < 0x80:
                pos += 1
            else:
                shared, pos = _varint(block, pos, end, 32)
            non_shared = block[pos]
            if non_shared < 0x80:
                pos += 1
            else:
                non_shared, pos = _varint(block, pos, end, 32)
            vlen = block[pos]
            if vlen < 0x80:
                pos += 1
            else:
                vlen, pos = _varint(block, pos, end, 32)
            kend = pos + non_shared
            vend = kend + vlen
            if vend > end:
                raise _Bad(f"entry at block offset {pos} runs past the entries ({vend} > {end})")
            if shared:
                if shared > len(key):
                    raise _Bad(f"entry shares {shared} bytes of a {len(key)}-byte key")
                key = key[:shared] + block[pos:kend]
            else:
                key = block[pos:kend]
            yield key, block[kend:vend]
            pos = vend
    except IndexError:
        raise _Bad("entry header runs past the block") from None


def _data_entries(block: bytes, end: int) -> Generator[tuple[bytes, int, bytes], None, int]:
    """:func:`_entries` for data blocks: yield ``(user_key, trailer, value)``, return the count.

    Kept separate (and duplicated) because it is the hot loop of every read."""
    pos = 0
    n = 0
    key = b""
    try:
        while pos < end:
            shared = block[pos]
            if shared < 0x80:
                pos += 1
            else:
                shared, pos = _varint(block, pos, end, 32)
            non_shared = block[pos]
            if non_shared < 0x80:
                pos += 1
            else:
                non_shared, pos = _varint(block, pos, end, 32)
            vlen = block[pos]
            if vlen < 0x80:
                pos += 1
            else:
                vlen, pos = _varint(block, pos, end, 32)
            kend = pos + non_shared
            vend = kend + vlen
            if vend > end:
                raise _Bad(f"entry at block offset {pos} runs past the entries ({vend} > {end})")
            if shared:
                if shared > len(key):
                    raise _Bad(f"entry shares {shared} bytes of a {len(key)}-byte key")
                key = key[:shared] + block[pos:kend]
            else:
                key = block[pos:kend]
            if len(key) < 8:
                raise _Bad(f"entry with a {len(key)}-byte internal key (less than its 8-byte "
                           "trailer)")
            n += 1
            yield key[:-8], int.from_bytes(key[-8:], "little"), block[kend:vend]
            pos = vend
    except IndexError:
        raise _Bad("entry header runs past the block") from None
    return n


def _ordered(entries: Generator[tuple[bytes, int, bytes], None, int], before: int
             ) -> Generator[tuple[bytes, int, bytes], None, int]:
    """Pass entries through, checking internal key order (user key up, then trailer down)."""
    prev_key, prev_trailer = b"", -1
    n = 0
    for user_key, trailer, value in entries:
        if (n or before) and (user_key < prev_key or (
                user_key == prev_key and trailer >= prev_trailer)):
            raise _Bad("entries out of order")
        prev_key, prev_trailer = user_key, trailer
        n += 1
        yield user_key, trailer, value
    return n


def _index_handles(block: bytes, end: int, *, delta: bool, first_key: bool
                   ) -> list[BlockHandle]:
    """The block handles of an index block (keys are skipped; see the module docstring)."""
    handles: list[BlockHandle] = []
    pos = 0
    key_len = 0
    previous: BlockHandle | None = None
    while pos < end:
        shared, pos = _varint(block, pos, end, 32)
        non_shared, pos = _varint(block, pos, end, 32)
        if not delta:
            vlen, pos = _varint(block, pos, end, 32)
        if shared > key_len:
            raise _Bad(f"entry shares {shared} bytes of a {key_len}-byte key")
        key_len = shared + non_shared
        pos += non_shared
        if pos > end:
            raise _Bad("index entry key runs past the entries")
        vstart = pos
        if delta and shared and previous is not None:
            zigzag, pos = _varint(block, pos, end)
            size = previous.size + ((zigzag >> 1) ^ -(zigzag & 1))
            if size < 0:
                raise _Bad("negative block size in a delta-encoded index entry")
            handle = BlockHandle(previous.offset + previous.size + BLOCK_TRAILER_BYTES, size)
        else:
            handle, pos = _handle(block, pos, end)
        if first_key:
            n, pos = _varint(block, pos, end, 32)
            pos += n
        if not delta:
            if pos > vstart + vlen:
                raise _Bad("index entry value shorter than its block handle")
            pos = vstart + vlen
        if pos > end:
            raise _Bad("index entry value runs past the entries")
        handles.append(handle)
        previous = handle
    return handles


def _kind(value_type: int) -> str:
    return VALUE_TYPES.get(value_type) or f"type_0x{value_type:02x}"


def read_sst_footer(fs: Any, path: str, *, shown: str | None = None) -> SstFooter:
    """The footer of the SST at ``path`` (format version, checksum type, block handles)."""
    shown = shown or path
    with open_binary(fs, path, "SST file", shown=shown) as f:
        return _Table(f, shown).footer


def sst_properties(fs: Any, path: str, *, shown: str | None = None) -> dict[str, bytes | int]:
    """The table properties of the SST at ``path`` (the ``rocksdb.properties`` meta block).

    Cheap: reads the footer, the metaindex and that one block. Numbers (``rocksdb.num.entries``,
    ``rocksdb.deleted.keys``, ``rocksdb.merge.operands``, ``rocksdb.num.range-deletions``,
    ``rocksdb.format.version``, …) are ``int``; strings (``rocksdb.compression``,
    ``rocksdb.comparator``, ``rocksdb.merge.operator``, …) stay ``bytes``. Empty when the file
    has no properties block.

    Raises
    ------
    BadInput
        The file is missing or unreadable.
    CorruptFile, UnsupportedFormat
        Not an SST, a damaged footer/metaindex/properties block, or an unread format.
    """
    shown = shown or path
    with open_binary(fs, path, "SST file", shown=shown) as f:
        return dict(_Table(f, shown).properties)


def iter_sst_entries(fs: Any, path: str, *, shown: str | None = None) -> Iterator[SstEntry]:
    """Yield every entry of the data blocks of the SST at ``path``, in file order.

    File order is RocksDB's internal key order: user keys ascending (bytewise), and for one
    user key the newest (highest sequence) first. Blocks are read and checked one run at a
    time; memory stays at one block (plus up to 1 MiB of read-ahead).

    Parameters
    ----------
    fs
        An fsspec filesystem.
    path
        The SST's path on ``fs``.
    shown
        How error messages name the file (default: ``path``).

    Raises
    ------
    BadInput
        The file is missing or unreadable (raised at call time, not at first iteration).
    CorruptFile
        Bad magic, truncation, a checksum mismatch, a block that does not decompress or
        parse, entries out of order, or an entry count that disagrees with the properties.
    UnsupportedFormat
        Snappy blocks without cramjam installed, dictionary compression, a partitioned
        index, another table format.
    """
    shown = shown or path
    f = open_binary(fs, path, "SST file", shown=shown)
    return _entries_then_close(f, shown)


def _entries_then_close(f: BinaryIO, path: str) -> Iterator[SstEntry]:
    names = [_kind(t) for t in range(256)]
    deletes = [t in _DELETE_TYPES for t in range(256)]
    with f:
        for user_key, trailer, value in _Table(f, path).raw_entries():
            t = trailer & 0xFF
            yield SstEntry(user_key, trailer >> 8, names[t], None if deletes[t] else value)


def live_state(
    fs: Any,
    paths: list[str],
    *,
    shown: list[str] | None = None,
    merge_delimiter: bytes | None = None,
) -> dict[bytes, bytes]:
    """The live ``key -> value`` map of a RocksDB version made of the SSTs ``paths``.

    The files may overlap (several L0 files, L0 over L1): for each user key the entry with
    the highest sequence number wins, and a winning delete (``kDeletion`` or
    ``kSingleDeletion``) removes the key. Memory is proportional to the distinct keys (plus,
    with ``merge_delimiter``, every entry of keys that have merge operands).

    Parameters
    ----------
    fs
        An fsspec filesystem.
    paths
        The version's SST files (e.g. ``SSTs/<dfsSstFileName>`` for every ``sstFiles`` entry of
        the checkpoint zip's metadata), in any order.
    shown
        How error messages name each file (same length as ``paths``; default: the paths).
    merge_delimiter
        ``None`` (default): a key whose newest entry is a merge operand is refused. Otherwise
        merges are resolved as RocksDB's ``StringAppendOperator`` with this delimiter does
        (Spark's merge operator; ``b""`` for its v2, ``b","`` for v1): the newest put older
        than the operands (unless a delete comes between), then the operands oldest first,
        joined by the delimiter. Verified against RocksDB's own merge with ``b","``.

    Raises
    ------
    UnsupportedFormat
        A file holds range deletions; a merge without ``merge_delimiter``; an entry kind other
        than put, delete, single delete and merge deciding a key (blob index, wide columns, …).
    CorruptFile
        A damaged file (see :func:`iter_sst_entries`), or one key with the same sequence
        number in two files.
    """
    names = list(shown) if shown is not None else list(paths)
    if len(names) != len(paths):
        raise ValueError("shown must name every path")
    resolve = merge_delimiter is not None
    # user key -> (trailer, value, index of the file); trailer = (sequence << 8) | type
    best: dict[bytes, tuple[int, bytes, int]] = {}
    # keys involved in merges (only with merge_delimiter): every entry but the best
    history: dict[bytes, list[tuple[int, bytes, int]]] = {}
    for i, (path, name) in enumerate(zip(paths, names, strict=True)):
        with open_binary(fs, path, "SST file", shown=name) as f:
            table = _Table(f, name)
            if table.range_deletions():
                raise UnsupportedFormat("SST holds range deletions, which are not supported",
                                        path=name)
            get = best.get
            for user_key, trailer, value in table.raw_entries():
                old = get(user_key)
                if old is None:
                    best[user_key] = (trailer, value, i)
                    continue
                if old[0] >> 8 == trailer >> 8 and old[2] != i:
                    raise CorruptFile(f"key {user_key[:40].hex()} has sequence number "
                                      f"{trailer >> 8} in two files (also {names[old[2]]})",
                                      path=name)
                new = (trailer, value, i)
                winner, loser = (old, new) if old[0] > trailer else (new, old)
                best[user_key] = winner
                if resolve and (user_key in history or (old[0] & 0xFF) == _MERGE
                                or (trailer & 0xFF) == _MERGE):
                    history.setdefault(user_key, []).append(loser)
    live: dict[bytes, bytes] = {}
    for key, (trailer, value, i) in best.items():
        t = trailer & 0xFF
        if t == _PUT:
            live[key] = value
        elif t == _MERGE and merge_delimiter is not None:  # i.e. resolve
            merged = _resolve_merge(key, [(trailer, value, i), *history.get(key, ())],
                                    merge_delimiter, names)
            if merged is not None:
                live[key] = merged
        elif t not in _DELETE_TYPES:
            raise UnsupportedFormat(
                f"key {key[:40].hex()} ends in a {_kind(t)} entry, which is not supported"
                + (" (merge operands, e.g. Spark list state: pass merge_delimiter)"
                   if t == _MERGE else ""), path=names[i])
    return live


def _resolve_merge(key: bytes, entries: list[tuple[int, bytes, int]], delimiter: bytes,
                   names: list[str]) -> bytes | None:
    """StringAppendOperator's full merge of a key's entries (any order; newest decides)."""
    operands: list[bytes] = []
    base: bytes | None = None
    for trailer, value, i in sorted(entries, key=lambda e: e[0], reverse=True):
        t = trailer & 0xFF
        if t == _MERGE:
            operands.append(value)
        elif t == _PUT:
            base = value
            break
        elif t in _DELETE_TYPES:
            break
        else:
            raise UnsupportedFormat(f"key {key[:40].hex()} merges onto a {_kind(t)} entry, "
                                    "which is not supported", path=names[i])
    operands.reverse()
    return delimiter.join(operands if base is None else [base, *operands])
