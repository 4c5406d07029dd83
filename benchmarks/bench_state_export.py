"""Benchmark: ``statekit state export`` throughput on the demo checkpoint scaled up to ~1M keys.

The question: how long does an SRE wait to dump a production-sized state store (1M users with
an open session) to Parquet/JSON/CSV, and where does that time go — JVM start, planning
(Spark's ``statestore`` source analysing the checkpoint), or reading and writing rows? That
tells us whether ``state export`` needs work (e.g. a JVM-free path) and which part to attack.

Data. The state must be written by Spark itself (the provider's real file layout), shaped
like the demo checkpoint (reference pipeline: key ``user_id``, 8 partitions, HDFS maintenance
every 1 s) but with ``--keys`` rows. Two sources:

* ``aggregate`` (default): the reference pipeline's applyInPandasWithState is far too slow
  to reach 1M keys here — measured ~270 keys/s on 2 cores (Python worker cost per group;
  ~62k keys took 280 s), i.e. about an hour per provider — and the generator makes ~5.5k
  sessions/s (3 min for 1M). So a Spark-native streaming aggregation writes the state
  instead: ``groupBy(user_id).agg(max(groupState), min(timeoutTimestamp))`` over generated
  rows, one row per user and micro-batch. Its state value mirrors the pipeline's: a nested
  ``struct`` with the 12 ``UserSession`` fields (same names and types; phase mix, 1–4
  transactions, a ``window_json`` string like ``[[ms, amount], …]``, ~360 bytes as JSON,
  like the demo) plus a ``long`` timeout. Keys arrive over ``--batches`` micro-batches (one
  input file each) and every later batch also updates 10% of the earlier keys, so the store
  is a chain of real deltas (HDFS) or RocksDB checkpoints with overwrites, as in production.
  It is a stand-in: only the operator (aggregation vs applyInPandasWithState) and the value's
  field names (``max``/``min`` vs ``groupState``/``timeoutTimestamp``) differ.
* ``pipeline``: the real thing — ``statekit.reference_pipeline.generator`` with one session per user
  over 3 batches of 10 minutes of event time (so no session reaches its 30-minute inactivity
  timeout), then ``statekit pipeline run`` (8 partitions). Use it at small ``--keys``
  (10k ≈ 1 min per provider) to check the stand-in against the real state: at 10k keys
  (HDFS) their export times agreed within ~15% (parquet 1.8 vs 1.6 s, jsonl/csv 0.6 s).

Measured per provider, in a fresh Python process (so the JVM start is real):

* ``jvm start``: ``build_session`` with ``reader_confs`` (includes importing pyspark);
* ``planning``: ``read_state`` + ``flatten`` + ``.schema`` (the reader's analysis);
* ``read (count)``: ``.count()`` of the state DataFrame — the pure-read baseline, run first;
* ``export <fmt>``: ``export_rows`` for parquet, jsonl, csv — ``seconds`` is Spark's write
  (read + convert + write), ``wall`` adds export_rows' re-planning and its row check;
* ``cli export parquet``: a fresh ``statekit state export --json`` process, end to end.

With ``--repeats N`` the in-process phases run N times and the best is shown. Data and
outputs live in a temporary folder, removed at the end. Not a test: nothing is asserted
except that every export wrote every key.

Run: ``.venv/bin/python benchmarks/bench_state_export.py [--keys 1000000]
[--provider hdfs|rocksdb] [--source aggregate|pipeline]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STATEKIT = str(ROOT / ".venv/bin/statekit")
PARTITIONS = 8  # like the demo checkpoint (make demo)
MAINTENANCE = "1s"
FORMATS = ("parquet", "jsonl", "csv")
START_MS = 1_767_600_000_000  # 2026-01-05T08:00Z, the generator's default start
BATCH_MS = 10 * 60_000
COUNTRIES = ("US", "GB", "DE", "FR", "NL", "ES", "IT", "CA", "JP", "BR")

SPARK_SCRIPT = r"""
import json, shutil, sys, time
t0 = time.perf_counter()
from statekit.jobs.session import build_session
from statekit.jobs.state_analysis import export_rows
from statekit.jobs.state_reader import flatten, read_state, reader_confs, resolve_target
from statekit.checkpoint import open_checkpoint
path, out_root, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
formats = sys.argv[4].split(",")
ckpt = open_checkpoint(path)
target = resolve_target(ckpt)
batch = ckpt.last_committed_batch
t1 = time.perf_counter()
spark = build_session("bench-state-export", conf=reader_confs(ckpt))
t2 = time.perf_counter()
df = read_state(spark, target)
flatten(df).schema
t3 = time.perf_counter()
res = {"model_s": t1 - t0, "jvm_start_s": t2 - t1, "planning_s": t3 - t2, "batch": batch,
       "count": [], "export": {f: [] for f in formats}}
for r in range(repeats):
    a = time.perf_counter()
    rows = df.count()
    res["count"].append({"rows": rows, "seconds": time.perf_counter() - a})
    for fmt in formats:
        out = f"{out_root}/{fmt}-{r}"
        a = time.perf_counter()
        result = export_rows(spark, target, batch, out, fmt)
        wall = time.perf_counter() - a
        res["export"][fmt].append({"rows": result.rows, "seconds": result.seconds,
                                   "wall": wall})
        shutil.rmtree(out, ignore_errors=True)
print(json.dumps(res))
"""


# -- data: a streaming aggregation with the reference pipeline's state shape -----------------

def session_rows(spark, keys: int, batch: int, batches: int):
    """Input rows of one micro-batch: the new users of this slice plus 10% of earlier users,
    each with a ``UserSession``-shaped struct and its timeout. Deterministic (hash-based)."""
    from pyspark.sql import functions as F

    lo, hi = keys * batch // batches, keys * (batch + 1) // batches
    ids = spark.range(0, hi, numPartitions=PARTITIONS)
    ids = ids.where((F.col("id") >= lo) | (F.abs(F.hash("id", F.lit(batch))) % 10 == 0))

    def rnd(salt: int, mod: int):  # uniform integer in [0, mod), stable per (user, batch)
        return F.abs(F.xxhash64("id", F.lit(batch), F.lit(salt))) % mod

    start = F.lit(START_MS + batch * BATCH_MS) + rnd(1, BATCH_MS)
    r = rnd(2, 1000)
    phase = (F.when(r < 5, "Flagged").when(r < 20, "Suspicious").otherwise("Watching"))
    txns = (F.when(phase != "Watching", 5 + rnd(3, 3))
            .otherwise(F.when(r < 350, 1).when(r < 650, 2).when(r < 850, 3).otherwise(4)))
    gap = 60_000 + rnd(4, 420_000)
    # The velocity window: the last (at most 5) transactions, oldest first.
    window = F.expr(
        "transform(sequence(greatest(n - 5, 0), n - 1), i -> named_struct("
        "'ms', start + i * gap, "
        "'amount', round(1 + (abs(xxhash64(id, i, 5)) % 119900) / 100.0, 2)))")
    window_json = F.expr("concat('[', array_join(transform(w, x -> "
                         "format_string('[%d, %s]', x.ms, cast(x.amount as string))), ', '), ']')")
    country = F.element_at(F.array(*[F.lit(c) for c in COUNTRIES]), (rnd(6, 10) + 1).cast("int"))
    staged = ids.select(
        "id", phase.alias("phase"), start.alias("start"), txns.cast("long").alias("n"),
        gap.alias("gap"), country.alias("country"))
    staged = staged.withColumn("last", F.col("start") + (F.col("n") - 1) * F.col("gap"))
    staged = staged.withColumn("w", window)
    flagged = F.col("phase") == "Flagged"
    state = F.struct(
        F.col("phase"),
        F.col("start").alias("session_start_ms"),
        F.col("last").alias("last_event_ms"),
        F.col("n").alias("txn_count"),
        F.round(F.expr("aggregate(w, 0D, (acc, x) -> acc + x.amount)")
                + (F.col("n") - F.size("w")) * 42.5, 2).alias("total_amount"),
        window_json.alias("window_json"),
        F.when(F.col("phase") == "Watching", F.lit(-1))
        .otherwise(F.col("last") - 60_000).alias("suspicious_since_ms"),
        F.when(F.col("phase") == "Watching", F.lit(""))
        .otherwise("velocity_count").alias("suspicious_reason"),
        F.col("last").alias("last_txn_ms"),
        F.col("country").alias("last_txn_country"),
        F.when(flagged, F.col("last")).otherwise(F.lit(-1)).alias("flagged_at_ms"),
        F.when(flagged, F.lit(1)).otherwise(F.lit(0)).cast("long").alias("alerts"),
    )
    timeout = F.when(flagged, F.col("last") + 24 * 3_600_000).otherwise(F.col("last") + 1_800_000)
    return staged.select(F.format_string("u%07d", "id").alias("user_id"),
                         state.alias("groupState"), timeout.alias("timeoutTimestamp"))


def write_landing(spark, landing: Path, keys: int, batches: int) -> int:
    """One Parquet file per micro-batch in ``landing`` (mtimes increasing); rows written."""
    landing.mkdir(parents=True)
    total = 0
    base = time.time() - batches
    for batch in range(batches):
        target = write_batch_file(session_rows(spark, keys, batch, batches), landing, batch,
                                  base + batch)
        total += spark.read.parquet(str(target)).count()
    return total


def write_batch_file(df, landing: Path, batch: int, mtime: float) -> Path:
    """``df`` as the single Parquet file ``landing/batch-<n>.parquet`` with modification
    time ``mtime`` (a file source reads files in that order, one per trigger here)."""
    tmp = landing.parent / f"tmp-{landing.name}-{batch}"
    df.coalesce(1).write.parquet(str(tmp))
    part = next(tmp.glob("part-*.parquet"))
    target = landing / f"batch-{batch:06d}.parquet"
    os.replace(part, target)
    os.utime(target, (mtime, mtime))
    shutil.rmtree(tmp)
    return target


def aggregate_checkpoint(spark, landing: Path, checkpoint: Path, provider: str) -> int:
    """Run the stand-in query over ``landing`` (availableNow); state keys at the end."""
    from pyspark.sql import functions as F

    from statekit.reference_pipeline.pipeline import RunOptions

    opts = RunOptions(landing=landing, checkpoint=str(checkpoint), output="", provider=provider,
                      partitions=PARTITIONS, maintenance_interval=MAINTENANCE)
    for key, value in opts.sql_confs().items():
        spark.conf.set(key, value)
    schema = spark.read.parquet(str(landing)).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(landing))
    query = (stream.groupBy("user_id")
             .agg(F.max("groupState").alias("groupState"),
                  F.min("timeoutTimestamp").alias("timeoutTimestamp"))
             .writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"stand-in query failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["stateOperators"]]
    return int(progress[-1]["stateOperators"][0]["numRowsTotal"])


# -- data: the real reference pipeline (small --keys) -------------------------------------------

def pipeline_landing(landing: Path, keys: int) -> int:
    """Generator config giving ~``keys`` sessions over 3 batches of 10 minutes: every initial
    user has its slot in one of batches 0-2 (slot period 8 ⇒ keys/8 eligible per batch), plus
    5·keys/16 brand-new users in batches 1 and 2; fraud and near misses at the demo's rate."""
    from statekit.reference_pipeline.generator import (
        MEAN_EVENTS_PER_SESSION,
        GeneratorConfig,
        generate,
    )

    eligible, new = keys // 8, 5 * keys // 16
    config = GeneratorConfig(
        seed=7, users=keys, new_users_per_batch=new, batch_minutes=10,
        events_per_batch=round(MEAN_EVENTS_PER_SESSION * (eligible + new)),
        fraud_per_batch=max(1.0, keys / 2000), near_miss_per_batch=max(2.0, keys / 1000))
    return generate(landing, config, 3).events_written


def pipeline_checkpoint(landing: Path, checkpoint: Path, provider: str) -> int:
    done = subprocess.run(
        [STATEKIT, "pipeline", "run", "--landing", str(landing), "--checkpoint", str(checkpoint),
         "--output", str(checkpoint.parent / f"out-{provider}"), "--provider", provider,
         "--partitions", str(PARTITIONS), "--maintenance-interval", MAINTENANCE, "--json"],
        check=True, capture_output=True, text=True)
    return int(json.loads(done.stdout)["state_keys"])


# -- measuring ----------------------------------------------------------------------------------

def measure(checkpoint: Path, work: Path, repeats: int) -> dict:
    out_root = work / f"exports-{checkpoint.name}"
    out_root.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", SPARK_SCRIPT, str(checkpoint), str(out_root), str(repeats),
         ",".join(FORMATS)], check=True, capture_output=True, text=True, cwd=ROOT)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    cli_out = out_root / "cli"
    started = time.perf_counter()
    done = subprocess.run([STATEKIT, "state", "export", str(checkpoint), "--out", str(cli_out),
                           "--format", "parquet", "--json"],
                          check=True, capture_output=True, text=True)
    result["cli"] = {"wall": time.perf_counter() - started, **json.loads(done.stdout)}
    shutil.rmtree(out_root, ignore_errors=True)
    return result


def table_rows(provider: str, keys: int, r: dict) -> list[tuple]:
    """(provider, keys, phase, seconds, wall, rows, rows/s) per measured phase."""
    def rate(rows, seconds):
        return rows / seconds if seconds else 0.0

    count = min(r["count"], key=lambda c: c["seconds"])
    rows = [
        (provider, keys, "jvm start", r["jvm_start_s"], r["jvm_start_s"], None, None),
        (provider, keys, "planning", r["planning_s"], r["planning_s"], None, None),
        (provider, keys, "read (count)", count["seconds"], count["seconds"], count["rows"],
         rate(count["rows"], count["seconds"])),
    ]
    for fmt, runs in r["export"].items():
        best = min(runs, key=lambda e: e["seconds"])
        rows.append((provider, keys, f"export {fmt}", best["seconds"], best["wall"],
                     best["rows"], rate(best["rows"], best["seconds"])))
    cli = r["cli"]
    rows.append((provider, keys, "cli export parquet", cli["seconds"], cli["wall"], cli["rows"],
                 rate(cli["rows"], cli["wall"])))
    return rows


def setup(work: Path, source: str, keys: int, providers: list[str], batches: int) -> dict:
    """Write the input and one checkpoint per provider under ``work``; what was done, timed."""
    lines, made = [], []
    if source == "aggregate":
        from statekit.jobs.session import build_session

        spark = build_session("bench-state-export-setup", conf={"spark.driver.memory": "4g"})
        started = time.perf_counter()
        input_rows = write_landing(spark, work / "landing", keys, batches)
        lines.append(f"generate {input_rows:,} input rows in {batches} files: "
                     f"{time.perf_counter() - started:.1f} s")
        for provider in providers:
            started = time.perf_counter()
            checkpoint = work / f"ckpt-{provider}"
            n = aggregate_checkpoint(spark, work / "landing", checkpoint, provider)
            lines.append(f"{provider}: streaming aggregation wrote {n:,} keys in "
                         f"{time.perf_counter() - started:.1f} s")
            made.append((provider, n, str(checkpoint)))
        spark.stop()
    else:
        started = time.perf_counter()
        events = pipeline_landing(work / "landing", keys)
        lines.append(f"generate {events:,} events in 3 batches: "
                     f"{time.perf_counter() - started:.1f} s")
        for provider in providers:
            started = time.perf_counter()
            checkpoint = work / f"ckpt-{provider}"
            n = pipeline_checkpoint(work / "landing", checkpoint, provider)
            lines.append(f"{provider}: reference pipeline wrote {n:,} keys in "
                         f"{time.perf_counter() - started:.1f} s")
            made.append((provider, n, str(checkpoint)))
    return {"lines": lines, "checkpoints": made}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="state keys to create")
    parser.add_argument("--provider", choices=("hdfs", "rocksdb"), action="append",
                        help="state store provider (repeatable; default: both)")
    parser.add_argument("--source", choices=("aggregate", "pipeline"), default="aggregate",
                        help="who writes the state (see the module docstring)")
    parser.add_argument("--batches", type=int, default=4,
                        help="micro-batches of the aggregate source")
    parser.add_argument("--repeats", type=int, default=1, help="best of N in-process runs")
    parser.add_argument("--setup-in", type=Path, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    providers = args.provider or ["hdfs", "rocksdb"]
    if args.setup_in:  # the child process that writes the data (its JVM exits with it)
        made = setup(args.setup_in, args.source, args.keys, providers, args.batches)
        print(json.dumps(made))
        return
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="bench-state-export-"))
    try:
        command = [sys.executable, __file__, "--setup-in", str(work), "--keys", str(args.keys),
                   "--source", args.source, "--batches", str(args.batches)]
        for provider in providers:
            command += ["--provider", provider]
        done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
        made = json.loads(done.stdout.strip().splitlines()[-1])
        rows = []
        for provider, keys, checkpoint in made["checkpoints"]:
            measured = measure(Path(checkpoint), work, args.repeats)
            rows += table_rows(provider, keys, measured)
            for fmt, runs in measured["export"].items():
                if any(run["rows"] != keys for run in runs):
                    print(f"WARNING: {provider} {fmt} exported {runs[0]['rows']} of {keys} rows")
        print(f"\nsource: {args.source}; {PARTITIONS} partitions; setup (not measured):")
        for line in made["lines"]:
            print(f"  {line}")
        print("\n| provider | keys | phase | seconds | wall s | rows | rows/s |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for provider, keys, phase, seconds, wall, n, rate in rows:
            print(f"| {provider} | {keys:,} | {phase} | {seconds:.2f} | {wall:.2f} | "
                  f"{'' if n is None else f'{n:,}'} | {'' if rate is None else f'{rate:,.0f}'} |")
        print("\nseconds: Spark's write for exports (export_rows' `seconds`, the CLI's JSON); "
              "wall: the whole call or process.\ncli rows/s: over the process wall time "
              f"(JVM start included). Script run time: {time.perf_counter() - began:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
