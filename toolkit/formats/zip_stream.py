"""A zip read front to back, entry by entry, the way Java's ``ZipInputStream`` reads it.

Spark unpacks a RocksDB checkpoint zip with ``ZipInputStream``: local headers in file order,
each entry's data inflated until its deflate stream ends, its CRC-32 and sizes checked
against the data descriptor (Spark's zips set flag bit 3) or the local header — and the
central directory at the end never read. Python's ``zipfile`` works the other way round
(central directory first), so damage it stops on (a flipped bit in the central directory) is
damage Spark never sees, and the reverse. Predicting what a restart does needs Spark's way.
"""

from __future__ import annotations

import struct
import zlib

from statekit.support.errors import CorruptFile

_LOC = 0x04034B50
_EXT = 0x08074B50
_LOC_HEADER = struct.Struct("<IHHHHHIIIHH")
_STORED, _DEFLATED = 0, 8


def java_zip_entries(data: bytes, *, path: str) -> dict[str, bytes]:
    """``{name: bytes}`` of every entry ``ZipInputStream`` returns, in file order.

    Raises
    ------
    CorruptFile
        What ``ZipInputStream`` fails with: an encrypted entry, an unknown method, a deflate
        stream that does not inflate or ends early, a CRC or size that does not match.
    """
    entries: dict[str, bytes] = {}
    pos = 0
    while pos + 4 <= len(data):
        if struct.unpack_from("<I", data, pos)[0] != _LOC:
            break  # the central directory (or anything else): no more entries
        if pos + _LOC_HEADER.size > len(data):
            raise CorruptFile("zip: truncated local header", path=path, offset=pos)
        (_sig, _version, flag, method, _time, _date, crc, csize, size, nlen,
         elen) = _LOC_HEADER.unpack_from(data, pos)
        start = pos + _LOC_HEADER.size
        raw_name = data[start:start + nlen]
        if len(raw_name) < nlen:
            raise CorruptFile("zip: truncated entry name", path=path, offset=start)
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptFile("zip: entry name is not UTF-8 (MALFORMED)", path=path,
                              offset=start) from None
        body = start + nlen + elen
        if body > len(data):
            raise CorruptFile("zip: truncated local header extra field", path=path,
                              offset=start)
        if flag & 1:
            raise CorruptFile(f"zip: encrypted ZIP entry not supported ({name})", path=path,
                              offset=pos)
        if method == _DEFLATED:
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            try:
                content = inflater.decompress(data[body:])
            except zlib.error as bad:
                raise CorruptFile(f"zip: invalid deflate data in {name} ({bad})", path=path,
                                  offset=body) from None
            if not inflater.eof:
                raise CorruptFile(f"zip: unexpected end of ZLIB input stream in {name}",
                                  path=path, offset=body)
            used = len(data) - body - len(inflater.unused_data)
            pos = body + used
            if flag & 8:
                if pos + 4 <= len(data) and struct.unpack_from("<I", data, pos)[0] == _EXT:
                    pos += 4
                if pos + 12 > len(data):
                    raise CorruptFile(f"zip: truncated data descriptor of {name}", path=path,
                                      offset=pos)
                crc, csize, size = struct.unpack_from("<III", data, pos)
                pos += 12
            if size != len(content):
                raise CorruptFile(f"zip: invalid entry size of {name} (expected {size} but "
                                  f"got {len(content)} bytes)", path=path, offset=body)
            if csize != used:
                raise CorruptFile(f"zip: invalid entry compressed size of {name} (expected "
                                  f"{csize} but got {used} bytes)", path=path, offset=body)
        elif method == _STORED:
            if flag & 8:
                raise CorruptFile(f"zip: only DEFLATED entries can have EXT descriptor "
                                  f"({name})", path=path, offset=pos)
            content = data[body:body + csize]
            if len(content) < csize:
                raise CorruptFile(f"zip: unexpected EOF reading {name}", path=path,
                                  offset=body)
            pos = body + csize
        else:
            raise CorruptFile(f"zip: invalid compression method {method} ({name})",
                              path=path, offset=pos)
        if zlib.crc32(content) != crc:
            raise CorruptFile(f"zip: invalid entry CRC of {name}", path=path, offset=body)
        entries[name] = content
    return entries
