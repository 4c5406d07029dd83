"""Write HDFS state store ``.snapshot`` files byte for byte as Spark writes them.

statekit's repartition builds the state of the new checkpoint itself: it writes one
``<version>.snapshot`` per new partition, which Spark's ``HDFSBackedStateStoreProvider`` then
loads as if it had written the file. So the bytes should be exactly Spark's, not merely
something a reader accepts: the same record stream, the same codec framing and, for lz4, the
same compressed blocks. Then a snapshot statekit writes can be compared with the one Spark
writes for the same rows, byte for byte (the tests do, against real Spark files).
:class:`SnapshotWriter` writes the records; :class:`CompressedWriter` is the codec stream
under it (the write side of :func:`~statekit.formats.compression.open_decompressed`).

What Spark writes (``writeSnapshotFile``, a ``DataOutputStream`` over the codec's stream):

* the records, ``int keyLen, key, int valueLen, value`` (big-endian), then ``int -1``;
* codec ``lz4`` (the default): lz4-java's ``LZ4BlockOutputStream`` with blocks of
  ``spark.io.compression.lz4.blockSize`` (32 KiB) bytes, each ``"LZ4Block"`` + token
  (``method | level``, level = ``ceil(log2(blockSize)) - 10``, 5 for 32 KiB) + little-endian
  compressed length, raw length and ``XXH32(block, 0x9747b28c) & 0x0FFFFFFF``, then the payload;
  a block that does not shrink is stored raw. ``close()`` ends with an empty raw block (zero
  lengths and checksum). The payload comes from ``LZ4Factory.fastestInstance().fastCompressor()``:
  the JNI binding to liblz4's ``LZ4_compress_default`` (acceleration 1). Where lz4-java cannot
  load its native library it falls back to its Java port, whose output differs only in rare
  cases (it stops looking for matches one byte earlier at a block's end, and hashes 4 bytes,
  not 5, in blocks over 64 KiB); both decode to the same bytes.
* codec ``zstd``: zstd-jni's ``ZstdOutputStreamNoFinalizer`` (level
  ``spark.io.compression.zstd.level``, 1) behind a 32 KiB ``BufferedOutputStream``. Closing
  it flushes (``ZSTD_e_flush`` ends the current block) and then ends the frame (``ZSTD_e_end``
  adds an empty last block): one frame, no content size, no checksum. ``zstandard`` drives
  libzstd the same way; the bytes are identical when both bundle the same libzstd (1.5.7 for
  zstd-jni 1.5.7-x and zstandard 0.25).

Why lz4 needs care: ``lz4.block.compress`` does *not* produce ``LZ4_compress_default``'s bytes.
It goes through the streaming API (``LZ4_resetStream`` + ``LZ4_compress_fast_continue``), which
always uses the 32-bit-index table with a 5-byte hash, where ``LZ4_compress_default`` uses a
16-bit table with a 4-byte hash for inputs under 64 KiB + 11 bytes: other matches, other
(usually smaller) output. The *frame* API compresses an independent block with
``LZ4_compress_fast_extState_fastReset``, which is ``LZ4_compress_default``'s algorithm, so
blocks are compressed by ``lz4.frame`` and cut out of the frame. That equivalence is checked at
first use against :func:`lz4_compress_block_py`, a pure-Python port of liblz4's compressor,
which is used instead whenever the check fails or the frame stored a block uncompressed
(both in :mod:`statekit.formats.lz4_compress`).

Memory stays constant: one block of uncompressed bytes (plus, transiently, the record being
written) and one compressed block.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Protocol

import xxhash
import zstandard

from statekit.formats.compression import (
    CODECS_SUPPORTED,
    LZ4_CHECKSUM_MASK,
    LZ4_HEADER,
    LZ4_MAGIC,
    LZ4_XXHASH_SEED,
    normalize_codec,
)
from statekit.formats.lz4_compress import lz4_compress_block
from statekit.formats.records import MAX_FIELD_BYTES
from statekit.support.errors import UnsupportedFormat

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

LZ4_DEFAULT_BLOCK_SIZE = 32 * 1024
"""Spark's ``spark.io.compression.lz4.blockSize`` default."""
LZ4_MIN_BLOCK_SIZE = 64
LZ4_MAX_BLOCK_SIZE = 1 << 25
"""The block sizes lz4-java's ``LZ4BlockOutputStream`` accepts."""
ZSTD_DEFAULT_LEVEL = 1
"""Spark's ``spark.io.compression.zstd.level`` default."""

_LZ4_RAW = 0x10
_LZ4_COMPRESSED = 0x20
_INT = struct.Struct(">i")
_END_OF_RECORDS = _INT.pack(-1)
_JOIN_LIMIT = 1 << 16

class _Output(Protocol):
    """What is written to: a file object, or a raw stream whose ``write`` may write only part
    of the bytes (returning how many) or return ``None``."""

    def write(self, data: bytes | memoryview, /) -> int | None: ...


def _lz4_level(block_size: int) -> int:
    """lz4-java's ``compressionLevel(blockSize)``: the token's low nibble."""
    return max(0, (block_size - 1).bit_length() - 10)


# --- the streams ------------------------------------------------------------------------------


class _LZ4BlockEncoder:
    """lz4-java ``LZ4BlockOutputStream(out, blockSize, fastCompressor, XXH32 checksum)``."""

    def __init__(self, emit: Callable[[bytes], None], block_size: int) -> None:
        self._emit = emit
        self._level = _lz4_level(block_size)

    def block(self, data: bytes) -> None:
        checksum = xxhash.xxh32_intdigest(data, seed=LZ4_XXHASH_SEED) & LZ4_CHECKSUM_MASK
        payload = lz4_compress_block(data)
        method = _LZ4_COMPRESSED
        if len(payload) >= len(data):
            method, payload = _LZ4_RAW, data
        self._emit(LZ4_HEADER.pack(LZ4_MAGIC, method | self._level, len(payload), len(data),
                                   checksum))
        self._emit(payload)

    def finish(self) -> None:
        self._emit(LZ4_HEADER.pack(LZ4_MAGIC, _LZ4_RAW | self._level, 0, 0, 0))


class _ZstdEncoder:
    """zstd-jni ``ZstdOutputStreamNoFinalizer`` as Spark closes it: flush, then end the frame."""

    def __init__(self, emit: Callable[[bytes], None], level: int) -> None:
        self._emit = emit
        self._compressor = zstandard.ZstdCompressor(level=level).compressobj()

    def block(self, data: bytes) -> None:
        out = self._compressor.compress(data)
        if out:
            self._emit(out)

    def finish(self) -> None:
        self._emit(self._compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
        self._emit(self._compressor.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))


class _ClosedOnExit:
    """``with`` support: close on a normal exit, abort (no end marker) on an exception, so a
    half-written file never reads as complete."""

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class CompressedWriter(_ClosedOnExit):
    """Spark's compressed output stream for state files: the write side of ``open_decompressed``.

    Bytes written here come out exactly as ``CompressionCodec.compressedOutputStream`` would
    emit them, in constant memory (one block, or one 32 KiB buffer for zstd).

    Parameters
    ----------
    out
        A writable binary file object (e.g. an fsspec file opened ``"wb"``). It is written to
        but never closed: the caller owns it.
    codec
        ``spark.sql.streaming.stateStore.compression.codec`` of the target checkpoint: ``lz4``
        (``None`` means Spark's default, lz4) or ``zstd``, short or class name (see
        :func:`~statekit.formats.compression.normalize_codec`).
    lz4_block_size
        ``spark.io.compression.lz4.blockSize`` in bytes (64 B to 32 MiB); only for lz4.
    zstd_level
        ``spark.io.compression.zstd.level``; only for zstd.
    path
        The file, for error messages.

    Raises
    ------
    UnsupportedFormat
        A codec other than lz4 and zstd.
    ValueError
        A block size lz4-java would refuse.
    """

    def __init__(self, out: BinaryIO, codec: str | None = "lz4", *,
                 lz4_block_size: int = LZ4_DEFAULT_BLOCK_SIZE,
                 zstd_level: int = ZSTD_DEFAULT_LEVEL, path: str | None = None) -> None:
        name = normalize_codec(codec)
        self._out: _Output = out
        self._bytes_in = 0
        self._bytes_written = 0
        self._closed = False
        self._buffer = bytearray()
        if name == "lz4":
            if not LZ4_MIN_BLOCK_SIZE <= lz4_block_size <= LZ4_MAX_BLOCK_SIZE:
                raise ValueError(f"lz4 block size must be {LZ4_MIN_BLOCK_SIZE} to "
                                 f"{LZ4_MAX_BLOCK_SIZE} bytes, not {lz4_block_size}")
            self._block_size = lz4_block_size
            self._encoder: _LZ4BlockEncoder | _ZstdEncoder = _LZ4BlockEncoder(
                self._emit, lz4_block_size)
        elif name == "zstd":
            self._block_size = 32 * 1024  # Spark's BufferedOutputStream (zstd.bufferSize)
            self._encoder = _ZstdEncoder(self._emit, zstd_level)
        else:
            raise UnsupportedFormat(
                f"state files cannot be written with codec '{codec}'; supported codecs: "
                f"{', '.join(CODECS_SUPPORTED)} (spark.sql.streaming.stateStore.compression.codec)",
                path=path)
        self.codec = name
        """The short codec name."""

    @property
    def bytes_in(self) -> int:
        """Uncompressed bytes written so far."""
        return self._bytes_in

    @property
    def bytes_written(self) -> int:
        """Compressed bytes written to ``out`` so far."""
        return self._bytes_written

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or :meth:`abort`."""
        return self._closed

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Compress ``data`` (buffered up to one block); return its length."""
        if self._closed:
            raise ValueError("write to a closed CompressedWriter")
        buffer, size = self._buffer, self._block_size
        n = len(data)
        self._bytes_in += n
        if len(buffer) + n <= size:  # lz4-java too only flushes a full block on more input
            buffer += data
            return n
        view = memoryview(data)
        start = 0
        while len(buffer) + n - start > size:
            take = size - len(buffer)
            if buffer:
                buffer += view[start:start + take]
                self._encoder.block(bytes(buffer))
                buffer.clear()
            else:
                self._encoder.block(bytes(view[start:start + take]))
            start += take
        buffer += view[start:]
        return n

    def close(self) -> None:
        """Compress what is buffered and end the stream as Spark's ``close()`` does."""
        if self._closed:
            return
        if self._buffer:
            self._encoder.block(bytes(self._buffer))
            self._buffer.clear()
        self._encoder.finish()
        self._closed = True

    def abort(self) -> None:
        """Stop without ending the stream: ``out`` holds a truncated, unreadable stream."""
        self._closed = True
        self._buffer.clear()

    def _emit(self, data: bytes) -> None:
        """Write all of ``data`` to ``out`` (looping over short writes of raw streams)."""
        n = self._out.write(data)
        if n is not None and n < len(data):
            view = memoryview(data)[n:]
            while view:
                n = self._out.write(view)
                if n is None:  # a writer that returns nothing wrote everything
                    break
                if n <= 0:
                    raise OSError("the output stream accepted no bytes")
                view = view[n:]
        self._bytes_written += len(data)


class SnapshotWriter(_ClosedOnExit):
    """Streams key/value records into a Spark HDFS state store ``.snapshot`` file.

    Takes :class:`CompressedWriter`'s arguments (``out`` stays open; the caller owns it).

    :meth:`close` (or leaving a ``with`` block normally) writes the ``-1`` end marker and ends
    the compressed stream. Leaving a ``with`` block by an exception calls :meth:`abort`
    instead, so a half-written snapshot never looks complete: readers reject it.
    Records are written in the order given; Spark writes its map's iteration order, and any
    order loads to the same state.
    """

    def __init__(self, out: BinaryIO, codec: str | None = "lz4", *,
                 lz4_block_size: int = LZ4_DEFAULT_BLOCK_SIZE,
                 zstd_level: int = ZSTD_DEFAULT_LEVEL, path: str | None = None) -> None:
        self._stream = CompressedWriter(out, codec, lz4_block_size=lz4_block_size,
                                        zstd_level=zstd_level, path=path)
        self._records = 0
        self.codec = self._stream.codec
        """The short codec name."""

    @property
    def records(self) -> int:
        """Records written so far."""
        return self._records

    @property
    def raw_bytes(self) -> int:
        """Uncompressed bytes so far (records, plus the 4-byte end marker once closed)."""
        return self._stream.bytes_in

    @property
    def bytes_written(self) -> int:
        """Bytes written to ``out`` so far: the file size, once closed."""
        return self._stream.bytes_written

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or :meth:`abort`."""
        return self._stream.closed

    def write(self, key: bytes, value: bytes) -> None:
        """Append one entry (key and value bytes exactly as Spark stores them)."""
        if self._stream.closed:
            raise ValueError("write to a closed SnapshotWriter")
        if len(key) > MAX_FIELD_BYTES or len(value) > MAX_FIELD_BYTES:
            raise ValueError("a key or value longer than 2 GiB - 1 cannot be stored")
        pack = _INT.pack
        if len(value) < _JOIN_LIMIT:  # one write is cheaper; big values are not copied
            self._stream.write(b"".join((pack(len(key)), key, pack(len(value)), value)))
        else:
            write = self._stream.write
            write(pack(len(key)))
            write(key)
            write(pack(len(value)))
            write(value)
        self._records += 1

    def write_packed(self, data: bytes | bytearray | memoryview, records: int) -> None:
        """Append ``records`` entries already laid out as Spark's records
        (:func:`pack_record`, concatenated): the same bytes as writing them one by one."""
        if self._stream.closed:
            raise ValueError("write to a closed SnapshotWriter")
        self._stream.write(data)
        self._records += records

    def close(self) -> None:
        """Write the end marker and finish the compressed stream (``out`` stays open)."""
        if not self._stream.closed:
            self._stream.write(_END_OF_RECORDS)
            self._stream.close()

    def abort(self) -> None:
        """Stop without the end marker: what is in ``out`` is an incomplete snapshot."""
        self._stream.abort()


def write_snapshot(out: BinaryIO, records: Iterable[tuple[bytes, bytes]],
                   codec: str | None = "lz4", *, lz4_block_size: int = LZ4_DEFAULT_BLOCK_SIZE,
                   zstd_level: int = ZSTD_DEFAULT_LEVEL, path: str | None = None
                   ) -> SnapshotWriter:
    """Write all ``(key, value)`` pairs as one complete snapshot; return the closed writer.

    The arguments are :class:`SnapshotWriter`'s; the returned writer's counters tell how many
    records and bytes were written.
    """
    with SnapshotWriter(out, codec, lz4_block_size=lz4_block_size, zstd_level=zstd_level,
                        path=path) as writer:
        for key, value in records:
            writer.write(key, value)
    return writer


def pack_record(key: bytes, value: bytes) -> bytes:
    """One snapshot/delta record: key length, key, value length, value (big-endian int32s)."""
    if len(key) > MAX_FIELD_BYTES or len(value) > MAX_FIELD_BYTES:
        raise ValueError("a key or value longer than 2 GiB - 1 cannot be stored")
    return b"".join((_INT.pack(len(key)), key, _INT.pack(len(value)), value))
