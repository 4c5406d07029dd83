"""Small real stateful queries (aggregation, dropDuplicates, stream-stream join) for tests.

The reference pipeline covers applyInPandasWithState; the checkpoint model must also read
what other operators write. Each query here runs for real on the shared test session, over a
few JSON files, with ``trigger(availableNow=True)`` into the ``noop`` sink, and the rows it was
fed are kept so tests can check the state against them.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from tests.support.shared_build import build_once

EVENT_DDL = ("key STRING, bucket INT, day DATE, ts TIMESTAMP, value LONG, amount DOUBLE, "
             "price DECIMAL(10,2), flag BOOLEAN")
FILES = 4
ROWS_PER_FILE = 60
START = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SmallQuery:
    name: str
    checkpoint: Path
    rows: list[dict]
    """Every input row (after JSON round trip), in file order."""
    confs: dict[str, str]


def make_rows(seed: int = 5) -> list[list[dict]]:
    """FILES files of ROWS_PER_FILE rows with keys k00..k24, event time advancing per file."""
    rng = random.Random(seed)
    files = []
    for f in range(FILES):
        rows = []
        for i in range(ROWS_PER_FILE):
            ts = START + timedelta(minutes=10 * f, seconds=rng.randrange(600))
            rows.append({
                "key": f"k{rng.randrange(25):02d}", "bucket": rng.randrange(3),
                "day": (date(2026, 1, 5) + timedelta(days=rng.randrange(2))).isoformat(),
                "ts": ts.isoformat().replace("+00:00", "Z"),
                "value": rng.randrange(-1000, 1000), "amount": round(rng.uniform(0, 500), 3),
                "price": str(Decimal(rng.randrange(0, 10**7)) / 100), "flag": rng.random() < .5,
                "seq": f * ROWS_PER_FILE + i,
            })
        files.append(rows)
    return files


def _write_input(folder: Path, files: list[list[dict]]) -> None:
    """``part-000.json``… with modification times a second apart (an hour ago): Spark's file
    source takes files in modification-time order, and files written within one clock tick
    would come in listing order instead, which varies, and so would watermarks and state."""
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time() - 3600
    for index, rows in enumerate(files):
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (start + index, start + index))


def provider_confs(provider: str, codec: str, min_deltas: int = 2) -> dict[str, str]:
    """Every state-store setting pinned, so nothing leaks in from an earlier query of the
    shared session (the reference pipeline sets its confs on the session)."""
    return {
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state."
            + ("RocksDBStateStoreProvider" if provider == "rocksdb"
               else "HDFSBackedStateStoreProvider"),
        "spark.sql.streaming.stateStore.compression.codec": codec,
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(min_deltas),
    }


def run_query(spark, df, checkpoint: Path, confs: dict[str, str], output_mode: str) -> None:
    """Run ``df`` to the end of its input into the noop sink, then quiesce the checkpoint."""
    from statekit.jobs.state_reader import session_confs

    with session_confs(spark, confs):
        query = (df.writeStream.format("noop").outputMode(output_mode)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    from tests.conftest import quiesce

    quiesce(spark, checkpoint)


def _stream(spark, folder: Path):
    return (spark.readStream.schema(EVENT_DDL + ", seq LONG").option("maxFilesPerTrigger", 1)
            .json(str(folder)))


def build(spark, root: Path, name: str, provider: str = "hdfs",
          codec: str = "lz4") -> SmallQuery:
    """Run query ``name`` (``aggregation``, ``dedup``, ``join``) into ``root/<name>-…``."""
    from pyspark.sql import functions as F

    files = make_rows()
    base = root / f"{name}-{provider}-{codec}"
    input_dir = base / "input"
    _write_input(input_dir, files)
    confs = provider_confs(provider, codec)
    events = _stream(spark, input_dir)
    if name == "aggregation":
        df = (events.withWatermark("ts", "1 day").groupBy("key", "bucket", "day")
              .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"),
                   F.avg("amount").alias("mean_amount"), F.sum("price").alias("price_sum"),
                   F.max("ts").alias("last_ts"), F.max("flag").alias("any_flag")))
        mode = "update"
    elif name == "dedup":
        df = events.withWatermark("ts", "1 day").dropDuplicates(["key", "bucket"])
        mode = "append"
    elif name == "session-window":
        df = (events.withWatermark("ts", "10 minutes")
              .groupBy(F.session_window("ts", "5 minutes"), "key")
              .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total")))
        mode = "append"
    elif name == "dedup-within-watermark":
        # a long delay, so keys are still in state when the run ends
        df = events.withWatermark("ts", "1 day").dropDuplicatesWithinWatermark(["key"])
        mode = "append"
    elif name == "tws":
        df = events.withWatermark("ts", "1 day").groupBy("key").transformWithStateInPandas(
            statefulProcessor=_counters_processor(), outputStructType="key string, n long",
            outputMode="Update", timeMode="EventTime")
        mode = "update"
    elif name == "join":
        left = events.where("bucket = 0").withWatermark("ts", "30 minutes").alias("l")
        right = _stream(spark, input_dir).where("bucket = 1").withWatermark(
            "ts", "30 minutes").alias("r")
        df = left.join(right, F.expr(
            "l.key = r.key AND r.ts BETWEEN l.ts - INTERVAL 20 MINUTES AND l.ts"))
        mode = "append"
    else:
        raise ValueError(name)
    run_query(spark, df, base / "checkpoint", confs, mode)
    return SmallQuery(name, base / "checkpoint", [r for rows in files for r in rows], confs)


def _counters_processor(ttl_ms: int | None = None):
    """A transformWithStateInPandas processor with a value, a list and a map state variable,
    and one event-time timer per key at (its latest event time + 1 day). With ``ttl_ms`` (which
    Spark allows only in processing-time mode) it registers no timers and keeps a
    ``first_seen`` value state with that TTL (Spark adds a TTL index column family), written
    once per key so a restart's wall clock does not change the rows already in state.

    Defined here (not at module level) so importing this module never needs pyspark, and
    pickled by value so Python workers do not have to import the tests package.
    """
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class Counters(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.count = handle.getValueState("count", "n long")
            self.values = handle.getListState("values", "v long")
            self.buckets = handle.getMapState("buckets", "b int", "n long")
            self.first_seen = (handle.getValueState("first_seen", "ts_ms long", ttl_ms)
                               if ttl_ms else None)

        def handleInputRows(self, key, rows, timerValues):
            n = self.count.get()[0] if self.count.exists() else 0
            latest = 0
            for pdf in rows:
                latest = max(latest, int(pdf["ts"].max().timestamp() * 1000))
                n += len(pdf)
                self.values.appendList([(int(v),) for v in pdf["value"]])
                for b in pdf["bucket"]:
                    seen = self.buckets.containsKey((int(b),))
                    old = self.buckets.getValue((int(b),))[0] if seen else 0
                    self.buckets.updateValue((int(b),), (old + 1,))
            self.count.update((n,))
            if self.first_seen is not None and not self.first_seen.exists():
                self.first_seen.update((latest,))
            if self.first_seen is not None:  # processing-time mode: no timers
                yield pd.DataFrame({"key": [key[0]], "n": [n]})
                return
            # one timer per key, at (latest event time seen for it + 1 day); files may be
            # processed in any order, so the timer only ever moves forward
            existing = list(self.handle.listTimers())
            expiry = max([latest + 86_400_000, *existing])
            for old in existing:
                if old != expiry:
                    self.handle.deleteTimer(old)
            if expiry not in existing:
                self.handle.registerTimer(expiry)
            yield pd.DataFrame({"key": [key[0]], "n": [n]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield pd.DataFrame({"key": [key[0]], "n": [-1]})

        def close(self):
            pass

    return Counters()


class SmallQueries:
    """Lazily builds and caches small queries for one test session."""

    def __init__(self, spark, root: Path) -> None:
        self._spark = spark
        self._root = root
        self._built: dict[tuple[str, str, str], SmallQuery] = {}

    def get(self, name: str, provider: str = "hdfs", codec: str = "lz4") -> SmallQuery:
        key = (name, provider, codec)
        if key not in self._built:  # once per test run: the workers share it
            self._built[key] = build_once(self._root, f"{name}-{provider}-{codec}", lambda _: build(
                self._spark, self._root, name, provider, codec))
        return self._built[key]


def count_until_quiet():
    """applyInPandasWithState: a count per key, removed (and emitted negated) by an
    event-time timeout 15 minutes after the key's latest event."""
    import pandas as pd

    def count(key, frames, state):
        if state.hasTimedOut:
            n = state.get[0]
            state.remove()
            yield pd.DataFrame({"key": [key[0]], "n": [-n]})
            return
        n, latest = state.get if state.exists else (0, 0)
        for frame in frames:
            n += len(frame)
            latest = max(latest, int(frame["ts"].max().timestamp() * 1000))
        state.update((n, latest))
        state.setTimeoutTimestamp(latest + 15 * 60_000)
        yield pd.DataFrame({"key": [key[0]], "n": [n]})

    return count
