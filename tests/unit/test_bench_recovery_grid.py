"""The recovery grid's bookkeeping that rewrites the documented numbers, JVM-free.

``bench_recovery_grid.py --restate-docs`` rewrites the held-out table of
docs/concepts/recovery.md after a constant changed: the estimates of the rows whose
checkpoints were re-written, the range of every row, the summary the acceptance is read from.
A wrong cell there misstates what statekit predicts, so it is checked here on the frozen
``make demo`` checkpoint standing in for a grid configuration.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.recovery.cost_model import DEFAULT_MODELS
from statekit.recovery.estimate import estimate_recovery
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo" / "checkpoint"
grid = load_script("benchmarks/bench_recovery_grid.py")


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


HEADER = ("load path", "keys", "value", "partitions", "batches", "half",
          "measured cold [10–90 %]", "estimate [range]", "error", "warm pairs [spread]",
          "warm estimate", "error", "Spark's load log D", "load estimate", "error")
PAGE = "\n".join([
    "# page", "", "<!-- recovery-grid -->", _row(*HEADER), "|" + "---|" * 15,
    _row("HDFS, no snapshot", "100k", "50 B", "16", "16", "held-out",
         "2.00 s [1.50 s – 2.50 s]", "9.00 s [1.00 s – 12.00 s]", "+350%", "1.80 s [0.20 s]",
         "9.00 s", "+400%", "0.53 s", "0.26 s", "-51%"),
    _row("RocksDB changelog", "3M", "50 B", "16", "16", "held-out",
         "20.00 s [19.00 s – 21.00 s]", "25.00 s [1.00 s – 2.00 s]", "+25%",
         "24.00 s [0.50 s]", "29.00 s", "+21%", "23.46 s", "12.60 s", "-46%"),
    "", "- held-out, cold restarts: 2 configurations, median |error| 187%, worst factor 4.50×",
    "", "Memory of the loaded state:", "",
    _row("configuration", "half", "rows (Spark)", "Spark's memoryUsedBytes",
         "statekit estimate", "error"), "|---|---|---:|---:|---:|---:|",
    _row("hdfs-nosnap-100k-50B-p16", "held-out", "100,000", "45.4 MiB", "65.3 MiB", "+44%"),
    "<!-- /recovery-grid -->", "", "after", ""])


def test_a_configuration_name_round_trips():
    for name in ("rocksdb-zip-100k-50B-p32", "hdfs-snap5-1000k-50B-p16-b32"):
        assert grid.parse_config(name).name == name
    assert grid.parse_config("rocksdb-zip-100k-50B-p32").half == "probe"
    with pytest.raises(SystemExit, match="not a configuration name"):
        grid.parse_config("rocksdb-zip-100k")
    assert grid.parse_seconds("-86 ms [-1.09 s – 0.43 s]") == pytest.approx(-0.086)
    assert grid.parse_seconds("1.39 s [0.51 s – 2.15 s]") == pytest.approx(1.39)


def test_restating_rewrites_the_estimates_and_keeps_the_measures(tmp_path):
    config = grid.parse_config("hdfs-nosnap-100k-50B-p16", half="held-out")
    target = tmp_path / "work" / "ckpt" / config.name
    shutil.copytree(DEMO, target / "ckpt")
    (target / "setup.json").write_text(json.dumps({"seconds": 1.0}))
    page = tmp_path / "recovery.md"
    page.write_text(PAGE)
    changelog = grid.parse_config("rocksdb-changelog-3000k-50B-p16", half="held-out")
    grid.restate_docs(page, tmp_path / "work", [config, changelog])

    text = page.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| HDFS")
            or line.startswith("| RocksDB")]
    hdfs = [c.strip() for c in rows[0].strip("|").split("|")]
    model = DEFAULT_MODELS["hdfs"]
    est = estimate_recovery(open_checkpoint(str(target / "ckpt")), cores=grid.CORES,
                            model=model).restart_s
    assert grid.parse_seconds(hdfs[7]) == pytest.approx(est, abs=0.01)
    assert hdfs[6] == "2.00 s [1.50 s – 2.50 s]" and hdfs[9] == "1.80 s [0.20 s]"  # measured
    assert hdfs[8] == f"{grid.relative_error(est, 2.0):+.0%}"
    warm_est = est / grid.COLD_FACTOR["hdfs"]
    assert hdfs[11] == f"{grid.relative_error(warm_est, 1.8):+.0%}"
    # a row without a re-written checkpoint keeps its estimate; its range follows the
    # constants' low/high
    rocks = [c.strip() for c in rows[1].strip("|").split("|")]
    low, high = DEFAULT_MODELS["rocksdb"].low, DEFAULT_MODELS["rocksdb"].high
    assert rocks[7] == f"25.00 s [{grid.fmt_s(25 * low)} – {grid.fmt_s(25 * high)}]"
    assert rocks[8] == "+25%"
    # the summary is recomputed over every row, and the rest of the page is untouched
    shown = grid.parse_seconds(hdfs[7])  # the summary is of the table as printed
    errors = [grid.relative_error(shown, 2.0), 0.25]
    worst = max(max(1 + e, 1 / (1 + e)) if e > -1 else float("inf") for e in errors)
    assert f"- held-out, cold restarts: 2 configurations, median |error| " \
        f"{sum(abs(e) for e in errors) / 2:.0%}, worst factor {worst:.2f}×" in text
    assert "4.50×" not in text
    assert "| hdfs-nosnap-100k-50B-p16 | held-out | 100,000 | 45.4 MiB |" in text
    assert text.startswith("# page\n") and text.endswith("after\n")
