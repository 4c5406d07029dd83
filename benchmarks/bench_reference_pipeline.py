"""Benchmark: how fast the reference pipeline's pure parts are, and what a Spark batch costs.

Later benchmarks (export at 1M keys, recovery, repartition) need large realistic checkpoints,
so generating events must be fast, and the state machine's per-event cost bounds how fast the
query can go. This script generates its own data in a temporary folder and prints a table:

* ``generate``: events/s and MB/s writing batch files (JSON lines) + ground truth;
* ``replay``: events/s through the state machine with Spark's micro-batch semantics (pure
  Python, ``statekit.reference_pipeline.simulate``);
* ``spark`` (with ``--spark``): seconds per micro-batch and events/s of the real query on
  local Spark, per provider, excluding the JVM start (reported separately).

Run: ``.venv/bin/python benchmarks/bench_reference_pipeline.py [--spark]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from statekit.reference_pipeline.generator import GeneratorConfig, generate
from statekit.reference_pipeline.simulate import simulate

SIZES = (  # (users, events per batch, batches)
    (2_000, 400, 20),
    (20_000, 4_000, 20),
    (200_000, 40_000, 10),
)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_pure(root: Path) -> list[tuple]:
    rows = []
    for users, per_batch, batches in SIZES:
        landing = root / f"l-{users}"
        config = GeneratorConfig(users=users, events_per_batch=per_batch,
                                 new_users_per_batch=max(10, users // 200))
        started = time.perf_counter()
        result = generate(landing, config, batches)
        gen_s = time.perf_counter() - started
        size_mb = folder_bytes(landing / "events") / 1e6
        started = time.perf_counter()
        sim = simulate(landing)
        replay_s = time.perf_counter() - started
        rows.append((users, per_batch, batches, result.events_written,
                     result.events_written / gen_s, size_mb / gen_s,
                     result.events_written / replay_s, max(sim.keys_per_batch)))
    return rows


def bench_spark(root: Path) -> list[tuple]:
    from statekit.jobs.session import build_session
    from statekit.reference_pipeline.pipeline import RunOptions, run

    started = time.perf_counter()
    spark = build_session("statekit-bench",
                          conf={"spark.sql.streaming.stateStore.maintenanceInterval": "1s"})
    jvm_s = time.perf_counter() - started
    landing = root / "spark-landing"
    generate(landing, GeneratorConfig(), 12)
    rows = []
    for provider, partitions in (("hdfs", 8), ("rocksdb", 8), ("hdfs", 2)):
        base = root / f"run-{provider}-{partitions}"
        opts = RunOptions(landing=landing, checkpoint=str(base / "c"), output=str(base / "o"),
                          provider=provider, partitions=partitions)
        result = run(spark, opts)
        per_batch = [p["durationMs"]["triggerExecution"] / 1000 for p in result.progress]
        total = sum(per_batch)
        rows.append((provider, partitions, len(per_batch), statistics.median(per_batch),
                     max(per_batch), result.input_rows / total))
    spark.stop()
    return [("jvm_start_s", round(jvm_s, 1))], rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark", action="store_true", help="also time the real Spark query")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="statekit-bench-"))
    try:
        print("| users | events/batch | batches | events | generate ev/s | generate MB/s "
              "| replay ev/s | peak state keys |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in bench_pure(root):
            users, per_batch, batches, events, gen_eps, mbs, replay_eps, peak = row
            print(f"| {users:,} | {per_batch:,} | {batches} | {events:,} | {gen_eps:,.0f} "
                  f"| {mbs:.1f} | {replay_eps:,.0f} | {peak:,} |")
        if args.spark:
            (jvm,), rows = bench_spark(root)
            print(f"\nSpark (local[*], 12 batches of ~400 events; JVM start {jvm[1]} s)\n")
            print("| provider | partitions | batches | median s/batch | max s/batch | events/s |")
            print("|---|---:|---:|---:|---:|---:|")
            for provider, parts, n, median, worst, eps in rows:
                print(f"| {provider} | {parts} | {n} | {median:.2f} | {worst:.2f} | {eps:,.0f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
