"""State requests are validated against the model before any JVM starts (jobs.state_reader)."""

from __future__ import annotations

import shutil
import uuid

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.jobs.state_reader import (
    StateTarget,
    reader_confs,
    resolve_target,
    spark_path,
    translate,
)
from statekit.support.errors import BadInput, CorruptFile, JobFailed, UnsupportedFormat
from tests.unit.checkpoint_builder import operator_metadata_text, write_checkpoint


@pytest.fixture
def ckpt():
    root = f"/st-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, root, planned=5, committed=5)
    yield open_checkpoint(f"memory://{root}")
    fs.rm(root, recursive=True)


def test_default_target_is_operator_0_at_the_last_batch(ckpt):
    target = resolve_target(ckpt)
    assert (target.operator_id, target.operator_name, target.batch_id) == (
        0, "applyInPandasWithState", None)
    assert target.options() == {"operatorId": "0"}
    assert resolve_target(ckpt, batch=3).options() == {"operatorId": "0", "batchId": "3"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"operator": 2}, "no operator 2; operators: 0 (applyInPandasWithState)"),
    ({"store": "left"}, "operator 0 has no store 'left'; stores: default"),
    ({"join_side": "left"}, "--join-side applies to joins; operator 0 is applyInPandasWithState"),
    ({"state_var": "count"}, "--state-var/--timers apply to transformWithState"),
    ({"batch": 9}, "batch 9 is not a retained committed batch (0..4)"),
])
def test_bad_requests_fail_before_spark(ckpt, kwargs, message):
    with pytest.raises(BadInput) as caught:
        resolve_target(ckpt, **kwargs)
    assert message in str(caught.value)


def test_joins_need_a_side_or_a_store(ckpt):
    root = ckpt.location.root
    fs = fsspec.filesystem("memory")
    stores = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
              "right-keyWithIndexToValue")
    fs.pipe(f"{root}/state/0/_metadata/metadata",
            operator_metadata_text(name="symmetricHashJoin", stores=stores).encode())
    join = open_checkpoint(f"memory://{root}")
    with pytest.raises(BadInput, match=r"choose --join-side left\|right or --store"):
        resolve_target(join)
    assert resolve_target(join, join_side="right").options() == {"operatorId": "0",
                                                                 "joinSide": "right"}
    assert resolve_target(join, store=stores[1]).options()["storeName"] == stores[1]


def test_operators_without_metadata_are_derived_from_the_state_folders(tmp_path):
    """Spark 3.5 writes no operator metadata: the operator comes from state/<op>/, its
    partitions from the pinned conf, its name from the schema (a groupState value)."""
    write_checkpoint(fsspec.filesystem("file"), str(tmp_path / "ck"), planned=2, committed=2)
    (tmp_path / "ck/state/0/_metadata/metadata").unlink()
    ckpt = open_checkpoint(str(tmp_path / "ck"))
    [meta] = ckpt.operators.values()
    assert (meta.operator_id, meta.version, meta.num_partitions) == (0, 0, 4)
    assert meta.name == "flatMapGroupsWithState"
    assert [s.name for s in meta.stores] == ["default"]
    target = resolve_target(ckpt)
    assert (target.operator_id, target.store) == (0, None)
    shutil.rmtree(tmp_path / "ck/state/0")
    with pytest.raises(BadInput, match="no state under state/"):
        resolve_target(open_checkpoint(str(tmp_path / "ck")))


def test_reader_confs_and_paths(ckpt, tmp_path):
    assert reader_confs(ckpt) == {}
    write_checkpoint(fsspec.filesystem("file"), str(tmp_path / "ck"), planned=2, committed=2)
    (tmp_path / "ck/state/0/1/3_0a1b2c3d-0000-0000-0000-000000000000.changelog").write_bytes(b"")
    local = open_checkpoint(str(tmp_path / "ck"))
    assert reader_confs(local) == {
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
    assert spark_path(local) == str(tmp_path / "ck")
    assert StateTarget("p", 1, "x", state_var="v", timers=True).label == (
        "operator 1 (x) state variable v timers")


@pytest.mark.parametrize(("text", "kind", "expected"), [
    ("An error occurred while calling o77.getResult.\n: org.apache.spark.SparkException: "
     "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state.\n"
     "\tat x\nCaused by: java.io.EOFException: Stream ended prematurely\n\tat y",
     CorruptFile, "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading "
                  "state. (cause: java.io.EOFException: Stream ended prematurely)"),
    ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `nonsense` cannot be resolved.", BadInput,
     "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `nonsense` cannot be resolved."),
    ("[STDS_INVALID_OPTION_VALUE.WITH_MESSAGE] Registered timers are not available",
     UnsupportedFormat, "Registered timers are not available"),
    ("something else\nsecond line", JobFailed, "reading x failed: something else"),
])
def test_spark_errors_become_one_line(text, kind, expected):
    error = translate("reading x", RuntimeError(text))
    assert isinstance(error, kind) and expected in str(error) and "\n" not in str(error)
