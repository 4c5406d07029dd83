"""The Overview's key-history sparkline, checked in the picture people see, not in its text.

The text of a sparkline (``▁▃▄▆▇███``) was always right; what went wrong was its look: in
the docs' PNGs and in the browser the bars fused into one light block. Only pixels show
that, so this test renders the Overview of the TUI fixture to SVG with the snapshot tests'
machinery, turns it into a PNG with ``docs/make_screenshots.py``'s own ``to_png`` (headless
Chromium, as the docs' pictures are made) and measures each bar of the sparkline: the
middle pixel column of each cell, its pixels that differ from the cell's background being
the bar. The bars must rise with their glyphs, stand out from their background, and each
must be told apart from its neighbour — by height, or where two are equally high (the
fixture's last three) by colour.
"""

from __future__ import annotations

import html
import importlib.util
import itertools
import re
from collections import Counter
from dataclasses import dataclass
from types import ModuleType

import pytest

from statekit.support.presentation import SPARK_BARS
from tests.support import tools
from tests.support.png import RGB, Image, decode
from tests.tui.shots import FIXTURE, PROGRESS, ROOT, keys, shoot

SCRIPT = ROOT / "docs" / "make_screenshots.py"
APART = 60
"""Colours this far apart (sum of the channels' differences) are told apart by eye."""
STANDS_OUT = 100
"""… and a bar this far from its background is plainly seen on it."""


@dataclass(frozen=True)
class Cell:
    """One sparkline cell as the SVG places it (SVG units are the PNG's pixels)."""

    glyph: str
    left: float
    width: float
    top: float
    height: float
    background: RGB


@dataclass(frozen=True)
class Bar:
    glyph: str
    height: int
    """Pixels of the cell's middle column that are not its background."""
    colour: RGB
    """The commonest of them."""
    background: RGB


def screenshots_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rgb(hex_colour: str) -> RGB:
    value = hex_colour.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def distance(a: RGB, b: RGB) -> int:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def sparkline_cells(svg: str) -> tuple[tuple[float, float], list[Cell]]:
    """The terminal's offset in the picture and the cells of the key-history sparkline —
    the run of bar glyphs before its ``first→last`` label — left to right, each with the
    background painted under it."""
    offset = re.search(r'<g transform="translate\(([\d.]+),\s*([\d.]+)\)" clip-path', svg)
    assert offset, "no terminal group in the SVG"
    rects = [(float(x), float(y), float(w), float(h), _rgb(fill)) for fill, x, y, w, h in
             re.findall(r'<rect fill="(#[0-9a-fA-F]{6})" x="([\d.]+)" y="([\d.]+)" '
                        r'width="([\d.]+)" height="([\d.]+)"', svg)]
    lines: dict[float, dict[int, str]] = {}
    width = 0.0
    for x, y, length, content in re.findall(
            r'<text class="[^"]+" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)"[^>]*>'
            r"([^<]*)</text>", svg):
        text = html.unescape(content).replace("\xa0", " ")
        width = float(length) / len(text)
        line = lines.setdefault(float(y), {})
        for n, char in enumerate(text):
            line[round(float(x) / width) + n] = char
    found = []
    for y, chars in lines.items():
        row = "".join(chars.get(column, " ") for column in range(max(chars) + 1))
        found += [(y, m.start(1), m.group(1)) for m in
                  re.finditer(f"([{SPARK_BARS}]+) [\\d,]+→[\\d,]+", row)]
    assert len(found) == 1, f"expected one sparkline on screen, found {found}"
    (y, first, glyphs), = found
    cells = []
    for n, glyph in enumerate(glyphs):
        left = (first + n) * width
        under = [r for r in rects if r[0] <= left + width / 2 < r[0] + r[2]
                 and r[1] <= y <= r[1] + r[3]]
        assert under, f"no background under the cell at x={left}"
        _, top, _, height, fill = under[-1]  # painted last: on top
        cells.append(Cell(glyph, left, width, top, height, fill))
    return (float(offset.group(1)), float(offset.group(2))), cells


def measured(image: Image, offset: tuple[float, float], cell: Cell) -> Bar:
    """The bar in the cell's middle pixel column (its top and bottom pixel left out: they
    blend with the rows around)."""
    x = round(offset[0] + cell.left + cell.width / 2)
    top, bottom = round(offset[1] + cell.top) + 1, round(offset[1] + cell.top + cell.height) - 1
    pixels = [image.pixel(x, y) for y in range(top, bottom)]
    painted = [p for p in pixels if distance(p, cell.background) > APART]
    colour = Counter(painted).most_common(1)[0][0] if painted else cell.background
    return Bar(cell.glyph, len(painted), colour, cell.background)


def bars_in_picture(svg: str, png: bytes) -> list[Bar]:
    offset, cells = sparkline_cells(svg)
    image = decode(png)
    return [measured(image, offset, cell) for cell in cells]


def check_bars(bars: list[Bar]) -> None:
    """What a person must see: bars as high as their glyphs, on a background they stand out
    from, each apart from its neighbour."""
    assert len(bars) >= 4, [b.glyph for b in bars]
    line = "".join(b.glyph for b in bars)
    for bar in bars:
        assert distance(bar.colour, bar.background) >= STANDS_OUT, (line, bar)
    for a in bars:
        for b in bars:
            if SPARK_BARS.index(a.glyph) < SPARK_BARS.index(b.glyph):
                assert a.height < b.height, (line, a, b)
    assert len({b.height for b in bars}) > 1, line
    for left, right in itertools.pairwise(bars):
        apart = abs(left.height - right.height) >= 2 or \
            distance(left.colour, right.colour) >= APART
        assert apart, f"bars {left.glyph}{right.glyph} of {line} fuse into one: {left} {right}"


@tools.needs(tools.CHROMIUM)
def test_the_key_history_bars_stay_apart_in_the_docs_picture(monkeypatch, tmp_path):
    chromium = tools.require(tools.CHROMIUM)
    monkeypatch.chdir(ROOT)  # the fixture by its relative path, as the snapshots show it
    svg = shoot(FIXTURE, keys(), progress=PROGRESS, rto_s=30.0)
    path = tmp_path / "overview.svg"
    path.write_text(svg, encoding="utf-8")
    png = screenshots_script().to_png(path, chromium)
    bars = bars_in_picture(svg, png.read_bytes())
    assert "".join(b.glyph for b in bars) == "▁▃▄▆▇███"  # three equal bars at the end
    check_bars(bars)


@pytest.mark.parametrize("line", ["▁▃▄▆▇███", "▁██████▆"])
def test_check_bars_refuses_fused_bars(line):
    """The check itself: light bars on the row's dark background, as before, fuse where two
    are equally high."""
    height = {g: 3 * (n + 1) for n, g in enumerate(SPARK_BARS)}
    light, row = (224, 224, 224), (23, 23, 23)
    with pytest.raises(AssertionError, match="fuse into one"):
        check_bars([Bar(g, height[g], light, row) for g in line])
