"""A chart with axes, units and a legend: a Plotext plot (``textual-plotext``) drawn from a
plain :class:`ChartSpec`.

Screens never draw: they build a spec (:mod:`statekit.tui.screen_charts`), the widget
renders it at whatever size it has. Ticks are chosen here, not by Plotext, so that a count
reads ``9.0 M`` and a size ``1.2 GiB`` rather than ``9000000.0``; a series spanning three or
more decades is drawn on a log scale; a flat series is a line at its level with its value on
the y axis (so "bounded at 900 keys" and "bounded at 9 M keys" look different). Each series
has its own marker as well as its own colour, so the legend reads without colour too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from statekit.formats.values import shorten
from statekit.support.presentation import human_bytes, human_duration

MARKERS = ("hd", "x", "o", "+", "*", "#", "@", "%")
LOG_SPAN = 1000.0
"""Draw on a log scale when the largest positive value is this many times the smallest."""


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class Reference:
    """A horizontal line across the chart (an objective such as the RTO)."""

    label: str
    y: float


@dataclass(frozen=True)
class Band:
    """A projection drawn dashed from the last point on, its range as dotted edges (where
    a saturating state levels off)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]


@dataclass(frozen=True)
class ChartSpec:
    """Everything a chart shows; ``unit`` formats the y ticks (``bytes``, ``s``, ``ms`` or
    a word such as ``keys``)."""

    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...] = ()
    unit: str = ""
    stacked: bool = False
    """Bars stacked per x (the series are the parts), instead of lines."""
    references: tuple[Reference, ...] = ()
    log_y: bool | None = None
    """None: log scale when the values span three decades or more."""
    empty: str = "no data"
    x_names: tuple[str, ...] = ()
    """Names for x = 0, 1, 2 …: evenly spaced categories (e.g. 1, 2, 5, 10 … 100)."""
    bands: tuple[Band, ...] = ()

    @property
    def has_data(self) -> bool:
        return any(s.y for s in self.series)

    def wants_log(self) -> bool:
        if self.log_y is not None:
            return self.log_y
        if self.stacked:
            return False
        positive = [v for s in self.series for v in s.y if v > 0]
        return bool(positive) and min(v for s in self.series for v in s.y) > 0 and \
            max(positive) / min(positive) >= LOG_SPAN


def compact(value: float) -> str:
    """``950``, ``12.5 k``, ``9.0 M``: a count short enough for an axis."""
    size = abs(value)
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            return f"{value / limit:.1f} {suffix}"
    return f"{value:.0f}" if float(value).is_integer() or size >= 100 else f"{value:.2g}"


def tick_text(unit: str) -> Callable[[float], str]:
    if unit == "bytes":
        return lambda v: human_bytes(int(v))
    if unit == "s":
        return lambda v: "0 s" if v == 0 else human_duration(v)
    if unit == "ms":
        return lambda v: f"{compact(v)} ms"
    return compact


def linear_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round ticks covering ``low``–``high`` (1, 2, 2.5, 5 × 10^n steps)."""
    if high <= low:
        pad = abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(1, count - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [round(math.floor(low / step) * step, 10)]
    while ticks[-1] < high:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def log_ticks(low: float, high: float, base: float = 10.0) -> list[float]:
    """Powers of ``base`` covering ``low``–``high``, at most about six of them."""
    first = math.floor(math.log(low, base) + 1e-9)
    last = math.ceil(math.log(high, base) - 1e-9)
    stride = max(1, math.ceil((last - first) / 5))
    return [base ** e for e in range(first, last + 1, stride)]


def integer_ticks(values: Sequence[float], count: int = 6) -> list[float]:
    low, high = min(values), max(values)
    if high - low < count:
        return sorted({float(v) for v in values})
    step = math.ceil((high - low) / (count - 1))
    return [float(low + n * step) for n in range(count) if low + n * step <= high]


BAR_SLOT_COLUMNS = 4
"""Columns per stacked bar: two of bar, one of gap (at two, Plotext's bars touch and the
chart reads as solid blocks)."""
BAR_AXIS_COLUMNS = 10
"""Columns of a chart that are not the plot: the y axis' labels and the frame."""


class Chart(PlotextPlot):
    """Renders a :class:`ChartSpec` (set with :meth:`show`)."""

    DEFAULT_CSS = """
    Chart {
        width: 1fr;
        height: 1fr;
        min-height: 8;
        padding-left: 1;
    }
    """
    """A column left of the y axis' labels: at the screen's edge the widest (``1.0 k``) sat
    flush against the frame, and was clipped wherever a border covers the first column; the
    rest of a pane keeps that margin too."""

    def __init__(self, spec: ChartSpec | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.spec = spec or ChartSpec("", "", "")

    def show(self, spec: ChartSpec) -> None:
        self.spec = spec
        self.refresh()

    def render(self) -> RenderResult:
        self._draw(self.spec)
        return super().render()

    def rendered_text(self) -> str:
        """The chart as plain text at its current size (what a person reads)."""
        result = self.render()
        return result.plain if isinstance(result, Text) else str(result)

    def _fitted(self, title: str) -> str:
        """``title`` cut to the chart's width: Plotext drops a title that does not fit,
        and with it an empty chart's reason (an error, say)."""
        width = self.content_size.width
        return shorten(title, width) if width > 1 else title

    def _draw(self, spec: ChartSpec) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        title = spec.title if spec.has_data else f"{spec.title} — {spec.empty}"
        plt.title(self._fitted(title))
        plt.xlabel(spec.x_label)
        plt.ylabel(spec.y_label + (f" ({spec.unit})" if spec.unit and spec.unit
                                   not in spec.y_label else ""))
        if not spec.has_data:
            return
        xs = sorted({x for s in spec.series for x in s.x})
        if spec.stacked:  # categories (Plotext spaces numeric bars by value, not by slot)
            ys = [list(s.y) for s in spec.series]
            fit = max(1, (self.size.width - BAR_AXIS_COLUMNS) // BAR_SLOT_COLUMNS)
            if len(xs) > fit:  # more bars than fit with a gap each: the newest that do
                plt.title(self._fitted(f"{title} — last {fit} of {len(xs)}"))
                xs, ys = xs[-fit:], [y[-fit:] for y in ys]
            plt.stacked_bar([f"{x:g}" for x in xs], ys, width=0.5,
                            labels=[s.label for s in spec.series])  # type: ignore[call-arg]
            totals = [sum(y[i] for y in ys if i < len(y)) for i in range(len(xs))]
            values = [0.0, *totals]
        else:
            for n, s in enumerate(spec.series):
                plt.plot(list(s.x), list(s.y), label=s.label, marker=MARKERS[n % len(MARKERS)])
            values = [v for s in spec.series for v in s.y]
        for band in spec.bands:  # the range's edges first: the projection lies on top
            plt.plot(list(band.x[1::2]), list(band.high[1::2]), marker="dot",
                     label=f"{band.label} range")
            plt.plot(list(band.x[1::2]), list(band.low[1::2]), marker="dot")
            _dashed(plt, band.x, band.y, band.label)
            values.extend([*band.low, *band.high])
            xs = sorted({*xs, *band.x})
        for n, line in enumerate(spec.references, len(spec.series)):
            plt.plot([xs[0], xs[-1]] if len(xs) > 1 else [xs[0] - 1, xs[0] + 1],
                     [line.y, line.y], label=line.label, marker=MARKERS[n % len(MARKERS)])
            values.append(line.y)
        fmt = tick_text(spec.unit)
        if spec.wants_log():
            plt.yscale("log")
            # sizes at powers of 32 (1 KiB, 32 KiB, 1 MiB…), counts at powers of 10
            ticks = log_ticks(min(v for v in values if v > 0), max(values),
                              32.0 if spec.unit == "bytes" else 10.0)
            plt.ylim(math.log10(ticks[0]), math.log10(ticks[-1]))  # Plotext: log units
        else:
            ticks = linear_ticks(min(0.0, min(values)) if spec.stacked else min(values),
                                 max(values))
            plt.ylim(ticks[0], ticks[-1])
        labels = [fmt(t) for t in ticks]
        if len(set(labels)) < len(labels):  # a narrow range: the short form repeats itself
            labels = [f"{t:,.0f}" if abs(t) >= 100 else f"{t:.3g}" for t in ticks]
        plt.yticks(ticks, labels)
        if spec.x_names:
            plt.xticks(list(range(len(spec.x_names))), list(spec.x_names))
        elif not spec.stacked:
            x_ticks = integer_ticks(xs)
            plt.xticks(x_ticks, [f"{t:.0f}" for t in x_ticks])


def _dashed(plt: object, x: Sequence[float], y: Sequence[float], label: str) -> None:
    """A line drawn as every other segment (Plotext has no dash style)."""
    for i in range(0, len(x) - 1, 2):
        plt.plot(list(x[i:i + 2]), list(y[i:i + 2]),  # type: ignore[attr-defined]
                 marker="-", label=label if i == 0 else None)
