"""liblz4's ``LZ4_compress_default``, exactly: the block compressor behind Spark's lz4 files.

Spark's lz4 state files are lz4-java ``LZ4BlockOutputStream`` blocks whose payload is
``LZ4_compress_default``'s output. ``lz4.block.compress`` does *not* produce those bytes (it
goes through liblz4's streaming API: another hash table, other matches), but the *frame* API
compresses an independent block with the same algorithm, so :func:`lz4_compress_block` cuts
the block out of an ``lz4.frame`` frame. That equivalence is checked at first use against
:func:`lz4_compress_block_py`, a pure-Python port of liblz4's compressor, used instead
whenever the check fails or the frame stored the block uncompressed. Used by
:mod:`statekit.formats.state_writer`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import lz4.frame

_LZ4_64K_LIMIT = 65536 + 11
"""Inputs shorter than this use the 16-bit table (``LZ4_64Klimit``)."""
_MIN_LENGTH = 13  # MFLIMIT + 1: shorter inputs are all literals
_U32: Callable[[bytes, int], tuple[int]] = struct.Struct("<I").unpack_from
_U64: Callable[[bytes, int], tuple[int]] = struct.Struct("<Q").unpack_from
_MASK64 = (1 << 64) - 1


def _put_length(out: bytearray, length: int) -> None:
    """The 255-run extension of a literal or match length beyond its 4-bit token field."""
    while length >= 255:
        out.append(255)
        length -= 255
    out.append(length)


def lz4_compress_block_py(src: bytes) -> bytes:
    """``LZ4_compress_default(src)`` in pure Python (slow: a few MB/s).

    A line-by-line port of liblz4's ``LZ4_compress_generic`` as ``LZ4_compress_fast_extState``
    calls it (no dictionary, acceleration 1) on a 64-bit little-endian machine: a table of
    2**13 16-bit positions hashed on 4 bytes for inputs under :data:`_LZ4_64K_LIMIT` bytes,
    else 2**12 32-bit positions hashed on 5 bytes with matches at most 65535 bytes back.
    """
    n = len(src)
    out = bytearray()
    anchor = 0
    if n >= _MIN_LENGTH:
        small = n < _LZ4_64K_LIMIT
        u32, u64 = _U32, _U64

        if small:
            def hash_at(p: int) -> int:  # LZ4_hash4, 13 bits
                return ((u32(src, p)[0] * 2654435761) & 0xFFFFFFFF) >> 19
        else:
            def hash_at(p: int) -> int:  # LZ4_hash5 (little-endian), 12 bits
                return (((u64(src, p)[0] << 24) * 889523592379) & _MASK64) >> 52

        table = [0] * (8192 if small else 4096)
        mflimit_plus_one = n - 11  # iend - MFLIMIT + 1
        match_limit = n - 5  # iend - LASTLITERALS
        ip = 1  # position 0 is already in the (zeroed) table
        forward_hash = hash_at(1)
        while True:
            # Find a match, skipping faster the longer nothing matches.
            forward = ip
            step, search_match_nb = 1, 1 << 6
            while True:
                h = forward_hash
                ref = table[h]
                ip = forward
                forward += step
                step = search_match_nb >> 6
                search_match_nb += 1
                if forward > mflimit_plus_one:
                    break
                forward_hash = hash_at(forward)
                table[h] = ip
                if (small or ref + 65535 >= ip) and src[ref:ref + 4] == src[ip:ip + 4]:
                    break
            if forward > mflimit_plus_one:
                break
            while ip > anchor and ref > 0 and src[ref - 1] == src[ip - 1]:
                ip -= 1
                ref -= 1
            literals = ip - anchor
            token = len(out)
            if literals >= 15:
                out.append(0xF0)
                _put_length(out, literals - 15)
            else:
                out.append(literals << 4)
            out += src[anchor:ip]
            while True:  # encode the match, then chain matches that start right after it
                offset = ip - ref
                out.append(offset & 0xFF)
                out.append(offset >> 8)
                ip += 4
                ref += 4
                start = ip
                while ip + 32 <= match_limit and src[ip:ip + 32] == src[ref:ref + 32]:
                    ip += 32
                    ref += 32
                while ip < match_limit and src[ip] == src[ref]:
                    ip += 1
                    ref += 1
                length = ip - start
                if length >= 15:
                    out[token] |= 15
                    _put_length(out, length - 15)
                else:
                    out[token] |= length
                anchor = ip
                if ip >= mflimit_plus_one:
                    break
                table[hash_at(ip - 2)] = ip - 2
                h = hash_at(ip)
                ref = table[h]
                table[h] = ip
                if not ((small or ref + 65535 >= ip) and src[ref:ref + 4] == src[ip:ip + 4]):
                    break
                token = len(out)
                out.append(0)
            if ip >= mflimit_plus_one:
                break
            ip += 1
            forward_hash = hash_at(ip)
    literals = n - anchor
    if literals >= 15:
        out.append(0xF0)
        _put_length(out, literals - 15)
    else:
        out.append(literals << 4)
    out += src[anchor:]
    return bytes(out)


_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_FRAME_MAX_BLOCK = 4 << 20


def _lz4_compress_block_frame(src: bytes) -> bytes | None:
    """The block ``lz4.frame`` compresses ``src`` into, or ``None`` if it stored it raw.

    The frame is one independent block (``src`` fits the 4 MiB maximum; ``LZ4F_compressFrame``
    picks the smallest block size that holds it) with no checksums and no content size:
    7 header bytes, a 4-byte block size (high bit: stored raw), the block, a zero end mark.
    """
    frame: bytes = lz4.frame.compress(
        src, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
        content_checksum=False, block_checksum=False, store_size=False)
    if not frame.startswith(_FRAME_MAGIC) or frame[4] & 0x1C:  # a size or checksum field
        return None
    size = _U32(frame, 7)[0]
    if size & 0x80000000 or len(frame) != 15 + size or frame[-4:] != b"\0\0\0\0":
        return None
    return frame[11:11 + size]


def _frame_check_sample(length: int) -> bytes:
    """Deterministic bytes with repeats near and far, runs and literals (a self-test input)."""
    out = bytearray()
    state = 12345
    while len(out) < length:
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        kind = state % 5
        if kind == 0 and len(out) > 64:
            back = 1 + (state >> 8) % min(len(out), 70000)
            start = len(out) - back
            out += out[start:start + 4 + (state >> 4) % 40]
        elif kind == 1:
            out += bytes([state & 0xFF]) * ((state >> 9) % 30)
        else:
            out += state.to_bytes(4, "little")
    return bytes(out[:length])


_frame_ok: dict[bool, bool] = {}
"""Per table kind (True: the 16-bit table), whether ``lz4.frame`` matches the port here."""


def lz4_compress_block(src: bytes) -> bytes:
    """``LZ4_compress_default(src)``: the payload lz4-java's fast compressor produces.

    Uses ``lz4.frame`` (C speed) once it has been seen to agree with
    :func:`lz4_compress_block_py` for inputs of this size class, else the pure-Python port.
    """
    if len(src) <= _FRAME_MAX_BLOCK:
        small = len(src) < _LZ4_64K_LIMIT
        ok = _frame_ok.get(small)
        if ok is None:
            sample = _frame_check_sample(4000 if small else _LZ4_64K_LIMIT + 4000)
            try:
                ok = _lz4_compress_block_frame(sample) == lz4_compress_block_py(sample)
            except Exception:  # an lz4 build that frames differently: use the port
                ok = False
            _frame_ok[small] = ok
        if ok:
            block = _lz4_compress_block_frame(src)
            if block is not None:
                return block
            # Stored raw: liblz4 gave up under the frame's "must shrink" limit, which it
            # checks conservatively, so only the full output tells whether lz4-java shrinks it.
    return lz4_compress_block_py(src)


