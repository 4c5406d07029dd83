"""Every retained batch: committed or not, interval, watermark progression."""

from __future__ import annotations

from rich.text import Text

from statekit.support.presentation import human_duration
from statekit.tui.pane import Pane, watermark_text, when


class BatchesPane(Pane):
    """Every retained batch: committed or not, interval, watermark progression."""

    def render_snapshot(self) -> None:
        rows = self.shown.timeline.rows
        self.title_line.update("batches — newest last")
        self.status.update(f"{len(rows)} batches retained, last committed "
                           f"{self.shown.timeline.last_committed}")
        previous = None
        out = []
        for r in rows:
            watermark = r.watermark_ms or None  # 0: no watermark yet, nothing moved
            moved = "" if previous is None or watermark is None or watermark == previous \
                else f"+{human_duration((watermark - previous) / 1000)}"
            previous = watermark if watermark is not None else previous
            out.append((str(r.batch_id), (
                str(r.batch_id),
                Text("committed", style="green") if r.committed else
                Text("NOT committed", style="bold red"),
                when(r.timestamp_ms),
                "-" if r.interval_ms is None else f"{r.interval_ms / 1000:.1f} s",
                watermark_text(r.watermark_ms), moved, str(r.shuffle_partitions or "-"),
                "; ".join(r.sources))))
        self.table.load(("batch", "state", "started", "interval", "watermark",
                         "watermark moved", "partitions", "sources"), out)
        if self.table.row_count:
            self.table.move_cursor(row=self.table.row_count - 1)
