"""Every fault of tests/faults.py, on copies of real checkpoints, through every command.

For each fault and each JVM-free command: the exit code is the documented one (or 0 where a
command does not depend on what was damaged), a failure is exactly one stderr line naming
the damaged file, JSON output is standard JSON, and — the property — ``report --decode``
never answers "no warnings" for a damaged checkpoint. The checkpoints are the reference
pipeline's (HDFS; RocksDB with changelogs; RocksDB with a zip per version); the source is
never touched (each fault works on its own copy).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.faults import FAULTS, Facts, Fault, facts_of
from tests.support.cli import run, strict_json

pytestmark = pytest.mark.spark

_LEDGER_CODES = {"corrupt-log", "odd-log-entry", "commit-without-offsets", "missing-log",
                 "not-a-batch", "log-gap", "clock-skew", "watermark-backwards", "bad-conf",
                 "unsupported-codec"}


@pytest.fixture(scope="module")
def pristine(reference_checkpoints, tmp_path_factory) -> dict[str, tuple[Path, Facts]]:
    """Copies of three real checkpoints (the shared originals stay untouched)."""
    runs = {"hdfs": reference_checkpoints.get("hdfs"),
            "changelog": reference_checkpoints.get("rocksdb", changelog=True),
            "zips": reference_checkpoints.get("rocksdb")}
    root = tmp_path_factory.mktemp("pristine")
    found = {}
    for name, ref in runs.items():
        copy = root / name
        shutil.copytree(ref.checkpoint, copy, symlinks=True)
        if name == "changelog":
            # As before maintenance ever uploaded a zip (a young query, or a maintenance
            # task that cannot keep up): the restart replays changelogs from version 1.
            for path in [*copy.rglob("*.zip"), *copy.rglob(".*.zip.crc"), *copy.rglob("SSTs")]:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        found[name] = (copy, facts_of(copy))
    return found


# the commands that end with the doctor's answer and exit with its code (11, 12)
_RESTART_VERDICTS = ("doctor", "report", "growth", "recovery")

CASES = [(fault, name) for fault in FAULTS for name in fault.checkpoints]


def test_the_corpus_is_large_and_covers_both_providers():
    assert len({f.name for f in FAULTS}) >= 60
    assert {name for _, name in CASES} == {"hdfs", "changelog", "zips"}


def test_pristine_checkpoints_have_no_findings(pristine):
    for name, (root, _) in pristine.items():
        code, out, err = run(["report", root, "--decode", "--json"])
        assert (code, err) == (0, ""), name
        report = strict_json(out)
        # the changelog copy never got a zip: that is worth a warning, and the only one
        assert {f["code"] for f in report["findings"]} == (
            {"no-snapshot"} if name == "changelog" else set()), name
        assert report["verification"]["files"] > 0 and not report["verification"]["damaged"]


def _names_damage(line: str, root: Path, fault: Fault, rel: str,
                  restart: str = "") -> bool:
    names = [rel, *(restart if n == "<restart>" else n for n in fault.names)]
    return any(f"{root}/{name}" in line or f"{root}/{name.rstrip('/')}" in line
               for name in names if name)


@pytest.mark.parametrize(("fault", "checkpoint"), CASES,
                         ids=[f"{f.name}@{c}" for f, c in CASES])
def test_fault(fault: Fault, checkpoint: str, pristine, tmp_path):
    source, facts = pristine[checkpoint]
    if fault.requires and not any(f.endswith(tuple("." + k for k in fault.requires))
                                  for f in facts.restart_files):
        pytest.fail(f"{checkpoint} has no {fault.requires} on its restart path")
    root = tmp_path / "ck"
    shutil.copytree(source, root, symlinks=True)
    rel = fault.apply(root, facts)
    restart_file = root / facts.restart_files[-1]

    def names(text: str) -> bool:
        return _names_damage(text, root, fault, rel, facts.restart_files[-1])

    commands = {
        "report": ["report", root],
        "report-verify": ["report", root, "--decode"],
        "report-json": ["report", root, "--decode", "--json"],
        "batches": ["batches", root],
        "batches-json": ["batches", root, "--json"],
        "schema": ["schema", root],
        "ls": ["ls", root, "--partition", "1"],
        "dump": ["dump", restart_file, "--limit", "5"],
        "growth": ["growth", root],
        "growth-json": ["growth", root, "--json"],
        "recovery": ["recovery", root],
        "recovery-json": ["recovery", root, "--json"],
        "doctor": ["doctor", root],
        "doctor-json": ["doctor", root, "--json"],
    }
    results = {name: run(args) for name, args in commands.items()}
    for name, (code, out, err) in results.items():
        where = f"{fault.name}@{checkpoint} {name}: exit {code}, stderr {err!r}"
        assert "Traceback" not in err and "internal error" not in err, where
        if name.startswith(_RESTART_VERDICTS) and code in (9, 11, 12):
            # the doctor's verdict (report, recovery and growth exit with it too), not an error
            assert err == "" and (code != 9 or name.startswith("doctor")), where
            continue
        if code:
            assert err.count("\n") == 1 and err.startswith("statekit: error: "), where
            assert str(root) in err or str(restart_file) in err, where
        else:
            assert err == "", where
        if code == 0 and name.endswith("-json"):
            strict_json(out)
    # the doctor: a damaged file on the restart path means "will not restart", and the fix
    # it prints is a rollback
    code, out, _ = results["doctor-json"]
    if code in (0, 9, 11, 12):
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

        assert contradictions(root) == [], fault.name
        return

    # the report names the damage in its findings, and never answers "no warnings"
    code, out, err = results["report-verify"]
    flat = " ".join(out.split())
    assert "Traceback" not in err
    codes = fault.finding.split("|")  # alternatives: any of them will do
    assert any(f"({code})" in flat for code in codes), f"{fault.name}@{checkpoint}: {flat[-600:]}"
    assert "no warnings" not in flat
    report = strict_json(results["report-json"][1])
    found = [f for f in report["findings"] if f["code"] in codes]
    assert found and {f["severity"] for f in found} == {fault.severity}
    assert any(names(f"{f['message']} {f['path']}") for f in found), found
    if not fault.read_only:
        assert any(f"({code})" in " ".join(results["report"][1].split()) for code in codes)
    if set(codes) & _LEDGER_CODES:  # batches shows the ledger's problems too
        problems = strict_json(results["batches-json"][1])["problems"]
        assert any(names(p["message"]) for p in problems)

    # every surface gives the doctor's answer (report, recovery, growth, metrics, the TUI's
    # model): exit codes, verdicts, no estimate for a checkpoint that will not restart
    from tests.oracle.surfaces import contradictions

    assert contradictions(root) == [], f"{fault.name}@{checkpoint}"
    for name in ("batches", "schema", "ls", "dump"):
        code, _, err = results[name]
        assert code in (0, fault.code, 3, 4, 5), f"{name}: {code} {err!r}"


@pytest.mark.parametrize(("fault", "checkpoint"), CASES,
                         ids=[f"{f.name}@{c}" for f, c in CASES])
def test_fault_through_spark_backed_commands(fault: Fault, checkpoint: str, pristine, spark,
                                             tmp_path):
    """The `state` and `repartition` commands: refused before Spark starts when the model
    sees the damage; else Spark's load failure traced to the damaged file — one line."""
    source, facts = pristine[checkpoint]
    root = tmp_path / "ck"
    shutil.copytree(source, root, symlinks=True)
    rel = fault.apply(root, facts)
    for args in (["state", "show", root, "--partition", "1", "--limit", "100000"],
                 ["repartition", root, "--out", tmp_path / "out", "--partitions", "2",
                  "--dry-run", "--force"]):
        code, _, err = run(args)
        where = f"{fault.name}@{checkpoint} {args[0]}: {code} {err!r}"
        assert "Py4J" not in err and "internal error" not in err, where
        if code:
            assert err.count("\n") == 1 and err.startswith("statekit: error: "), where
        if fault.everywhere and args[0] == "state" and code == 0:
            continue  # the query-id file: state rows read without it; repartition copies it
        if fault.severity == "error":
            assert code == fault.code, where
            assert _names_damage(err, root, fault, rel, facts.restart_files[-1]), where
        else:  # (6: repartition refuses an uncommitted batch)
            assert code in (0, fault.code, 6), where
    assert not (tmp_path / "out").exists()


def test_a_jvm_command_prints_one_line_and_no_jvm_noise(pristine, tmp_path):
    """A fresh process: the JVM's start-up warning never reaches the user's terminal."""
    import subprocess
    import sys

    source, facts = pristine["hdfs"]
    root = tmp_path / "ck"
    shutil.copytree(source, root, symlinks=True)
    fault = next(f for f in FAULTS if f.name == "change-file-bytes-flipped")
    rel = fault.apply(root, facts)
    done = subprocess.run([sys.executable, "-m", "statekit", "state", "show", str(root)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 4, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"statekit: error: {root}/{rel}: "), done.stderr


def test_a_damaged_snapshot_is_repaired_by_spark_as_the_report_says(pristine, spark, tmp_path):
    """The report calls a damaged snapshot with an intact older chain a warning because
    Spark 4.3 loads the older chain instead: Spark's reader must return every row."""
    source, facts = pristine["hdfs"]
    root = tmp_path / "ck"
    shutil.copytree(source, root, symlinks=True)
    before = run(["state", "show", root, "--partition", "1", "--limit", "100000", "--json"])
    rel = next(f for f in FAULTS if f.name == "snapshot-bytes-flipped").apply(root, facts)
    report = strict_json(run(["report", root, "--decode", "--json"])[1])
    [finding] = [f for f in report["findings"] if f["code"] == "damaged-file"]
    assert finding["severity"] == "warning" and rel in finding["path"]
    after = run(["state", "show", root, "--partition", "1", "--limit", "100000", "--json"])
    assert after[0] == before[0] == 0, after[2]
    def rows(result: tuple[int, str, str]) -> list[str]:
        return sorted(json.dumps(r, sort_keys=True) for r in strict_json(result[1])["rows"])

    assert rows(after) == rows(before) and rows(after)
