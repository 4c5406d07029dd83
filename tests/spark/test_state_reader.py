"""State rows through Spark's state data source (jobs.state_reader / ``statekit state``),
checked against what each real query was fed."""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from datetime import datetime, timezone

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import file_records
from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.jobs.state_analysis import (
    export_rows,
    state_stats,
    summarize_changes,
)
from statekit.jobs.state_reader import (
    read_changes,
    read_state,
    reader_confs,
    resolve_target,
    session_confs,
    state_variables,
)
from statekit.reference_pipeline.simulate import simulate
from statekit.support.errors import BadInput

pytestmark = [pytest.mark.spark]


def rows_of(spark, checkpoint, raw=False, **target):
    """State rows as dicts (or as Spark Rows with ``raw``: aggregation buffers repeat field
    names, so those must be read by position)."""
    ckpt = open_checkpoint(str(checkpoint))
    with session_confs(spark, reader_confs(ckpt)):
        rows = read_state(spark, resolve_target(ckpt, **target)).collect()
    return rows if raw else [r.asDict(recursive=True) for r in rows]


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(
        timezone.utc).replace(tzinfo=None)


def test_aggregation_rows_equal_the_input_grouped(spark, small_queries):
    query = small_queries.get("aggregation")
    expected = defaultdict(lambda: [0, 0])
    for r in query.rows:
        group = expected[(r["key"], r["bucket"], r["day"])]
        group[0] += 1
        group[1] += r["value"]
    # value = (count, sum(value), avg buffer sum, avg buffer count, sum(price), …)
    got = {(r.key.key, r.key.bucket, r.key.day.isoformat()): [r.value[0], r.value[1]]
           for r in rows_of(spark, query.checkpoint, raw=True)}
    assert got == dict(expected)


@pytest.mark.parametrize(("name", "columns"), [("dedup", ("key", "bucket")),
                                               ("dedup-within-watermark", ("key",))])
def test_dedup_keys_are_the_distinct_input_keys(spark, small_queries, name, columns):
    query = small_queries.get(name)
    got = {tuple(r["key"][c] for c in columns) for r in rows_of(spark, query.checkpoint)}
    assert got == {tuple(r[c] for c in columns) for r in query.rows}


def test_session_windows_count_their_events(spark, small_queries):
    query = small_queries.get("session-window")
    rows = rows_of(spark, query.checkpoint)
    assert rows
    for row in rows:
        key = row["key"]["key"]
        window = row["value"]["session_window"]
        inside = [ts(r["ts"]) for r in query.rows
                  if r["key"] == key and window["start"] <= ts(r["ts"]) < window["end"]]
        # value = (session_window, key, count buffer, sum buffer)
        assert row["value"]["count"] == len(inside) and min(inside) == window["start"]


@pytest.mark.parametrize("side", ["left", "right"])
def test_join_sides_hold_input_rows(spark, small_queries, side):
    query = small_queries.get("join")
    bucket = 0 if side == "left" else 1
    fed = {r["seq"]: r for r in query.rows if r["bucket"] == bucket}
    rows = rows_of(spark, query.checkpoint, join_side=side)
    assert rows and len({r["value"]["seq"] for r in rows}) == len(rows)
    for row in rows:
        original = fed[row["value"]["seq"]]
        assert row["value"]["key"] == original["key"] == row["key"]["field0"]
        assert row["value"]["value"] == original["value"]
    counts = rows_of(spark, query.checkpoint, store=f"{side}-keyToNumValues")
    assert sum(r["value"]["value"] for r in counts) == len(rows)


def test_apply_in_pandas_with_state_rows_equal_the_simulation(spark, reference_checkpoints):
    run = reference_checkpoints.get("hdfs")
    sim = simulate(run.landing)
    rows = rows_of(spark, run.checkpoint)
    assert {r["key"]["user_id"] for r in rows} == set(sim.state)
    for r in rows:
        assert r["value"]["groupState"]["phase"] == sim.state[r["key"]["user_id"]].phase.value


def test_transform_with_state_variables_and_timers(spark, small_queries):
    query = small_queries.get("tws", "rocksdb")
    ckpt = open_checkpoint(str(query.checkpoint))
    fed = Counter(r["key"] for r in query.rows)
    count = {r["key"]["key"]: r["value"]["n"]
             for r in rows_of(spark, query.checkpoint, state_var="count")}
    assert count == dict(fed)
    values = Counter(r["key"]["key"] for r in rows_of(spark, query.checkpoint,
                                                      state_var="values"))
    assert values == fed
    buckets = defaultdict(int)
    for r in rows_of(spark, query.checkpoint, state_var="buckets"):
        buckets[r["key"]["key"]] += r["user_map_value"]["n"]
    assert dict(buckets) == dict(fed)
    latest = defaultdict(lambda: datetime.min)
    for r in query.rows:
        latest[r["key"]] = max(latest[r["key"]], ts(r["ts"]))
    timers = rows_of(spark, query.checkpoint, timers=True)
    assert len(timers) == len(fed), "one registered timer per key"
    expiry = {r["key"]["key"]: r["expiration_timestamp_ms"] for r in timers}
    assert expiry == {k: int(v.replace(tzinfo=timezone.utc).timestamp() * 1000) + 86_400_000
                      for k, v in latest.items()}
    assert state_variables(ckpt, 0) == ["values", "buckets", "count"]  # as declared
    with pytest.raises(BadInput, match=r"choose --state-var \(values, buckets, count\)"):
        resolve_target(ckpt)


def test_change_feed_equals_the_delta_files(spark, small_queries):
    query = small_queries.get("aggregation")
    ckpt = open_checkpoint(str(query.checkpoint))
    target = resolve_target(ckpt)
    summary = summarize_changes(read_changes(spark, target, 0))
    expected = {}
    for batch in ckpt.committed_batches:
        ops = Counter()
        for instance in ckpt.inventory.instances_of(0):
            for f in instance.of_kind("delta"):
                if f.version == batch + 1:
                    ops.update(r.op for r in file_records(ckpt, f))
        expected[batch] = (ops["put"], ops["delete"])
    got = {b.batch_id: (b.upserts, b.deletes) for b in summary}
    assert got == {b: v for b, v in expected.items() if v != (0, 0)}
    assert sum(v[0] for v in got.values()) > 0


@pytest.mark.parametrize(("leaky", "share"), [(False, 0.0), (True, 1.0)])
def test_stats_counts_and_timeouts(spark, reference_checkpoints, leaky, share):
    run = reference_checkpoints.get("hdfs", leaky=leaky)
    ckpt = open_checkpoint(str(run.checkpoint))
    stats = state_stats(spark, ckpt, resolve_target(ckpt), top=3)
    assert stats.rows == run.result.state_keys() == sum(stats.rows_per_partition.values())
    assert stats.no_timeout_share == share
    assert len(stats.largest) == 3 and stats.largest[0]["size"] == stats.value_bytes["max"]
    if not leaky:  # every live session's timeout lies ahead of the watermark
        assert stats.timeout_minus_watermark_s["p50"] > 0


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_export_writes_every_row(spark, reference_checkpoints, tmp_path, fmt):
    run = reference_checkpoints.get("rocksdb")
    ckpt = open_checkpoint(str(run.checkpoint))
    target = resolve_target(ckpt)
    progress = []
    result = export_rows(spark, target, ckpt.last_committed_batch, str(tmp_path / "out"), fmt,
                         lambda done, total: progress.append((done, total)))
    assert result.rows == run.result.state_keys()
    assert progress and progress[-1][0] == progress[-1][1] > 0  # ends at "all tasks done"
    reader = spark.read.format({"jsonl": "json"}.get(fmt, fmt)).option("header", "true")
    back = reader.load(str(tmp_path / "out"))
    assert {"key.user_id", "partition_id", "batch_id"} <= set(back.columns)
    assert {str(r.batch_id) for r in back.select("batch_id").distinct().collect()} == {
        str(ckpt.last_committed_batch)}


def test_cli_show_where_json_and_errors(reference_checkpoints, small_queries, tmp_path,
                                        capsys):
    run = reference_checkpoints.get("rocksdb", changelog=True, variant="format-v2")
    code = run_cli(cli, "statekit", ["state", "show", str(run.checkpoint), "--json", "--where",
                                     "value.groupState.txn_count >= 2", "--limit", "1000"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["rows"]
    assert all(r["value.groupState"]["txn_count"] >= 2 for r in data["rows"])
    join = small_queries.get("join").checkpoint
    assert run_cli(cli, "statekit", ["state", "show", str(join)]) == 3
    assert "choose --join-side left|right or --store" in capsys.readouterr().err
    copy = tmp_path / "ck"
    shutil.copytree(reference_checkpoints.get("hdfs").checkpoint, copy)
    for delta in (copy / "state/0/1").glob("*.delta"):
        delta.write_bytes(delta.read_bytes()[:30])
    for snapshot in (copy / "state/0/1").glob("*.snapshot"):
        snapshot.unlink()
    code = run_cli(cli, "statekit", ["state", "show", str(copy)])
    err = capsys.readouterr().err
    # refused before Spark starts: the files' sizes disagree with their checksum files
    assert code == 4 and err.count("\n") == 1 and err.startswith(
        f"statekit: error: {copy}/state/0/1/") and "checksum file" in err


def test_cli_export_changes_stats_operators(reference_checkpoints, tmp_path, capsys):
    run = reference_checkpoints.get("hdfs")
    ck = str(run.checkpoint)
    last = run.result.progress[-1]["batchId"]

    def json_of(args):
        code = run_cli(cli, "statekit", ["state", *args, "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return json.loads(captured.out)

    out = tmp_path / "export"
    exported = json_of(["export", ck, "--out", str(out), "--format", "jsonl"])
    assert exported["rows"] == run.result.state_keys() and exported["batch_id"] == last
    assert run_cli(cli, "statekit", ["state", "export", ck, "--out", str(out)]) == 6
    assert "output exists and is not empty" in capsys.readouterr().err
    changes = json_of(["changes", ck, "--from-batch", str(last - 2), "--rows", "3"])
    assert changes["batches"] and {b["batch_id"] for b in changes["batches"]} <= {
        last - 2, last - 1, last}
    assert all(b["upserts"] + b["deletes"] > 0 for b in changes["batches"])
    assert len(changes["rows"]) == 3 and all(r["batch_id"] >= last - 2 for r in changes["rows"])
    stats = json_of(["stats", ck, "--top", "2"])
    assert stats["rows"] == run.result.state_keys() and len(stats["largest"]) == 2
    operators = json_of(["operators", ck])
    assert [(o["operator_id"], o["store"], o["agree"]) for o in operators] == [
        (0, "default", True)]
