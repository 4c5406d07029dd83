"""The shared text forms (sizes, durations, instants, sparklines) and the CPU count."""

from __future__ import annotations

import os

import pytest

from statekit.support import machine
from statekit.support.presentation import dash, human_bytes, human_duration, iso_ms, sparkline


@pytest.mark.parametrize(("size", "shown"), [
    (None, "-"), (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 * 1024 ** 3, "5.0 GiB"),
    (3 * 1024 ** 5, "3072.0 TiB")])
def test_human_bytes(size, shown):
    assert human_bytes(size) == shown


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "-"), (0.25, "250 ms"), (90, "90.0 s"), (600, "10.0 min"), (7200, "2.0 h"),
    (3 * 86400, "3.0 d")])
def test_human_duration(seconds, shown):
    assert human_duration(seconds) == shown


def test_iso_ms_and_dash():
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"
    assert iso_ms(1767620698064) == "2026-01-05T13:44:58.064Z"
    assert iso_ms(None) == dash(None) == "-"
    assert dash(3) == "3"


def test_sparkline_keeps_the_newest_points_within_width():
    assert sparkline(range(100), 10) == "▁▁▂▃▄▅▆▇██"  # 90..99, scaled 0..7
    assert len(sparkline(range(100))) == 48
    assert sparkline([7, 7, 7], 32) == "▁▁▁"
    assert sparkline([], 5) == sparkline([1, 2], 0) == ""


def test_usable_cpus_without_sched_getaffinity(monkeypatch):
    """macOS and Windows have no ``os.sched_getaffinity``: fall back to ``os.cpu_count``."""
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert machine.usable_cpus() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert machine.usable_cpus() == 1


def test_usable_cpus_honours_the_affinity_mask(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 3, 5}, raising=False)
    assert machine.usable_cpus() == 3


def test_offset_summaries_are_cut_with_an_ellipsis():
    """A source offset too long for the batches table is cut visibly, never silently."""
    import json

    from statekit.checkpoint.logs import SourceOffset
    from statekit.report.batches import summarize_offset

    kafka = {f"topic-{n}": {str(p): p * 1000 for p in range(4)} for n in range(9)}
    shown = summarize_offset(SourceOffset("0", json.dumps(kafka)))
    assert len(shown) == 80 and shown.endswith("…")
    assert shown.startswith("topic-0: 4 partitions, Σ 6000")
    nested = summarize_offset(SourceOffset("0", json.dumps({"k": {"deep": "x" * 60}})))
    assert nested == "k=" + json.dumps({"deep": "x" * 60}, separators=(",", ":"))[:39] + "…"
    assert summarize_offset(SourceOffset("0", "not json " * 10)).endswith("…")
    assert summarize_offset(SourceOffset("0", '{"logOffset":7}')) == "logOffset=7"


def test_a_history_sparkline_covers_the_whole_history():
    from statekit.support.presentation import history_sparkline, resampled

    # grew early, flat since: the newest 10 points alone are a flat line
    keys = [100] * 5 + list(range(100, 701, 60)) + [700] * 30
    assert sparkline(keys, 10) == "▁" * 10
    line = history_sparkline(keys, 10)
    assert len(line) == 10 and line[0] == "▁" and line[-1] == "█" and len(set(line)) > 2
    assert resampled(range(100), 10) == [0, 11, 22, 33, 44, 55, 66, 77, 88, 99]  # both ends
    assert resampled(range(100), 1) == [99]
    assert resampled([3, 1, 2], 10) == [3, 1, 2] and resampled([1, 2], 0) == []
    assert history_sparkline([5, 9, 1], 8) == sparkline([5, 9, 1], 8)


def test_the_overview_key_history_cell_draws_what_its_label_says():
    from statekit.tui.panes.overview import SPARK_WIDTH, history_cell

    keys = [175] * 3 + list(range(175, 716, 20)) + [715] * 40
    cell = history_cell(keys).plain
    line, label = cell.split(" ")
    assert label == "175→715" and len(line) == SPARK_WIDTH
    assert line[0] == "▁" and line[-1] == "█"  # from the first version, not the tail


def test_distinct_names_keep_what_tells_paths_apart():
    from statekit.support.presentation import distinct_names

    paths = ["/data/streams/a/checkpoint", "/data/streams/b/checkpoint",
             "/data/other/c/checkpoint"]
    assert distinct_names(paths, 40) == {paths[0]: "streams/a", paths[1]: "streams/b",
                                         paths[2]: "other/c"}
    assert distinct_names(["s3://bucket/x", "s3://bucket/y"], 40) == {
        "s3://bucket/x": "x", "s3://bucket/y": "y"}
    long = "/mnt/" + "deep/" * 10 + "the-stream"
    (name,) = distinct_names([long], 16).values()
    assert len(name) <= 16 and name.startswith("…") and name.endswith("the-stream")
    # a shared last folder goes only from the names that share it
    mixed = ["/d/golden/agg/checkpoint", "/d/golden/join/checkpoint", "/d/tui/reference"]
    assert list(distinct_names(mixed, 40).values()) == ["golden/agg", "golden/join",
                                                        "tui/reference"]
    # one path, or paths that differ only in the shared last folder, keep a name
    assert distinct_names(["/a/checkpoint"], 40) == {"/a/checkpoint": "/a/checkpoint"}
    assert distinct_names(["/a/x", "/a/y/x"], 40) == {"/a/x": "x", "/a/y/x": "y/x"}
