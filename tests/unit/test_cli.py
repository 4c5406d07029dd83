"""CLI behaviour without a JVM: help everywhere, one-line errors and documented exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from statekit.cli.commands.pipeline import cli as pipeline_cli
from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.support.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_USAGE

SMALL = ["--users", "50", "--events-per-batch", "40", "--new-users-per-batch", "2"]


def invoke(args: list[str], capsys) -> tuple[int, str, str]:
    code = run_cli(cli, "statekit", args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def walk(command: click.Command, path: str = "statekit"):
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from walk(sub, f"{path} {name}")


def test_every_command_has_help_text():
    for path, command in walk(cli):
        assert command.help and len(command.help.strip()) > 20, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, f"{path} --{param.name} has no help"


def test_pipeline_commands_are_mounted_under_statekit(capsys):
    code, out, _ = invoke(["pipeline", "--help"], capsys)
    assert code == 0
    for name in ("generate", "run", "labels"):
        assert name in out


def test_generate_then_append_then_labels(tmp_path, capsys):
    landing = tmp_path / "landing"
    code, out, err = invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "3",
                             "--json", *SMALL], capsys)
    assert (code, err) == (0, "")
    summary = json.loads(out)
    assert (summary["first_batch"], summary["total_batches"]) == (0, 3)
    code, out, _ = invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "2",
                           "--append", "--json"], capsys)
    assert code == 0
    assert json.loads(out)["total_batches"] == 5
    assert json.loads(out)["config"]["users"] == 50
    code, out, _ = invoke(["pipeline", "labels", "--landing", str(landing)], capsys)
    assert code == 0
    assert isinstance(json.loads(out), dict)


def test_generate_into_a_used_landing_without_append_is_refused(tmp_path, capsys):
    landing = tmp_path / "landing"
    assert invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "1", *SMALL],
                  capsys)[0] == 0
    code, _, err = invoke(["pipeline", "generate", "--landing", str(landing)], capsys)
    assert code == EXIT_BAD_INPUT
    assert err == (f"statekit: error: {landing}: already holds 1 generated batches; "
                   "pass --append to add more\n")


def test_append_with_another_config_is_refused(tmp_path, capsys):
    landing = tmp_path / "landing"
    invoke(["pipeline", "generate", "--landing", str(landing), "--batches", "1", *SMALL], capsys)
    code, _, err = invoke(["pipeline", "generate", "--landing", str(landing), "--append",
                           "--seed", "99"], capsys)
    assert code == EXIT_BAD_INPUT
    assert err.count("\n") == 1
    assert "--append must keep the folder's config: seed=99 (folder has 7)" in err


def test_corrupt_manifest_is_one_line(tmp_path, capsys):
    (tmp_path / "generator.json").write_text("{not json")
    code, _, err = invoke(["pipeline", "labels", "--landing", str(tmp_path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert err.startswith(f"statekit: error: {tmp_path / 'generator.json'}: not a generator")
    assert err.count("\n") == 1


def test_run_on_a_folder_that_is_not_a_landing_folder(tmp_path, capsys):
    code, _, err = invoke(["pipeline", "run", "--landing", str(tmp_path), "--checkpoint",
                           str(tmp_path / "c"), "--output", str(tmp_path / "o")], capsys)
    assert code == EXIT_BAD_INPUT
    assert err == (f"statekit: error: {tmp_path}: not a landing folder "
                   "(run `generate` first)\n")


def test_bad_conf_pair_is_rejected_before_spark_starts(tmp_path, capsys):
    invoke(["pipeline", "generate", "--landing", str(tmp_path / "l"), "--batches", "1", *SMALL],
           capsys)
    code, _, err = invoke(["pipeline", "run", "--landing", str(tmp_path / "l"), "--checkpoint",
                           str(tmp_path / "c"), "--output", str(tmp_path / "o"), "--conf",
                           "no-equals-sign"], capsys)
    assert code == EXIT_BAD_INPUT
    assert err == "statekit: error: --conf expects KEY=VALUE, got 'no-equals-sign'\n"


def test_usage_errors_exit_2(capsys):
    code, _, err = invoke(["pipeline", "run", "--provider", "cassandra"], capsys)
    assert code == EXIT_USAGE
    assert "Invalid value for '--provider'" in err


def test_missing_java_is_a_one_line_error_with_its_own_exit_code(tmp_path):
    subprocess.run([sys.executable, "-m", "statekit", "pipeline", "generate", "--landing",
                    str(tmp_path / "l"), "--batches", "1", *SMALL], check=True)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java here
    proc = subprocess.run(
        [sys.executable, "-m", "statekit", "pipeline", "run", "--landing", str(tmp_path / "l"),
         "--checkpoint", str(tmp_path / "c"), "--output", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == EXIT_ENVIRONMENT
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "statekit: error: Java 17+ is required by Spark but no `java` was found")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_console_script_entry_points(args):
    proc = subprocess.run([sys.executable, "-m", "statekit.cli.main", *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert "statekit" in proc.stdout


def test_pipeline_main_module_has_help():
    proc = subprocess.run([sys.executable, "-m", "statekit", "pipeline", "--help"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert "generate" in proc.stdout and "run" in proc.stdout


def test_pipeline_group_is_the_same_object_under_both_entry_points():
    assert cli.commands["pipeline"] is pipeline_cli


@pytest.mark.parametrize(("location", "expected"), [
    ("/tmp/ckpt", "/tmp/ckpt"), ("rel/ckpt", "rel/ckpt"), ("file:/tmp/ckpt", "/tmp/ckpt"),
    ("file:///tmp/ckpt", "/tmp/ckpt"), ("s3://bucket/ckpt", None), ("hdfs://nn/ckpt", None)])
def test_local_path_treats_file_urls_as_local_and_other_urls_as_remote(location, expected):
    from pathlib import Path

    from statekit.reference_pipeline.pipeline import local_path

    assert local_path(location) == (Path(expected) if expected else None)
