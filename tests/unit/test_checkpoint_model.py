"""The checkpoint model on memory:// and tmp folders: layout, inventory, facts, report, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.layout import MetaFile, StateFile, classify
from statekit.checkpoint.soundness import raise_if_unsound
from statekit.report.checkpoint_report import build_report
from statekit.support.errors import BadInput, CorruptFile, NotACheckpoint
from tests.support.tools import ROOT_NEEDS_SETPRIV
from tests.unit.checkpoint_builder import write_checkpoint


@pytest.fixture
def memory_root():
    root = f"/ck-{uuid.uuid4().hex[:8]}"
    yield root
    fsspec.filesystem("memory").rm(root, recursive=True)


def memory_checkpoint(root: str, **kwargs):
    write_checkpoint(fsspec.filesystem("memory"), root, **kwargs)
    return open_checkpoint(f"memory://{root}")


@pytest.mark.parametrize(("rel", "expected"), [
    ("0/3/12.delta", ("delta", 0, "default", 3, 12, None)),
    ("1/0/7.snapshot", ("snapshot", 1, "default", 0, 7, None)),
    ("0/2/left-keyToNumValues/5.delta", ("delta", 0, "left-keyToNumValues", 2, 5, None)),
    ("0/1/9_0d1e2f30-aaaa-bbbb-cccc-000000000001.zip",
     ("zip", 0, "default", 1, 9, "0d1e2f30-aaaa-bbbb-cccc-000000000001")),
    ("0/1/4.changelog", ("changelog", 0, "default", 1, 4, None)),
    ("0/1/SSTs/000012-77a8.sst", ("sst", 0, "default", 1, None, None)),
])
def test_data_files_are_classified_from_their_names(rel, expected):
    item = classify(rel, 10, "/x/" + rel)
    assert isinstance(item, StateFile)
    assert (item.kind, item.operator_id, item.store, item.partition, item.version,
            item.unique_id) == expected


@pytest.mark.parametrize(("rel", "kind"), [
    ("0/_metadata/metadata", "operator-metadata"),
    ("0/_metadata/v2/14", "operator-metadata-v2"),
    ("0/_stateSchema/default/0_5c1d", "schema-v3"),
    ("0/0/_metadata/schema", "schema"),
    ("0/0/left-keyToNumValues/_metadata/schema", "schema"),
    ("0/0/.3.delta.crc", "crc"),
    ("0/0/3_ab12cd34-0000.changelog.crc", "crc"),
    ("0/0/notes.txt", "unknown"),
    ("README", "unknown"),
])
def test_other_files_are_classified_too(rel, kind):
    item = classify(rel, 10, "/x/" + rel)
    assert isinstance(item, MetaFile) and item.kind == kind


def test_inventory_versions_snapshots_and_files_to_load(memory_root):
    ckpt = memory_checkpoint(memory_root, planned=12, committed=12, snapshots=(5, 10))
    inv = ckpt.inventory
    assert inv.operator_ids == [0] and inv.stores(0) == ["default"]
    assert inv.partitions(0, "default") == [0, 1, 2, 3]
    part = inv.instance(0, "default", 2)
    assert part.change_versions == list(range(1, 13)) and part.snapshot_versions == [5, 10]
    assert [f.name for f in part.files_to_load(12)] == ["10.snapshot", "11.delta", "12.delta"]
    assert [f.name for f in part.files_to_load(4)] == ["1.delta", "2.delta", "3.delta",
                                                       "4.delta"]
    assert [f.name for f in part.files_to_load(10)] == ["10.snapshot"]
    assert inv.crc_files == 4 * 12 and inv.listed_files == 4 * (12 * 2 + 2) + 2
    assert ckpt.operators[0].name == "applyInPandasWithState"


def test_report_on_a_healthy_layout(memory_root):
    ckpt = memory_checkpoint(memory_root, planned=12, committed=12, snapshots=(10,))
    report = build_report(ckpt, min_deltas=5)
    (store,) = report.stores
    assert report.last_committed_batch == 11 and store.committed_version == 12
    assert [p.versions_since_snapshot for p in store.partitions] == [2, 2, 2, 2]
    assert [p.bytes for p in store.partitions] == [12 * (100 + p) + 1000 for p in range(4)]
    assert store.bytes_skew == round((12 * 103 + 1000) / ((12 * 406 + 4000) / 4), 2)
    assert report.findings == ()
    assert report.to_dict()["stores"][0]["max_snapshot_lag"] == 2


def test_snapshot_lag_and_missing_snapshot_warnings(memory_root):
    ckpt = memory_checkpoint(memory_root, planned=30, committed=30, snapshots=(3,))
    report = build_report(ckpt, min_deltas=5)
    (lag,) = [f for f in report.findings if f.code == "snapshot-lag"]
    assert "more than 2×minDeltasForSnapshot (10)" in lag.message and "worst: 27" in lag.message
    ckpt2 = memory_checkpoint(memory_root + "b", planned=8, committed=8)
    codes = [f.code for f in build_report(ckpt2, min_deltas=5).findings]
    assert codes == ["no-snapshot"]
    assert build_report(ckpt2, min_deltas=10).findings == ()  # young query: nothing to say


def test_uncommitted_batch_and_its_state_files(memory_root):
    ckpt = memory_checkpoint(memory_root, planned=6, committed=5, extra_versions=(6,))
    assert ckpt.uncommitted_batches == [5]
    report = build_report(ckpt, min_deltas=10)
    codes = {f.code: f for f in report.findings}
    assert set(codes) == {"uncommitted-batch", "orphan-files"}
    assert "batch 5 planned but not committed" in codes["uncommitted-batch"].message
    assert "4 files (406 bytes)" in codes["orphan-files"].message
    assert "(4 beyond-last-commit)" in codes["orphan-files"].message
    assert codes["orphan-files"].severity == "info"


def test_unfinished_repartition_is_an_error(memory_root):
    ckpt = memory_checkpoint(memory_root, planned=6, committed=5, repartition_to=8)
    (finding,) = [f for f in build_report(ckpt).findings if f.code == "unfinished-repartition"]
    assert finding.severity == "error" and "to 8 partitions (from 4)" in finding.message


def test_stale_files_from_purged_batches_are_orphans(memory_root):
    # batches 0..9 purged from the logs, but versions 1..4 still on disk with no snapshot
    # after them: versions 11.. load from snapshot 10, so 1..9 are stale.
    ckpt = memory_checkpoint(memory_root, planned=20, committed=20, first_batch=10,
                             extra_versions=range(1, 11), snapshots=(10,))
    report = build_report(ckpt, min_deltas=10)
    (finding,) = [f for f in report.findings if f.code == "orphan-files"]
    assert "36 files (3654 bytes)" in finding.message and "(36 stale)" in finding.message
    assert finding.severity == "warning"
    assert all(p.orphans == 9 for p in report.stores[0].partitions)


def test_missing_partition_and_unloadable_partition(memory_root):
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, memory_root, planned=6, committed=6, skip_partitions=(3,))
    fs.rm(f"{memory_root}/state/0/1/2.delta")
    report = build_report(open_checkpoint(f"memory://{memory_root}"))
    codes = {f.code: f for f in report.findings}
    assert codes["missing-partitions"].partitions == (3,)
    assert codes["cannot-load"].partitions == (1,) and codes["cannot-load"].severity == "error"


def test_rocksdb_layout(memory_root):
    ckpt = memory_checkpoint(memory_root, planned=5, committed=5, provider="rocksdb")
    (store,) = build_report(ckpt).stores
    assert store.provider == "rocksdb"
    assert store.files_by_kind == {"sst": 8, "zip": 20}
    assert all(p.versions_since_snapshot == 0 for p in store.partitions)
    assert [p.keys for p in store.partitions] == [65] * 4
    assert all(p.keys_version == 5 and p.missing_ssts == 0 for p in store.partitions)


def test_a_missing_sst_makes_the_partition_unloadable(memory_root):
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, memory_root, planned=5, committed=5, provider="rocksdb")
    fs.rm(f"{memory_root}/state/0/2/SSTs/000017-43062a3e-87dd-4425-8173-8c245328559f.sst")
    report = build_report(open_checkpoint(f"memory://{memory_root}"))
    (finding,) = report.findings
    assert finding.code == "cannot-load" and finding.partitions == (2,)
    assert report.stores[0].partitions[2].missing_ssts == 1


def test_local_paths_and_file_urls_give_the_same_model(tmp_path):
    write_checkpoint(fsspec.filesystem("file"), str(tmp_path / "ck"), planned=3, committed=3)
    a = build_report(open_checkpoint(str(tmp_path / "ck")))
    b = build_report(open_checkpoint(f"file://{tmp_path}/ck"))
    assert a.stores == b.stores and a.query_id == b.query_id


# ----------------------------------------------------------------------------- bad input
def test_missing_path(tmp_path):
    with pytest.raises(BadInput, match="no such file or folder"):
        open_checkpoint(str(tmp_path / "nope"))


def test_empty_folder_and_file_are_not_checkpoints(tmp_path):
    with pytest.raises(NotACheckpoint, match="not a Structured Streaming checkpoint"):
        open_checkpoint(str(tmp_path))
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotACheckpoint, match="is a file"):
        open_checkpoint(str(tmp_path / "f"))


def test_missing_metadata_names_the_file(memory_root):
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, memory_root, planned=2, committed=2)
    fs.rm(f"{memory_root}/metadata")
    with pytest.raises(NotACheckpoint) as caught:
        open_checkpoint(f"memory://{memory_root}")
    assert str(caught.value).startswith(f"memory://{memory_root}/metadata: missing")


def test_invalid_offsets_json_is_reported_with_the_file(memory_root):
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, memory_root, planned=3, committed=3)
    fs.pipe(f"{memory_root}/offsets/2", b'v1\n{"batchWatermarkMs":0,')
    ckpt = open_checkpoint(f"memory://{memory_root}")
    report = build_report(ckpt)  # the report shows it: the newest entry, so an error
    [finding] = [f for f in report.findings if f.code == "corrupt-log"]
    assert finding.severity == "error"
    assert finding.message.startswith(f"memory://{memory_root}/offsets/2: invalid JSON")
    with pytest.raises(CorruptFile) as caught:  # commands that compute from it stop
        raise_if_unsound(ckpt)
    assert str(caught.value).startswith(f"memory://{memory_root}/offsets/2: invalid JSON")


@ROOT_NEEDS_SETPRIV
def test_unreadable_file_is_a_one_line_error(tmp_path):
    """Permissions are real: as root the test drops to 'nobody' in a subprocess."""
    ck = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(ck), planned=2, committed=2)
    (ck / "offsets" / "1").chmod(0)
    for folder in (tmp_path, *tmp_path.parents):
        if folder != folder.parent:
            folder.chmod(folder.stat().st_mode | 0o005)
    for name in ("recovery", "report"):
        command = [sys.executable, "-m", "statekit.cli.main", name, str(ck)]
        if os.geteuid() == 0:
            command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                       *command]
        done = subprocess.run(command, capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.dirname(__file__)) + "/..")
        # the newest offsets entry, which a restart must read: neither the report nor the
        # estimate stands — both exit with the doctor's code and name the file
        assert done.returncode in (11, 12), done.stderr
        assert f"{ck}/offsets/1" in done.stdout and "permission denied" in done.stdout, \
            done.stdout
        if name == "recovery":
            assert "does not apply" in done.stdout

