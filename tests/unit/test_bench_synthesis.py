"""The report benchmark's synthetic checkpoints must be ones that restart.

``benchmarks/bench_report.py`` (and ``bench_object_store.py``) time statekit on a checkpoint
of hundreds of partitions built from a small real one's files. When the soundness checks
learned that offsets pointing past the file source's log stop a restart, the synthetic
checkpoint (no ``sources/``) became one that will not restart: the report exited 12 and the
benchmark stopped; and its snapshots sat beside deltas of other versions, which the doctor
rightly calls damaged pairs. Built here from the frozen ``make demo`` checkpoint, JVM-free.
"""

from __future__ import annotations

from pathlib import Path

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.soundness import raise_if_unsound
from statekit.doctor import diagnose
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo" / "checkpoint"


def _bench_report():
    return load_script("benchmarks/bench_report.py")


def test_a_synthesized_checkpoint_restarts(tmp_path):
    big = _bench_report().synthesize(DEMO, tmp_path / "big", partitions=6, versions=25)
    checkpoint = open_checkpoint(str(big))
    assert checkpoint.last_committed_batch == 24
    raise_if_unsound(checkpoint)  # the state commands' check
    # healthy, as the benchmark's "healthy" doctor column says: no fatal problem (what makes
    # `statekit report` exit 12) and no warning either (a snapshot beside a delta Spark did
    # not write with it is a damaged pair, and checking it is not the healthy path's cost)
    problems = diagnose(checkpoint, decode=True, fix=False).problems
    assert not problems, [(p.severity, p.code) for p in problems]
    log = sorted(p.name for p in (big / "sources" / "0").iterdir())
    assert "9.compact" in log and "19.compact" in log and "24" in log and "9" not in log
    assert (big / "sources/0/19.compact").read_text().count('"batchId"') == 20
