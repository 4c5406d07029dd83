"""Parsing StreamingQueryProgress logs (listener JSON lines or a recentProgress array)."""

from __future__ import annotations

import json

import pytest

from statekit.checkpoint.progress_log import parse_progress
from statekit.support.errors import BadInput, CorruptFile
from tests.support.progress_logs import progress


def test_lines_with_idle_events_restarts_and_noise():
    lines = [json.dumps(progress(0, 10)), "INFO some log line", json.dumps(progress(1, 20)),
             json.dumps(progress(1, 21, idle=True)),  # idle trigger: dropped
             json.dumps(progress(1, 25)),              # batch 1 re-run after a restart: kept
             json.dumps(progress(2, 30, ops=2)), ""]
    (first, second) = parse_progress("\n".join(lines), shown="p.jsonl")
    assert first.label == "0:op0"
    assert [(p.batch_id, p.rows_total) for p in first.points] == [(0, 10), (1, 25), (2, 30)]
    assert first.points[0].timestamp_ms == 1772359200000
    assert first.points[0].memory_bytes == 1000 and first.points[0].rows_updated == 5
    assert second.label == "1:op1" and [p.rows_total for p in second.points] == [31]


def test_json_array_of_recent_progress():
    text = json.dumps([progress(b, 10 * b) for b in range(5)], indent=2)
    (op,) = parse_progress(text, shown="recent.json")
    assert [p.rows_total for p in op.points] == [0, 10, 20, 30, 40]


def test_invalid_json_line_names_the_file_and_line():
    with pytest.raises(CorruptFile, match=r"p.jsonl: line 2 is not valid JSON"):
        parse_progress(json.dumps(progress(0, 1)) + "\n{not json\n", shown="p.jsonl")
    with pytest.raises(CorruptFile, match="invalid JSON array"):
        parse_progress("[{", shown="a.json")


def test_no_progress_objects_is_bad_input():
    with pytest.raises(BadInput, match="no StreamingQueryProgress"):
        parse_progress('{"a": 1}\n', shown="x.jsonl")
    with pytest.raises(BadInput, match="no StreamingQueryProgress"):
        parse_progress(json.dumps(progress(0, 1, idle=True)), shown="x.jsonl")
    stateless = progress(0, 1)
    stateless["stateOperators"] = []
    with pytest.raises(BadInput, match="no stateful operators"):
        parse_progress(json.dumps(stateless), shown="x.jsonl")
