"""``statekit tui`` checks its checkpoint before starting the app (no terminal needed)."""

from __future__ import annotations

from statekit.cli.main import cli
from statekit.cli.runner import run_cli


def test_a_wrong_path_is_a_one_line_error_not_an_empty_app(tmp_path, capsys):
    assert run_cli(cli, "statekit", ["tui", str(tmp_path / "missing")]) == 3
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    assert run_cli(cli, "statekit", ["tui", str(tmp_path / "plain")]) == 3
    assert run_cli(cli, "statekit", ["tui", str(tmp_path / "plain"), "--watch", "0.1"]) == 2


def test_model_explains_findings():
    from statekit.assess.findings import explain

    assert "restart" in explain("no-snapshot", "partition 3 has no snapshot")
    assert explain("unknown-code", "as is") == "as is"


def test_a_bad_progress_log_is_a_one_line_error_before_the_app(tmp_path, capsys):
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[1] / "data" / "tui" / "reference_hdfs"
    missing = tmp_path / "progress.jsonl"
    assert run_cli(cli, "statekit", ["tui", str(fixture), "--progress-log", str(missing)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(missing) in err and "no such file" in err
    missing.write_text('{"batchId": 3, "durationMs": \n')
    assert run_cli(cli, "statekit", ["tui", str(fixture), "--progress-log", str(missing)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not valid JSON" in err
    assert run_cli(cli, "statekit", ["tui", str(fixture), "--rto", "soon"]) == 2
