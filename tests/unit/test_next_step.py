"""A dry run's ``next:`` line is a real run statekit will carry out (no JVM).

The line must parse, with the command's own parser, to the same options as the dry run —
``--file-sink``, ``--no-verify``, storage options, Spark settings, ``--env-archive`` (which
click keeps no value of) included — minus ``--dry-run``; and its ``--out`` must not be the
folder the dry run said the real run refuses. ``statekit rollback --dry-run`` starts no JVM,
so it is run whole here, and its ``next:`` line is then run too. ``statekit repartition`` and
``migrate`` dry runs start Spark (they count keys per new partition through it): their line
is built here by the same function from the same arguments, without the JVM.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from statekit.cli.commands.repartition import migrate_command, repartition_command
from statekit.cli.commands.rollback import rollback_command
from statekit.cli.main import cli
from statekit.cli.next_step import PLACEHOLDER, real_run
from statekit.cli.runner import run_cli
from tests.support.next_steps import GOLDEN, file_sink, next_line, the_same_run_for_real


def test_a_rollback_dry_run_into_a_busy_folder_proposes_a_fresh_one(tmp_path, capsys):
    source = tmp_path / "checkpoint"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", source)
    sink = file_sink(tmp_path / "output", 3)
    busy = tmp_path / "at-1"
    busy.mkdir()
    (busy / "notes.txt").write_text("someone's")
    (tmp_path / "at-1-2").mkdir()  # taken as well (empty, but there)
    dry = [str(source), "--to-batch", "1", "--out", str(busy), f"--file-sink={sink}",
           "--no-verify", "--storage-option", "auto_mkdir=true", "--new-query-id",
           "--dry-run"]
    assert run_cli(cli, "statekit", ["rollback", *dry]) == 0
    out = capsys.readouterr().out
    assert "the real run needs another --out" in " ".join(out.split())
    command, why = next_line(out)
    real = the_same_run_for_real(rollback_command, dry, command)
    fresh = Path(real["target"])
    assert fresh == tmp_path / "at-1-3" and not fresh.exists()
    assert str(busy) in why and "new folder" in why
    assert real["file_sink"] == str(sink) and real["verify"] is False
    # and the line does what it says: the real run (no JVM with --no-verify) publishes there
    assert run_cli(cli, "statekit", shlex.split(command)[1:]) == 0
    assert (fresh / "commits" / "1").exists() and not (fresh / "commits" / "2").exists()
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in (sink / "_spark_metadata").iterdir()) == ["0", "1"]


def test_a_rollback_dry_run_into_the_source_leaves_out_for_the_user(tmp_path, capsys):
    """Every sibling of a folder inside the source is inside it too: no name is proposed,
    and the placeholder keeps a shell from running the line as it is."""
    source = tmp_path / "checkpoint"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", source)
    inside = source / "rolled-back"
    dry = [str(source), "--to-batch", "1", "--out", str(inside), "--dry-run"]
    assert run_cli(cli, "statekit", ["rollback", *dry]) == 0
    command, why = next_line(capsys.readouterr().out)
    real = the_same_run_for_real(rollback_command, dry, command)
    assert real["target"] == PLACEHOLDER and f"--out {PLACEHOLDER}" in command
    assert PLACEHOLDER in why and str(inside) in why
    shell = subprocess.run(["bash", "-c", command.replace("statekit", "echo", 1)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert shell.returncode != 0 and shell.stdout == ""


def test_a_rollback_dry_run_into_a_new_folder_keeps_it(tmp_path, capsys):
    source = tmp_path / "checkpoint"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", source)
    dry = [str(source), "--to-batch", "1", "--out", str(tmp_path / "new"), "--dry-run"]
    assert run_cli(cli, "statekit", ["rollback", *dry]) == 0
    command, why = next_line(capsys.readouterr().out)
    assert command == shlex.join(["statekit", "rollback", *dry[:-1]])
    assert why == "write it for real"


@pytest.mark.parametrize(("command", "options"), [
    (repartition_command, ["-n4"]),
    (repartition_command, ["--partitions", "4"]),
    (migrate_command, ["--to", "rocksdb", "--changelog", "-n", "8"]),
])
def test_repartition_and_migrate_keep_every_option_for_the_real_run(tmp_path, command,
                                                                    options):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    dry = ["ckpt", *options, "--out=busy", "--file-sink", "s3://bucket/output",
           "--storage-option", "anon=false", "--storage-option", "profile=prod",
           "--conf", "spark.executor.memory=4g", "--master", "spark://head:7077",
           "--env-archive", str(archive), "--no-verify", "--force", "--allow-uncommitted",
           "--dry-run"]
    line = real_run(command, ["statekit", command.name], dry, out="busy-2")
    real = the_same_run_for_real(command, dry, line)
    assert real["target"] == "busy-2" and real["file_sink"] == "s3://bucket/output"
    # without a refused --out, only --dry-run goes: the rest as typed, in order
    assert real_run(command, ["statekit", command.name], dry) == \
        shlex.join(["statekit", command.name, *dry[:-1]])


def test_a_deprecated_spelling_is_written_as_the_current_one(capsys):
    dry = ["ckpt", "-n", "4", "--out", "dst", "--sink", "output", "--dry-run"]
    line = real_run(repartition_command, ["statekit", "repartition"], dry)
    assert line == "statekit repartition ckpt -n 4 --out dst --file-sink output"
    real = the_same_run_for_real(repartition_command, dry,
                                 real_run(repartition_command, ["statekit", "repartition"],
                                          dry, out="dst-2"))
    assert real["file_sink"] == "output"
    assert "--sink is deprecated" in capsys.readouterr().err  # the dry run's, parsed here
