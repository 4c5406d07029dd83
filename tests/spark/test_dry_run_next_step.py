"""``statekit repartition --dry-run`` ends with its real run: the same options, ``--file-sink``
included, and a fresh ``--out`` in place of the one the real run refuses.

The JVM-free tests (``tests/unit/test_next_step.py``) build the line from the arguments;
this one runs the command whole, as a user does — the dry run counts keys per new partition
through Spark — so it also proves the command prints what the builder makes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statekit.cli.commands.repartition import repartition_command
from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from tests.support.next_steps import GOLDEN, file_sink, next_line, the_same_run_for_real

pytestmark = [pytest.mark.spark]


def test_a_repartition_dry_run_ends_with_the_real_run(tmp_path, capsys):
    source = tmp_path / "checkpoint"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", source)
    sink = file_sink(tmp_path / "output", 3)  # batches 0-2: the source's last committed is 2
    busy = tmp_path / "three"
    busy.mkdir()
    (busy / "notes.txt").write_text("someone's")
    dry = [str(source), "-n", "3", "--out", str(busy), "--file-sink", str(sink), "--force",
           "--no-verify", "--dry-run"]
    code = run_cli(cli, "statekit", ["repartition", *dry])
    out = capsys.readouterr().out
    assert code == 0, out
    command, why = next_line(out)
    real = the_same_run_for_real(repartition_command, dry, command)
    assert Path(real["target"]) == tmp_path / "three-2" and not (tmp_path / "three-2").exists()
    assert real["file_sink"] == str(sink) and real["partitions"] == 3
    assert str(busy) in why
