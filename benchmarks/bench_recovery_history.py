"""Benchmark: restart estimates learned from the query's own restarts, in environments that
differ the way clusters do.

What it measures: the cost model is fitted on one machine, and no constant fitted there is
right on a cluster with other cores, storage latency or heap. The query's progress log holds
its own restarts (a new ``runId``): calibrated on two of them, how close the estimate comes to
the third restart's user-visible cost at ≥ 1M keys, beside the uncalibrated estimate.

Environments (each a fresh set of runs, every run a fresh process — a cold JVM, as a
restart is):

* ``base``: ``local[2]``, an 8 GiB heap;
* ``one-core``: Spark restricted to ``local[1]``;
* ``latency``: the checkpoint behind a filesystem that answers every request after
  ``--latency-ms`` (``benchmarks/slowfs/SlowFileSystem.java``, compiled here against the
  pyspark wheel's Hadoop API: per-request latency is what an object store adds; Spark cannot
  speak S3 itself without the hadoop-aws connector, which the wheel does not ship);
* ``small-heap``: a 1.5 GiB heap (the HDFS provider's million keys fill half of it).

Per environment and provider (HDFS with a snapshot every 10 deltas, maintenance every 5 s;
RocksDB with changelog checkpointing): run 0 starts the query on an empty checkpoint and
writes ``--keys`` keys over 10 batches; runs 1–3 are restarts, each processing 4 files of
100k rows (half new keys, half updates) — the state grows by 200k keys a run. Every run's
``recentProgress`` is appended to the environment's progress log, as a
StreamingQueryListener writing JSON lines would. Before run 3 the checkpoint and the log are
copied: that is what ``statekit recovery CKPT --progress-log LOG`` sees before the restart it
predicts.

Report: per environment and provider, the restart run 3 measured from the log (its first
batch over the run's steady batches, the same rule statekit applies to the past restarts),
the estimate calibrated on runs 1–2 (and the query's first start), the uncalibrated estimate
(probe-scaled), and their errors — on the state's part (measured − the cold start the log
measured on the query's first start) and on the whole first batch.

The predicted restart is run again ``--repeats`` times (each on a fresh copy of the
checkpoint before it, a fresh JVM): the measure is the median of its draws.

Run: ``.venv/bin/python benchmarks/bench_recovery_history.py --workdir W [--keys 1000000]
[--envs base,one-core,latency,small-heap] [--providers hdfs,rocksdb] [--repeats 2]
[--report-only] [--docs docs/concepts/recovery.md]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

ENVS = ("base", "one-core", "latency", "small-heap")
PROVIDERS = ("hdfs", "rocksdb")
INITIAL_FILES = 10
RUN_FILES = 4
ROWS_PER_RUN_FILE = 100_000
RESTARTS = 3
VALUE_BYTES = 50


def env_confs(env: str, provider: str, work: Path, latency_ms: float) -> tuple[str, dict]:
    """(master, confs) of one environment and provider."""
    prefix = "spark.sql.streaming.stateStore."
    confs = {"spark.sql.shuffle.partitions": "8", f"{prefix}maintenanceInterval": "5s",
             "spark.driver.memory": "8g", "spark.sql.adaptive.enabled": "false"}
    if provider == "rocksdb":
        confs[f"{prefix}providerClass"] = (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        confs[f"{prefix}rocksdb.changelogCheckpointing.enabled"] = "true"
    master = "local[2]"
    if env == "one-core":
        master = "local[1]"
    if env == "small-heap":
        confs["spark.driver.memory"] = "1536m"
    if env == "latency":
        confs["spark.driver.extraClassPath"] = str(slow_jar(work))
        confs["spark.hadoop.fs.slow.impl"] = "statekit.bench.SlowFileSystem"
        confs["spark.hadoop.fs.slow.latency.ms"] = str(int(latency_ms))
        confs["spark.hadoop.fs.slow.impl.disable.cache"] = "false"
    return master, confs


def slow_jar(work: Path) -> Path:
    """The latency filesystem, compiled against the pyspark wheel's Hadoop client API."""
    jar = work / "slowfs.jar"
    if jar.exists():
        return jar
    import pyspark

    api = next((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    classes = work / "slowfs-classes"
    shutil.rmtree(classes, ignore_errors=True)
    subprocess.run(["javac", "-d", str(classes), "-cp", str(api),
                    str(ROOT / "benchmarks/slowfs/SlowFileSystem.java")], check=True)
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


def child_generate(spec: dict) -> dict:
    """The input files: 10 of ``keys/10`` new keys; per restart, 4 of 100k rows (half new
    keys beyond those so far, half updates of existing ones)."""
    from bench_common import session
    from bench_recovery_grid import payload_expr

    spark = session("bench-history-generate", {})
    folder = Path(spec["data"])
    keys = spec["keys"]

    def write(rows, name: str) -> None:
        tmp = folder / f"tmp-{name}"
        rows.coalesce(1).write.parquet(str(tmp))
        next(tmp.glob("part-*.parquet")).rename(folder / f"{name}.parquet")
        shutil.rmtree(tmp)

    per = keys // INITIAL_FILES
    for b in range(INITIAL_FILES):
        write(spark.range(b * per, (b + 1) * per).selectExpr(
            "id as key", f"{payload_expr(VALUE_BYTES, str(b))} as payload"), f"r0-{b:02d}")
    top = keys
    half = ROWS_PER_RUN_FILE // 2
    for run in range(1, RESTARTS + 1):
        for f in range(RUN_FILES):
            new = spark.range(top, top + half).selectExpr("id as key")
            upd = spark.range(half).selectExpr(f"pmod(xxhash64(id, {run * 10 + f}), {top}) "
                                               "as key")
            write(new.union(upd).selectExpr(
                "key", f"{payload_expr(VALUE_BYTES, f'{run}-{f}')} as payload"), f"r{run}-{f:02d}")
            top += half
    spark.stop()
    (folder / "_DONE").write_text("")
    return {"keys": keys, "final_keys": top}


def child_run(spec: dict) -> dict:
    """One run of the query (a fresh process: a cold JVM), its progress appended to the log."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from statekit.jobs.session import build_session

    started = time.perf_counter()
    spark: SparkSession = build_session("bench-history", spec["master"], spec["confs"])
    jvm_s = time.perf_counter() - started
    query = (spark.readStream.schema("key long, payload string")
             .option("maxFilesPerTrigger", 1).parquet(spec["landing"])
             .groupBy("key").agg(F.max("payload").alias("payload"), F.count("*").alias("n"))
             .writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", spec["checkpoint"])
             .trigger(availableNow=True).start())
    query.awaitTermination()
    progress = [json.loads(p.json) if hasattr(p, "json") else p for p in query.recentProgress]
    progress = [p for p in progress if "addBatch" in (p.get("durationMs") or {})]
    with open(spec["log"], "a", encoding="utf-8") as out:
        for p in progress:
            out.write(json.dumps(p) + "\n")
    spark.stop()
    return {"jvm_s": jvm_s, "batches": len(progress),
            "first_s": progress[0]["durationMs"]["triggerExecution"] / 1000 if progress else None}


def run_child(mode: str, spec: dict, timeout: float = 1800) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", mode, json.dumps(spec)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_idle(limit: float = 0.1, patience_s: float = 60.0) -> None:
    from bench_common import cpu_busy

    deadline = time.monotonic() + patience_s
    while cpu_busy(1.0) > limit and time.monotonic() < deadline:
        pass


def record(work: Path, env: str, provider: str, latency_ms: float) -> None:
    """Run 0 and the restarts of one environment and provider (skipped when done)."""
    from bench_common import wait_static

    base = work / f"{env}-{provider}"
    if (base / "done.json").exists():
        return
    shutil.rmtree(base, ignore_errors=True)
    landing = base / "landing"
    landing.mkdir(parents=True)
    master, confs = env_confs(env, provider, work, latency_ms)
    checkpoint = base / "ckpt"
    spark_checkpoint = f"slow://{checkpoint}" if env == "latency" else str(checkpoint)
    log = base / "progress.jsonl"
    runs = []
    for run in range(RESTARTS + 1):
        for file in sorted((work / "data").glob(f"r{run}-*.parquet")):
            os.link(file, landing / file.name)
        if run == RESTARTS:  # what statekit sees before the restart it predicts
            shutil.copytree(checkpoint, base / "ckpt-before")
            shutil.copy(log, base / "progress-before.jsonl")
        wait_idle()
        result = run_child("run", {"master": master, "confs": confs, "landing": str(landing),
                                   "checkpoint": spark_checkpoint, "log": str(log)})
        wait_static(checkpoint)
        runs.append(result)
        print(json.dumps({"env": env, "provider": provider, "run": run, **result}),
              flush=True)
    (base / "done.json").write_text(json.dumps({"runs": runs, "master": master}))


def repeat_final(work: Path, env: str, provider: str, repeats: int, latency_ms: float) -> None:
    """The predicted restart again, ``repeats`` times: each on a fresh copy of the checkpoint
    as it was before it, over the same files, in a fresh JVM — a cold first batch varies by
    about a second, and one draw of it would judge the noise."""
    from bench_common import wait_static

    base = work / f"{env}-{provider}"
    if not (base / "done.json").exists():
        return
    master, confs = env_confs(env, provider, work, latency_ms)
    for n in range(repeats):
        folder = base / f"repeat-{n}"
        if (folder / "done.json").exists():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        checkpoint = folder / "ckpt"
        shutil.copytree(base / "ckpt-before", checkpoint)
        shutil.copy(base / "progress-before.jsonl", folder / "progress.jsonl")
        wait_idle()
        spark_checkpoint = f"slow://{checkpoint}" if env == "latency" else str(checkpoint)
        result = run_child("run", {"master": master, "confs": confs,
                                   "landing": str(base / "landing"),
                                   "checkpoint": spark_checkpoint,
                                   "log": str(folder / "progress.jsonl")})
        wait_static(checkpoint)
        shutil.rmtree(checkpoint)
        (folder / "done.json").write_text(json.dumps(result))
        print(json.dumps({"env": env, "provider": provider, "repeat": n, **result}),
              flush=True)


def final_costs(base: Path) -> list[float]:
    """The predicted restart's measured cost: the recorded run and every repeat of it."""
    from statekit.checkpoint.progress_log import parse_timings
    from statekit.recovery.history import observed_restarts

    logs = [base / "progress.jsonl", *sorted(base.glob("repeat-*/progress.jsonl"))]
    costs = []
    for log in logs:
        if log.parent != base and not (log.parent / "done.json").exists():
            continue
        restarts = observed_restarts(parse_timings(log.read_text(), shown=str(log))[0])
        if len(restarts.restarts) == RESTARTS:
            costs.append(restarts.restarts[-1].cost_s)
    return costs


# ---------------------------------------------------------------- report


def cores_of(master: str) -> int:
    return int(master[master.index("[") + 1: -1])


def evaluate(work: Path, env: str, provider: str) -> dict | None:
    """The calibrated and uncalibrated estimates of the last restart against its measure."""
    from statekit.checkpoint.checkpoint import open_checkpoint
    from statekit.checkpoint.progress_log import parse_timings
    from statekit.recovery.cost_model import local_model
    from statekit.recovery.estimate import estimate_recovery
    from statekit.recovery.history import observed_restarts

    base = work / f"{env}-{provider}"
    if not (base / "done.json").exists():
        return None
    done = json.loads((base / "done.json").read_text())
    cores = cores_of(done["master"])
    full, _ = parse_timings((base / "progress.jsonl").read_text(), shown="log")
    measured = observed_restarts(full)
    if not measured.restarts:
        return None
    target = measured.restarts[-1]
    costs = final_costs(base)
    before, _ = parse_timings((base / "progress-before.jsonl").read_text(), shown="log")
    ckpt = open_checkpoint(str(base / "ckpt-before"))
    model = local_model(ckpt)
    plain = estimate_recovery(ckpt, cores=cores, model=model)
    learned = estimate_recovery(ckpt, cores=cores, model=model, timings=before)
    calibration = learned.learning
    cold = measured.cold_start_s
    measured_s = statistics.median(costs)
    state_measured = measured_s - (cold or 0.0)
    return {
        "env": env, "provider": provider, "cores": cores, "draws": len(costs),
        "spread_s": max(costs) - min(costs),
        "keys": target.state_rows, "measured_s": measured_s,
        "cold_s": cold, "state_measured_s": state_measured,
        "uncalibrated_s": plain.restart_s, "calibrated_s": learned.restart_s,
        "first_batch_s": calibration.first_batch_s(learned.restart_s)
        if calibration else None,
        "scale": calibration.scale if calibration else None,
        "fixed_s": calibration.fixed_s if calibration else None,
        "fitted": calibration.scale_fitted if calibration else False,
        "learned_from": len(calibration.used) if calibration else 0,
    }


def learned_words(r: dict) -> str:
    if r["scale"] is None:
        return "uncalibrated"
    scale = f"× {r['scale']:.2f}" if r["fitted"] else "× 1 (kept)"
    return f"{scale} {r['fixed_s']:+.2f} s ({r['learned_from']})"


def error(estimate: float, measured: float) -> float:
    return (estimate - measured) / max(abs(measured), 1.0)


def report(work: Path, envs: list[str], providers: list[str], docs: Path | None) -> None:
    rows = [r for env in envs for provider in providers
            if (r := evaluate(work, env, provider)) is not None]
    header = ("| environment | provider | keys at the restart | measured: first batch over "
              "steady, median [spread, restarts] | of it the state's (− cold start) | "
              "calibrated (state) | error | "
              "calibrated (first batch) | error | uncalibrated (state) | error | "
              "learned (restarts) |")
    lines = [header, "|" + "---|" * 12]
    calibrated_errors, whole_errors, plain_errors = [], [], []
    for r in rows:
        e_cal = error(r["calibrated_s"], r["state_measured_s"])
        e_plain = error(r["uncalibrated_s"], r["state_measured_s"])
        whole = r["first_batch_s"]
        e_whole = error(whole, r["measured_s"]) if whole is not None else None
        calibrated_errors.append(e_cal)
        plain_errors.append(e_plain)
        if e_whole is not None:
            whole_errors.append(e_whole)
        lines.append(
            f"| {r['env']} | {r['provider']} | {r['keys'] or 0:,} | {r['measured_s']:.2f} s "
            f"[{r['spread_s']:.2f} s, {r['draws']}] | "
            f"{r['state_measured_s']:.2f} s | {r['calibrated_s']:.2f} s | {e_cal:+.0%} | "
            + (f"{whole:.2f} s | {e_whole:+.0%} | " if whole is not None else "– | – | ")
            + f"{r['uncalibrated_s']:.2f} s | {e_plain:+.0%} | " + learned_words(r) + " |")

    def summary(name: str, errors: list[float]) -> str:
        if not errors:
            return f"- {name}: none"
        worst = max(max(1 + e, 1 / max(1 + e, 1e-9)) for e in errors)
        return (f"- {name}: {len(errors)} restarts, median |error| "
                f"{statistics.median(abs(e) for e in errors):.0%}, worst factor {worst:.2f}×")

    lines += ["", summary("calibrated, the state's part", calibrated_errors),
              summary("calibrated, the whole first batch", whole_errors),
              summary("uncalibrated, the state's part", plain_errors)]
    text = "\n".join(lines)
    print(text)
    if docs is not None:
        content = docs.read_text()
        start, end = "<!-- recovery-history -->", "<!-- /recovery-history -->"
        if start in content:
            head, rest = content.split(start, 1)
            content = head + start + "\n" + text + "\n" + end + rest.split(end, 1)[1]
            docs.write_text(content)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        spec = json.loads(sys.argv[3])
        result = {"generate": child_generate, "run": child_run}[sys.argv[2]](spec)
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=0,
                        help="run the predicted restart this many more times (the measure "
                        "is the median)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--docs", type=Path)
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    envs, providers = args.envs.split(","), args.providers.split(",")
    if not args.report_only:
        data = work / "data"
        if not (data / "_DONE").exists():
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            print(json.dumps(run_child("generate", {"data": str(data), "keys": args.keys})),
                  flush=True)
        for env in envs:
            for provider in providers:
                record(work, env, provider, args.latency_ms)
        for env in envs:
            for provider in providers:
                repeat_final(work, env, provider, args.repeats, args.latency_ms)
    report(work, envs, providers, args.docs)


if __name__ == "__main__":
    main()
