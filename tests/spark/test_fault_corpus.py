"""The fault corpus through what needs Spark, and the frozen corpus against this Spark.

Every fault of tests/faults.py through the Spark-backed commands (``state show``,
``repartition``), on copies of checkpoints the reference pipeline writes at test time (HDFS;
RocksDB with changelogs; RocksDB with a zip per version; the shared originals stay untouched):
refused before Spark starts when the model sees the damage, else Spark's load failure traced
to the damaged file, one line. The JVM-free commands run the same faults on frozen copies of
the same three checkpoints (tests/unit/test_fault_corpus.py, tests/data/fault_corpus): here,
the frozen copies are compared with what this Spark writes.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.faults import (
    CASE_IDS,
    CASES,
    FAULTS,
    Facts,
    Fault,
    facts_of,
    names_damage,
    strip_zips,
)
from tests.support.cli import run, strict_json

pytestmark = pytest.mark.spark

FROZEN = Path(__file__).resolve().parents[1] / "data" / "fault_corpus"


@pytest.fixture(scope="module")
def pristine(reference_checkpoints, tmp_path_factory) -> dict[str, tuple[Path, Facts]]:
    """Copies of three real checkpoints (the shared originals stay untouched), post-processed
    as tests/data/fault_corpus/regenerate.py does for the frozen ones."""
    runs = {"hdfs": reference_checkpoints.get("hdfs"),
            "changelog": reference_checkpoints.get("rocksdb", changelog=True),
            "zips": reference_checkpoints.get("rocksdb")}
    root = tmp_path_factory.mktemp("pristine")
    found = {}
    for name, ref in runs.items():
        copy = root / name
        shutil.copytree(ref.checkpoint, copy, symlinks=True)
        if name == "changelog":
            strip_zips(copy)
        found[name] = (copy, facts_of(copy))
    return found


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _kind(root: Path) -> dict:
    """What a checkpoint is made of, without what changes from run to run (query and run ids,
    timestamps, SST names, which versions maintenance snapshotted): every path with numbers
    and ids generalised; the version line of every log; the JSON keys of the commit and
    offset entries; the confs the newest offsets entry pins; the operator metadata and the
    schema files; the first bytes (codec, zip) of every state file kind; the changelogs'
    format versions; the keys of the zips' metadata."""
    from statekit.formats.compression import open_decompressed
    from statekit.formats.records import read_changelog

    def general(path: Path) -> str:
        rel = _UUID.sub("U", str(path.relative_to(root)))
        return re.sub(r"\d+", "N", rel) + ("/" if path.is_dir() else "")

    def first_line(path: Path) -> str:
        return path.read_bytes().split(b"\n", 1)[0].decode()

    every = sorted(root.rglob("*"))
    files = [p for p in every if p.is_file() and not p.name.startswith(".")]
    logs = {name: [p for p in files if p.relative_to(root).parts[0] == name]
            for name in ("offsets", "commits", "sources")}
    newest = max(logs["offsets"], key=lambda p: int(p.name))
    offset_meta = json.loads(newest.read_text().split("\n")[1])
    heads: dict[str, set[bytes]] = {}
    changelog_versions, zip_metadata = set(), set()
    for path in files:
        kind = path.suffix.lstrip(".")
        if kind in ("delta", "snapshot", "changelog", "zip"):
            heads.setdefault(kind, set()).add(path.read_bytes()[:8])
        if kind == "changelog":
            with open(path, "rb") as raw:
                stream = open_decompressed(raw, "lz4", path=str(path))
                changelog_versions.add(read_changelog(stream, path=str(path))[0].version)
        if kind == "zip":
            with zipfile.ZipFile(path) as z:
                version, body = z.read("metadata").decode().split("\n", 1)
            zip_metadata.add((version, tuple(sorted(json.loads(body)))))
    return {
        "layout": {general(p) for p in every},
        "log_versions": {name: {first_line(p) for p in found} for name, found in logs.items()},
        "commit_keys": {tuple(sorted(json.loads(p.read_text().split("\n")[1])))
                        for p in logs["commits"]},
        "offset_keys": sorted(offset_meta),
        "pinned_confs": offset_meta["conf"],
        "query_metadata_keys": sorted(json.loads((root / "metadata").read_text())),
        "operator_metadata": {(general(p), p.read_bytes()) for p in files
                              if p.parent.name == "_metadata"},
        "heads": heads,
        "changelog_versions": changelog_versions,
        "zip_metadata": zip_metadata,
    }


def test_the_frozen_corpus_is_what_this_spark_writes(pristine, spark):
    """tests/unit/test_fault_corpus.py damages frozen copies of these three checkpoints: they
    must still be what this Spark writes with the test configuration (same files in the same
    places, same formats and pinned confs, same batches and partitions). When this fails,
    run tests/data/fault_corpus/regenerate.py."""
    manifest = json.loads((FROZEN / "manifest.json").read_text())
    # the session the frozen ones were written in is this run's `spark` fixture's
    for key, value in manifest["session"]["all_confs_set"].items():
        if key not in ("spark.app.name", "spark.master"):
            assert spark.conf.get(key, None) == value, key
    for name, (fresh, facts) in pristine.items():
        frozen = FROZEN / name
        assert _kind(frozen) == _kind(fresh), f"{name}: regenerate tests/data/fault_corpus"
        frozen_facts = facts_of(frozen)
        assert (frozen_facts.last, frozen_facts.partitions) == (facts.last, facts.partitions)


@pytest.mark.parametrize(("fault", "checkpoint"), CASES, ids=CASE_IDS)
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
            assert names_damage(err, root, fault, rel, facts.restart_files[-1]), where
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
