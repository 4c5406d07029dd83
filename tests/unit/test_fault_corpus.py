"""Every fault of tests/faults.py, on copies of real checkpoints, through every JVM-free command.

For each fault and each JVM-free command: the exit code is the documented one (or 0 where a
command does not depend on what was damaged), a failure is exactly one stderr line naming
the damaged file, JSON output is standard JSON, and — the property — ``report --decode``
never answers "no warnings" for a damaged checkpoint. The checkpoints are the reference
pipeline's (HDFS; RocksDB with changelogs; RocksDB with a zip per version), written by Spark
with the test suite's configuration and frozen in tests/data/fault_corpus (regenerate.py
there writes them; tests/spark/test_fault_corpus.py checks that the installed Spark still
writes them alike). They are never touched: each case damages its own copy, and every case
and the end of the run check that.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import TEST_BATCHES, TEST_GENERATOR, TEST_MIN_DELTAS, TEST_PARTITIONS
from tests.faults import CASE_IDS, CASES, FAULTS, Facts, Fault, facts_of, names_damage
from tests.support.cli import run, strict_json
from tests.support.trees import tree_hash

FROZEN = Path(__file__).resolve().parents[1] / "data" / "fault_corpus"
NAMES = ("hdfs", "changelog", "zips")

_LEDGER_CODES = {"corrupt-log", "odd-log-entry", "commit-without-offsets", "missing-log",
                 "not-a-batch", "log-gap", "clock-skew", "watermark-backwards", "bad-conf",
                 "unsupported-codec"}

# the commands that end with the doctor's answer and exit with its code (11, 12)
_RESTART_VERDICTS = ("doctor", "report", "growth", "recovery", "batches")


def _stat_print(root: Path) -> list[tuple[str, int, int, int]]:
    """Every entry's path, mode, size and mtime: any write into the tree changes it (cheap
    enough to take around every case; the end of the run compares the contents too)."""
    found = []
    for folder, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            found.append((os.path.relpath(path, root), st.st_mode, st.st_size, st.st_mtime_ns))
    return sorted(found)


@pytest.fixture(scope="session")
def frozen() -> dict[str, tuple[Path, Facts]]:
    """The frozen checkpoints and their facts; at the end, their contents must be what they
    were at the start (no case may write into tests/data). Session-scoped although only this
    module uses it: it costs a fraction of a second, and a module-scoped fixture would pin
    every case to one xdist worker (tests/conftest.py groups a module's tests that share one
    under ``--dist loadgroup``)."""
    before = {name: tree_hash(FROZEN / name) for name in NAMES}
    yield {name: (FROZEN / name, facts_of(FROZEN / name)) for name in NAMES}
    assert {name: tree_hash(FROZEN / name) for name in NAMES} == before, \
        "a test wrote into tests/data/fault_corpus"


@pytest.fixture
def copy_of(frozen, tmp_path):
    """``copy_of(name)``: a fresh copy of a frozen checkpoint under tmp_path, and its facts;
    the frozen original must be unchanged when the test ends."""
    prints = {}

    def make(name: str) -> tuple[Path, Facts]:
        source, facts = frozen[name]
        prints[name] = _stat_print(source)
        root = tmp_path / name
        shutil.copytree(source, root, symlinks=True)
        assert not root.resolve().is_relative_to(FROZEN)
        return root, facts

    yield make
    for name, before in prints.items():
        assert _stat_print(frozen[name][0]) == before, f"a test wrote into {frozen[name][0]}"


def test_the_corpus_is_large_and_covers_both_providers():
    assert len({f.name for f in FAULTS}) >= 60
    assert {name for _, name in CASES} == set(NAMES)


def test_the_frozen_checkpoints_were_written_with_the_test_configuration(frozen):
    """The manifest regenerate.py wrote names the configuration of the ``reference_checkpoints``
    fixture; a change there means the frozen copies are stale: regenerate them."""
    manifest = json.loads((FROZEN / "manifest.json").read_text())
    assert manifest["generator"] == dataclasses.asdict(TEST_GENERATOR)
    assert (manifest["batches"], manifest["partitions"], manifest["min_deltas_for_snapshot"]) \
        == (TEST_BATCHES, TEST_PARTITIONS, TEST_MIN_DELTAS)
    assert set(manifest["checkpoints"]) == set(NAMES)
    for name, (_root, facts) in frozen.items():
        entry = manifest["checkpoints"][name]
        assert (facts.last, facts.partitions, list(facts.restart_files),
                list(facts.restart_ssts)) == (
            entry["last_committed_batch"], entry["partitions"],
            entry["restart_files_partition_1"], entry["restart_ssts_partition_1"]), name
        assert facts.partitions == TEST_PARTITIONS
    # what the faults damage is there: a snapshot then deltas; changelogs only; a zip
    kinds = {name: {f.rsplit(".", 1)[-1] for f in facts.restart_files}
             for name, (_r, facts) in frozen.items()}
    assert kinds == {"hdfs": {"snapshot", "delta"}, "changelog": {"changelog"}, "zips": {"zip"}}
    assert frozen["hdfs"][1].restart_files[-1].endswith(".delta")
    assert frozen["zips"][1].restart_ssts


def test_pristine_checkpoints_have_no_findings(copy_of):
    for name in NAMES:
        root, _ = copy_of(name)
        code, out, err = run(["report", root, "--json"])
        assert (code, err) == (0, ""), name
        report = strict_json(out)
        # the changelog copy never got a zip: that is worth a warning, and the only one
        assert {f["code"] for f in report["findings"]} == (
            {"no-snapshot"} if name == "changelog" else set()), name
        assert report["verification"]["files"] > 0 and not report["verification"]["damaged"]


@pytest.mark.parametrize(("fault", "checkpoint"), CASES, ids=CASE_IDS)
def test_fault(fault: Fault, checkpoint: str, copy_of):
    root, facts = copy_of(checkpoint)
    if fault.requires and not any(f.endswith(tuple("." + k for k in fault.requires))
                                  for f in facts.restart_files):
        pytest.fail(f"{checkpoint} has no {fault.requires} on its restart path")
    rel = fault.apply(root, facts)
    restart_file = root / facts.restart_files[-1]

    def names(text: str) -> bool:
        return names_damage(text, root, fault, rel, facts.restart_files[-1])

    from tests.oracle.surfaces import surface_commands

    commands = {
        # the JSON ones end in no suffix, the text ones in -text (recovery's text: the
        # oracle's run with --rto)
        **surface_commands(root),
        "schema": ["schema", root],
        "ls": ["ls", root, "--partition", "1"],
        "dump": ["dump", restart_file, "--limit", "5"],
        "doctor-text": ["doctor", root],
    }
    json_commands = {name for name, args in commands.items() if "--json" in args}
    results = {name: run(args) for name, args in commands.items()}
    # the surfaces' oracle below reads the same checkpoint: what ran here is not run again
    ran = {tuple(str(a) for a in args): results[name] for name, args in commands.items()}
    for name, (code, out, err) in results.items():
        where = f"{fault.name}@{checkpoint} {name}: exit {code}, stderr {err!r}"
        assert "Traceback" not in err and "internal error" not in err, where
        if name.startswith(_RESTART_VERDICTS) and code in (9, 11, 12, 14):
            # the doctor's verdict (report, recovery and growth exit with it too), not an error
            assert err == "" and (code not in (9, 14) or name.startswith("doctor")), where
            continue
        if code:
            assert err.count("\n") == 1 and err.startswith("statekit: error: "), where
            assert str(root) in err or str(restart_file) in err, where
        else:
            assert err == "", where
        if code == 0 and name in json_commands:
            strict_json(out)
    # the doctor: a damaged file on the restart path means "will not restart", and the fix
    # it prints is a rollback
    code, out, _ = results["doctor"]
    if code in (0, 9, 11, 12, 14):
        diagnosis = strict_json(out)
        assert diagnosis["exit_code"] == code
        if fault.read_only and fault.severity == "error":
            assert code in (11, 12), diagnosis
        if code == 11:
            assert diagnosis["fix_command"].startswith("statekit rollback ")
    if fault.everywhere:  # the query-id file: the doctor's answer, or unreadable for all
        doctor_code = results["doctor"][0]
        for name, (code, _out, err) in results.items():
            # (others need no query id; growth reports a history and the doctor's verdict)
            if name.startswith(("report", "growth", "recovery")):
                allowed = (fault.code, doctor_code, *((0,) if name.startswith("growth") else ()))
                assert code in allowed, f"{fault.name} {name}: {code} {err!r}"
        from tests.oracle.surfaces import contradictions

        assert contradictions(root, ran) == [], fault.name
        return

    # the report names the damage in its findings, and never answers "no warnings"
    code, out, err = results["report-text"]
    flat = " ".join(out.split())
    assert "Traceback" not in err
    codes = fault.finding.split("|")  # alternatives: any of them will do
    assert any(f"({code})" in flat for code in codes), f"{fault.name}@{checkpoint}: {flat[-600:]}"
    assert "no warnings" not in flat
    report = strict_json(results["report"][1])
    found = [f for f in report["findings"] if f["code"] in codes]
    assert found and {f["severity"] for f in found} == {fault.severity}
    assert any(names(f"{f['message']} {f['path']}") for f in found), found
    if not fault.read_only:  # the listing alone finds it
        listed = strict_json(results["report-listed"][1])
        assert any(f["code"] in codes for f in listed["findings"]), listed["findings"]
    if set(codes) & _LEDGER_CODES:  # batches shows the ledger's problems too
        problems = strict_json(results["batches"][1])["problems"]
        assert any(names(p["message"]) for p in problems)

    # every surface gives the doctor's answer (report, recovery, growth, metrics, the TUI's
    # model): exit codes, verdicts, no estimate for a checkpoint that will not restart
    from tests.oracle.surfaces import contradictions

    assert contradictions(root, ran) == [], f"{fault.name}@{checkpoint}"
    for name in ("batches-text", "schema", "ls", "dump"):
        code, _, err = results[name]
        assert code in (0, fault.code, 3, 4, 5), f"{name}: {code} {err!r}"
