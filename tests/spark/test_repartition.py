"""``statekit repartition`` on real checkpoints: verified targets, untouched sources, and the
same output as the source when both are restarted on the same new input.

Every checkpoint here is a shared build of the run (``reference_checkpoints``), read only.
A repartitioned query of each stateful operator restarting into the same output and state
as its source (4 → 7 partitions; HDFS, RocksDB, RocksDB with changelogs) is the migrate
matrix's (tests/spark/test_migrate.py, on the shared ``sources``: ``make test`` judges a
covering sample of it, ``make test-oracle`` all of it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.cli.runner import run_cli
from tests.conftest import TEST_PARTITIONS
from tests.support.restarts import (
    PipelineRun,
    assert_crashes_leave_nothing,
    assert_target_restarts_like_the_source,
    crash_runner,
)
from tests.support.spark_runs import landing_after
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]


def _cli():
    from statekit.cli.main import cli

    return cli


def repartition(src: Path, dst: Path, n: int, *extra: str) -> dict:
    import io
    from contextlib import redirect_stdout

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = run_cli(_cli(), "statekit", ["repartition", str(src), "--partitions", str(n),
                                            "--out", str(dst), "--force", "--json", *extra])
    assert code == 0, buffer.getvalue()
    return json.loads(buffer.getvalue())


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_reference_pipeline_repartitioned_restarts_identically(spark, reference_checkpoints,
                                                               tmp_path, provider):
    """The shared reference run (4 partitions) into 3, with its file sink: the target, and
    a copy of the source, restarted on the same new landing files write the same alerts and
    sessions. (Into more partitions, 4 → 7, is the migrate matrix's ``*-repartition``:
    ``fmgws`` the same operator, applyInPandasWithState.)"""
    shared = reference_checkpoints.get(provider)
    # the shared landing is read only: the restarts read the generator's next files from
    # a folder of their own (the checkpoint's source log names the files it already read)
    run = PipelineRun(tmp_path, landing_after(shared.landing, tmp_path / "landing"),
                      shared.checkpoint, shared.output, provider, TEST_PARTITIONS)
    after = 3
    source_hash = tree_hash(run.checkpoint)
    target = tmp_path / "target"
    target_out = tmp_path / "target-out"
    shutil.copytree(run.output, target_out)
    result = repartition(run.checkpoint, target, after, "--file-sink", str(target_out))
    assert result["file_sink_entry"].startswith(str(target_out))
    assert tree_hash(run.checkpoint) == source_hash  # the source is never written
    check = result["verification"]
    assert check["ok"] and check["metadata_partitions"] and \
        set(check["metadata_partitions"]) == {after}
    assert all(s["missing"] == s["extra"] == s["misplaced"] == 0 for s in check["stores"])
    target_ckpt = open_checkpoint(str(target))
    n = result["plan"]["last_committed"]
    assert target_ckpt.last_committed_batch == n + 1
    assert target_ckpt.offset(n + 1).shuffle_partitions == after
    assert sorted(i.partition for i in target_ckpt.inventory.instances_of(0, "default")) == \
        list(range(after))
    assert {f.version for f in target_ckpt.inventory.all_files() if f.kind != "sst"} == {n + 2}
    assert not list(tmp_path.glob(".*statekit-staging"))

    # the source restarts on a copy of itself (and of its sink) in tmp_path
    assert_target_restarts_like_the_source(spark, run, target, target_out, tmp_path)
    assert tree_hash(run.checkpoint) == source_hash


def test_dry_run_counts_keys_per_new_partition_and_writes_nothing(reference_checkpoints,
                                                                  tmp_path):
    run = reference_checkpoints.get("hdfs")
    result = repartition(run.checkpoint, tmp_path / "dst", 3, "--dry-run")
    assert result["dry_run"] and not (tmp_path / "dst").exists()
    counts = result["plan"]["keys_per_partition"]["0/default"]
    assert len(counts) == 3 and sum(counts) == run.result.state_keys()
    sizes = result["plan"]["bytes_per_partition"]["0/default"]
    assert len(sizes) == 3 and all(s > 0 for s in sizes)
    assert result["plan"]["estimate"]["seconds"] > 0 and result["plan"]["files_to_write"] > 3


def test_refusals_write_nothing(reference_checkpoints, tmp_path, capsys):
    import time

    source = tmp_path / "src"
    shutil.copytree(reference_checkpoints.get("hdfs").checkpoint, source)
    # the newest batch started just now: the query looks live
    newest = max(int(p.name) for p in (source / "offsets").iterdir() if p.name.isdigit())
    lines = (source / "offsets" / str(newest)).read_text().split("\n")
    meta = json.loads(lines[1])
    meta["batchTimestampMs"] = int(time.time() * 1000) - 5_000
    lines[1] = json.dumps(meta)
    (source / "offsets" / str(newest)).write_text("\n".join(lines))
    (source / "offsets" / f".{newest}.crc").unlink(missing_ok=True)
    before = tree_hash(source)
    args = ["repartition", str(source), "--out", str(tmp_path / "dst")]
    assert run_cli(_cli(), "statekit", [*args, "--partitions", "4", "--force"]) == 6
    assert "already has 4 partitions" in capsys.readouterr().err
    assert run_cli(_cli(), "statekit", [*args, "--partitions", "2"]) == 6
    assert "looks live" in capsys.readouterr().err
    assert tree_hash(source) == before and not (tmp_path / "dst").exists()


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_fault_injection_leaves_no_target_and_a_rerun_completes(spark, reference_checkpoints,
                                                                 tmp_path, provider):
    """A failure at every write step (each file, the Spark job, the publish) leaves no
    target and no staging folder; the source is untouched; a rerun completes."""
    source = reference_checkpoints.get(provider).checkpoint
    before = tree_hash(source)
    attempt = crash_runner(spark, open_checkpoint(str(source)), tmp_path, 2)
    plan, steps, result = attempt("ok", None)
    assert result.verification.ok and (tmp_path / "ok" / "commits").exists()
    failures = steps if provider == "hdfs" else ["spark repartition", steps[0], "publish"]
    if provider == "hdfs":
        failures = [*failures, *(f"write state/0/{p}/{plan.state_version}.snapshot"
                                 for p in range(2))]
    assert ("publish" in failures and len(failures) > 5) or provider == "rocksdb"
    assert_crashes_leave_nothing(attempt, failures, tmp_path)
    assert tree_hash(source) == before


@pytest.mark.parametrize("variant", [None, "format-v2"])
def test_rocksdb_changelog_checkpoint_repartition_verified(reference_checkpoints, tmp_path,
                                                           variant):
    """Changelog checkpointing, also with checkpointFormatVersion 2 (``<v>_<uuid>`` files and
    commit-log unique ids)."""
    run = reference_checkpoints.get("rocksdb", changelog=True, variant=variant)
    before = tree_hash(run.checkpoint)
    result = repartition(run.checkpoint, tmp_path / "dst", 3)
    assert result["verification"]["ok"]
    assert result["verification"]["stores"][0]["target_rows"] == run.result.state_keys()
    assert tree_hash(run.checkpoint) == before
    target = open_checkpoint(str(tmp_path / "dst"))
    assert target.last_committed_batch == result["plan"]["repartition_batch"]
    assert sorted({i.partition for i in target.inventory.instances.values()}) == [0, 1, 2]


def _reader_confs_now(spark) -> dict[str, str | None]:
    from statekit.jobs.state_reader import CHANGELOG_CONF, FORMAT_VERSION_CONF

    return {key: spark.conf.get(key, None) for key in (CHANGELOG_CONF, FORMAT_VERSION_CONF)}


def test_reader_confs_are_set_for_the_run_and_restored_after(spark, reference_checkpoints,
                                                             tmp_path, capsys):
    """The action sets what Spark's readers need (changelog checkpointing, format v2) only
    while it runs, through the CLI as through the shared function; the session keeps its
    own values afterwards."""
    from statekit.jobs.actions.repartition import prepare
    from statekit.jobs.actions.repartition import run as run_action
    from statekit.jobs.state_reader import CHANGELOG_CONF, FORMAT_VERSION_CONF

    ckpt_dir = reference_checkpoints.get("rocksdb", changelog=True, variant="format-v2").checkpoint
    spark.conf.set(CHANGELOG_CONF, "false")
    spark.conf.unset(FORMAT_VERSION_CONF)
    try:
        before = _reader_confs_now(spark)
        during: list[dict[str, str | None]] = []
        prepared = prepare(open_checkpoint(str(ckpt_dir)), resolve(str(tmp_path / "dst")), 3,
                           force=True)
        outcome = run_action(spark, prepared, dry_run=True,
                             progress=lambda _m: during.append(_reader_confs_now(spark)))
        assert sum(outcome.plan.keys_per_partition["0/default"]) > 0
        assert during and all(d == {CHANGELOG_CONF: "true", FORMAT_VERSION_CONF: "2"}
                              for d in during)
        assert _reader_confs_now(spark) == before
        result = repartition(ckpt_dir, tmp_path / "dst-cli", 3, "--dry-run")
        assert result["dry_run"] and _reader_confs_now(spark) == before
    finally:
        spark.conf.unset(CHANGELOG_CONF)


def test_dry_run_on_a_truncated_delta_is_one_line(reference_checkpoints, tmp_path, capsys):
    """Spark cannot load the state: the dry run names the damaged file in one line (exit 4),
    not a stack."""
    source = tmp_path / "src"
    shutil.copytree(reference_checkpoints.get("hdfs", variant="no-snapshot").checkpoint, source)
    newest = max(source.glob("state/0/0/*.delta"), key=lambda p: int(p.stem))
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    before = tree_hash(source)
    code = run_cli(_cli(), "statekit", ["repartition", str(source), "--partitions", "3",
                                        "--out", str(tmp_path / "dst"), "--force", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 4, err
    assert err.startswith(f"statekit: error: {newest}: ")
    assert len(err.strip().splitlines()) == 1 and len(err) < 1000
    assert tree_hash(source) == before and not (tmp_path / "dst").exists()
