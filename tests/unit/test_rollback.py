"""Rollback planning and copying without a JVM: which batches are possible, what is copied,
what is refused, and that a crash at any write step leaves nothing."""

from __future__ import annotations

import json
from dataclasses import replace

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.jobs.rollback import run_rollback
from statekit.support.errors import BadInput, UnsafeOperation
from statekit.writes.rollback import plan_rollback, rollback_choices, write_rollback
from statekit.writes.staging import Staging
from tests.support.builders import rollback_source
from tests.support.trees import tree_hash
from tests.unit.checkpoint_builder import write_checkpoint

LONG_AGO = 1_700_000_000_000 + 10**9


def test_choices_follow_the_retained_state_files(tmp_path):
    root = rollback_source(tmp_path)
    (root / "state" / "0" / "1" / "2.delta").unlink()  # versions 2 and 3 cannot be rebuilt
    choices = {c.batch: c for c in rollback_choices(open_checkpoint(str(root)))}
    assert sorted(choices) == [0, 1, 2, 3, 4, 5]  # committed batches only
    assert [b for b, c in sorted(choices.items()) if c.possible] == [0, 3, 4, 5]
    assert "state version 2 of operator 0 store default partition 1" in choices[1].reason


def test_a_compacted_file_source_log_limits_the_choices(tmp_path):
    root = rollback_source(tmp_path)
    folder = root / "sources" / "0"
    lines = [(folder / str(b)).read_text().split("\n")[1] for b in range(4)]
    (folder / "3.compact").write_text("v1\n" + "\n".join(lines))
    (folder / "3").unlink()
    for b in (0, 1):  # deleted after the compaction, as Spark does
        (folder / str(b)).unlink()
    choices = {c.batch: c for c in rollback_choices(open_checkpoint(str(root)))}
    assert [b for b, c in sorted(choices.items()) if c.possible] == [3, 4, 5]
    assert "compacted at batch 3" in choices[2].reason and "0, 1" in choices[2].reason


def test_plan_copies_the_logs_up_to_the_batch_and_the_state_that_loads_it(tmp_path):
    root = rollback_source(tmp_path)
    ckpt = open_checkpoint(str(root))
    plan = plan_rollback(ckpt, resolve(str(tmp_path / "dst")), 2, now_ms=LONG_AGO)
    assert plan.copied[-1] == "commits/2" and plan.dropped_batches == (3, 4, 5, 6)
    assert plan.reruns == "the query runs batches 3…6 again"
    assert replace(plan, dropped_batches=(3,)).reruns == "the query runs batch 3 again"
    assert replace(plan, dropped_batches=()).reruns == "the query runs no batch again"
    assert {p for p in plan.copied if p.startswith(("offsets/", "commits/"))} == \
        {"offsets/0", "offsets/1", "offsets/2", "commits/0", "commits/1", "commits/2"}
    assert {p for p in plan.copied if p.startswith("sources/")} == \
        {"sources/0/0", "sources/0/1", "sources/0/2"}
    state = {p for p in plan.copied if p.startswith("state/") and p.endswith(".delta")}
    assert state == {f"state/0/{part}/{v}.delta" for part in range(4) for v in (1, 2, 3)}
    before = tree_hash(root)
    staging = Staging(resolve(str(tmp_path / "dst")), ckpt.location.url)
    staging.prepare()
    staging.publish(last=write_rollback(ckpt, plan, staging))
    target = open_checkpoint(str(tmp_path / "dst"))
    assert target.last_committed_batch == 2 and max(target.planned_batches) == 2
    assert (tmp_path / "dst" / "state" / "0" / "0" / "3.delta").read_bytes() == \
        (root / "state" / "0" / "0" / "3.delta").read_bytes()
    assert tree_hash(root) == before


@pytest.mark.parametrize(("batch", "error", "text"), [
    (6, BadInput, "batch 6 is not committed"),
    (9, BadInput, "not committed (committed batches: 0…5)"),
    (1, BadInput, "cannot roll back to batch 1: state version 2"),
])
def test_impossible_batches_are_refused_in_one_line(tmp_path, batch, error, text):
    root = rollback_source(tmp_path)
    (root / "state" / "0" / "1" / "2.delta").unlink()
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")):
        plan_rollback(open_checkpoint(str(root)), resolve(str(tmp_path / "dst")), batch,
                      now_ms=LONG_AGO)
    assert not (tmp_path / "dst").exists()


def test_target_inside_the_source_or_not_empty_is_refused(tmp_path):
    root = rollback_source(tmp_path)
    ckpt = open_checkpoint(str(root))
    with pytest.raises(UnsafeOperation, match="inside the source"):
        plan_rollback(ckpt, resolve(str(root / "x")), 2, now_ms=LONG_AGO)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(UnsafeOperation, match="not empty"):
        plan_rollback(ckpt, resolve(str(tmp_path / "full")), 2, now_ms=LONG_AGO)


def test_a_crash_at_any_write_step_leaves_nothing(tmp_path):
    root = rollback_source(tmp_path)
    ckpt = open_checkpoint(str(root))
    plan = plan_rollback(ckpt, resolve(str(tmp_path / "dst")), 3, now_ms=LONG_AGO)
    steps = [f"write {p}" for p in plan.copied] + ["publish"]
    for step in steps:
        def hook(name, step=step):
            if name == step:
                raise RuntimeError(f"injected crash at {name}")
        staging = Staging(resolve(str(tmp_path / "dst")), ckpt.location.url, hook)
        with pytest.raises(RuntimeError, match="injected"):
            run_rollback(None, ckpt, plan, staging)  # no Spark: copied, not verified
        assert not (tmp_path / "dst").exists(), step
        assert not (tmp_path / ".dst.statekit-staging").exists(), step
    result = run_rollback(None, ckpt, plan, Staging(resolve(str(tmp_path / "dst")),
                                                    ckpt.location.url))
    assert result.checks is None
    assert open_checkpoint(str(tmp_path / "dst")).last_committed_batch == 3


def test_cli_lists_plans_and_copies_without_a_jvm(tmp_path, capsys):
    """``--list``, ``--dry-run`` and ``--no-verify`` never start Spark (this unit suite has
    no JVM); a missing ``--to-batch`` is a usage error."""
    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    root = rollback_source(tmp_path)
    (root / "state" / "0" / "1" / "2.delta").unlink()
    before = tree_hash(root)

    def statekit(*args):
        code = run_cli(cli, "statekit", ["rollback", str(root), *args, "--force"])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = statekit("--list", "--json")
    assert code == 0
    assert [(c["batch"], c["possible"]) for c in json.loads(out)] == \
        [(5, True), (4, True), (3, True), (2, False), (1, False), (0, True)]
    code, out, _ = statekit("--to-batch", "4", "--out", str(tmp_path / "dst"), "--dry-run",
                            "--json")
    assert code == 0 and json.loads(out)["plan"]["dropped_batches"] == [5, 6]
    assert not (tmp_path / "dst").exists()
    # the text dry run ends with the command that writes it for real
    code, out, _ = statekit("--to-batch", "4", "--out", str(tmp_path / "dst"), "--dry-run")
    assert "the query runs batches 5…6 again" in " ".join(out.split())
    (step,) = [line for line in out.splitlines() if line.startswith("next: ")]
    assert step.split("  #")[0] == (f"next: statekit rollback {root} --to-batch 4 --out "
                                    f"{tmp_path / 'dst'} --force")
    # a target with content is a note on a dry run, the refusal on the real run
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    code, out, _ = statekit("--to-batch", "4", "--out", str(tmp_path / "busy"), "--dry-run")
    assert code == 0 and "the real run needs another --out" in " ".join(out.split())
    code, _, err = statekit("--to-batch", "4", "--out", str(tmp_path / "busy"))
    assert code != 0 and "exists and is not empty" in err
    code, out, _ = statekit("--to-batch", "4", "--out", str(tmp_path / "dst"), "--no-verify",
                            "--json")
    assert code == 0 and json.loads(out)["verification"] is None
    assert open_checkpoint(str(tmp_path / "dst")).last_committed_batch == 4
    code, _, err = statekit("--out", str(tmp_path / "other"))
    assert code == 2 and "--to-batch" in err
    assert tree_hash(root) == before


def v2_source(tmp_path):
    """A checkpoint format v2 layout (one RocksDB partition): ``<v>_<id>`` changelogs for
    versions 1–5, a zip at 2, commits naming each version's id — and a retried version 4
    whose files carry an id no commit names."""
    from tests.unit.checkpoint_builder import REAL_ZIP_FILE

    root = tmp_path / "v2"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=5, committed=5,
                     partitions=1, provider="rocksdb")
    folder = root / "state" / "0" / "0"
    for zipped in folder.glob("*.zip"):
        zipped.unlink()
    ids = {v: f"{v}{v}{v}{v}{v}{v}{v}{v}-aaaa-bbbb-cccc-000000000000" for v in range(1, 6)}
    for v, uid in ids.items():
        (folder / f"{v}_{uid}.changelog").write_bytes(b"c" * 50)
        (root / "commits" / str(v - 1)).write_text(
            "v2\n" + json.dumps({"nextBatchWatermarkMs": 0, "stateUniqueIds": {"0": [[uid]]}}))
    (folder / f"2_{ids[2]}.zip").write_bytes(REAL_ZIP_FILE.read_bytes())
    stray = "99999999-aaaa-bbbb-cccc-000000000000"
    (folder / f"4_{stray}.changelog").write_bytes(b"x" * 50)
    (folder / f"4_{stray}.zip").write_bytes(REAL_ZIP_FILE.read_bytes())
    return root, ids


def test_format_v2_copies_the_files_the_commit_log_names(tmp_path):
    root, ids = v2_source(tmp_path)
    ckpt = open_checkpoint(str(root))
    plan = plan_rollback(ckpt, resolve(str(tmp_path / "dst")), 3, force=True)
    state = sorted(p.rsplit("/", 1)[-1] for p in plan.copied
                   if p.startswith("state/0/0/") and "_" in p.rsplit("/", 1)[-1]
                   and not p.endswith(".sst"))
    # version 4 = the zip at 2 (its id named by commits/1), then the changelogs 3 and 4
    assert state == [f"2_{ids[2]}.zip", f"3_{ids[3]}.changelog", f"4_{ids[4]}.changelog"]
    assert any(p.endswith(".sst") for p in plan.copied)  # the SSTs the zip names
    (root / "state" / "0" / "0" / f"3_{ids[3]}.changelog").unlink()
    choices = {c.batch: c for c in rollback_choices(open_checkpoint(str(root)))}
    assert [b for b, c in sorted(choices.items()) if c.possible] == [0, 1]
    assert "named by the commit log" in choices[3].reason
