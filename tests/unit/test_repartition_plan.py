"""Repartition planning, target metadata and staging, without a JVM."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.support.errors import UnsafeOperation, UnsupportedFormat
from statekit.writes.repartition_plan import plan_repartition
from statekit.writes.staging import MARKER, Staging
from statekit.writes.target import operator_metadata, repartition_offsets, write_logs
from tests.unit.checkpoint_builder import operator_metadata_text, write_checkpoint

LONG_AGO = 1_700_000_000_000 + 10**9  # "now" far after the builder's batch timestamps


def source(tmp_path, **kw):
    kw.setdefault("planned", 6)
    kw.setdefault("committed", 6)
    root = tmp_path / "src"
    write_checkpoint(fsspec.filesystem("file"), str(root), **kw)
    (root / "sources" / "0").mkdir(parents=True, exist_ok=True)
    (root / "sources" / "0" / "0").write_text("v1\n{}\n")
    return open_checkpoint(str(root))


def plan(ckpt, tmp_path, n=8, **kw):
    kw.setdefault("now_ms", LONG_AGO)
    return plan_repartition(ckpt, resolve(str(tmp_path / "dst")), n, **kw)


def test_plan_of_a_clean_checkpoint(tmp_path):
    ckpt = source(tmp_path, snapshots=[4])
    p = plan(ckpt, tmp_path)
    assert (p.from_partitions, p.to_partitions, p.last_committed) == (4, 8, 5)
    assert (p.repartition_batch, p.state_version) == (6, 7)
    (store,) = p.stores
    assert store.partitions == 4 and store.files == 4 * 3  # snapshot 4 + deltas 5, 6
    assert "metadata" in p.copied_logs and "offsets/5" in p.copied_logs
    assert "sources/0/0" in p.copied_logs and "state/0/0/_metadata/schema" in p.copied_logs
    assert json.loads(json.dumps(p.to_dict()))["state_version"] == 7


@pytest.mark.parametrize(("kw", "n", "error", "text"), [
    ({}, 4, UnsafeOperation, "already has 4 partitions"),
    ({"planned": 7}, 8, UnsafeOperation, "--allow-uncommitted"),
    ({"provider": "rocksdb", "snapshots": []}, 8, None, None),
])
def test_refusals(tmp_path, kw, n, error, text):
    ckpt = source(tmp_path, **kw)
    if error is None:
        assert plan(ckpt, tmp_path, n).provider == "rocksdb"
        return
    with pytest.raises(error, match=text):
        plan(ckpt, tmp_path, n)


def test_uncommitted_allowed_plans_from_the_last_commit(tmp_path):
    ckpt = source(tmp_path, planned=7, extra_versions=[7])
    p = plan(ckpt, tmp_path, allow_uncommitted=True)
    assert p.last_committed == 5 and "offsets/6" not in p.copied_logs
    assert any("exactly-once sink" in note for note in p.notes)


def test_live_query_target_and_operator_refusals(tmp_path):
    ckpt = source(tmp_path)
    last = ckpt.offset(5).timestamp_ms
    with pytest.raises(UnsafeOperation, match="looks live"):
        plan(ckpt, tmp_path, now_ms=last + 5_000)
    assert plan(ckpt, tmp_path, now_ms=last + 5_000, force=True).to_partitions == 8
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "x").write_text("x")
    with pytest.raises(UnsafeOperation, match="not empty"):
        plan(ckpt, tmp_path)
    with pytest.raises(UnsafeOperation, match="inside the source"):
        plan_repartition(ckpt, resolve(str(tmp_path / "src" / "new")), 8, now_ms=LONG_AGO)
    meta = tmp_path / "src" / "state" / "0" / "_metadata" / "metadata"
    meta.write_text(operator_metadata_text(name="transformWithStateExec"))
    with pytest.raises(UnsupportedFormat, match="transformWithState keeps one column family"):
        plan(open_checkpoint(str(tmp_path / "src")), tmp_path / "other")
    # a join's stores are placed by their names' shape: one named otherwise is refused
    meta.write_text(operator_metadata_text(name="symmetricHashJoin"))
    with pytest.raises(UnsupportedFormat, match="store 'default' is not one of the four"):
        plan(open_checkpoint(str(tmp_path / "src")), tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_dry_run_is_never_refused_for_what_only_a_write_must_not_do(tmp_path):
    """A live-looking query, an uncommitted batch, a target with content: a dry run writes
    nothing, so each is a note saying what the real run needs, not exit 6."""
    ckpt = source(tmp_path, planned=7, extra_versions=[7])
    last = ckpt.offset(6).timestamp_ms
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "x").write_text("x")
    for refused in ({"now_ms": last + 5_000}, {}):
        with pytest.raises(UnsafeOperation):
            plan(ckpt, tmp_path, **refused)
    p = plan(ckpt, tmp_path, now_ms=last + 5_000, dry_run=True)
    assert p.last_committed == 5
    notes = " ".join(p.notes)
    assert "looks live" in notes and "the real run will be refused" in notes
    assert "needs --allow-uncommitted" in notes
    assert "exists and is not empty" in notes and "needs another --out" in notes
    # what a dry run cannot plan at all stays an error
    with pytest.raises(UnsafeOperation, match="already has 4 partitions"):
        plan(ckpt, tmp_path, 4, dry_run=True)


def test_offsets_and_operator_metadata_rewrites():
    offsets = b'v1\n{"batchWatermarkMs":5,"batchTimestampMs":9,"conf":{' \
              b'"spark.sql.shuffle.partitions":"4","x":"y"}}\n{"logOffset":3}'
    out = repartition_offsets(offsets, 16, "o").decode().split("\n")
    assert out[0] == "v1" and out[2] == '{"logOffset":3}'
    meta = json.loads(out[1])
    assert meta["conf"] == {"spark.sql.shuffle.partitions": "16", "x": "y"}
    assert meta["batchWatermarkMs"] == 5
    rewritten = operator_metadata(operator_metadata_text().encode(), 3, "m").decode()
    assert json.loads(rewritten.split("\n")[1])["stateStoreInfo"][0]["numPartitions"] == 3


def test_staging_writes_logs_then_publishes_atomically(tmp_path):
    ckpt = source(tmp_path)
    p = plan(ckpt, tmp_path, n=2)
    target = resolve(str(tmp_path / "dst"))
    steps = []
    staging = Staging(target, ckpt.location.url, on_step=steps.append)
    staging.prepare()
    write_logs(ckpt, p, staging)
    assert not (tmp_path / "dst").exists()
    staged = tmp_path / ".dst.statekit-staging"
    assert (staged / MARKER).exists() and (staged / "offsets" / "6").exists()
    assert json.loads((staged / "offsets" / "6").read_text().split("\n")[1])["conf"][
        "spark.sql.shuffle.partitions"] == "2"
    meta = (staged / "state" / "0" / "_metadata" / "metadata").read_text()
    assert '"numPartitions":2' in meta
    assert "write offsets/6" in steps
    staging.write("commits/6", b"v1\n{}")
    staging.publish(last="commits/6")
    assert not staged.exists() and (tmp_path / "dst" / "commits" / "6").exists()
    assert not (tmp_path / "dst" / MARKER).exists()


def test_crashed_staging_is_replaced_and_foreign_folders_refused(tmp_path):
    ckpt = source(tmp_path)
    target = resolve(str(tmp_path / "dst"))

    def crash(step):
        if step == "write offsets/6":
            raise RuntimeError("crash")

    staging = Staging(target, ckpt.location.url, on_step=crash)
    staging.prepare()
    with pytest.raises(RuntimeError):
        write_logs(ckpt, plan(ckpt, tmp_path), staging)
    assert not (tmp_path / "dst").exists()  # a crash leaves no target
    rerun = Staging(target, ckpt.location.url)
    rerun.prepare()  # the stale staging folder is statekit's: replaced
    write_logs(ckpt, plan(ckpt, tmp_path), rerun)
    rerun.write("commits/6", b"v1\n{}")
    rerun.publish(last="commits/6")
    assert (tmp_path / "dst" / "offsets" / "6").exists()
    foreign = tmp_path / ".other.statekit-staging"
    foreign.mkdir()
    with pytest.raises(UnsafeOperation, match="not made by statekit"):
        Staging(resolve(str(tmp_path / "other")), "src").prepare()


def test_memory_filesystem_publish_moves_the_commit_last(tmp_path):
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, "/rp/src", planned=3, committed=3)
    ckpt = open_checkpoint("memory:///rp/src")
    target = resolve("memory:///rp/dst")
    p = plan_repartition(ckpt, target, 2, now_ms=LONG_AGO)
    staging = Staging(target, ckpt.location.url)
    staging.prepare()
    write_logs(ckpt, p, staging)
    staging.write("commits/3", b"v1\n{}")
    staging.publish(last="commits/3")
    assert fs.exists("/rp/dst/commits/3") and fs.exists("/rp/dst/offsets/3")
    assert not fs.exists("/rp/.dst.statekit-staging")


def _sink(tmp_path, batches: int, compact_every: int = 10):
    log = tmp_path / "out" / "_spark_metadata"
    log.mkdir(parents=True)
    entries = []
    for b in range(batches):
        entries.append(json.dumps({"path": f"file:/out/part-{b}.parquet", "size": b,
                                   "isDir": False, "modificationTime": 1, "blockReplication": 1,
                                   "blockSize": 1, "action": "add"}))
        if (b + 1) % compact_every == 0:
            (log / f"{b}.compact").write_text("v1\n" + "\n".join(entries))
        else:
            (log / str(b)).write_text("v1\n" + entries[-1])
    return resolve(str(tmp_path / "out"))


def test_file_sink_entry_plain_compacted_and_refused(tmp_path):
    from statekit.writes.file_sink import repartition_entry, write_entry

    sink = _sink(tmp_path / "a", 7)
    assert repartition_entry(sink, 7) == ("_spark_metadata/7", b"v1")
    with pytest.raises(UnsafeOperation, match="ends at batch 6"):
        repartition_entry(sink, 9)
    write_entry(sink, "_spark_metadata/7", b"v1")
    with pytest.raises(UnsafeOperation, match="already has"):
        write_entry(sink, "_spark_metadata/7", b"v1")
    sink = _sink(tmp_path / "b", 19)  # batch 19 is a compaction batch: 9.compact + 10..18
    name, data = repartition_entry(sink, 19)
    lines = data.decode().split("\n")
    assert name == "_spark_metadata/19.compact" and lines[0] == "v1"
    assert [json.loads(line)["size"] for line in lines[1:]] == list(range(19))



@pytest.mark.parametrize(("kw", "args", "error", "text"), [
    ({}, {"n": None, "to_provider": "hdfs"}, UnsafeOperation, "nothing to migrate"),
    ({}, {"n": None, "to_provider": "rocksdb", "changelog": False}, None, None),
    ({}, {"n": 4, "to_provider": "hdfs", "changelog": True}, UnsafeOperation,
     "RocksDB targets only"),
    ({}, {"n": None, "to_provider": "memory"}, UnsupportedFormat, "cannot migrate"),
    ({"provider": "rocksdb", "snapshots": []}, {"n": None, "to_provider": "rocksdb",
                                                "changelog": True},
     UnsafeOperation, "changelog checkpointing is not pinned"),
    ({"provider": "rocksdb", "snapshots": []}, {"n": 6, "to_provider": "hdfs"}, None, None),
])
def test_migration_plans_and_refusals(tmp_path, kw, args, error, text):
    ckpt = source(tmp_path, **kw)
    n = args.pop("n")
    if error is not None:
        with pytest.raises(error, match=text):
            plan(ckpt, tmp_path, n, **args)
        return
    p = plan(ckpt, tmp_path, n, **args)
    assert p.migrates and p.target_provider == args["to_provider"]
    assert p.to_partitions == (n or p.from_partitions)
    assert p.to_dict()["target_provider"] == args["to_provider"]


def test_migration_offsets_pin_the_new_provider(tmp_path):
    ckpt = source(tmp_path)
    p = plan(ckpt, tmp_path, None, to_provider="rocksdb")
    staging = Staging(resolve(str(tmp_path / "dst")), ckpt.location.url)
    staging.prepare()
    write_logs(ckpt, p, staging)
    conf = json.loads((tmp_path / ".dst.statekit-staging" / "offsets" / "6").read_text()
                      .split("\n")[1])["conf"]
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith(
        "RocksDBStateStoreProvider")
    assert conf["spark.sql.shuffle.partitions"] == "4"
    # batch N's entry is copied as it is: the provider changes with the new batch only
    assert (tmp_path / ".dst.statekit-staging" / "offsets" / "5").read_bytes() == \
        (tmp_path / "src" / "offsets" / "5").read_bytes()


def test_read_view_names_rocksdb_and_carries_the_schemas(tmp_path):
    from statekit.writes.target import READ_VIEW, write_read_view

    ckpt = source(tmp_path)
    p = plan(ckpt, tmp_path, 8, to_provider="rocksdb")
    staging = Staging(resolve(str(tmp_path / "dst")), ckpt.location.url)
    staging.prepare()
    view = tmp_path / ".dst.statekit-staging" / write_read_view(ckpt, p, staging)
    assert view.name == READ_VIEW
    conf = json.loads((view / "offsets" / "5").read_text().split("\n")[1])["conf"]
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith(
        "RocksDBStateStoreProvider")
    assert conf["spark.sql.shuffle.partitions"] == "4"  # the source's, read as it is
    assert (view / "metadata").exists() and (view / "commits" / "5").exists()
    assert (view / "state" / "0" / "0" / "_metadata" / "schema").exists()
    assert not list(view.rglob("*.delta")) and not list(view.rglob("*.snapshot"))


GOLDEN_35 = Path(__file__).resolve().parent.parent / "data" / "golden" / "spark-3.5.9"


@pytest.mark.parametrize(("query", "name", "prefix"), [
    ("aggregation_hdfs", "stateStoreSave", 0),
    ("session_window_hdfs", "sessionWindowStateStoreSaveExec", 1),
    ("stream_stream_join_hdfs", "symmetricHashJoin", 0),
    ("dedup_rocksdb_changelog", "dedupe", 0),
    ("apply_in_pandas_with_state_hdfs", "flatMapGroupsWithState", 0),
])
def test_operators_without_metadata_are_derived_as_spark_4_writes_them(query, name, prefix):
    from statekit.writes.target import derived_operator_metadata

    ckpt = open_checkpoint(str(GOLDEN_35 / query / "checkpoint"))
    assert [m.name for m in ckpt.operators.values()] == [name]
    (relative, data), = derived_operator_metadata(ckpt, 7).items()
    assert relative == "state/0/_metadata/metadata"
    version, body = data.decode().split("\n")
    meta = json.loads(body)
    assert version == "v1" and meta["operatorInfo"] == {"operatorId": 0, "operatorName": name}
    assert {s["numPartitions"] for s in meta["stateStoreInfo"]} == {7}
    assert {s["numColsPrefixKey"] for s in meta["stateStoreInfo"]} == {prefix}
    assert [s["storeName"] for s in meta["stateStoreInfo"]] == [s.name for s in
                                                               ckpt.operators[0].stores]


def test_derive_operator_by_schema_shape():
    from statekit.checkpoint.operators import derive_operator

    def name(stores=("default",), value=(), key=(), window=False):
        return derive_operator(0, list(stores), 4, list(value), list(key), window).name

    assert name(value=["expiresAtMicros"]) == "dedupeWithinWatermark"
    assert name(value=["session_window", "n"], key=["k", "sessionStartTime"],
                window=True) == "sessionWindowStateStoreSaveExec"
    # a grouping column that happens to be called sessionStartTime, no window in the value
    assert name(value=["n"], key=["sessionStartTime"]) == "stateStoreSave"
    assert name(stores=("a", "b"), value=["n"]) == "unknown"
    assert name(value=[]) == "unknown"


def test_schema_paths_are_retargeted_to_the_new_checkpoint(tmp_path):
    """transformWithState's v2 operator metadata names its schema files by absolute path:
    the staged copy keeps the source's (what Spark's rewriter reads), and just before
    publishing they are pointed at the target's own copies."""
    from statekit.writes.target import retarget_schema_paths, write_operator_metadata

    ckpt_root = tmp_path / "src"
    write_checkpoint(fsspec.filesystem("file"), str(ckpt_root), planned=6, committed=6,
                     provider="rocksdb", snapshots=[])
    (ckpt_root / "sources" / "0").mkdir(parents=True, exist_ok=True)
    (ckpt_root / "sources" / "0" / "0").write_text("v1\n{}\n")
    schema = ckpt_root / "state" / "0" / "_stateSchema" / "default" / "0_abc"
    schema.parent.mkdir(parents=True)
    schema.write_bytes(b"v3\n")
    body = {"operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPandasExec"},
            "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0,
                                "numPartitions": 4,
                                "stateSchemaFilePaths": [f"file:{schema}"]}],
            "operatorPropertiesJson": "{}"}
    v2 = ckpt_root / "state" / "0" / "_metadata" / "v2" / "0"
    v2.parent.mkdir(parents=True)
    v2.write_text("v2\n" + json.dumps(body))
    ckpt = open_checkpoint(str(ckpt_root))
    p = plan(ckpt, tmp_path, 8)
    staging = Staging(resolve(str(tmp_path / "dst")), ckpt.location.url)
    staging.prepare()
    write_operator_metadata(ckpt, p, staging, 8)
    staged = tmp_path / ".dst.statekit-staging" / "state" / "0" / "_metadata" / "v2" / "0"
    first = json.loads(staged.read_text().split("\n")[1])["stateStoreInfo"][0]
    assert first["numPartitions"] == 8 and first["stateSchemaFilePaths"] == [f"file:{schema}"]
    assert retarget_schema_paths(ckpt, staging, f"file:{tmp_path / 'dst'}") == \
        ["state/0/_metadata/v2/0"]
    moved = json.loads(staged.read_text().split("\n")[1])["stateStoreInfo"][0]
    assert moved["stateSchemaFilePaths"] == [
        f"file:{tmp_path / 'dst'}/state/0/_stateSchema/default/0_abc"]
    assert moved["numPartitions"] == 8
    assert v2.read_text() == "v2\n" + json.dumps(body)  # the source is untouched


def test_commit_of_the_new_batch_names_the_new_state_files(tmp_path):
    """Checkpoint format v2 commits name the state files they committed: the target's
    ``commits/N+1`` carries the ids of the files written for it, or none at all (a v1
    commit) for a format-v1 target such as HDFS; a v1 commit is copied byte for byte."""
    from statekit.writes.target import commit_entry

    ckpt = source(tmp_path)
    p = plan(ckpt, tmp_path, 3)
    v1 = (tmp_path / "src" / "commits" / "5").read_bytes()
    assert commit_entry(ckpt, p) == ("commits/6", v1)
    (tmp_path / "src" / "commits" / "5").write_text(
        'v2\n{"nextBatchWatermarkMs":7,"stateUniqueIds":{"0":[["a"],["b"],["c"],["d"]]}}')
    ckpt = open_checkpoint(str(tmp_path / "src"))
    new_ids = {"0": [["x"], ["y"], ["z"]]}
    name, data = commit_entry(ckpt, p, new_ids)
    header, body = data.decode().split("\n")
    assert (name, header, json.loads(body)) == (
        "commits/6", "v2", {"nextBatchWatermarkMs": 7, "stateUniqueIds": new_ids})
    header, body = commit_entry(ckpt, p)[1].decode().split("\n")
    assert (header, json.loads(body)) == ("v1", {"nextBatchWatermarkMs": 7})
