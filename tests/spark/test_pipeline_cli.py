"""`statekit pipeline run` end to end (in-process, reusing the test session's JVM)."""

from __future__ import annotations

import json

import pytest

from statekit.cli.main import cli
from statekit.cli.runner import run_cli

pytestmark = [pytest.mark.spark]

SMALL = ["--users", "60", "--events-per-batch", "40", "--new-users-per-batch", "2"]


def invoke(args, capsys):
    code = run_cli(cli, "statekit", args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_available_now_prints_a_json_summary(spark, tmp_path, capsys):
    landing = tmp_path / "landing"
    assert invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "3", *SMALL],
                  capsys)[0] == 0
    args = ["pipeline", "run", "--landing", str(landing), "--checkpoint", str(tmp_path / "ckpt"),
            "--output", str(tmp_path / "out"), "--partitions", "2",
            "--progress-log", str(tmp_path / "progress.jsonl"), "--json"]
    code, out, err = invoke(args, capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["batches_run"] == 4  # 3 files + the closing no-data batch
    assert summary["batch_ids"] == [0, 3]
    assert summary["input_rows"] == sum(
        len(p.read_text().splitlines()) for p in (landing / "events").iterdir())
    assert summary["state_keys"] >= 1
    assert summary["state_files"][".delta"] == 2 * 4
    progress = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [p["batchId"] for p in progress] == [0, 1, 2, 3]

    # Re-running on the drained input runs no batch and changes nothing.
    code, out, _ = invoke(args, capsys)
    assert code == 0
    again = json.loads(out)
    assert again["batches_run"] == 0
    assert again["sessions_closed_total"] == summary["sessions_closed_total"]

    # A different partition count on an existing checkpoint is pinned: say so.
    code, _, err = invoke([*args[:-1], "--partitions", "5"], capsys)
    assert code == 0
    assert "the checkpoint pins 2 partitions; --partitions 5 is ignored by Spark" in err


def _committed(checkpoint):
    """The batch ids of ``checkpoint/commits`` (Spark's own files, not its ``.crc`` ones)."""
    folder = checkpoint / "commits"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) \
        if folder.is_dir() else []


def test_live_processing_time_run_stops_at_the_timeout(spark, tmp_path, capsys):
    """A processing-time query never ends by itself: the run stops it at ``--stop-after`` and
    exits 0, and its summary is what the checkpoint committed. How many batches fit in the
    timeout depends on the machine and is not asserted; a later available-now run resumes
    where the timeout stopped the query and reads every remaining event once."""
    landing, ckpt = tmp_path / "landing", tmp_path / "ckpt"
    invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "2", *SMALL], capsys)
    base = ["pipeline", "run", "--landing", str(landing), "--checkpoint", str(ckpt),
            "--output", str(tmp_path / "out"), "--partitions", "2"]
    log = tmp_path / "progress.jsonl"
    code, out, err = invoke([*base, "--trigger", "processing-time", "--interval", "1 second",
                             "--stop-after", "12", "--progress-log", str(log), "--json"], capsys)
    assert code == 0, err
    assert not [q for q in spark.streams.active if q.name == "reference_fraud_sessions"]
    summary = json.loads(out)
    committed = _committed(ckpt)
    assert committed == list(range(len(committed)))
    assert summary["batches_run"] == len(committed)
    assert summary["batch_ids"] == ([0, committed[-1]] if committed else [])
    progress = [json.loads(line) for line in log.read_text().splitlines()]
    assert [p["batchId"] for p in progress] == committed
    assert summary["input_rows"] == sum(p["numInputRows"] for p in progress)

    code, out, err = invoke([*base, "--json"], capsys)  # available-now: drain the rest
    assert code == 0, err
    rest = json.loads(out)
    after = _committed(ckpt)
    assert after == list(range(len(after))) and after[:len(committed)] == committed
    assert rest["batches_run"] == len(after) - len(committed)
    if rest["batches_run"]:
        assert rest["batch_ids"] == [len(committed), after[-1]]
    assert summary["input_rows"] + rest["input_rows"] == sum(
        len(p.read_text().splitlines()) for p in (landing / "events").iterdir())


def test_a_failing_query_is_one_line_with_exit_code_8(spark, tmp_path, capsys):
    landing = tmp_path / "landing"
    invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "1", *SMALL], capsys)
    # An output path that is a file: Spark cannot create the sink folder.
    (tmp_path / "out").write_text("a file, not a folder")
    code, _, err = invoke(["pipeline", "run", "--landing", str(landing), "--checkpoint",
                           str(tmp_path / "ckpt"), "--output", str(tmp_path / "out"),
                           "--partitions", "2"], capsys)
    assert code == 8
    lines = [line for line in err.splitlines() if line.startswith("statekit: error:")]
    assert len(lines) == 1
    assert "the reference pipeline query failed" in lines[0]
    assert "Traceback" not in err
