"""What each screen charts: plain :class:`ChartSpec` objects built from statekit's analyses
(and a progress log), so the choice of series, labels and units is testable without drawing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from statekit.tui.chart_widget import Band, ChartSpec, Reference, Series

if TYPE_CHECKING:
    from statekit.checkpoint.progress_log import QueryBatch
    from statekit.growth.analysis import GrowthReport, StoreGrowth
    from statekit.growth.outlook import Outlook
    from statekit.recovery.estimate import RecoveryEstimate


RTO_FAR = 5.0
"""An RTO this many times above the what-if curve's top is named in the title, not drawn."""


@dataclass(frozen=True)
class StoreSeries:
    """One store's history: keys and bytes per version."""

    label: str
    versions: tuple[int, ...]
    keys: tuple[int, ...]
    bytes: tuple[int, ...]
    projection: Band | None = None
    """Where the store's keys go: a saturating store's way to its plateau with the plateau's
    range; a growing one's at its rate (a leak's, or the trend's)."""


PROJECTION_SPAN = 1.0
"""The projection runs on for this many times the history's length (or until the plateau)."""


def _projection(label: str, store: StoreGrowth) -> Band | None:
    """The discovery curve from the last version on: to the plateau, its low and high; or a
    growing store's keys at the rate the outlook projects them."""
    from statekit.growth.population import curve
    from statekit.growth.trend import SATURATING

    sat = store.saturation
    versions = store.history.versions
    if versions and store.key_verdict in ("growing", "accelerating"):
        from statekit.growth.outlook import rising

        _, rate = rising(store.key_verdict, store.keys, sat)
        steps = max(4, int(PROJECTION_SPAN * len(versions)))
        last = versions[-1]
        xs = tuple(float(last.version + i) for i in range(steps + 1))
        line = tuple(float(last.keys) + rate * i for i in range(steps + 1))
        return Band(f"{label} projected", xs, line, line, line)
    if store.key_verdict != SATURATING or sat is None or not versions or \
            sat.plateau is None or not sat.events_per_batch:
        return None
    last = versions[-1]
    steps = max(4, int(PROJECTION_SPAN * len(versions)))
    if sat.batches_to_plateau is not None:
        steps = max(4, min(steps, int(sat.batches_to_plateau) + 1))
    skew, pace = sat.skew or 0.0, sat.events_per_batch or 0.0
    xs = tuple(float(last.version + i) for i in range(steps + 1))
    start = float(last.keys)
    return Band(f"{label} projected", xs,
                (start, *curve(start, sat.plateau, skew, pace, steps)),
                (start, *curve(start, sat.plateau_low or sat.plateau, skew, pace, steps)),
                (start, *curve(start, sat.plateau_high or sat.plateau, skew, pace, steps)))


def store_series(report: GrowthReport) -> list[StoreSeries]:
    out = []
    for store in report.stores:
        versions = store.history.versions if store.history else ()
        sizes = [v.bytes if v.bytes is not None else v.disk_bytes for v in versions]
        label = f"{store.operator_id}/{store.store}"
        out.append(StoreSeries(
            label, tuple(v.version for v in versions),
            tuple(v.keys for v in versions),
            tuple(s for s in sizes if s is not None) if all(s is not None for s in sizes)
            else (), _projection(label, store)))
    return out


def keys_chart(stores: Sequence[StoreSeries], ahead: Outlook | None = None) -> ChartSpec:
    """Live keys per version, each store's projection dashed, and the keys at which the
    busiest executor's memory fills (``ahead``: the report's outlook, with
    ``--executor-memory``) — drawn when near, named in the title when far above."""
    bands = tuple(s.projection for s in stores if s.projection is not None)
    title = "live keys per state version" + (", dashed: projected" if bands else "")
    references: tuple[Reference, ...] = ()
    if ahead is not None and ahead.limit_bytes is not None:
        from statekit.support.presentation import human_bytes, human_duration

        limit = human_bytes(int(ahead.limit_bytes))
        when = ("already full" if ahead.limit_days == 0 else
                f"full in {human_duration(ahead.limit_days * 86400)}"
                if ahead.limit_days is not None else ahead.limit_note or "")
        title += f" — executor memory {limit}: {when}"
        top = max((max(s.keys) for s in stores if s.keys), default=0.0)
        top = max([top, *(max(b.high) for b in bands)])
        if ahead.limit_keys is not None and ahead.limit_keys <= RTO_FAR * max(top, 1.0):
            references = (Reference(f"executor memory {limit}", ahead.limit_keys),)
    return ChartSpec(title, "state version", "keys", tuple(
        Series(s.label, tuple(map(float, s.versions)), tuple(map(float, s.keys)))
        for s in stores if s.keys), unit="keys", empty="no key history", bands=bands,
        references=references)


def bytes_chart(stores: Sequence[StoreSeries]) -> ChartSpec:
    return ChartSpec("state size per version (key + value bytes)", "state version", "size",
                     tuple(Series(s.label, tuple(map(float, s.versions)),
                                  tuple(map(float, s.bytes))) for s in stores if s.bytes),
                     unit="bytes", empty="sizes not replayed (RocksDB zips: keys only)")


def what_if_chart(estimate: RecoveryEstimate, rto_s: float | None) -> ChartSpec:
    """Restart time against minDeltasForSnapshot: worst case, its upper range, typical."""
    points = sorted(estimate.what_if, key=lambda w: w.min_deltas)
    xs = tuple(float(n) for n in range(len(points)))  # 1, 2, 5 … 100 evenly spaced
    # drawn in this order, so the worst case (the line that matters) lies on top
    series = (Series("worst, top of range", xs, tuple(w.worst_high_s for w in points)),
              Series("typical", xs, tuple(w.typical_s for w in points)),
              Series("worst case", xs, tuple(w.worst_s for w in points)))
    highest = max((w.worst_high_s for w in points), default=0.0)
    title = "restart time if minDeltasForSnapshot were…"
    references: tuple[Reference, ...] = ()
    if rto_s and rto_s > RTO_FAR * highest:
        # a line far above would flatten the curve onto the axis: say it instead
        title += f" (RTO {rto_s:g} s: far above every value)"
    elif rto_s:
        references = (Reference(f"RTO {rto_s:g} s", rto_s),)
    return ChartSpec(title, "minDeltasForSnapshot", "restart time",
                     series if points else (), unit="s", references=references, log_y=False,
                     empty="no what-if (no delta files to replay)",
                     x_names=tuple(str(w.min_deltas) for w in points))


def _batch_series(label: str, batches: Sequence[QueryBatch], values: Sequence[float | None]
                  ) -> Series:
    pairs = [(float(b.batch_id), float(v)) for b, v in zip(batches, values, strict=True)
             if v is not None]
    return Series(label, tuple(x for x, _ in pairs), tuple(y for _, y in pairs))


def query_charts(batches: Sequence[QueryBatch]) -> list[ChartSpec]:
    """Spark UI's Structured Streaming charts, per batch."""
    phases = list(dict.fromkeys(p for b in batches for p in b.phases_ms))
    return [
        ChartSpec("input and process rate", "batch", "rows/s", (
            _batch_series("input rows/s", batches, [b.input_rows_per_second for b in batches]),
            _batch_series("processed rows/s", batches,
                          [b.processed_rows_per_second for b in batches])),
            unit="rows/s", log_y=False),
        ChartSpec("batch duration by phase", "batch", "duration", tuple(
            Series(phase, tuple(float(b.batch_id) for b in batches),
                   tuple(float(b.phases_ms.get(phase, 0)) for b in batches))
            for phase in phases), unit="ms", stacked=True),
        ChartSpec("state rows (all operators)", "batch", "rows", (
            _batch_series("numRowsTotal", batches, [b.state_rows for b in batches]),),
            unit="rows"),
        ChartSpec("state memory (all operators)", "batch", "memory", (
            _batch_series("memoryUsedBytes", batches,
                          [b.state_memory_bytes for b in batches]),), unit="bytes"),
        ChartSpec("state rows updated and removed", "batch", "rows", (
            _batch_series("numRowsUpdated", batches, [b.state_rows_updated for b in batches]),
            _batch_series("numRowsRemoved", batches, [b.state_rows_removed for b in batches])),
            unit="rows", log_y=False),
        ChartSpec("watermark delay (batch start − watermark)", "batch", "delay", (
            _batch_series("watermark gap", batches, [
                None if b.watermark_gap_ms is None else b.watermark_gap_ms / 1000
                for b in batches]),), unit="s", empty="no watermark yet"),
    ]
