"""Java's "modified UTF-8", the string encoding of ``DataOutputStream.writeUTF``.

Spark writes version tags, schema JSON and changelog lineage with ``writeUTF``: a 2-byte
big-endian length, then the string as modified UTF-8. It differs from UTF-8 in two ways that
matter to a reader: U+0000 is written as ``C0 80``, and characters outside the BMP are written as
two 3-byte surrogates (CESU-8) instead of one 4-byte sequence. Python's ``utf-8`` codec rejects
both, so schema files with such names would not load; this module decodes exactly what
``DataInputStream.readUTF`` accepts.
"""

from __future__ import annotations


def decode_modified_utf8(data: bytes) -> str:
    """Decode modified UTF-8 as ``DataInputStream.readUTF`` does.

    Raises
    ------
    ValueError
        Malformed input (what Java reports as ``UTFDataFormatException``).
    """
    if data.isascii() and b"\x00" not in data:
        return data.decode("ascii")
    units: list[int] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        top = c >> 4
        if top < 8:
            units.append(c)
            i += 1
        elif top in (12, 13):
            if i + 1 >= n:
                raise ValueError(f"partial character at end (byte {i})")
            c2 = data[i + 1]
            if c2 & 0xC0 != 0x80:
                raise ValueError(f"malformed input around byte {i + 1}")
            units.append(((c & 0x1F) << 6) | (c2 & 0x3F))
            i += 2
        elif top == 14:
            if i + 2 >= n:
                raise ValueError(f"partial character at end (byte {i})")
            c2, c3 = data[i + 1], data[i + 2]
            if c2 & 0xC0 != 0x80 or c3 & 0xC0 != 0x80:
                raise ValueError(f"malformed input around byte {i + 2}")
            units.append(((c & 0x0F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F))
            i += 3
        else:
            raise ValueError(f"malformed input around byte {i}")
    # UTF-16 code units -> str, joining surrogate pairs; a lone surrogate stays as is.
    raw = b"".join(u.to_bytes(2, "big") for u in units)
    return raw.decode("utf-16-be", "surrogatepass")


def encode_modified_utf8(text: str) -> bytes:
    """Encode ``text`` as ``DataOutputStream.writeUTF`` would, without the length prefix."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        u = (units[i] << 8) | units[i + 1]
        if 0 < u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes((0xC0 | (u >> 6), 0x80 | (u & 0x3F)))
        else:
            out += bytes((0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)))
    return bytes(out)


def write_utf(text: str) -> bytes:
    """``writeUTF(text)``: the 2-byte big-endian length, then the modified UTF-8 bytes."""
    body = encode_modified_utf8(text)
    if len(body) > 0xFFFF:
        raise ValueError(f"string too long for writeUTF ({len(body)} bytes)")
    return len(body).to_bytes(2, "big") + body
