"""``statekit evict`` on real checkpoints: the target read through Spark's ``statestore`` reader
is the source minus exactly the selected rows, the query restarts on it, and a leak fixed by
eviction plus a fix deploy is bounded in ``statekit growth``."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.cli.runner import run_cli
from statekit.growth.analysis import analyse
from statekit.growth.trend import ACCELERATING, BOUNDED, GROWING
from tests.support.spark_runs import (
    final_state,
    run_by_batch,
    run_to_end,
    source_confs,
)
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def evict(*args: str, code: int = 0) -> dict:
    import io
    from contextlib import redirect_stdout

    from statekit.cli.main import cli

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        got = run_cli(cli, "statekit", ["evict", *args, "--force", "--json"])
    assert got == code, buffer.getvalue()
    return json.loads(buffer.getvalue()) if code == 0 else {}


def _key_of(entry: tuple) -> str:
    return json.loads(entry[2])["key"]["key"]


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb-changelog"])
def test_evict_by_predicate_removes_exactly_those_rows_and_restarts(spark, sources, tmp_path,
                                                                   provider):
    source = sources.get("aggregation", provider)
    before = tree_hash(source.checkpoint)
    state = final_state(spark, source.checkpoint)
    poisoned = {"k01", "k02", "k03"}
    chosen = Counter({e: n for e, n in state.items() if _key_of(e) in poisoned})
    assert chosen and len(chosen) < len(state)

    target = tmp_path / "target"
    result = evict(str(source.checkpoint), "--out", str(target),
                   "--where", "key.key IN ('k01', 'k02', 'k03')")
    assert result["verification"]["ok"]
    assert result["plan"]["removed_total"] == sum(chosen.values())
    assert tree_hash(source.checkpoint) == before
    # Spark's reader on the target: the source minus exactly the selected rows
    assert final_state(spark, target) == state - chosen
    written = open_checkpoint(str(target))
    assert written.offset(written.last_committed_batch).provider == \
        ("hdfs" if provider == "hdfs" else "rocksdb")

    # the restart with the fourth file: every other key emits what it would have
    output = run_to_end(spark, "aggregation", source.input_dir, target,
                        source_confs(provider, "aggregation"))
    kept = [r for r in output if r[0] not in poisoned]
    assert kept == [r for r in source.expected_output if r[0] not in poisoned] and kept
    # … and the evicted keys start counting again
    for row in (r for r in output if r[0] in poisoned):
        full = next(e for e in source.expected_output if e[:2] == row[:2])
        assert int(row[2]) <= int(full[2])


def _raw_rows_by_key(spark, checkpoint: Path) -> dict[str, Counter]:
    """transformWithState's raw rows (every column family, as ``final_state`` shows them)
    by the grouping key Spark extracts from each."""
    from pyspark.sql import functions as F

    from statekit.jobs.raw_rows import read_raw_rows
    from statekit.jobs.state_reader import reader_confs, session_confs

    ckpt = open_checkpoint(str(checkpoint))
    by_key: dict[str, Counter] = {}
    with session_confs(spark, reader_confs(ckpt)):
        for store in ckpt.inventory.stores(0):
            frame = read_raw_rows(spark, str(checkpoint), ckpt.last_committed_batch, 0, store)
            for key, row in frame.select("partition_key.key", F.to_json(F.struct(
                    "column_family_name", F.hex("key_bytes"), F.hex("value_bytes")))).collect():
                by_key.setdefault(key, Counter())[(0, store, row)] += 1
    return by_key


@pytest.mark.parametrize("provider", ["rocksdb", "rocksdb-changelog"])
def test_evict_transform_with_state_keys_from_every_column_family(spark, sources, tmp_path,
                                                                  provider):
    """The selected grouping keys lose their rows in every column family — value, list
    and map state, timers — and nothing else changes; the restarted query treats them as
    new keys and every other key as before."""
    source = sources.get("tws", provider)
    before = tree_hash(source.checkpoint)
    state = final_state(spark, source.checkpoint)
    by_key = _raw_rows_by_key(spark, source.checkpoint)
    poisoned = {"k01", "k02", "k03"}
    chosen = sum((by_key[k] for k in poisoned), Counter())
    families = {json.loads(row)["column_family_name"] for _, _, row in chosen}
    assert {"count", "values", "buckets"} <= families and any("Timers" in f or "timer" in f
                                                              for f in families), families
    assert sum(chosen.values()) < sum(state.values())

    dry = evict(str(source.checkpoint), "--out", str(tmp_path / "dry"), "--dry-run",
                "--where", "key.key IN ('k01', 'k02', 'k03')")
    assert dry["plan"]["removed_total"] == sum(chosen.values())
    assert not (tmp_path / "dry").exists()
    target = tmp_path / "target"
    result = evict(str(source.checkpoint), "--out", str(target),
                   "--where", "key.key IN ('k01', 'k02', 'k03')")
    assert result["verification"]["ok"], result["verification"]
    assert result["plan"]["removed_total"] == sum(chosen.values())
    assert tree_hash(source.checkpoint) == before
    assert final_state(spark, target) == state - chosen

    output = run_to_end(spark, "tws", source.input_dir, target, source_confs(provider, "tws"))
    kept = [r for r in output if r[0] not in poisoned]
    assert kept == [r for r in source.expected_output if r[0] not in poisoned] and kept
    for row in (r for r in output if r[0] in poisoned):  # counting again from nothing
        assert int(row[1]) <= max(int(e[1]) for e in source.expected_output if e[0] == row[0])


def _fmgws_source(spark, root: Path, provider: str):
    """applyInPandasWithState stopped before its no-data batch: the timeouts behind the
    watermark are still in state (they would fire at the next batch). The third file jumps
    two hours ahead with keys k00-k04 only, so every other key's timeout is due; the fourth
    (the restart's) has those five keys only."""
    from tests.small_queries import _write_input, make_rows

    def later(rows: list[dict], minutes: int) -> list[dict]:
        out = []
        for row in rows:
            if row["key"] < "k05":
                ts = dt.datetime.fromisoformat(row["ts"].replace("Z", "+00:00"))
                stamp = (ts + dt.timedelta(minutes=minutes)).isoformat()
                out.append({**row, "ts": stamp.replace("+00:00", "Z")})
        return out

    files = make_rows(seed=11)
    input_dir = root / "input"
    _write_input(input_dir, [files[0], files[1], later(files[2], 120)])
    checkpoint = root / "checkpoint"
    confs = {**source_confs(provider, "fmgws"), NO_DATA_BATCHES: "false"}
    run_to_end(spark, "fmgws", input_dir, checkpoint, confs)
    (input_dir / "part-003.json").write_text(
        "".join(json.dumps(r) + "\n" for r in later(files[3], 130)))
    return checkpoint, input_dir, confs


def test_evict_expired_timeouts(spark, tmp_path):
    from pyspark.sql import functions as F

    from statekit.jobs.state_reader import StateTarget, read_state

    checkpoint, input_dir, confs = _fmgws_source(spark, tmp_path / "src", "rocksdb")
    ckpt = open_checkpoint(str(checkpoint))
    last = ckpt.last_committed_batch
    watermark = json.loads((checkpoint / "commits" / str(last)).read_text().splitlines()[1])[
        "nextBatchWatermarkMs"]
    rows = read_state(spark, StateTarget(str(checkpoint), 0, "applyInPandasWithState",
                                         "default"))
    due = {r["k"] for r in rows.where(
        (F.col("value.timeoutTimestamp") != -1)
        & (F.col("value.timeoutTimestamp") < watermark)).select(F.col("key.key").alias("k"))
        .collect()}
    assert due and len(due) < rows.count()

    dry = evict(str(checkpoint), "--out", str(tmp_path / "dry"), "--expired", "--dry-run")
    assert dry["dry_run"] and not (tmp_path / "dry").exists()
    assert dry["plan"]["removed_total"] == len(due) and dry["plan"]["watermark_ms"] == watermark
    sample = dry["plan"]["sample"]["0/default"]
    assert {r["key"]["key"] for r in sample} <= due
    assert all(r["value"]["timeoutTimestamp"] < watermark for r in sample)

    target = tmp_path / "target"
    result = evict(str(checkpoint), "--out", str(target), "--expired")
    assert result["verification"]["ok"] and result["plan"]["removed_total"] == len(due)
    left = {json.loads(e[2])["key"]["key"] for e in final_state(spark, target)}
    assert not left & due

    # restarted: the copy of the source fires the due timeouts (negated counts); the target
    # has no such state left, every other key behaves the same
    copy = tmp_path / "copy"
    shutil.copytree(checkpoint, copy)
    expected = run_by_batch(spark, "fmgws", input_dir, copy, confs)
    got = run_by_batch(spark, "fmgws", input_dir, target, confs)
    fired = {r[0] for rows in expected.values() for r in rows if int(r[1]) < 0}
    fourth = {json.loads(line)["key"] for line in
              (input_dir / "part-003.json").read_text().splitlines()}
    assert due - fourth and due - fourth <= fired  # a key with new rows does not time out
    assert not {r[0] for rows in got.values() for r in rows if int(r[1]) < 0} & due
    flat = sorted(r for rows in expected.values() for r in rows if r[0] not in due)
    assert sorted(r for rows in got.values() for r in rows if r[0] not in due) == flat


def test_stale_keys_of_the_leaky_pipeline_use_growths_key_age(spark, reference_checkpoints,
                                                              tmp_path):
    """--stale-after K removes exactly the keys ``statekit growth --stale-after K`` counts
    as untouched; --no-timeout narrows nothing here (the leaky query sets none)."""
    leaky = reference_checkpoints.get("hdfs", leaky=True).checkpoint
    stale = 4
    report = analyse(open_checkpoint(str(leaky)), stale_after=stale)
    (store,) = report.stores
    untouched = store.history.versions[-1].untouched
    keys = store.history.versions[-1].keys
    assert 0 < untouched < keys

    target = tmp_path / "target"
    result = evict(str(leaky), "--out", str(target), "--stale-after", str(stale),
                   "--no-timeout")
    assert result["verification"]["ok"]
    assert result["plan"]["removed_total"] == untouched
    assert result["verification"]["stores"][0]["target_rows"] == keys - untouched
    sample = result["plan"]["sample"]["0/default"]
    last_version = result["plan"]["last_committed"] + 1
    assert all(last_version - r["changed_at"] >= stale for r in sample)
    assert all(r["key"]["user_id"].startswith("u") for r in sample)


def test_leaked_windows_evicted_then_fix_deploy_is_bounded(spark, tmp_path):
    """A windowed count without a watermark leaks a window per user forever. Evicting the
    stale windows and restarting with the fix (a watermark; the state schema is the same)
    turns the growing history into a bounded one."""
    from tests import growth_queries
    from tests.small_queries import provider_confs, run_query

    leak = growth_queries.build(spark, tmp_path, "agg-no-watermark")
    before = analyse(open_checkpoint(str(leak.checkpoint)))
    assert before.verdict in (GROWING, ACCELERATING)
    source_keys = before.stores[0].history.versions[-1].keys

    target = tmp_path / "target"
    result = evict(str(leak.checkpoint), "--out", str(target), "--stale-after", "2")
    assert result["verification"]["ok"]
    kept = result["verification"]["stores"][0]["target_rows"]
    assert kept < source_keys / 3

    input_dir = leak.checkpoint.parent / "input"
    first = growth_queries.BATCHES
    growth_queries._write_input(input_dir, batches=range(first, first + 10))
    df, mode = growth_queries.query(spark, input_dir, "agg-watermark")
    run_query(spark, df, target, provider_confs("hdfs", "lz4"), mode)
    after = analyse(open_checkpoint(str(target)))
    assert after.verdict == BOUNDED, (after.verdict, after.summary)
    assert after.stores[0].history.versions[-1].keys < source_keys / 3


def test_refusals_are_one_line_and_write_nothing(spark, sources, small_queries, tmp_path,
                                                 capsys):
    source = sources.get("aggregation", "hdfs")
    before = tree_hash(source.checkpoint)
    target = tmp_path / "target"
    args = [str(source.checkpoint), "--out", str(target)]
    evict(*args, "--where", "key.nope = 1", code=3)  # Spark's analysis error, exit 3
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    evict(*args, code=3)  # nothing selected
    evict(*args, "--expired", code=5)  # an aggregation has no timeouts
    join = small_queries.get("join").checkpoint
    evict(str(join), "--out", str(target), "--where", "true", code=5)
    err = capsys.readouterr().err
    assert "keyToNumValues" in err
    tws = small_queries.get("tws", "rocksdb").checkpoint
    evict(str(tws), "--out", str(target), "--stale-after", "2", code=5)
    assert "key ages" in capsys.readouterr().err
    evict(str(tws), "--out", str(target), "--where", "value.n > 1", code=3)
    err = capsys.readouterr().err
    assert "key.*, the grouping key, only" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()
    assert not list(tmp_path.glob(".*statekit-staging"))
    assert tree_hash(source.checkpoint) == before


def test_a_failed_write_leaves_no_target(spark, sources, tmp_path):
    from statekit.checkpoint.location import resolve
    from statekit.jobs.evict import run_evict
    from statekit.jobs.state_reader import reader_confs, session_confs
    from statekit.support.errors import StatekitError
    from statekit.writes.evict import Selection, plan_evict
    from statekit.writes.staging import Staging

    source = sources.get("aggregation", "hdfs")
    before = tree_hash(source.checkpoint)
    ckpt = open_checkpoint(str(source.checkpoint))
    target = resolve(str(tmp_path / "target"))
    plan = plan_evict(ckpt, target, Selection(where="key.key = 'k01'"), force=True)
    version = plan.base.state_version
    with session_confs(spark, reader_confs(ckpt)), pytest.raises(StatekitError):
        run_evict(spark, ckpt, plan, Staging(target, ckpt.location.url), storage_options={},
                  fail_on=f"write state/0/1/{version}.snapshot")
    assert not (tmp_path / "target").exists()
    assert not list(tmp_path.glob(".*statekit-staging"))
    assert tree_hash(source.checkpoint) == before
