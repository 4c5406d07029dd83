"""The TUI's pure pieces without a terminal: screenshot text pinned to its cells, chart
ticks, and Spark-UI metrics parsed from a real progress log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from statekit.checkpoint.progress_log import parse_query, read_text
from statekit.support.errors import BadInput
from statekit.tui.chart_widget import ChartSpec, Series, integer_ticks, linear_ticks, log_ticks
from statekit.tui.svg import pin_spaces

PROGRESS = Path(__file__).resolve().parents[1] / "data" / "tui" / \
    "reference_hdfs.progress.jsonl"
TEXT = ('<text class="r7" x="524.6" y="93.2" textLength="134.2" clip-path="url(#l3)">'
        '&#160;&#160;provider&#160;</text>')


def test_pin_spaces_moves_padding_into_the_position():
    pinned = pin_spaces(TEXT)
    x, length, body = re.search(r'x="([\d.]+)".*textLength="([\d.]+)"[^>]*>([^<]*)<',
                                pinned).groups()
    cell = 134.2 / 11  # "  provider " is 11 cells
    assert body == "provider"
    assert float(x) == pytest.approx(524.6 + 2 * cell)
    assert float(length) == pytest.approx(8 * cell)


def test_pin_spaces_keeps_words_and_drops_blank_runs():
    blank = TEXT.replace("&#160;&#160;provider&#160;", "&#160;&#160;&#160;")
    plain = TEXT.replace("&#160;&#160;provider&#160;", "a&#160;b")
    assert pin_spaces(blank) == ""
    assert pin_spaces(plain) == plain  # inner spaces are the renderer's to keep
    assert pin_spaces(TEXT + plain).endswith(plain)


def test_ticks_cover_the_range_with_round_steps():
    assert linear_ticks(0, 330) == [0, 100, 200, 300, 400]
    assert linear_ticks(900, 900)[0] < 900 < linear_ticks(900, 900)[-1]  # flat: a band
    assert log_ticks(12, 9_000) == [10, 100, 1_000, 10_000]
    assert log_ticks(12, 9_000_000) == [10, 1_000, 100_000, 10_000_000]  # ≤ 6 ticks
    assert log_ticks(1000, 1e7, 32.0) == [32.0, 1024.0, 32768.0, 1048576.0, 33554432.0]
    assert integer_ticks([1, 2, 3]) == [1, 2, 3]
    assert integer_ticks(list(range(0, 101))) == [0, 20, 40, 60, 80, 100]


def test_log_scale_only_when_values_span_decades():
    def spec(*ys: float) -> ChartSpec:
        return ChartSpec("t", "x", "y", (Series("s", tuple(range(len(ys))), ys),))

    assert spec(10, 100, 10_000).wants_log()
    assert not spec(900, 950, 1000).wants_log()
    assert not spec(0, 100, 10_000).wants_log()  # a zero cannot go on a log axis


def test_parse_query_matches_the_logged_progress():
    text = PROGRESS.read_text()
    logged = [json.loads(line) for line in text.splitlines()]
    batches = parse_query(text, shown=str(PROGRESS))
    assert [b.batch_id for b in batches] == [p["batchId"] for p in logged]
    for batch, raw in zip(batches, logged, strict=True):
        ops = raw["stateOperators"]
        assert batch.input_rows == raw["numInputRows"]
        assert batch.processed_rows_per_second == pytest.approx(raw["processedRowsPerSecond"])
        assert batch.state_rows == sum(op["numRowsTotal"] for op in ops)
        assert batch.state_memory_bytes == sum(op["memoryUsedBytes"] for op in ops)
        assert batch.trigger_ms == raw["durationMs"]["triggerExecution"]
        assert "triggerExecution" not in batch.phases_ms
        assert sum(batch.phases_ms.values()) <= batch.trigger_ms + len(batch.phases_ms)
    first_watermark = next(b for b in batches if b.watermark_gap_ms is not None)
    assert first_watermark.watermark_gap_ms > 0


def test_parse_query_errors_name_the_file(tmp_path):
    broken = tmp_path / "progress.jsonl"
    broken.write_text('{"batchId": 1, \n')
    with pytest.raises(Exception, match="line 1 is not valid JSON"):
        parse_query(broken.read_text(), shown=str(broken))
    with pytest.raises(BadInput, match="no such file"):
        read_text(str(tmp_path / "missing.jsonl"))


def test_state_cells_show_spark_rows_as_the_cli_shows_arrow_rows():
    """The State tab gets PySpark ``Row`` objects, ``statekit state show`` the dicts Arrow
    gives: one value, one rendering (never ``Row(user_id='u1', …)``)."""
    from pyspark.sql import Row

    from statekit.formats.values import render_value
    from statekit.tui.panes.state import cell_text

    row = Row(user_id="u1", state=Row(phase="Watching", amounts=[1.5, 2.0]), seen=None)
    as_arrow = {"user_id": "u1", "state": {"phase": "Watching", "amounts": [1.5, 2.0]},
                "seen": None}
    assert cell_text(row) == render_value(as_arrow, max_len=None) == \
        "{user_id: 'u1', state: {phase: 'Watching', amounts: [1.5, 2.0]}, seen: null}"
    assert cell_text([Row(a=1), Row(a=2)]) == render_value([{"a": 1}, {"a": 2}])
    # a map of structs, and a list of lists of structs: Rows at any depth
    assert cell_text({"k": Row(a=1)}) == render_value({"k": {"a": 1}})
    assert cell_text([[Row(a=1)]]) == render_value([[{"a": 1}]])
    assert cell_text(None) == "null" and cell_text("u1") == "u1"
