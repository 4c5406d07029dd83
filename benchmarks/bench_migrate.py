"""Benchmark: ``statekit repartition`` and ``statekit migrate`` at ~1M keys, for an
aggregation and a stream-stream join, next to Spark's own in-place repartition.

The questions: how many state rows per second do statekit's writes move, for each provider,
when the target has another partition count (repartition) or another provider (migrate)?
How much memory does the driver need? And is statekit's HDFS path — its own executor-side
replay, Arrow hand-off to the JVM, Spark's hash partitioning and snapshot writer tasks — at
least as fast as Spark's own in-place repartition of the same state in RocksDB?

Data. Spark itself writes every checkpoint (in a child process; its times are printed, not
measured):

* aggregation: ``bench_repartition.setup`` (itself ``bench_state_export``'s stand-in for the
  reference pipeline: a streaming ``groupBy(user_id)`` whose value is a 12-field session
  struct), ``--keys`` keys, 8 partitions, HDFS and RocksDB;
* join: a stream-stream inner join (``user_id`` equality and a 20-minute event-time range,
  30-minute watermarks) over ``--keys`` input rows, half on each side, whose keys never
  match. Event times spread over an hour, so the rows already behind the watermark are
  evicted and the rest stay in state, each in ``keyToNumValues`` and
  ``keyWithIndexToValue``: the four stores hold about 1.3 × ``--keys`` rows. 8 partitions,
  HDFS and RocksDB.

Measured, each in a fresh process (imports and JVM start included), with the verification
(the target read back through Spark's reader and compared with the source) and without it:

* ``statekit repartition SRC --partitions 3`` (8 → 3);
* ``statekit migrate SRC --to <the other provider>`` (8 partitions kept);
* RocksDB sources: Spark's own ``_streamingCheckpointManager.repartition(copy, 3)`` on a
  fresh copy (``bench_repartition.inplace_run``).

rows/s is the state rows written over the job's seconds (the JSON's ``seconds``: logs, the
Spark work, verification, publish; Spark in-place: the call alone). Peak memory is
``VmHWM`` over the process tree (``bench_repartition.TreeMonitor``): the driver's Python
process, the Spark JVM (in local mode also the executor) and the largest Python worker.

Caveats: one run per row on the 2-core machine; local[*]. Not a test: nothing is asserted;
the script warns where the rows written differ from the source's or a verification fails.

Run: ``.venv/bin/python benchmarks/bench_migrate.py [--keys 1000000] [--quick] [--workdir DIR]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_repartition as repartition_bench  # noqa: E402  (data, monitor, in-place run)
from bench_common import wait_static  # noqa: E402

PARTITIONS = repartition_bench.FROM_PARTITIONS
TO = 3
BATCHES = 4
OTHER = {"hdfs": "rocksdb", "rocksdb": "hdfs"}


# -- data ---------------------------------------------------------------------------------------

def write_join_landing(spark, landing: Path, rows: int) -> None:
    """Two Parquet files of ``rows // 2`` rows each; even ids are left rows, odd ids right
    rows, with different keys, so the join never matches; event times spread over an hour."""
    from bench_state_export import write_batch_file
    from pyspark.sql import functions as F

    landing.mkdir(parents=True)
    half = rows // 2
    base = time.time() - 2
    for batch in range(2):
        df = (spark.range(batch * half, (batch + 1) * half)
              .select(F.concat(F.lit("u"), F.col("id").cast("string")).alias("user_id"),
                      (F.col("id") % 2).cast("int").alias("side"),
                      F.timestamp_seconds(F.lit(1_767_600_000) + F.col("id") % 3600)
                      .alias("ts"),
                      (F.col("id") % 1000 / 10).alias("amount")))
        write_batch_file(df, landing, batch, base + batch)


def join_checkpoint(spark, landing: Path, checkpoint: Path, provider: str) -> None:
    from pyspark.sql import functions as F

    from tests.small_queries import provider_confs

    for key, value in {**provider_confs(provider, "lz4"),
                       "spark.sql.shuffle.partitions": str(PARTITIONS)}.items():
        spark.conf.set(key, value)
    schema = spark.read.parquet(str(landing)).schema

    def side(number: int, alias: str):
        return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                .parquet(str(landing)).where(f"side = {number}")
                .withWatermark("ts", "30 minutes").alias(alias))

    joined = side(0, "l").join(side(1, "r"), F.expr(
        "l.user_id = r.user_id AND r.ts BETWEEN l.ts - INTERVAL 20 MINUTES AND l.ts"))
    query = (joined.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"join query failed: {query.exception()}")


def setup(work: Path, keys: int) -> None:
    """The aggregation checkpoints (``bench_repartition.setup``), then the join ones;
    ``setup.json`` records each (a later run with the same ``--workdir`` reuses them)."""
    from statekit.jobs.session import build_session

    repartition_bench.setup(work, [("hdfs", keys), ("rocksdb", keys)], BATCHES)
    record = work / "setup.json"
    done = json.loads(record.read_text())
    spark = None
    landing = work / f"landing-join-{keys}"
    for provider in ("hdfs", "rocksdb"):
        name = f"join-{provider}-{keys}"
        if name in done:
            continue
        if spark is None:
            spark = build_session("bench-migrate-setup", conf={"spark.driver.memory": "4g"})
        if not landing.exists():
            started = time.perf_counter()
            write_join_landing(spark, landing, keys)
            done["lines"].append(f"generate {keys:,} join input rows: "
                                 f"{time.perf_counter() - started:.1f} s")
        checkpoint = work / f"ckpt-{name}"
        shutil.rmtree(checkpoint, ignore_errors=True)
        started = time.perf_counter()
        join_checkpoint(spark, landing, checkpoint, provider)
        getattr(spark._jvm, repartition_bench.STATE_STORE_CLASS).stop()
        wait_static(checkpoint)
        done[name] = {"provider": provider, "checkpoint": str(checkpoint)}
        done["lines"].append(f"{provider}: stream-stream join over {keys:,} rows written in "
                             f"{time.perf_counter() - started:.1f} s")
        record.write_text(json.dumps(done, indent=1))
    if spark is not None:
        spark.stop()


# -- measuring ----------------------------------------------------------------------------------

def statekit_run(args: list[str], out: Path, verify: bool, interval: float) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [repartition_bench.STATEKIT, *args, "--out", str(out), "--force", "--json"]
    if not verify:
        command.append("--no-verify")
    data, wall, _printed, memory = repartition_bench.run_monitored(command, interval, args[0])
    written = data["written"]
    check = data["verification"]
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "job": data["seconds"], "memory": memory,
            "rows": sum(p["keys"] for parts in written.values() for p in parts),
            "verified": None if check is None else check["ok"],
            "source_rows": None if check is None else sum(s["source_rows"]
                                                          for s in check["stores"]),
            "problems": [] if check is None else check["problems"]}


def report(results: list[dict], lines: list[str], began: float) -> None:
    print("\nsetup (not measured):")
    for line in lines:
        print(f"  {line}")
    header = ("query", "source", "operation", "verify", "state rows", "wall s", "job s",
              "rows/s (job)", "peak driver Python", "peak JVM", "peak Python worker")
    print("\n| " + " | ".join(header) + " |")
    print("|---|---|---|---|" + "---:|" * (len(header) - 4))
    mib = repartition_bench.mib
    for r in results:
        m = r["memory"]
        rows = r["rows"]
        print("| " + " | ".join((
            r["query"], r["provider"], r["operation"], r["verify"],
            "?" if rows is None else f"{rows:,}", f"{r['wall']:.1f}", f"{r['job']:.1f}",
            "?" if not rows else f"{rows / r['job']:,.0f}", mib(m["driver_kib"]),
            mib(m["jvm_kib"]), mib(m["worker_kib"]) if m["workers"] else "–")) + " |")
    by = {(r["query"], r["provider"], r["operation"], r["verify"]): r for r in results}
    print()
    for query in ("aggregation", "join"):
        spark = by.get((query, "rocksdb", f"Spark in-place → {TO}", "–"))
        ours = by.get((query, "hdfs", f"repartition → {TO}", "no"))
        if spark and ours and spark["rows"] and ours["rows"]:
            ratio = (ours["rows"] / ours["job"]) / (spark["rows"] / spark["job"])
            print(f"{query}: statekit's HDFS repartition (no verify) moves "
                  f"{ratio:.2f}× the rows per second of Spark's in-place RocksDB repartition")
    for r in results:
        if r["verified"] is False:
            print(f"WARNING: {r['query']} {r['provider']} {r['operation']}: verification "
                  f"failed: {'; '.join(r['problems'])}")
        if r["source_rows"] is not None and r["rows"] is not None and \
                r["rows"] != r["source_rows"]:
            print(f"WARNING: {r['query']} {r['provider']} {r['operation']}: {r['rows']:,} "
                  f"rows written, the source has {r['source_rows']:,}")
    print(f"\nScript run time: {time.perf_counter() - began:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000,
                        help="aggregation keys, and join input rows (default 1000000)")
    parser.add_argument("--quick", action="store_true", help="smoke run at 40,000 keys")
    parser.add_argument("--poll", type=float, default=0.2,
                        help="seconds between process-tree memory polls")
    parser.add_argument("--workdir", type=Path,
                        help="keep data here (and reuse a finished setup)")
    parser.add_argument("--setup-in", type=Path, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.quick:
        args.keys = 40_000
    if args.setup_in:
        setup(args.setup_in, args.keys)
        return
    began = time.perf_counter()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    work = args.workdir.resolve() if args.workdir else \
        Path(tempfile.mkdtemp(prefix="bench-migrate-"))
    try:
        print(f"setting up in {work} …", flush=True)
        done = subprocess.run([sys.executable, __file__, "--setup-in", str(work), "--keys",
                               str(args.keys)], capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"setup failed (exit {done.returncode})")
        made = json.loads((work / "setup.json").read_text())
        results = []
        for query in ("aggregation", "join"):
            for provider in ("hdfs", "rocksdb"):
                name = (f"{provider}-{args.keys}-b{BATCHES}" if query == "aggregation"
                        else f"join-{provider}-{args.keys}")
                checkpoint = Path(made[name]["checkpoint"])
                operations = [(f"repartition → {TO}", ["repartition", str(checkpoint),
                                                       "--partitions", str(TO)]),
                              (f"migrate → {OTHER[provider]}",
                               ["migrate", str(checkpoint), "--to", OTHER[provider]])]
                for operation, command in operations:
                    for verify in (False, True):
                        print(f"{query} {provider}: {operation}"
                              f"{'' if verify else ' --no-verify'} …", flush=True)
                        r = statekit_run(command, work / "out", verify, args.poll)
                        results.append({**r, "query": query, "provider": provider,
                                        "operation": operation,
                                        "verify": "yes" if verify else "no"})
                if provider == "rocksdb":
                    print(f"{query} rocksdb: Spark in-place on a copy …", flush=True)
                    r = repartition_bench.inplace_run(checkpoint, work / "inplace", TO,
                                                      args.poll)
                    results.append({"query": query, "provider": provider,
                                    "operation": f"Spark in-place → {TO}", "verify": "–",
                                    "wall": r["wall"], "job": r["job"], "rows": r["keys"],
                                    "memory": r["memory"], "verified": None,
                                    "source_rows": None, "problems": []})
        report(results, made.get("lines", []), began)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
