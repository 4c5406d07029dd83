"""The reference pipeline on real local Spark, both providers, against ground truth."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from statekit.reference_pipeline.generator import generate
from statekit.reference_pipeline.pipeline import RunOptions, read_output, run
from statekit.reference_pipeline.simulate import simulate
from statekit.reference_pipeline.truth import (
    all_users,
    expected_sessions,
    fraud_labels,
    max_event_ms,
)
from tests.conftest import TEST_BATCHES, TEST_GENERATOR, TEST_PARTITIONS

pytestmark = [pytest.mark.spark]

WATERMARK_DELAY_MS = 5 * 60_000
NORMAL_RUNS = [("hdfs", False), ("rocksdb", False), ("rocksdb", True)]


def sink_rows(spark, output) -> list[dict]:
    return [row.asDict() for row in read_output(spark, str(output)).collect()]


def precision_recall(alerted: set[str], fraudulent: set[str]) -> str:
    hits = len(alerted & fraudulent)
    precision = hits / len(alerted) if alerted else 1.0
    recall = hits / len(fraudulent) if fraudulent else 1.0
    return (f"precision {precision:.3f} ({hits}/{len(alerted)} alerts), "
            f"recall {recall:.3f} ({hits}/{len(fraudulent)} fraud users); "
            f"missed {sorted(fraudulent - alerted)}, false {sorted(alerted - fraudulent)}")


@pytest.mark.parametrize(("provider", "changelog"), NORMAL_RUNS,
                         ids=["hdfs", "rocksdb", "rocksdb-changelog"])
def test_flags_every_fraudulent_user_and_no_one_else(spark, reference_checkpoints, provider,
                                                     changelog):
    ref = reference_checkpoints.get(provider, changelog=changelog)
    rows = sink_rows(spark, ref.output)
    alerted = {r["user_id"] for r in rows if r["kind"] == "alert"}
    fraudulent = set(fraud_labels(ref.landing))
    assert len(fraudulent) >= 5, "the test stream must contain fraud"
    assert alerted == fraudulent, precision_recall(alerted, fraudulent)
    assert len([r for r in rows if r["kind"] == "alert"]) == sum(
        len(v) for v in fraud_labels(ref.landing).values()), "one alert per fraud incident"


@pytest.mark.parametrize(("provider", "changelog"), NORMAL_RUNS,
                         ids=["hdfs", "rocksdb", "rocksdb-changelog"])
def test_session_summaries_match_ground_truth(spark, reference_checkpoints, provider, changelog):
    ref = reference_checkpoints.get(provider, changelog=changelog)
    progress = ref.result.progress
    final_watermark = max_event_ms(ref.landing) - WATERMARK_DELAY_MS
    last_wm = progress[-1]["eventTime"]["watermark"]
    assert last_wm == _iso_ms(final_watermark)

    truth = expected_sessions(ref.landing, final_watermark)
    expected = sorted((t.user_id, t.session_start_ms, t.last_event_ms, t.closed_ms,
                       t.txn_count, t.total_amount, t.final_phase, t.close_reason)
                      for t in truth if t.close_reason)
    emitted = sorted((r["user_id"], r["session_start_ms"], r["last_event_ms"], r["event_ms"],
                      r["txn_count"], r["total_amount"], r["phase"], r["reason"])
                     for r in sink_rows(spark, ref.output) if r["kind"] == "session")
    missing = sorted(set(expected) - set(emitted))[:5]
    extra = sorted(set(emitted) - set(expected))[:5]
    assert emitted == expected, f"missing {missing}, unexpected {extra}"
    still_open = sum(1 for t in truth if t.close_reason is None)
    assert ref.result.state_keys() == still_open


@pytest.mark.parametrize(("provider", "changelog"), NORMAL_RUNS,
                         ids=["hdfs", "rocksdb", "rocksdb-changelog"])
def test_key_count_stays_bounded(reference_checkpoints, provider, changelog):
    ref = reference_checkpoints.get(provider, changelog=changelog)
    keys = [k for _, _, k in ref.result.keys_per_batch()]
    assert len(keys) == TEST_BATCHES + 1  # one batch per file + the final no-data batch
    # Spark's state size after every batch is exactly what the semantics predict …
    assert keys == simulate(ref.landing).keys_per_batch
    # … and it levels off: once sessions close as fast as they open, no upward trend.
    settled = keys[7:TEST_BATCHES]
    assert max(settled) <= 1.25 * min(settled), keys
    assert keys[-1] < max(keys)  # the final watermark closes sessions


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_leaky_variant_grows_every_batch(reference_checkpoints, provider):
    ref = reference_checkpoints.get(provider, leaky=True)
    per_batch = ref.result.keys_per_batch()
    data_batches = [k for _, rows, k in per_batch if rows > 0]
    assert len(data_batches) == TEST_BATCHES
    assert all(b > a for a, b in pairwise(data_batches)), data_batches
    assert per_batch[-1][2] >= len(all_users(ref.landing))
    normal = reference_checkpoints.get(provider)
    assert per_batch[-1][2] > 2 * normal.result.state_keys()


def test_checkpoints_have_the_files_later_tools_read(reference_checkpoints):
    hdfs = reference_checkpoints.get("hdfs").checkpoint
    rocks = reference_checkpoints.get("rocksdb").checkpoint
    changelog = reference_checkpoints.get("rocksdb", changelog=True).checkpoint
    for ckpt in (hdfs, rocks, changelog):
        assert json.loads((ckpt / "metadata").read_text())["id"]
        assert len(list((ckpt / "commits").glob("[0-9]*"))) == TEST_BATCHES + 1
        partitions = [p for p in (ckpt / "state" / "0").iterdir() if p.name.isdigit()]
        assert len(partitions) == TEST_PARTITIONS
    assert list(hdfs.rglob("*.delta"))
    assert list(hdfs.rglob("*.snapshot")), "maintenance (200ms) wrote no HDFS snapshot"
    assert list(rocks.rglob("*.zip")) and list(rocks.rglob("*.sst"))
    assert list(changelog.rglob("*.changelog"))
    offsets = (hdfs / "offsets" / "0").read_text().splitlines()
    conf = json.loads(offsets[1])["conf"]
    assert conf["spark.sql.shuffle.partitions"] == str(TEST_PARTITIONS)
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith(
        "HDFSBackedStateStoreProvider")


def test_restart_in_two_halves_gives_exactly_the_same_output(spark, reference_checkpoints,
                                                            tmp_path):
    whole = reference_checkpoints.get("hdfs")
    landing = tmp_path / "landing"
    opts = RunOptions(landing=landing, checkpoint=str(tmp_path / "checkpoint"),
                      output=str(tmp_path / "output"), provider="hdfs",
                      partitions=TEST_PARTITIONS)
    half = TEST_BATCHES // 2
    generate(landing, TEST_GENERATOR, half)
    first = run(spark, opts)
    generate(landing, TEST_GENERATOR, TEST_BATCHES - half)
    second = run(spark, opts)
    assert first.batches[0] == 0 and second.batches[0] == first.batches[-1] + 1
    assert second.state_keys() == whole.result.state_keys()

    def canonical(output: Path) -> list[tuple]:
        return sorted(tuple(r[c] for c in sorted(r)) for r in sink_rows(spark, output))

    split_rows = canonical(tmp_path / "output")
    assert len(split_rows) == whole.result.output_rows
    assert split_rows == canonical(whole.output)


def _iso_ms(ms: int) -> str:
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{ms % 1000:03d}Z"
