"""Decompress Spark state files as streams, in constant memory, with byte offsets in errors.

Every HDFS ``.delta``/``.snapshot`` and RocksDB ``.changelog`` is one stream compressed by
Spark's ``spark.sql.streaming.stateStore.compression.codec`` (``lz4`` unless set otherwise).
Spark's lz4 is *not* the lz4 frame format that ``lz4.frame`` reads: it is lz4-java's
``LZ4BlockOutputStream`` (blocks of ``"LZ4Block"`` + token + lengths + an xxhash32 of the
decompressed block), so it is decoded here block by block, checking every checksum and reporting
the byte offset of the first bad block. Spark's zstd is a plain zstd frame stream; python's
``zstandard`` decodes it, but silently returns short output when the input is cut, so the frame
structure is tracked here too and a truncated file becomes :class:`CorruptFile`.

Neither reader ever holds more than one block (at most 32 MiB for lz4, far less in practice:
Spark writes 32 KiB blocks) or one read's worth of data.
"""

from __future__ import annotations

import io
import struct
from typing import TYPE_CHECKING, BinaryIO, cast

import lz4.block
import xxhash
import zstandard

from statekit.support.errors import CorruptFile, UnsupportedFormat

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

CODECS_SUPPORTED = ("lz4", "zstd")
"""Codecs :func:`open_decompressed` can read."""

SPARK_CODEC_CLASSES = {
    "org.apache.spark.io.lz4compressioncodec": "lz4",
    "org.apache.spark.io.lzfcompressioncodec": "lzf",
    "org.apache.spark.io.snappycompressioncodec": "snappy",
    "org.apache.spark.io.zstdcompressioncodec": "zstd",
    # The name before Spark 3.0.
    "org.apache.spark.io.zstandardcompressioncodec": "zstd",
}

LZ4_MAGIC = b"LZ4Block"
LZ4_HEADER = struct.Struct("<8sBiii")
LZ4_XXHASH_SEED = 0x9747B28C
LZ4_CHECKSUM_MASK = 0x0FFFFFFF
_LZ4_RAW = 0x10
_LZ4_COMPRESSED = 0x20

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"

_READ_CHUNK = 64 * 1024


def normalize_codec(name: str | None) -> str:
    """Return Spark's short codec name for a conf value.

    Parameters
    ----------
    name
        ``spark.sql.streaming.stateStore.compression.codec`` as found in an offsets file: a
        short name (``lz4``, ``zstd``, ``snappy``, ``lzf``, any case) or a codec class name.
        ``None`` (conf absent) means Spark's default, ``lz4``.

    Returns
    -------
    str
        The lower-case short name; an unknown class name is returned lower-cased, unchanged,
        so the caller's "unsupported codec" message can show it.
    """
    if name is None or not name.strip():
        return "lz4"
    key = name.strip().lower()
    return SPARK_CODEC_CLASSES.get(key, key)


def sniff_codec(head: bytes) -> str | None:
    """Guess the codec of a state file from its first bytes (8 are enough), or ``None``."""
    if head.startswith(LZ4_MAGIC):
        return "lz4"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head.startswith(SNAPPY_JAVA_MAGIC):
        return "snappy"
    return None


def open_decompressed(raw: BinaryIO, codec: str, *, path: str) -> BinaryIO:
    """Wrap ``raw`` (positioned at the file start) in a stream of its decompressed bytes.

    Parameters
    ----------
    raw
        A readable binary file object; it is not closed by the returned stream.
    codec
        A short codec name (see :func:`normalize_codec`).
    path
        The file's path, for error messages.

    Returns
    -------
    BinaryIO
        A buffered, read-only stream. Reading it raises :class:`CorruptFile` (with the byte
        offset in the *compressed* file) for bad magic, bad headers, failed checksums or a
        stream that ends early.

    Raises
    ------
    UnsupportedFormat
        For any codec other than those in :data:`CODECS_SUPPORTED`.
    """
    return io.BufferedReader(_block_reader(raw, codec, path), buffer_size=_READ_CHUNK)


def raw_decompressed(raw: BinaryIO, codec: str, *, path: str) -> BinaryIO:
    """Like :func:`open_decompressed`, but unbuffered: each read decodes only the blocks it
    needs (Spark's own stream behaves so: a damaged block after the last one a reader needs
    is never touched)."""
    return cast("BinaryIO", _block_reader(raw, codec, path))


def decompress_prefix(head: bytes, codec: str, *, path: str) -> tuple[bytes, int]:
    """Decode as much of a cut-off compressed stream (a file's first bytes) as forms whole
    blocks: ``(decompressed bytes, compressed bytes they came from)``.

    For sampling a large file's records per compressed byte from its head without reading it
    all: a stream reader fails at the cut and loses its whole read-ahead, this keeps every
    block before the cut (for zstd, the compressed count may include up to one block whose
    output ``zstandard`` still holds back).
    """
    raw = io.BytesIO(head)
    reader = _block_reader(raw, codec, path)
    out, consumed = bytearray(), 0
    try:
        while True:
            block = reader._next_block()
            if reader._eof:
                break
            out += block
            consumed = raw.tell()
    except CorruptFile:
        pass  # the cut
    return bytes(out), consumed


def _block_reader(raw: BinaryIO, codec: str, path: str) -> _BlockStream:
    name = normalize_codec(codec)
    if name == "lz4":
        return _LZ4BlockReader(raw, path)
    if name == "zstd":
        return _ZstdReader(raw, path)
    raise UnsupportedFormat(
        f"state files compressed with codec '{codec}' cannot be read; supported codecs: "
        f"{', '.join(CODECS_SUPPORTED)} (spark.sql.streaming.stateStore.compression.codec)",
        path=path,
    )


def _read_exact(raw: BinaryIO, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads; fewer only at end of file."""
    data: bytes | None = raw.read(n)  # None: a non-blocking raw stream with nothing to read
    if data is None:
        data = b""
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = raw.read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class _BlockStream(io.RawIOBase):
    """A raw stream that serves bytes from one decoded block at a time."""

    def __init__(self) -> None:
        super().__init__()
        self._block = b""
        self._pos = 0
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        while self._pos >= len(self._block):
            if self._eof:
                return 0
            self._block = self._next_block()
            self._pos = 0
        with memoryview(buffer) as view:
            n = min(len(view), len(self._block) - self._pos)
            view[:n] = self._block[self._pos : self._pos + n]
        self._pos += n
        return n

    def _next_block(self) -> bytes:
        """Return the next decoded block (may be empty); set ``_eof`` at the clean end."""
        raise NotImplementedError


class _LZ4BlockReader(_BlockStream):
    """lz4-java ``LZ4BlockInputStream``, as Spark reads it (concatenated streams allowed)."""

    def __init__(self, raw: BinaryIO, path: str) -> None:
        super().__init__()
        self._raw = raw
        self._path = path
        self._offset = 0  # of the next block header in the compressed file
        self._ended_once = False  # saw an end block: EOF is now clean

    def _corrupt(self, message: str, offset: int) -> CorruptFile:
        return CorruptFile(f"lz4 stream: {message}", path=self._path, offset=offset)

    def _next_block(self) -> bytes:
        start = self._offset
        header = _read_exact(self._raw, LZ4_HEADER.size)
        if not header and self._ended_once:
            self._eof = True
            return b""
        if len(header) < LZ4_HEADER.size:
            what = "truncated block header" if header else "stream ends without an end block"
            raise self._corrupt(what, start)
        magic, token, clen, rlen, checksum = LZ4_HEADER.unpack(header)
        if magic != LZ4_MAGIC:
            raise self._corrupt(f"bad block magic {magic!r} (expected b'LZ4Block')", start)
        method = token & 0xF0
        max_len = 1 << (10 + (token & 0x0F))
        if method not in (_LZ4_RAW, _LZ4_COMPRESSED):
            raise self._corrupt(f"bad block token 0x{token:02x}", start)
        if (
            clen < 0
            or rlen < 0
            or rlen > max_len
            or clen > max_len + max_len // 255 + 16
            or (rlen == 0) != (clen == 0)
            or (method == _LZ4_RAW and clen != rlen)
        ):
            raise self._corrupt(
                f"bad block header (compressed {clen}, raw {rlen} bytes, token 0x{token:02x})",
                start,
            )
        self._offset = start + LZ4_HEADER.size + clen
        if rlen == 0:
            if checksum != 0:
                raise self._corrupt("end block with a non-zero checksum", start)
            self._ended_once = True
            return b""
        self._ended_once = False
        payload = _read_exact(self._raw, clen)
        if len(payload) < clen:
            raise self._corrupt(f"truncated block ({len(payload)} of {clen} bytes)", start)
        if method == _LZ4_RAW:
            data = payload
        else:
            try:
                data = lz4.block.decompress(payload, uncompressed_size=rlen)
            except (lz4.block.LZ4BlockError, ValueError, MemoryError) as exc:
                raise self._corrupt(f"block does not decompress ({exc})", start) from None
            if len(data) != rlen:
                raise self._corrupt(f"block decompresses to {len(data)}, not {rlen}, bytes", start)
        actual = xxhash.xxh32_intdigest(data, seed=LZ4_XXHASH_SEED) & LZ4_CHECKSUM_MASK
        if actual != checksum & 0xFFFFFFFF:
            raise self._corrupt(
                f"block checksum mismatch (stored 0x{checksum & 0xFFFFFFFF:08x}, "
                f"computed 0x{actual:08x})",
                start,
            )
        return data


class _ZstdFrameTracker:
    """Follows the zstd frame/block structure of the bytes passing by, without decoding them.

    It exists only to tell a complete stream from a cut one (``zstandard`` does not), and to
    name the offset where a frame that never ends began.
    """

    def __init__(self) -> None:
        self.offset = 0  # bytes seen so far
        self.frame_start = 0
        self._need = 4  # bytes still needed for the current fixed-size field
        self._field = bytearray()
        self._state = "magic"
        self._skip = 0
        self._checksum = False
        self._last = False

    @property
    def at_boundary(self) -> bool:
        """True when every frame seen so far is complete."""
        return self._state == "magic" and not self._field and self._skip == 0

    def feed(self, data: bytes) -> None:
        """Advance over ``data``; raise ``ValueError`` for a structure that cannot be zstd."""
        i, n = 0, len(data)
        while i < n:
            if self._skip:
                step = min(self._skip, n - i)
                self._skip -= step
                i += step
                if self._skip == 0:
                    self._after_skip()
                continue
            take = min(self._need - len(self._field), n - i)
            self._field += data[i : i + take]
            i += take
            if len(self._field) == self._need:
                field = bytes(self._field)
                self._field.clear()
                self._on_field(field, self.offset + i)
        self.offset += n

    def _after_skip(self) -> None:
        if self._state != "block":  # a skippable frame's body
            self._expect("magic", 4)
        elif not self._last:
            self._expect("bhdr", 3)
        elif self._checksum:
            self._expect("checksum", 4)
        else:
            self._expect("magic", 4)

    def _expect(self, state: str, need: int) -> None:
        self._state, self._need = state, need

    def _on_field(self, field: bytes, end: int) -> None:
        state = self._state
        if state == "magic":
            self.frame_start = end - 4
            magic = int.from_bytes(field, "little")
            if field == ZSTD_MAGIC:
                self._expect("fhd", 1)
            elif magic & 0xFFFFFFF0 == 0x184D2A50:
                self._expect("skipsize", 4)
            else:
                raise ValueError(f"bad zstd frame magic {field.hex()}")
        elif state == "skipsize":
            self._skip = int.from_bytes(field, "little")
            self._state = "skip"
            if self._skip == 0:
                self._expect("magic", 4)
        elif state == "fhd":
            fhd = field[0]
            if fhd & 0x08:
                raise ValueError("reserved bit set in zstd frame header")
            single = bool(fhd & 0x20)
            fcs = (0, 2, 4, 8)[fhd >> 6] or (1 if single else 0)
            did = (0, 1, 2, 4)[fhd & 0x03]
            self._checksum = bool(fhd & 0x04)
            rest = (0 if single else 1) + did + fcs
            if rest:
                self._expect("fhrest", rest)
            else:
                self._expect("bhdr", 3)
        elif state == "fhrest":
            self._expect("bhdr", 3)
        elif state == "bhdr":
            value = int.from_bytes(field, "little")
            self._last = bool(value & 1)
            btype = (value >> 1) & 3
            size = value >> 3
            if btype == 3:
                raise ValueError("reserved zstd block type")
            self._state = "block"
            self._skip = 1 if btype == 1 else size
            if self._skip == 0:
                self._after_skip()
        elif state == "checksum":
            self._expect("magic", 4)


class _TrackedSource:
    """The compressed bytes as ``zstandard`` pulls them, checked by a frame tracker."""

    def __init__(self, raw: BinaryIO, path: str) -> None:
        self._raw = raw
        self._path = path
        self.tracker = _ZstdFrameTracker()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size if size and size > 0 else _READ_CHUNK) or b""
        tracker = self.tracker
        try:
            tracker.feed(data)
        except ValueError as exc:
            raise CorruptFile(f"zstd stream: {exc}", path=self._path,
                              offset=tracker.frame_start) from None
        if not data:
            if tracker.offset == 0:
                raise CorruptFile("zstd stream: empty file", path=self._path, offset=0)
            if not tracker.at_boundary:
                raise CorruptFile(
                    f"zstd stream: truncated frame (file ends at byte {tracker.offset})",
                    path=self._path, offset=tracker.frame_start)
        return data


class _ZstdReader(_BlockStream):
    """zstd frames (one or more, as zstd-jni writes them), decoded with ``zstandard``."""

    def __init__(self, raw: BinaryIO, path: str) -> None:
        super().__init__()
        self._path = path
        self._source = _TrackedSource(raw, path)
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            # zstandard only calls .read(); its stubs ask for a whole IO[bytes]
            self._source,  # type: ignore[arg-type]
            read_size=_READ_CHUNK, read_across_frames=True, closefd=False
        )

    def _next_block(self) -> bytes:
        try:
            data = self._reader.read(_READ_CHUNK)
        except zstandard.ZstdError as exc:
            raise CorruptFile(f"zstd stream: {exc}", path=self._path,
                              offset=self._source.tracker.frame_start) from None
        if not data:
            self._eof = True
        return data
