"""Labelled real checkpoints for growth detection: the same query with and without a watermark.

A streaming aggregation over event-time windows and a dropDuplicates are the textbook cases of
unbounded state: without a watermark Spark can never drop a window or a seen id, so the state
grows with every batch; with one it stays bounded. Each query here runs for real on the shared
test session over ``BATCHES`` small JSON files (one micro-batch each, event time advancing 10
minutes per file, ~25 users active per batch), so the detector is judged on what Spark wrote.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.support.shared_build import build_once

BATCHES = 14
EVENTS_PER_BATCH = 40
POPULATION = 20_000
"""The finite population of ``users-finite``: 2,000 events a batch see ~75 % of it."""
POPULATION_EVENTS = 2_000
LEAK_EVENTS = 5_000
"""``users-leak``: events a batch of the finite population (~97 % of it seen) …"""
LEAKED_PER_BATCH = 100
"""… plus this many brand-new users a batch, each seen once and never again."""
START = datetime(2026, 2, 2, 9, 0, tzinfo=timezone.utc)

#: name → (expected verdict family, description)
LABELS = {
    "agg-watermark": ("bounded", "windowed count with a 10-minute watermark"),
    "agg-no-watermark": ("growing", "windowed count without a watermark"),
    "dedup-watermark": ("bounded", "dropDuplicates(id, ts) with a 10-minute watermark"),
    "dedup-no-watermark": ("growing", "dropDuplicates(id) without a watermark"),
    "users-finite": ("saturating", f"count by user over {POPULATION:,} users, uniform draws"),
    "users-open": ("growing", "count by user, new users every batch"),
    "users-leak": ("growing", f"count by user over {POPULATION:,} users plus "
                   f"{LEAKED_PER_BATCH} one-off users a batch"),
}


@dataclass(frozen=True)
class GrowthQuery:
    name: str
    provider: str
    checkpoint: Path
    expected: str


def _write_input(folder: Path, seed: int = 3, batches: range = range(BATCHES)) -> None:
    """One JSON file per batch in ``batches`` (later batches: later event times)."""
    rng = random.Random(seed + batches.start)
    folder.mkdir(parents=True, exist_ok=True)
    for batch in batches:
        rows = []
        for i in range(EVENTS_PER_BATCH):
            ts = START + timedelta(minutes=10 * batch, seconds=rng.randrange(600))
            rows.append({"id": f"e{batch:03d}-{i:03d}", "user": f"u{rng.randrange(60):02d}",
                         "ts": ts.isoformat().replace("+00:00", "Z"),
                         "amount": round(rng.uniform(1, 300), 2)})
        (folder / f"part-{batch:03d}.json").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))


def _write_population(folder: Path, name: str) -> None:
    """``users-finite``: events of a fixed population; ``users-open``: 300 new users a batch
    plus 1,200 events of those seen so far; ``users-leak``: the fixed population plus users
    seen once."""
    rng = random.Random(11)
    folder.mkdir(parents=True, exist_ok=True)
    known = 500
    for batch in range(BATCHES):
        if name == "users-finite":
            users = [rng.randrange(POPULATION) for _ in range(POPULATION_EVENTS)]
        elif name == "users-leak":
            one_off = 10**6 + batch * LEAKED_PER_BATCH
            users = [*(rng.randrange(POPULATION) for _ in range(LEAK_EVENTS)),
                     *range(one_off, one_off + LEAKED_PER_BATCH)]
        else:
            users = [*range(known, known + 300), *(rng.randrange(known) for _ in range(1200))]
            known += 300
        ts = (START + timedelta(minutes=10 * batch)).isoformat().replace("+00:00", "Z")
        (folder / f"part-{batch:03d}.json").write_text("".join(
            json.dumps({"id": f"e{batch}-{i}", "user": f"u{u:06d}", "ts": ts, "amount": 1.0})
            + "\n" for i, u in enumerate(users)))


def query(spark, input_dir: Path, name: str):
    """Query ``name`` over ``input_dir``: (streaming DataFrame, output mode)."""
    from pyspark.sql import functions as F

    events = (spark.readStream.schema("id STRING, user STRING, ts TIMESTAMP, amount DOUBLE")
              .option("maxFilesPerTrigger", 1).json(str(input_dir)))
    if name.startswith("agg"):
        if name == "agg-watermark":
            events = events.withWatermark("ts", "10 minutes")
        return events.groupBy(F.window("ts", "10 minutes"), "user").agg(
            F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total")), "update"
    if name == "dedup-watermark":
        return events.withWatermark("ts", "10 minutes").dropDuplicates(["id", "ts"]), "append"
    if name == "dedup-no-watermark":
        return events.dropDuplicates(["id"]), "append"
    if name.startswith("users-"):
        return events.groupBy("user").agg(F.count(F.lit(1)).alias("n")), "update"
    raise ValueError(name)


def build(spark, root: Path, name: str, provider: str = "hdfs") -> GrowthQuery:
    from tests.small_queries import provider_confs, run_query

    base = root / f"{name}-{provider}"
    if name.startswith("users-"):
        _write_population(base / "input", name)
    else:
        _write_input(base / "input")
    df, mode = query(spark, base / "input", name)
    confs = provider_confs(provider, "lz4")
    if name.startswith("users-") and provider == "rocksdb":  # change files: the discovery curve
        confs["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] = "true"
        confs["spark.sql.streaming.stateStore.minDeltasForSnapshot"] = "1000"
    run_query(spark, df, base / "checkpoint", confs, mode)
    return GrowthQuery(name, provider, base / "checkpoint", LABELS[name][0])


class GrowthQueries:
    """Lazily builds and caches the labelled queries for one test session."""

    def __init__(self, spark, root: Path) -> None:
        self._spark = spark
        self._root = root
        self._built: dict[tuple[str, str], GrowthQuery] = {}

    def get(self, name: str, provider: str = "hdfs") -> GrowthQuery:
        if (name, provider) not in self._built:  # once per test run: the workers share it
            self._built[(name, provider)] = build_once(
                self._root, f"{name}-{provider}",
                lambda _: build(self._spark, self._root, name, provider))
        return self._built[(name, provider)]
