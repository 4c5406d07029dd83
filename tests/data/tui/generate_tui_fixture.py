"""Regenerate ``tests/data/tui/reference_hdfs``: the checkpoint the TUI's snapshot tests show.

Snapshot tests compare rendered screens with SVGs stored in the repository, so the checkpoint
behind them must not change between runs: a run of the reference pipeline carries a fresh
query id, fresh batch timestamps and, for snapshots written by the maintenance task, timing-
dependent files. This checkpoint was written once by the reference pipeline itself and is kept
as written: the leaky variant with no snapshot (minDeltasForSnapshot 1000), so the Growth,
Overview and Recovery screens have something to say and no file depends on maintenance timing.
Beside it, ``reference_hdfs.progress.jsonl``: the same run's StreamingQueryProgress log (one
JSON object per batch, as a listener writes it), which the Query screen charts.

Not a test: run by hand, ``python tests/data/tui/generate_tui_fixture.py``, then refresh the
stored screens with ``STATEKIT_UPDATE_SNAPSHOTS=1 pytest tests/tui/test_snapshots.py`` and look
at every changed SVG before committing it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from statekit.jobs.session import build_session
from statekit.reference_pipeline.generator import GeneratorConfig, generate
from statekit.reference_pipeline.pipeline import RunOptions, run

HERE = Path(__file__).resolve().parent
TARGET = HERE / "reference_hdfs"
PROGRESS = HERE / "reference_hdfs.progress.jsonl"
CONFIG = GeneratorConfig(seed=5, users=120, new_users_per_batch=4, events_per_batch=60,
                         fraud_per_batch=1.0, near_miss_per_batch=1.0)
BATCHES = 12


def main() -> None:
    spark = build_session("tui-fixture", conf={
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
    })
    with tempfile.TemporaryDirectory() as tmp:
        landing = Path(tmp) / "landing"
        generate(landing, CONFIG, BATCHES)
        checkpoint = Path(tmp) / "checkpoint"
        run(spark, RunOptions(landing=landing, checkpoint=str(checkpoint),
                              output=str(Path(tmp) / "output"), provider="hdfs", partitions=4,
                              min_deltas_for_snapshot=1000, leaky=True,
                              progress_log=PROGRESS))
        # Unload the providers so maintenance stops writing into the checkpoint, then keep it.
        getattr(spark._jvm, "org.apache.spark.sql.execution.streaming.state.StateStore").stop()
        spark.stop()
        shutil.rmtree(TARGET, ignore_errors=True)
        shutil.copytree(checkpoint, TARGET)
    files = [p for p in TARGET.rglob("*") if p.is_file()]
    print(f"{TARGET}: {len(files)} files, {sum(p.stat().st_size for p in files):,} bytes")


if __name__ == "__main__":
    main()
