"""Generated faults on the golden checkpoints Spark 3.5, 4.0 and 4.1 wrote, read without a JVM:
every command that answers "will it restart?" answers as the doctor does, none prints a
traceback or more than one stderr line, none writes, JSON stays standard — also under a
path that is not valid UTF-8, and for a user who cannot read a file.

(Restarts need pyspark 4.3: the Spark side of these faults is judged on 4.3's own
checkpoints in tests/spark/test_doctor_campaign.py and benchmarks/doctor_campaign.py.)
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracle.fault_space import damaged_copies, enumerate_faults, sample_faults
from tests.oracle.surfaces import contradictions
from tests.support.tools import ROOT_NEEDS_SETPRIV

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
CHECKPOINTS = sorted(p for p in GOLDEN.glob("spark-*/*") if (p / "checkpoint").is_dir())
PER_CHECKPOINT = 5


def _copy(source: Path, to: Path) -> Path:
    shutil.copytree(source / "checkpoint", to, symlinks=True)
    return to


def test_there_are_golden_checkpoints_of_three_spark_versions():
    assert {p.parent.name.split("-")[1][:3] for p in CHECKPOINTS} >= {"3.5", "4.0", "4.1"}


@pytest.mark.parametrize("golden", CHECKPOINTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_generated_faults_on_a_golden_checkpoint(golden: Path, tmp_path: Path):
    pristine = _copy(golden, tmp_path / "pristine")
    assert contradictions(pristine) == []
    faults = sample_faults(enumerate_faults(golden.name, pristine), PER_CHECKPOINT,
                           seed=len(golden.name))
    assert len(faults) == PER_CHECKPOINT
    work = tmp_path / "work"
    for fault in damaged_copies(pristine, faults, work):
        found = contradictions(work)
        assert found == [], f"{fault.id}: {found}"


def test_a_path_that_is_not_utf8(tmp_path: Path):
    """The bytes of the folder name reach every command as surrogate escapes: they are
    shown as \\xNN, never an internal error (statekit metrics once failed with
    UnicodeEncodeError)."""
    golden = next(p for p in CHECKPOINTS if p.name == "aggregation_hdfs")
    folder = os.fsencode(tmp_path) + b"/bad\xffname"
    os.mkdir(folder)
    root = Path(os.fsdecode(folder)) / "checkpoint"
    _copy(golden, root)
    assert contradictions(root) == []
    newest = max(root.glob("state/0/1/*.delta"), key=lambda p: int(p.stem))
    newest.unlink()
    assert contradictions(root) == []
    for args in (["batches"], ["schema"], ["ls", "--partition", "1"],
                 ["rollback", "--list"], ["rollback", "--list", "--json"]):
        done = subprocess.run([sys.executable, "-m", "statekit", args[0], os.fsencode(root),
                               *args[1:]], capture_output=True, timeout=120)
        assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr, \
            (args, done.stderr)
        assert done.returncode in (0, 3, 4), (args, done.returncode, done.stderr)


def _without_read_override() -> list[str]:
    """The prefix that runs a command without root's power to read any file: as root, the
    capabilities that override permissions dropped (util-linux setpriv); else nothing."""
    if os.geteuid() != 0:
        return []
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]


@ROOT_NEEDS_SETPRIV
def test_files_a_user_cannot_read(tmp_path: Path):
    """Without permission on one file or folder: one line naming it, a documented exit
    code, and the doctor counts a file the restart reads as one Spark cannot read."""
    golden = next(p for p in CHECKPOINTS if p.name == "aggregation_hdfs")
    root = _copy(golden, tmp_path / "checkpoint")
    last = max(int(p.name) for p in (root / "offsets").iterdir() if p.name.isdigit())
    cases = [(root / "metadata", (11,)), (root / "offsets" / str(last), (11, 12)),
             (root / "state" / "0" / "1", (3, 11, 12))]
    for target, codes in cases:
        mode = target.stat().st_mode
        os.chmod(target, 0)
        try:
            for command in (["doctor"], ["report"], ["recovery"], ["growth"], ["metrics"],
                            ["batches"]):
                done = subprocess.run(
                    [*_without_read_override(), sys.executable, "-m", "statekit", *command,
                     str(root)], capture_output=True, text=True, timeout=120)
                where = f"{command} on {target.name}: {done.returncode} {done.stderr!r}"
                assert "Traceback" not in done.stderr and \
                    "internal error" not in done.stderr, where
                assert done.stderr.count("\n") <= 1, where
                if command == ["doctor"]:
                    assert done.returncode in codes, where
                    assert target.name in done.stdout + done.stderr, where
        finally:
            os.chmod(target, stat.S_IMODE(mode))
