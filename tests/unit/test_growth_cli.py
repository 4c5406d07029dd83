"""``statekit growth`` without a JVM: exit codes, bad input, progress-only use, JSON."""

from __future__ import annotations

import json

import fsspec
import pytest

from statekit.cli.main import cli
from statekit.cli.params import parse_size
from statekit.cli.runner import run_cli
from statekit.support.errors import BadInput
from statekit.support.presentation import sparkline
from tests.support.progress_logs import progress
from tests.unit.checkpoint_builder import write_checkpoint


def invoke(args, capsys) -> tuple[int, str, str]:
    code = run_cli(cli, "statekit", [str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_progress(path, totals):
    path.write_text("".join(json.dumps(progress(b, t)) + "\n" for b, t in enumerate(totals)))
    return path


def test_progress_log_alone_alerts_with_exit_10(tmp_path, capsys):
    log = write_progress(tmp_path / "p.jsonl", [1000 + 40 * b for b in range(20)])
    code, out, _ = invoke(["growth", "--progress-log", log, "--fail-on", "growing",
                           "--max-keys", 5000], capsys)
    assert code == 10
    assert "GROWING" in out or "ACCELERATING" in out
    assert "reaches max keys 5,000 in 81 batches" in out
    code, out, _ = invoke(["growth", "--progress-log", log, "--json"], capsys)
    assert code == 0 and json.loads(out)["progress"][0]["batches"] == 20


def test_bounded_progress_log_passes_fail_on(tmp_path, capsys):
    log = write_progress(tmp_path / "p.jsonl", [1000 + (b * 7919) % 50 for b in range(20)])
    code, out, _ = invoke(["growth", "--progress-log", log, "--fail-on", "growing"], capsys)
    assert code == 0 and "BOUNDED" in out


def test_fail_on_accelerating_ignores_linear_growth(tmp_path, capsys):
    log = write_progress(tmp_path / "p.jsonl", [1000 + 40 * b for b in range(20)])
    code, _, _ = invoke(["growth", "--progress-log", log, "--fail-on", "accelerating"], capsys)
    assert code == 0
    log = write_progress(tmp_path / "q.jsonl", [1000 + b ** 3 for b in range(20)])
    code, _, _ = invoke(["growth", "--progress-log", log, "--fail-on", "accelerating"], capsys)
    assert code == 10


@pytest.mark.parametrize("args,code,message", [
    (["growth"], 2, "give a checkpoint"),
    (["growth", "--deep", "--progress-log", "x"], 2, "--deep needs a checkpoint"),
    (["growth", "--progress-log", "{tmp}/missing.jsonl"], 3, "missing.jsonl: no such file"),
    (["growth", "--progress-log", "{tmp}"], 3, "is a folder"),
    (["growth", "{tmp}"], 3, "not a Structured Streaming checkpoint"),
    (["growth", "--progress-log", "{tmp}/bad.jsonl"], 4, "bad.jsonl: line 1 is not valid JSON"),
    (["growth", "--progress-log", "{tmp}/ok.jsonl", "--max-bytes", "lots"], 2,
     "Invalid value for '--max-bytes': cannot read 'lots' as a size"),
    # usage errors come before any work (the missing checkpoint is never opened)
    (["growth", "{tmp}/missing", "--max-bytes", "-5e9"], 2, "'-5e9' is not a positive size"),
    (["growth", "{tmp}/missing", "--max-keys", "nan"], 2, "'nan' is not a positive number"),
    (["growth", "{tmp}/missing", "--max-keys", "inf"], 2, "'inf' is not a positive number"),
    (["growth", "{tmp}/missing", "--max-keys", "-1"], 2, "'-1' is not a positive number"),
    (["growth", "{tmp}/missing", "--max-keys", "many"], 2, "cannot read 'many' as a number"),
    # an empty CKPT (an unset $CKPT in a cron job) is not "no checkpoint": it must fail
    (["growth", "", "--fail-on", "growing"], 3, "empty checkpoint location"),
])
def test_bad_input_is_one_line_with_its_code(tmp_path, capsys, args, code, message):
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    write_progress(tmp_path / "ok.jsonl", [1, 2, 3])
    result, out, err = invoke([a.format(tmp=tmp_path) for a in args], capsys)
    assert result == code
    assert message in (err or out)
    assert "Traceback" not in err


def test_unknown_operator_and_stateless_checkpoint(tmp_path, capsys):
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=8, committed=8,
                     provider="rocksdb")
    code, _, err = invoke(["growth", root, "--operator", 3], capsys)
    assert code == 3 and "no operator 3 (operators: 0)" in err
    stateless = tmp_path / "stateless"
    write_checkpoint(fsspec.filesystem("file"), str(stateless), planned=2, committed=2)
    fsspec.filesystem("file").rm(str(stateless / "state"), recursive=True)
    code, out, _ = invoke(["growth", stateless], capsys)
    assert code == 0 and "no state store files" in out


def test_corrupt_state_file_is_named(tmp_path, capsys):
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=3, committed=3)
    code, _, err = invoke(["growth", root], capsys)  # placeholder bytes, not lz4
    assert code == 4 and "1.delta" in err and len(err.strip().splitlines()) == 1


def test_parse_size_and_sparkline():
    assert parse_size("10GiB") == 10 * 1024 ** 3
    assert parse_size("500MB") == 500e6
    assert parse_size("2e9") == 2e9
    assert parse_size("123") == 123
    with pytest.raises(BadInput):
        parse_size("ten gigs")
    assert sparkline([1, 2, 3, 4]) == "▁▃▆█"
    assert sparkline([5, 5]) == "▁▁" and sparkline([]) == ""
