"""Checkpoints older Spark versions wrote (tests/data/golden, see its README) through every
command: Spark 3.5 (no operator metadata), 4.0 and 4.1 (visible JSON checksum files), for
an aggregation, a RocksDB-changelog dedup, applyInPandasWithState, a stream-stream join and
session windows. ``statekit state show`` must return exactly as many rows as Spark 4.3's own
``statestore`` reader, and as the generator's input says.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cli import run, strict_json

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"
CHECKPOINTS = sorted(GOLDEN.glob("spark-*/*/checkpoint"))
IDS = [f"{c.parent.parent.name}/{c.parent.name}" for c in CHECKPOINTS]


def _manifest(checkpoint: Path) -> dict:
    return json.loads((checkpoint.parent / "manifest.json").read_text())


def test_golden_checkpoints_cover_three_versions_and_five_queries():
    versions = {c.parent.parent.name.split("-")[1][:3] for c in CHECKPOINTS}
    queries = {c.parent.name for c in CHECKPOINTS}
    assert versions == {"3.5", "4.0", "4.1"}
    assert queries == {"aggregation_hdfs", "dedup_rocksdb_changelog",
                       "apply_in_pandas_with_state_hdfs", "stream_stream_join_hdfs",
                       "session_window_hdfs"}


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=IDS)
def test_every_jvm_free_command(checkpoint: Path, tmp_path):
    ck = tmp_path / "ck"  # a copy: nothing may be written to the repository's files
    shutil.copytree(checkpoint, ck, symlinks=True)
    manifest = _manifest(checkpoint)
    code, out, err = run(["report", ck, "--decode", "--json"])
    assert (code, err) == (0, "")
    report = strict_json(out)
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert report["verification"]["files"] > 0 and not report["verification"]["damaged"]
    assert report["last_committed_batch"] == manifest["last_batch_id"]
    stores = {s["store"] for s in report["stores"]}
    assert stores == set(manifest["expected_state_rows"]["0"])
    assert {s["num_partitions"] for s in report["stores"]} == {manifest["shuffle_partitions"]}
    if manifest["operator_names_metadata_file"]:  # 4.x: the name Spark recorded
        assert {s["operator_name"] for s in report["stores"]} == set(
            manifest["operator_names_metadata_file"])
    store = sorted(stores)[0]
    part = ck / "state" / "0" / "0" / ("" if store == "default" else store)
    restart_file = sorted(p for p in part.iterdir()
                          if p.suffix in (".delta", ".snapshot", ".changelog"))[-1]
    for args in (["batches", ck], ["schema", ck], ["ls", ck, "--partition", "0", "--store",
                                                   store],
                 ["dump", restart_file, "--limit", "3"], ["growth", ck, "--json"],
                 ["recovery", ck, "--json"]):
        code, out, err = run(args)
        assert (code, err) == (0, ""), args[0]
        if "--json" in args:
            strict_json(out)
    assert (ck / "state").exists() and sorted(p.name for p in ck.rglob("*")) == sorted(
        p.name for p in checkpoint.rglob("*"))


def test_spark_4_1_checksum_files_are_verified(tmp_path):
    """Spark 4.1's visible ``<file>.crc`` (CRC32C, mainFileSize) catches a changed byte even
    without Hadoop's hidden checksum file."""
    source = GOLDEN / "spark-4.1.4" / "aggregation_hdfs" / "checkpoint"
    ck = tmp_path / "ck"
    shutil.copytree(source, ck)
    delta = ck / "state/0/1/3.delta"
    assert (ck / "state/0/1/3.delta.crc").exists()
    (ck / "state/0/1/3.snapshot").unlink()  # the restart now reads the deltas
    (ck / "state/0/1/3.snapshot.crc").unlink()
    (ck / "state/0/1/.3.snapshot.crc").unlink(missing_ok=True)
    (ck / "state/0/1/.3.delta.crc").unlink(missing_ok=True)
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0xFF
    delta.write_bytes(bytes(data))
    report = strict_json(run(["report", ck, "--decode", "--json"])[1])
    [finding] = [f for f in report["findings"] if f["code"] == "damaged-file"]
    assert finding["path"] == str(delta) and "CRC32C" in finding["message"]
    assert finding["severity"] == "error"
    delta.write_bytes(bytes(data[:-3]))  # and a size that disagrees with mainFileSize
    report = strict_json(run(["report", ck, "--decode", "--json"])[1])
    [finding] = [f for f in report["findings"] if f["code"] == "damaged-file"]
    assert "its checksum file says" in finding["message"]


@pytest.mark.spark
@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=IDS)
def test_state_commands_match_spark_4_3s_reader(checkpoint: Path, spark, tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(checkpoint, ck, symlinks=True)
    manifest = _manifest(checkpoint)
    expected = manifest["expected_state_rows"]["0"]
    for store, rows in sorted(expected.items()):
        code, out, err = run(["state", "show", ck, "--store", store, "--limit", "1000000",
                              "--json"])
        assert (code, err) == (0, ""), store
        shown = len(strict_json(out)["rows"])
        spark_rows = (spark.read.format("statestore").option("operatorId", 0)
                      .option("storeName", store).load(str(ck)).count())
        assert shown == spark_rows == rows, store
    store = sorted(expected)[0]
    code, out, err = run(["state", "stats", ck, "--store", store, "--json"])
    assert (code, err) == (0, "")
    code, _, err = run(["state", "export", ck, "--store", store, "--out", tmp_path / "out",
                        "--format", "jsonl"])
    assert (code, err) == (0, "")
    exported = sum(1 for p in (tmp_path / "out").rglob("*.json") for _ in p.open())
    assert exported == expected[store]
    code, out, err = run(["state", "changes", ck, "--store", store, "--from-batch", "1", "--json"])
    assert (code, err) == (0, ""), err
