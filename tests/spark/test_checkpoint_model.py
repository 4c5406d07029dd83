"""The pure-Python checkpoint model and report against what Spark wrote and what Spark reads."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.jobs.state_analysis import compare_operators
from statekit.jobs.state_reader import reader_confs, session_confs, spark_path
from statekit.report.batches import batch_timeline
from statekit.report.checkpoint_report import build_report
from tests.conftest import TEST_PARTITIONS
from tests.spark.real_checkpoints import ALL, REFERENCE, checkpoint_for

pytestmark = [pytest.mark.spark]

_DATA_FILE = re.compile(r"^(\d+)(?:_[0-9a-f-]+)?\.(delta|snapshot|zip|changelog)$")


@pytest.fixture(params=ALL)
def real(request, reference_checkpoints, small_queries) -> tuple[str, Path]:
    return request.param, checkpoint_for(request.param, reference_checkpoints, small_queries)


def independent_listing(checkpoint: Path) -> tuple[Counter, Counter]:
    """(file counts, bytes) per (operator, store, partition, kind), straight from os.walk."""
    counts, sizes = Counter(), Counter()
    state = checkpoint / "state"
    for folder, _dirs, names in os.walk(state):
        rel = Path(folder).relative_to(state).parts
        for name in names:
            if name.endswith(".crc") or "_metadata" in rel or "_stateSchema" in rel:
                continue
            if name.startswith(".") and name.endswith(".tmp"):  # an upload Spark left behind
                continue
            if rel and rel[-1] == "SSTs":
                kind, where = "sst", rel[:-1]
            else:
                match = _DATA_FILE.match(name)
                assert match, f"unexpected file {folder}/{name}"
                kind, where = match[2], rel
            store = where[2] if len(where) == 3 else "default"
            key = (int(where[0]), store, int(where[1]), kind)
            counts[key] += 1
            sizes[key] += (Path(folder) / name).stat().st_size
    return counts, sizes


def test_report_counts_equal_an_independent_listing(real):
    name, checkpoint = real
    report = build_report(open_checkpoint(str(checkpoint)))
    counts, sizes = independent_listing(checkpoint)
    assert counts, f"{name}: Spark wrote no state files?"
    seen = Counter()
    for store in report.stores:
        for part in store.partitions:
            key = (store.operator_id, store.store, part.partition)
            change = counts[(*key, "delta")] + counts[(*key, "changelog")]
            full = counts[(*key, "snapshot")] + counts[(*key, "zip")]
            assert (part.deltas, part.snapshots, part.sst_files) == (
                change, full, counts[(*key, "sst")]), f"{name} {key}"
            assert part.bytes == sum(v for k, v in sizes.items() if k[:3] == key)
            seen.update({k: v for k, v in counts.items() if k[:3] == key})
    assert seen == counts, f"{name}: files the report missed: {counts - seen}"
    assert report.state_files == sum(counts.values())


def test_operators_equal_what_the_state_metadata_reader_returns(spark, real):
    """``statekit state operators``' comparison (:func:`compare_operators`, Spark's
    ``state-metadata`` beside the model) agrees on every store, and what Spark returned is
    the model's operators, stores, partitions and batch range as listed here."""
    name, checkpoint = real
    ckpt = open_checkpoint(str(checkpoint))
    with session_confs(spark, reader_confs(ckpt)):
        rows = compare_operators(spark, ckpt, spark_path(ckpt))
    assert rows and all(r.agree for r in rows), (name, [r.to_dict() for r in rows])
    ours = {(op.operator_id, op.name, store.name, store.num_partitions,
             ckpt.committed_batches[0], ckpt.last_committed_batch)
            for op in ckpt.operators.values() for store in op.stores}
    theirs = {(r.operator_id, r.spark["operator_name"], r.store, r.spark["num_partitions"],
               r.spark["min_batch_id"], r.spark["max_batch_id"]) for r in rows}
    assert ours == theirs, name
    if name == "join":
        assert {store for (_, _, store, *_rest) in ours} == {
            "left-keyToNumValues", "left-keyWithIndexToValue",
            "right-keyToNumValues", "right-keyWithIndexToValue"}


@pytest.mark.parametrize("name", list(REFERENCE))
def test_batches_follow_the_queries_own_progress(reference_checkpoints, name):
    run = reference_checkpoints.get(**REFERENCE[name])
    timeline = batch_timeline(open_checkpoint(str(run.checkpoint)))
    by_id = {row.batch_id: row for row in timeline.rows}
    progress = [json.loads(line) for line in run.progress_log.read_text().splitlines()]
    assert progress
    for event in progress:
        row = by_id.get(event["batchId"])
        if row is None:  # purged by minBatchesToRetain
            assert name == "hdfs-purged" and event["batchId"] < timeline.rows[0].batch_id
            continue
        assert row.committed and row.planned
        watermark = event.get("eventTime", {}).get("watermark")
        if watermark:
            assert _iso_to_ms(watermark) == row.watermark_ms
    assert timeline.last_committed == progress[-1]["batchId"]
    intervals = [r.interval_ms for r in timeline.rows[1:]]
    assert all(i is not None and i >= 0 for i in intervals)


def _iso_to_ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_healthy_checkpoints_have_no_errors_orphans_or_lag_warnings(real):
    _name, checkpoint = real
    report = build_report(open_checkpoint(str(checkpoint)), min_deltas=3)
    codes = {f.code for f in report.findings}
    assert not codes & {"cannot-load", "orphan-files", "missing-partitions",
                        "uncommitted-batch", "unfinished-repartition"}, report.findings
    for store in report.stores:
        assert len(store.partitions) == store.num_partitions
        assert all(p.loadable for p in store.partitions)


def test_purged_checkpoint_keeps_only_recent_batches_and_no_orphans(reference_checkpoints):
    ckpt = open_checkpoint(str(reference_checkpoints.get("hdfs", variant="purged").checkpoint))
    assert ckpt.committed_batches[0] > 0, "minBatchesToRetain=4 should have purged old batches"
    report = build_report(ckpt, min_deltas=3)
    assert sum(p.orphans for s in report.stores for p in s.partitions) == 0
    oldest = min(f.version for f in ckpt.inventory.all_files() if f.version is not None)
    assert oldest > 1, "old state files should have been cleaned up too"


def test_no_snapshot_checkpoint_reports_full_replay(reference_checkpoints):
    ckpt = open_checkpoint(str(
        reference_checkpoints.get("hdfs", variant="no-snapshot").checkpoint))
    report = build_report(ckpt, min_deltas=3)
    (store,) = report.stores
    assert all(p.snapshots == 0 and p.latest_snapshot is None for p in store.partitions)
    assert all(p.versions_since_snapshot == store.committed_version for p in store.partitions)
    (finding,) = [f for f in report.findings if f.code == "no-snapshot"]
    assert finding.partitions == tuple(range(store.num_partitions))


def test_format_v2_checkpoint_is_recognised(reference_checkpoints):
    ckpt = open_checkpoint(str(reference_checkpoints.get(
        "rocksdb", changelog=True, variant="format-v2").checkpoint))
    report = build_report(ckpt)
    assert report.checkpoint_format_version == 2 and report.changelog_checkpointing
    files = list(ckpt.inventory.all_files())
    assert files and all(f.unique_id for f in files if f.kind in ("zip", "changelog"))
    last = ckpt.commit(ckpt.last_committed_batch)
    assert last.version == 2 and last.state_unique_ids
    assert report.crc_files >= len([f for f in files if f.kind != "sst"])


def test_sparks_failed_in_place_repartition_is_reported(spark, reference_checkpoints,
                                                        tmp_path):
    """Spark 4.2+'s internal repartition refuses HDFS-backed state only after writing a new
    offsets entry — the checkpoint can no longer restart. The report must say so."""
    import shutil

    copy = tmp_path / "ck"
    shutil.copytree(reference_checkpoints.get("hdfs").checkpoint, copy)
    before = open_checkpoint(str(copy))
    with pytest.raises(Exception, match="UNSUPPORTED_PROVIDER"):
        spark._streamingCheckpointManager.repartition(str(copy), 6, True)
    ckpt = open_checkpoint(str(copy))
    assert ckpt.uncommitted_batches == [before.last_committed_batch + 1]
    (finding,) = [f for f in build_report(ckpt).findings if f.code == "unfinished-repartition"]
    assert finding.severity == "error"
    assert f"to 6 partitions (from {TEST_PARTITIONS})" in finding.message
