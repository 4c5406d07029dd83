"""Screenshots that look in a picture as they do in the terminal.

Rich exports each run of same-styled cells as one SVG ``<text>`` with an ``x`` and a
``textLength``. A run that begins or ends with spaces (``"  provider "``, a table cell's
padding) is written with ``&#160;``, and SVG renderers (librsvg, and so the pictures people
see first) drop or squeeze those: the label then runs into the value before it
("hdfscodec"). :func:`pin_spaces` moves the spaces out of the text and into its ``x``, so
every word starts at its own cell whatever the renderer does with whitespace.
"""

from __future__ import annotations

import html
import re

from rich.cells import cell_len

NBSP = "&#160;"
_TEXT = re.compile(r'(<text\b[^>]*?\bx=")([\d.]+)("[^>]*?\btextLength=")([\d.]+)("[^>]*>)'
                   r"([^<]*)(</text>)")


def _pinned(match: re.Match[str]) -> str:
    start, x, middle, length, close, content, end = match.groups()
    body = content
    lead = 0
    while body.startswith(NBSP):
        body, lead = body[len(NBSP):], lead + 1
    trail = 0
    while body.endswith(NBSP):
        body, trail = body[:-len(NBSP)], trail + 1
    if not lead and not trail:
        return match.group(0)
    if not body:
        return ""  # only spaces: the background rectangles already paint the cells
    cells = cell_len(html.unescape(content).replace("\xa0", " "))
    width = float(length) / cells if cells else 0.0
    return (f"{start}{float(x) + lead * width:g}{middle}"
            f"{float(length) - (lead + trail) * width:g}{close}{body}{end}")


def pin_spaces(svg: str) -> str:
    """``svg`` with each text run's leading and trailing spaces turned into position."""
    return _TEXT.sub(_pinned, svg)
