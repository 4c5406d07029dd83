"""Pixels of a PNG without an image library: tests look at what Chromium drew.

The screenshots the tests check (an SVG rasterized by headless Chromium, as
``docs/make_screenshots.py`` does) are 8-bit RGB or RGBA, non-interlaced — the only kind
decoded here. Pillow is not a dependency of the project, and a test that asks "are these
bars told apart on the picture?" needs no more than this.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {2: 3, 6: 4}
"""PNG colour type → bytes per pixel at 8 bits (RGB, RGBA)."""

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    rows: tuple[bytes, ...]
    """Unfiltered scanlines, ``channels`` bytes per pixel."""
    channels: int

    def pixel(self, x: int, y: int) -> RGB:
        at = x * self.channels
        r, g, b = self.rows[y][at:at + 3]
        return r, g, b


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(kind: int, line: bytearray, previous: bytes, bpp: int) -> bytes:
    if kind == 0:
        return bytes(line)
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            corner = previous[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        else:
            raise ValueError(f"unknown PNG filter {kind}")
    return bytes(line)


def decode(data: bytes) -> Image:
    """The PNG's pixels (8-bit RGB/RGBA, not interlaced; anything else is refused)."""
    if data[:8] != SIGNATURE:
        raise ValueError("not a PNG")
    offset, idat, header = 8, bytearray(), None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, "
                         f"interlace {interlace}")
    bpp = CHANNELS[colour]
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    rows: list[bytes] = []
    previous = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), previous,
                         bpp)
        rows.append(line)
        previous = line
    return Image(width, height, tuple(rows), bpp)
