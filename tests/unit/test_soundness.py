"""The cheap restart check against the report it replaced on the state commands' entry.

``raise_if_unsound`` no longer builds a report; it must still stop on exactly the problem the
report's first ``error`` finding names (after the ledger's own check), with the same exit
code — on generated faults of every golden checkpoint (Spark 3.5, 4.0, 4.1; both providers),
and pass where the report finds no error.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.soundness import raise_if_unsound
from statekit.report.checkpoint_report import build_report
from statekit.support.errors import StatekitError
from tests.oracle.fault_space import damaged_copies, enumerate_faults, sample_faults

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
CHECKPOINTS = sorted(p for p in GOLDEN.glob("spark-*/*") if (p / "checkpoint").is_dir())
PER_CHECKPOINT = 25


def _report_says(root: Path) -> tuple[int, str] | None:
    """What the state commands stopped on before: the ledger's check, then the report's
    first error finding."""
    try:
        ckpt = open_checkpoint(str(root))
        ckpt.require_sound_ledger()
        errors = [f for f in build_report(ckpt).findings if f.severity == "error"]
    except StatekitError as error:
        return error.exit_code, str(error)
    if not errors:
        return None
    error = errors[0].to_error()
    return error.exit_code, str(error)


def _check_says(root: Path) -> tuple[int, str] | None:
    try:
        raise_if_unsound(open_checkpoint(str(root)))
    except StatekitError as error:
        return error.exit_code, str(error)
    return None


@pytest.mark.parametrize("golden", CHECKPOINTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_check_stops_where_the_report_finds_the_first_error(golden: Path, tmp_path: Path):
    pristine = tmp_path / "pristine"
    shutil.copytree(golden / "checkpoint", pristine, symlinks=True)
    assert _check_says(pristine) is None and _report_says(pristine) is None
    faults = sample_faults(enumerate_faults(golden.name, pristine), PER_CHECKPOINT,
                           seed=len(golden.name) + 7)
    stopped = 0
    work = tmp_path / "work"
    for fault in damaged_copies(pristine, faults, work):
        expected = _report_says(work)
        assert _check_says(work) == expected, fault.id
        stopped += expected is not None
    assert stopped, "no sampled fault stops a restart: the comparison proved nothing"


@pytest.mark.parametrize("odd", ["symlink-loop", "fifo", "dangling-symlink"])
def test_entries_that_are_not_files_stop_the_check_as_the_report(tmp_path, odd):
    """Known only once ``state/`` is listed: the check must list it before asking."""
    import os

    root = tmp_path / "checkpoint"
    shutil.copytree(CHECKPOINTS[0] / "checkpoint", root, symlinks=True)
    entry = root / "state" / "0" / "1" / "odd"
    if odd == "symlink-loop":
        os.symlink("odd", entry)
    elif odd == "fifo":
        os.mkfifo(entry)
    else:
        os.symlink("missing-target", entry)
    expected = _report_says(root)
    assert expected is not None and "neither files nor folders" in expected[1]
    assert _check_says(root) == expected
