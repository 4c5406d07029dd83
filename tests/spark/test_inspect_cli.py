"""The inspect commands (report, batches, schema, ls, dump) on real checkpoints, end to end:
exact outputs that could be wrong, exit codes for bad input, and the source left untouched."""

from __future__ import annotations

import json
import shutil

import pytest

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from tests.spark.real_checkpoints import checkpoint_for
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]


def invoke(args: list[str], capsys) -> tuple[int, str, str]:
    code = run_cli(cli, "statekit", [str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", ["hdfs", "rocksdb-changelog-v2", "join"])
def test_every_command_leaves_the_checkpoint_byte_identical(name, reference_checkpoints,
                                                            small_queries, capsys, tmp_path):
    # A copy: the shared session's state-store maintenance thread may still upload RocksDB
    # snapshots into the original after its query stopped.
    ckpt = tmp_path / "ck"
    shutil.copytree(checkpoint_for(name, reference_checkpoints, small_queries), ckpt)
    before = tree_hash(ckpt)
    store = ["--store", "left-keyToNumValues"] if name == "join" else []
    a_file = next(p for p in sorted((ckpt / "state" / "0" / "1").rglob("*"))
                  if p.suffix in (".delta", ".changelog") and not p.name.startswith("."))
    for args in (["report", ckpt], ["report", ckpt, "--json"], ["batches", ckpt],
                 ["batches", ckpt, "--json"], ["schema", ckpt], ["schema", ckpt, "--json"],
                 ["ls", ckpt, "--partition", 1, *store], ["ls", ckpt, "--partition", 1, "--json",
                                                          *store],
                 ["dump", a_file], ["dump", a_file, "--json"]):
        code, _out, err = invoke(args, capsys)
        assert code == 0, (args, err)
    assert tree_hash(ckpt) == before


def test_report_json_matches_the_run(reference_checkpoints, capsys):
    run = reference_checkpoints.get("hdfs")
    code, out, _ = invoke(["report", run.checkpoint, "--json", "--min-deltas", "3"], capsys)
    data = json.loads(out)
    assert code == 0
    executed = [p["batchId"] for p in run.result.progress]
    assert data["last_committed_batch"] == executed[-1]
    assert data["committed_batches"] == executed
    (store,) = data["stores"]
    assert store["operator_name"] == "applyInPandasWithState"
    assert [p["partition"] for p in store["partitions"]] == list(range(4))
    assert all(p["versions_since_snapshot"] <= 6 for p in store["partitions"])
    assert data["findings"] == []


def test_report_narrows_to_one_partition(reference_checkpoints, capsys):
    ckpt = reference_checkpoints.get("rocksdb").checkpoint
    code, out, _ = invoke(["report", ckpt, "--json", "--partition", 2, "--operator", 0], capsys)
    (store,) = json.loads(out)["stores"]
    assert code == 0 and [p["partition"] for p in store["partitions"]] == [2]
    code, _, err = invoke(["report", ckpt, "--json", "--operator", 7], capsys)
    assert code == 3 and "no operator 7 (operators: 0)" in err  # not an empty table
    code, _, err = invoke(["report", ckpt, "--partition", 4], capsys)
    assert code == 3 and "no partition 4: the state has partitions 0..3" in err


def test_dump_decodes_the_reference_state(reference_checkpoints, capsys):
    ckpt = reference_checkpoints.get("hdfs").checkpoint
    snapshot = sorted((ckpt / "state/0/0").glob("*.snapshot"), key=lambda p: int(p.stem))[-1]
    code, out, _ = invoke(["dump", snapshot, "--json"], capsys)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and rows and all(r["op"] == "put" for r in rows)
    assert all(r["key"]["user_id"].startswith("u") for r in rows)
    phases = {r["value"]["groupState"]["phase"] for r in rows}
    assert phases <= {"Watching", "Suspicious", "Flagged"}
    assert all(r["value"]["timeoutTimestamp"] > 0 for r in rows)


def test_corrupt_and_broken_inputs_are_one_line_errors(reference_checkpoints, tmp_path,
                                                       capsys):
    copy = tmp_path / "ck"
    shutil.copytree(reference_checkpoints.get("hdfs").checkpoint, copy)
    delta = sorted((copy / "state/0/2").glob("*.delta"), key=lambda p: int(p.stem))[-1]
    delta.write_bytes(delta.read_bytes()[:40])
    code, _, err = invoke(["dump", delta], capsys)
    assert code == 4 and err.startswith(f"statekit: error: {delta}: ") and err[-1] == "\n"
    assert err.count("\n") == 1
    offsets = sorted((copy / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1]
    offsets.write_text("v1\n{broken")
    code, out, err = invoke(["report", copy, "--json"], capsys)  # a finding, named
    [finding] = [f for f in json.loads(out)["findings"] if f["code"] == "corrupt-log"]
    assert (err, finding["severity"], finding["path"]) == ("", "error", str(offsets))
    # and the doctor's answer, as its exit code: the rollback to the batch before fixes it
    assert (code, json.loads(out)["restart"]["verdict"]) == (11, "will not restart")
    code, _, err = invoke(["growth", copy], capsys)  # what computes from it stops
    assert (code, err) == (4, f"statekit: error: {offsets}: invalid JSON on line 2: "
                              "Expecting property name enclosed in double quotes (column 2); "
                              "a restart reads this file and fails (statekit report lists "
                              "every problem)\n")
    code, _, err = invoke(["report", tmp_path / "nothing-here"], capsys)
    assert (code, err) == (3, f"statekit: error: {tmp_path / 'nothing-here'}: no such file "
                              "or folder\n")
    code, _, err = invoke(["report", copy / "state"], capsys)
    assert code == 3 and "not a Structured Streaming checkpoint" in err
    (copy / "metadata").unlink()
    code, out, err = invoke(["batches", copy], capsys)  # the table, and the verdict on it
    flat = " ".join(out.split())
    assert (code, err) == (0, "") and "restart: will not restart" in flat
    assert f"{copy}/metadata" in flat
