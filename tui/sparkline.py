"""A sparkline that reads as bars in a picture too: each bar in its own colour on a track.

A sparkline is a row of block glyphs (``▁▂▃▄▅▆▇█``) whose heights carry a trend. Left
unstyled in a table cell, it takes the cell's colours — light glyphs on the row's dark
background — and equal bars side by side (a store that levelled off: ``▁██████▆``) fuse
into one light slab in the SVG screenshots, the PNGs made from them and the browser: nothing
tells one bar from the next, or where a full bar ends. So each bar here is drawn in one of
two shades, alternating, which keeps equal neighbours two bars, on a track colour of its own
that differs from both shades and from the table's rows, which shows every bar's height.
The colours are fixed rather than the theme's: the cell must read the same in every theme.
"""

from __future__ import annotations

from rich.text import Text

TRACK = "#2c3340"
"""The cells' background: the part of each cell above its bar."""
BARS = ("#8fc8ff", "#4f8fd0")
"""The bars' colours, alternating from the first bar."""


def sparkline_text(line: str) -> Text:
    """``line`` (block glyphs, one per bar) styled bar by bar."""
    text = Text()
    for n, glyph in enumerate(line):
        text.append(glyph, style=f"{BARS[n % len(BARS)]} on {TRACK}")
    return text
