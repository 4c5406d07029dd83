"""Restart proofs for rewritten checkpoints: the reference pipeline restarted on a target and on
a copy of its source, and crashes injected at every write step of a repartition.

Lives here rather than in a test module because the repartition, migrate and TUI tests all
prove a target the same way (``pipeline_run``, ``assert_target_restarts_like_the_source``)
and crash a rewrite the same way (``crash_runner``, ``assert_crashes_leave_nothing``).
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from statekit.checkpoint.location import resolve

PIPELINE_BATCHES = 6


@dataclass
class PipelineRun:
    root: Path
    landing: Path
    checkpoint: Path
    output: Path
    provider: str
    partitions: int


def pipeline_run(spark, root: Path, provider: str, partitions: int) -> PipelineRun:
    """The reference pipeline over a private landing folder (restarts append to it)."""
    from statekit.reference_pipeline.generator import generate
    from statekit.reference_pipeline.pipeline import RunOptions, run
    from tests.conftest import TEST_GENERATOR, quiesce

    landing = root / "landing"
    generate(landing, TEST_GENERATOR, PIPELINE_BATCHES)
    opts = RunOptions(landing=landing, checkpoint=str(root / "checkpoint"),
                      output=str(root / "output"), provider=provider, partitions=partitions,
                      min_deltas_for_snapshot=3)
    run(spark, opts)
    quiesce(spark, opts.checkpoint)
    return PipelineRun(root, landing, root / "checkpoint", root / "output", provider,
                       partitions)


def restart_pipeline(spark, run: PipelineRun, checkpoint: Path, output: Path) -> list[tuple]:
    """Run the pipeline on ``checkpoint`` until the landing folder is drained; the rows of
    the output files this restart wrote (alerts and sessions), sorted."""
    from statekit.reference_pipeline.pipeline import RunOptions
    from statekit.reference_pipeline.pipeline import run as run_pipeline
    from tests.conftest import quiesce

    opts = RunOptions(landing=run.landing, checkpoint=str(checkpoint), output=str(output),
                      provider=run.provider, partitions=run.partitions,
                      min_deltas_for_snapshot=3)
    before = {p.name for p in output.rglob("*.parquet")}
    run_pipeline(spark, opts)
    quiesce(spark, str(checkpoint))
    written = [str(p) for p in output.rglob("*.parquet") if p.name not in before]
    rows = spark.read.parquet(*written).collect() if written else []
    return sorted(tuple(str(v) for v in r) for r in rows)


def assert_target_restarts_like_the_source(spark, run: PipelineRun, target: Path,
                                           target_out: Path, tmp_path: Path) -> None:
    """The same new input into the source (restarted on a copy) and the target: the target's
    new output rows (alerts and sessions) must equal the source's."""
    from statekit.reference_pipeline.generator import generate
    from tests.conftest import TEST_GENERATOR

    generate(run.landing, TEST_GENERATOR, 2)
    source_copy, source_out = tmp_path / "src-copy", tmp_path / "src-out"
    shutil.copytree(run.checkpoint, source_copy)
    shutil.copytree(run.output, source_out)
    expected = restart_pipeline(spark, run, source_copy, source_out)
    got = restart_pipeline(spark, run, target, target_out)
    assert got == expected and len(expected) > 5


def crash_runner(spark, ckpt, tmp_path: Path, partitions: int, **plan_options):
    """``attempt(name, fail)``: plan and run into ``tmp_path/name``, crashing (the staging
    hook raises) at write step ``fail`` (``"<step>#2"``: its second occurrence; None: no
    crash); returns (plan, steps, result), each repeated step named with its occurrence."""
    from statekit.jobs.repartition import run_repartition
    from statekit.jobs.state_reader import reader_confs, session_confs
    from statekit.writes.repartition_plan import plan_repartition
    from statekit.writes.staging import Staging

    def attempt(name: str, fail: str | None):
        target = resolve(str(tmp_path / name))
        plan = plan_repartition(ckpt, target, partitions, force=True, **plan_options)
        steps: list[str] = []
        seen: Counter = Counter()

        def hook(step):
            seen[step] += 1
            steps.append(step if seen[step] == 1 else f"{step}#{seen[step]}")
            if steps[-1] == fail:
                raise RuntimeError(f"injected crash at {steps[-1]}")
        with session_confs(spark, reader_confs(ckpt)):
            result = run_repartition(spark, ckpt, plan, Staging(target, ckpt.location.url, hook),
                                     storage_options={}, check=fail in (None, "publish"),
                                     fail_on=fail)
        return plan, steps, result

    return attempt


def assert_crashes_leave_nothing(attempt, failures: list[str], tmp_path: Path) -> None:
    """A crash at each of ``failures`` leaves no target and no staging folder; a rerun
    after them completes."""
    for number, step in enumerate(failures):
        with pytest.raises(Exception, match="injected"):
            attempt(f"t{number}", step)
        assert not (tmp_path / f"t{number}").exists(), step
        assert not list(tmp_path.glob(f".t{number}.statekit-staging")), step
    _, _, again = attempt("t0", None)  # the rerun after a crash completes
    assert again.verification.ok and (tmp_path / "t0" / "commits").exists()
