#!/usr/bin/env python3
"""Regenerate the golden checkpoints written by older Spark versions.

Run it with the interpreter of a virtualenv that has exactly one pyspark installed::

    /work/golden-venvs/3.5.9/bin/python tests/data/golden/regenerate.py
    /work/golden-venvs/3.5.9/bin/python tests/data/golden/regenerate.py --query session_window_hdfs

It writes ``spark-<version>/<query>/checkpoint/`` and ``spark-<version>/<query>/manifest.json``
beside this file (any earlier copy of that query folder is deleted first). The input rows come
from a fixed seed, so they are the same for every Spark version; the landing folders live under
``/tmp/statekit-golden/<version>/<query>/`` so the absolute paths recorded in ``sources/`` and
``offsets/`` are stable and mean nothing.

Self-contained on purpose: stdlib + pyspark + pandas only, never ``statekit``. The input
generators and the ``expected_*`` functions need only the stdlib, so a test can import this file
(``importlib`` by path) to get the exact rows a checkpoint was fed without having pyspark.

Every query gets exactly 3 committed batches: one input file is added before each
``trigger(availableNow=True)`` run, and ``spark.sql.streaming.noDataMicroBatches.enabled`` is
false so a watermark change never adds an extra no-data batch. The expected state rows are then
computed here from the input with the event-time rules Spark applies (watermark of batch N =
max event time of batches < N minus the delay, the minimum over inputs for a join; rows at or
below it are late and dropped; state at or below the operator's state watermark is evicted at
the end of the batch). Timestamps carry random milliseconds and every ``expected_*`` function
checks that no row sits within a few milliseconds of a boundary, so ``<`` vs ``<=`` never
matters.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANDING_ROOT = Path("/tmp/statekit-golden")
START = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)
BATCHES = 3
SHUFFLE_PARTITIONS = 2
SEED = 20260105
MINUTE_MS = 60_000
EPSILON_MS = 3  # no event time may be this close to a watermark / state boundary

STATE_PKG = "org.apache.spark.sql.execution.streaming.state."
HDFS = STATE_PKG + "HDFSBackedStateStoreProvider"
ROCKSDB = STATE_PKG + "RocksDBStateStoreProvider"

QUERIES = ["aggregation_hdfs", "dedup_rocksdb_changelog", "apply_in_pandas_with_state_hdfs",
           "stream_stream_join_hdfs", "session_window_hdfs"]


# --------------------------------------------------------------------------------------------
# input data (stdlib only, deterministic)
# --------------------------------------------------------------------------------------------

def _ts(ms: int) -> str:
    """Epoch milliseconds -> ISO-8601 UTC string with milliseconds (what the JSON files hold)."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _start_ms() -> int:
    return int(START.timestamp() * 1000)


def _window_ms(rng: random.Random, batch: int, minutes: int = 10) -> int:
    """A random millisecond inside [START + 10*batch min, START + 10*batch min + minutes)."""
    return _start_ms() + batch * 10 * MINUTE_MS + rng.randrange(minutes * MINUTE_MS)


def rows_aggregation() -> list[list[dict]]:
    rng = random.Random(SEED + 1)
    files = []
    for b in range(BATCHES):
        files.append([{"key": f"k{rng.randrange(30):02d}", "value": rng.randrange(-100, 1000),
                       "ts_ms": _window_ms(rng, b), "seq": b * 100 + i} for i in range(80)])
    return files


def rows_dedup() -> list[list[dict]]:
    """New events plus ~25% exact re-deliveries of an earlier (id, ts) from any earlier batch."""
    rng = random.Random(SEED + 2)
    files, seen, next_id = [], [], 0
    for b in range(BATCHES):
        rows = []
        for i in range(80):
            if seen and rng.random() < 0.25:
                ev_id, ts_ms = rng.choice(seen)
            else:
                ev_id, ts_ms = f"e{next_id:04d}", _window_ms(rng, b)
                next_id += 1
                seen.append((ev_id, ts_ms))
            rows.append({"id": ev_id, "ts_ms": ts_ms, "value": rng.randrange(1000),
                         "seq": b * 100 + i})
        files.append(rows)
    return files


def rows_apply_in_pandas() -> list[list[dict]]:
    rng = random.Random(SEED + 3)
    return [[{"user": f"u{rng.randrange(12):02d}", "ts_ms": _window_ms(rng, b),
              "amount": round(rng.uniform(1, 500), 2), "close": rng.random() < 0.08,
              "seq": b * 100 + i} for i in range(60)] for b in range(BATCHES)]


def rows_join() -> tuple[list[list[dict]], list[list[dict]]]:
    """Impressions (left) and clicks (right); a click follows an impression of its ad by
    0-14 minutes (so some fall outside the 10-minute join window)."""
    rng = random.Random(SEED + 4)
    left, right = [], []
    for b in range(BATCHES):
        imps = [{"ad": f"a{rng.randrange(15):02d}", "ts_ms": _window_ms(rng, b),
                 "seq": b * 100 + i} for i in range(50)]
        clicks = []
        for i in range(30):
            src = rng.choice(imps)
            clicks.append({"ad": src["ad"], "ts_ms": src["ts_ms"] + rng.randrange(14 * MINUTE_MS),
                           "seq": b * 100 + i})
        left.append(imps)
        right.append(clicks)
    return left, right


def rows_session() -> list[list[dict]]:
    rng = random.Random(SEED + 5)
    return [[{"user": f"u{rng.randrange(8):02d}", "ts_ms": _window_ms(rng, b),
              "seq": b * 100 + i} for i in range(40)] for b in range(BATCHES)]


def to_json_rows(rows: list[dict]) -> list[dict]:
    """Rows as written to the landing JSON files (``ts_ms`` becomes an ISO ``ts`` string)."""
    out = []
    for r in rows:
        r = dict(r)
        r["ts"] = _ts(r.pop("ts_ms"))
        out.append(r)
    return out


# --------------------------------------------------------------------------------------------
# expected state, computed from the input (stdlib only)
# --------------------------------------------------------------------------------------------

def watermarks(files_per_input: list[list[list[dict]]], delays_ms: list[int]) -> list[int]:
    """Global watermark (ms) of each batch: min over inputs of (max event time of earlier
    batches - delay); 0 for the first batch; never decreases."""
    out, wm, maxes = [], 0, [None] * len(delays_ms)
    for b in range(BATCHES):
        out.append(wm)
        for i, files in enumerate(files_per_input):
            m = max(r["ts_ms"] for r in files[b])
            maxes[i] = m if maxes[i] is None else max(maxes[i], m)
        wm = max(wm, min(mx - d for mx, d in zip(maxes, delays_ms, strict=True)))
    return out


def _check_far(value: int, bound: int, what: str) -> None:
    if bound > 0 and abs(value - bound) < EPSILON_MS:
        raise AssertionError(f"{what}: {value} is within {EPSILON_MS} ms of boundary {bound}; "
                             "change the seed")


def expected_aggregation() -> dict:
    files = rows_aggregation()
    keys = {r["key"] for rows in files for r in rows}
    return {"0": {"default": len(keys)}}


DEDUP_DELAY_MS = 5 * MINUTE_MS


def expected_dedup() -> dict:
    files = rows_dedup()
    wms = watermarks([files], [DEDUP_DELAY_MS])
    state: set[tuple[str, int]] = set()
    for b, rows in enumerate(files):
        w = wms[b]
        for r in rows:
            _check_far(r["ts_ms"], w, "dedup late filter")
            if w and r["ts_ms"] <= w:
                continue  # late: dropped before the operator
            state.add((r["id"], r["ts_ms"]))
        state = {k for k in state if not (w and k[1] <= w)}  # eviction at the end of the batch
    return {"0": {"default": len(state)}}


APPLY_DELAY_MS = 10 * MINUTE_MS


def expected_apply_in_pandas() -> tuple[dict, dict]:
    """State rows and the final (count, last_amount) per user, mirroring ``_track_user``."""
    files = rows_apply_in_pandas()
    wms = watermarks([files], [APPLY_DELAY_MS])
    state: dict[str, tuple[int, float]] = {}
    for b, rows in enumerate(files):
        w = wms[b]
        by_user: dict[str, list[dict]] = {}
        for r in rows:
            _check_far(r["ts_ms"], w, "applyInPandasWithState late filter")
            if w and r["ts_ms"] <= w:
                continue
            by_user.setdefault(r["user"], []).append(r)
        for user, urows in by_user.items():
            urows.sort(key=lambda r: (r["ts_ms"], r["seq"]))
            count = state.get(user, (0, 0.0))[0] + len(urows)
            if any(r["close"] for r in urows):
                state.pop(user, None)
            else:
                state[user] = (count, urows[-1]["amount"])
        # timeouts are set a day ahead, so none fires within these batches
    return {"0": {"default": len(state)}}, {u: list(v) for u, v in sorted(state.items())}


JOIN_LEFT_DELAY_MS = 2 * MINUTE_MS
JOIN_RIGHT_DELAY_MS = 5 * MINUTE_MS
JOIN_WINDOW_MS = 10 * MINUTE_MS


def expected_join() -> dict:
    """clickTime BETWEEN impressionTime AND impressionTime + 10 minutes.

    Left (impression) state watermark = W - 10 min (a future click has clickTime > W);
    right (click) state watermark = W (a future impression has impressionTime > W).
    A row is buffered if it is not late (ts > W of its batch) and above its side's state
    watermark at the end of every later batch (the last one decides).
    """
    left, right = rows_join()
    wms = watermarks([left, right], [JOIN_LEFT_DELAY_MS, JOIN_RIGHT_DELAY_MS])
    w_last = wms[-1]
    out = {}
    for side, files, offset in (("left", left, -JOIN_WINDOW_MS), ("right", right, 0)):
        kept = []
        for b, rows in enumerate(files):
            for r in rows:
                _check_far(r["ts_ms"], wms[b], f"join {side} late filter")
                for later in wms[b:]:
                    _check_far(r["ts_ms"], later + offset, f"join {side} state watermark")
                if wms[b] and r["ts_ms"] <= wms[b]:
                    continue
                if w_last and r["ts_ms"] <= w_last + offset:
                    continue
                kept.append(r)
        out[f"{side}-keyToNumValues"] = len({r["ad"] for r in kept})
        out[f"{side}-keyWithIndexToValue"] = len(kept)
    return {"0": out}


SESSION_GAP_MS = 5 * MINUTE_MS
SESSION_DELAY_MS = 10 * MINUTE_MS


def expected_session() -> tuple[dict, list]:
    """Sessions per user (gap 5 min), late rows (ts + gap <= W) dropped, sessions whose end is
    at or below the watermark evicted (append mode emits them) at the end of each batch."""
    files = rows_session()
    wms = watermarks([files], [SESSION_DELAY_MS])
    sessions: dict[str, list[list[int]]] = {}  # user -> [[start, end, count]]
    for b, rows in enumerate(files):
        w = wms[b]
        by_user: dict[str, list[int]] = {}
        for r in rows:
            _check_far(r["ts_ms"] + SESSION_GAP_MS, w, "session late filter")
            if w and r["ts_ms"] + SESSION_GAP_MS <= w:
                continue
            by_user.setdefault(r["user"], []).append(r["ts_ms"])
        for user, times in by_user.items():
            items = sessions.get(user, []) + [[t, t + SESSION_GAP_MS, 1] for t in times]
            items.sort()
            merged: list[list[int]] = []
            for s in items:
                if merged:
                    _check_far(s[0], merged[-1][1], "session merge")
                if merged and s[0] <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], s[1])
                    merged[-1][2] += s[2]
                else:
                    merged.append(list(s))
            sessions[user] = merged
        for user in list(sessions):
            for s in sessions[user]:
                _check_far(s[1], w, "session eviction")
            sessions[user] = [s for s in sessions[user] if not (w and s[1] <= w)]
            if not sessions[user]:
                del sessions[user]
    flat = [[u, _ts(s), _ts(e), n] for u, ss in sorted(sessions.items()) for s, e, n in ss]
    return {"0": {"default": len(flat)}}, flat


# --------------------------------------------------------------------------------------------
# Spark side
# --------------------------------------------------------------------------------------------

def _write_json(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / ("." + path.name + ".tmp")  # hidden: the file source ignores it
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in to_json_rows(rows)))
    tmp.rename(path)


def _track_user(key, pdfs, state):
    """applyInPandasWithState function: count + last amount per user; a ``close`` event
    removes the user's state; an event-time timeout one day after the latest event."""
    import pandas as pd

    pdf = pd.concat(list(pdfs), ignore_index=True)
    if state.hasTimedOut:
        state.remove()
        yield pd.DataFrame({"user": [key[0]], "count": [-1], "last_amount": [0.0],
                            "closed": [True]})
        return
    pdf = pdf.sort_values(["ts", "seq"])
    count = (state.get[0] if state.exists else 0) + len(pdf)
    last = float(pdf["amount"].iloc[-1])
    closed = bool(pdf["close"].any())
    if closed:
        state.remove()
    else:
        state.update((count, last))
        latest_ms = int(pd.Timestamp(pdf["ts"].max()).value // 1_000_000)
        state.setTimeoutTimestamp(latest_ms + 86_400_000)
    yield pd.DataFrame({"user": [key[0]], "count": [count], "last_amount": [last],
                        "closed": [closed]})


def _state_store_object(spark):
    return getattr(spark._jvm, STATE_PKG + "StateStore")


def _unload_state_stores(spark) -> None:
    """Stop maintenance and unload every provider (local mode: driver JVM = executor)."""
    try:
        _state_store_object(spark).stop()
    except Exception as e:  # pragma: no cover - best effort
        print(f"  (could not stop StateStore: {e})")


def _wait_stable(folder: Path, timeout: float = 20.0) -> None:
    previous, deadline = None, time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = sorted((str(p), p.stat().st_size) for p in folder.rglob("*") if p.is_file())
        if current == previous:
            return
        previous = current
        time.sleep(0.5)


class Query:
    """One golden query: how to build it, its confs, its expected state."""

    def __init__(self, name: str, provider: str, mode: str, confs: dict[str, str]):
        self.name, self.provider, self.mode, self.confs = name, provider, mode, confs


def _queries() -> dict[str, Query]:
    rocks = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB,
             "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
    return {
        "aggregation_hdfs": Query("aggregation_hdfs", "hdfs", "update", {}),
        "dedup_rocksdb_changelog": Query("dedup_rocksdb_changelog", "rocksdb", "append", rocks),
        "apply_in_pandas_with_state_hdfs": Query("apply_in_pandas_with_state_hdfs", "hdfs",
                                                 "update", {}),
        "stream_stream_join_hdfs": Query("stream_stream_join_hdfs", "hdfs", "append", {}),
        "session_window_hdfs": Query("session_window_hdfs", "hdfs", "append", {}),
    }


def _build_df(spark, name: str, landing: Path):
    from pyspark.sql import functions as F

    def stream(folder: Path, ddl: str):
        return spark.readStream.schema(ddl).json(str(folder))

    if name == "aggregation_hdfs":
        ev = stream(landing, "key STRING, value LONG, ts TIMESTAMP, seq LONG")
        return ev.groupBy("key").agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
    if name == "dedup_rocksdb_changelog":
        ev = stream(landing, "id STRING, ts TIMESTAMP, value LONG, seq LONG")
        return ev.withWatermark("ts", "5 minutes").dropDuplicates(["id", "ts"])
    if name == "apply_in_pandas_with_state_hdfs":
        from pyspark.sql.streaming.state import GroupStateTimeout

        ev = stream(landing, "user STRING, ts TIMESTAMP, amount DOUBLE, close BOOLEAN, seq LONG")
        return (ev.withWatermark("ts", "10 minutes").groupBy("user").applyInPandasWithState(
            _track_user, "user STRING, count LONG, last_amount DOUBLE, closed BOOLEAN",
            "count LONG, last_amount DOUBLE", "Update", GroupStateTimeout.EventTimeTimeout))
    if name == "stream_stream_join_hdfs":
        ddl = "ad STRING, ts TIMESTAMP, seq LONG"
        imps = (stream(landing / "impressions", ddl)
                .selectExpr("ad AS impressionAd", "ts AS impressionTime", "seq AS impressionSeq")
                .withWatermark("impressionTime", "2 minutes"))
        clicks = (stream(landing / "clicks", ddl)
                  .selectExpr("ad AS clickAd", "ts AS clickTime", "seq AS clickSeq")
                  .withWatermark("clickTime", "5 minutes"))
        return imps.join(clicks, F.expr(
            "clickAd = impressionAd AND clickTime >= impressionTime AND "
            "clickTime <= impressionTime + INTERVAL 10 MINUTES"))
    if name == "session_window_hdfs":
        ev = stream(landing, "user STRING, ts TIMESTAMP, seq LONG")
        return (ev.withWatermark("ts", "10 minutes")
                .groupBy(F.session_window("ts", "5 minutes"), "user").count())
    raise ValueError(name)


def _input_files(name: str) -> list[dict[str, list[dict]]]:
    """Per batch: {relative landing file path: rows}."""
    if name == "aggregation_hdfs":
        files = {"": rows_aggregation()}
    elif name == "dedup_rocksdb_changelog":
        files = {"": rows_dedup()}
    elif name == "apply_in_pandas_with_state_hdfs":
        files = {"": rows_apply_in_pandas()}
    elif name == "stream_stream_join_hdfs":
        left, right = rows_join()
        files = {"impressions/": left, "clicks/": right}
    elif name == "session_window_hdfs":
        files = {"": rows_session()}
    else:
        raise ValueError(name)
    return [{f"{prefix}part-{b:03d}.json": rows[b] for prefix, rows in files.items()}
            for b in range(BATCHES)]


def _expected(name: str) -> dict:
    if name == "aggregation_hdfs":
        return {"state_rows": expected_aggregation()}
    if name == "dedup_rocksdb_changelog":
        return {"state_rows": expected_dedup()}
    if name == "apply_in_pandas_with_state_hdfs":
        rows, values = expected_apply_in_pandas()
        return {"state_rows": rows, "state_values": values}
    if name == "stream_stream_join_hdfs":
        return {"state_rows": expected_join()}
    if name == "session_window_hdfs":
        rows, sessions = expected_session()
        return {"state_rows": rows, "sessions": sessions}
    raise ValueError(name)


def _description(name: str) -> dict:
    d = {
        "aggregation_hdfs": {
            "query": "groupBy(key).agg(count(1) AS n, sum(value) AS total)",
            "output_mode": "update", "watermark": None,
            "state_key": ["key"], "input_rows_per_batch": 80},
        "dedup_rocksdb_changelog": {
            "query": "withWatermark(ts, '5 minutes').dropDuplicates(['id', 'ts'])",
            "output_mode": "append", "watermark": {"ts": "5 minutes"},
            "state_key": ["id", "ts"], "input_rows_per_batch": 80,
            "note": "~25% of rows re-deliver an earlier (id, ts); the event-time column is in "
                    "the key so old keys are evicted (removes appear in the changelog)"},
        "apply_in_pandas_with_state_hdfs": {
            "query": "withWatermark(ts, '10 minutes').groupBy(user).applyInPandasWithState("
                     "..., 'Update', EventTimeTimeout)",
            "output_mode": "update", "watermark": {"ts": "10 minutes"},
            "state_key": ["user"], "state_schema": "count LONG, last_amount DOUBLE",
            "input_rows_per_batch": 60,
            "note": "state = (rows seen since the last close, amount of the latest row); a batch "
                    "with a close=true row for a user removes its state; timeout = latest event "
                    "time + 1 day (never fires here)"},
        "stream_stream_join_hdfs": {
            "query": "impressions (watermark 2 min) INNER JOIN clicks (watermark 5 min) ON "
                     "clickAd = impressionAd AND clickTime BETWEEN impressionTime AND "
                     "impressionTime + 10 minutes",
            "output_mode": "append",
            "watermark": {"impressionTime": "2 minutes", "clickTime": "5 minutes"},
            "state_key": {"left": ["impressionAd"], "right": ["clickAd"]},
            "input_rows_per_batch": {"impressions": 50, "clicks": 30}},
        "session_window_hdfs": {
            "query": "withWatermark(ts, '10 minutes').groupBy(session_window(ts, '5 minutes'), "
                     "user).count()",
            "output_mode": "append", "watermark": {"ts": "10 minutes"},
            "state_key": ["user", "session_window.start"], "input_rows_per_batch": 40},
    }[name]
    return d


def _operator_metadata_files(checkpoint: Path) -> dict:
    """Parse state/<op>/_metadata/* (OperatorStateMetadata v1/v2: a version line + JSON)."""
    out = {}
    for f in sorted((checkpoint / "state").glob("*/_metadata/**/*")):
        if not f.is_file() or f.name.startswith("."):
            continue
        rel = str(f.relative_to(checkpoint))
        lines = f.read_text(errors="replace").splitlines()
        entry = {"version_line": lines[0] if lines else None}
        try:
            entry["json"] = json.loads("\n".join(lines[1:]))
        except Exception:
            entry["raw"] = "\n".join(lines[1:])[:2000]
        out[rel] = entry
    return out


def _operator_names_from_metadata(meta: dict) -> list[str]:
    names = []
    for entry in meta.values():
        info = (entry.get("json") or {}).get("operatorInfo") or {}
        if info.get("operatorName") and info["operatorName"] not in names:
            names.append(info["operatorName"])
    return names


def _spark_state_rows(spark, checkpoint: Path, name: str) -> dict:
    """Row counts the state data source (Spark >= 4.0) reads at the last committed batch,
    and the state-metadata source's rows. Reads a scratch copy, never the golden folder."""
    out: dict = {}
    scratch = Path(tempfile.mkdtemp(prefix="statekit-golden-read-"))
    copy = scratch / "checkpoint"
    shutil.copytree(checkpoint, copy)
    try:
        try:
            meta = spark.read.format("state-metadata").load(str(copy)).collect()
            out["state_metadata"] = [
                {k: v for k, v in r.asDict().items() if not k.startswith("_")} for r in meta]
        except Exception as e:
            out["state_metadata_error"] = _short_error(e)
        stores = (["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
                   "right-keyWithIndexToValue"] if name == "stream_stream_join_hdfs"
                  else ["default"])
        counts: dict = {}
        for store in stores:
            try:
                counts[store] = (spark.read.format("statestore").option("operatorId", 0)
                                 .option("storeName", store).load(str(copy)).count())
            except Exception as e:
                counts[store] = {"error": _short_error(e)}
        out["state_rows"] = {"0": counts}
        if name == "stream_stream_join_hdfs":
            sides = {}
            for side in ("left", "right"):
                try:
                    sides[side] = (spark.read.format("statestore").option("operatorId", 0)
                                   .option("joinSide", side).load(str(copy)).count())
                except Exception as e:
                    sides[side] = {"error": _short_error(e)}
            out["join_side_rows"] = {"0": sides}
    finally:
        _unload_state_stores(spark)
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def _short_error(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:400]


def _json_default(o):
    if isinstance(o, datetime):
        return o.isoformat()
    return str(o)


def run_query(spark, version: str, q: Query, out_root: Path) -> dict:
    query_dir = out_root / q.name
    checkpoint = query_dir / "checkpoint"
    landing = LANDING_ROOT / version / q.name / "landing"
    shutil.rmtree(query_dir, ignore_errors=True)
    shutil.rmtree(landing.parent, ignore_errors=True)
    landing.mkdir(parents=True)
    if q.name == "stream_stream_join_hdfs":
        (landing / "impressions").mkdir()
        (landing / "clicks").mkdir()
    query_dir.mkdir(parents=True)

    for k, v in q.confs.items():
        spark.conf.set(k, v)
    progress = []
    try:
        for batch, files in enumerate(_input_files(q.name)):
            for rel, rows in files.items():
                _write_json(landing / rel, rows)
            df = _build_df(spark, q.name, landing)
            sq = (df.writeStream.format("noop").outputMode(q.mode)
                  .option("checkpointLocation", str(checkpoint))
                  .queryName(f"golden_{q.name}")
                  .trigger(availableNow=True).start())
            sq.awaitTermination()
            if sq.exception() is not None:
                raise RuntimeError(f"{q.name} batch {batch}: {sq.exception()}")
            progress.append(sq.lastProgress)
            # let the background maintenance task run (HDFS snapshots, RocksDB uploads)
            time.sleep(2.5)
            _unload_state_stores(spark)
            _wait_stable(checkpoint)
    finally:
        for k in q.confs:
            spark.conf.unset(k)

    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir()
                     if p.name.isdigit())
    last = progress[-1] or {}
    meta_files = _operator_metadata_files(checkpoint)
    files = sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file())
    expected = _expected(q.name)
    manifest = {
        "spark_version": version,
        "python_packages": _package_versions(),
        "query": q.name,
        "description": _description(q.name),
        "provider": q.provider,
        "provider_class": q.confs.get("spark.sql.streaming.stateStore.providerClass",
                                      HDFS + " (default, not set)"),
        "confs": {**_base_confs(), **q.confs},
        "shuffle_partitions": SHUFFLE_PARTITIONS,
        "batches_committed": len(commits),
        "last_batch_id": commits[-1] if commits else None,
        "operators": [
            {"operator_id": 0,
             "operator_name_progress": op.get("operatorName"),
             "num_rows_total_progress": op.get("numRowsTotal"),
             "num_rows_updated_progress": op.get("numRowsUpdated"),
             "num_rows_removed_progress": op.get("numRowsRemoved")}
            for op in last.get("stateOperators", [])],
        "operator_names_metadata_file": _operator_names_from_metadata(meta_files),
        "operator_metadata_files": meta_files,
        "expected_state_rows": expected["state_rows"],
        "expected": {k: v for k, v in expected.items() if k != "state_rows"},
        "watermarks_ms_per_batch": _watermarks_for(q.name),
        "landing": str(landing),
        "visible_crc_files": [f for f in files if f.endswith(".crc")
                              and not Path(f).name.startswith(".")],
        # v1 schema files (state/<op>/<partition>[/<store>]/_metadata/schema) and the
        # v2+ ones (state/<op>/_stateSchema/...)
        "schema_files": [f for f in files if not Path(f).name.startswith(".")
                         and ("/_stateSchema/" in f or f.endswith("/_metadata/schema"))],
        "files": files,
    }
    major = int(version.split(".")[0])
    if major >= 4:
        read = _spark_state_rows(spark, checkpoint, q.name)
        manifest["spark_state_rows"] = read.get("state_rows")
        if "join_side_rows" in read:
            manifest["spark_join_side_rows"] = read["join_side_rows"]
        manifest["spark_state_metadata"] = read.get("state_metadata",
                                                    read.get("state_metadata_error"))
    else:
        manifest["spark_state_rows"] = None
        manifest["spark_state_rows_note"] = ("no state data source (format 'statestore') "
                                             f"in Spark {version}")
    (query_dir / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=False, default=_json_default) + "\n")
    return manifest


def _watermarks_for(name: str) -> list[int]:
    if name == "aggregation_hdfs":
        return [0] * BATCHES
    if name == "dedup_rocksdb_changelog":
        return watermarks([rows_dedup()], [DEDUP_DELAY_MS])
    if name == "apply_in_pandas_with_state_hdfs":
        return watermarks([rows_apply_in_pandas()], [APPLY_DELAY_MS])
    if name == "stream_stream_join_hdfs":
        left, right = rows_join()
        return watermarks([left, right], [JOIN_LEFT_DELAY_MS, JOIN_RIGHT_DELAY_MS])
    return watermarks([rows_session()], [SESSION_DELAY_MS])


def _package_versions() -> dict[str, str]:
    import numpy
    import pandas
    import pyarrow

    return {"python": sys.version.split()[0], "pandas": pandas.__version__,
            "pyarrow": pyarrow.__version__, "numpy": numpy.__version__}


def _base_confs() -> dict[str, str]:
    return {
        "spark.master": "local[2]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.pyspark.python": sys.executable,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--query", action="append", choices=QUERIES,
                        help="only this query (repeatable); default all")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="folder that gets spark-<version>/ (default: beside this script)")
    args = parser.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("TZ", "UTC")
    import pyspark
    from pyspark.sql import SparkSession

    version = pyspark.__version__
    builder = SparkSession.builder.appName("statekit-golden")
    for k, v in _base_confs().items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out_root = args.out / f"spark-{version}"
    out_root.mkdir(parents=True, exist_ok=True)
    failures = {}
    try:
        for name in args.query or QUERIES:
            print(f"[{version}] {name} ...", flush=True)
            try:
                m = run_query(spark, version, _queries()[name], out_root)
                print(f"  batches={m['batches_committed']} expected={m['expected_state_rows']} "
                      f"spark={m.get('spark_state_rows')} "
                      f"progress={[o['num_rows_total_progress'] for o in m['operators']]}",
                      flush=True)
            except Exception as e:  # keep going: one query's failure must not hide the rest
                failures[name] = _short_error(e)
                print(f"  FAILED: {failures[name]}", flush=True)
    finally:
        spark.stop()
    if failures:
        print(json.dumps(failures, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
