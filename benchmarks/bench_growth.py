"""Benchmark: ``statekit growth``'s key-count trajectory from files versus asking Spark.

The question: growth detection needs the key count at *every* retained version, not just the
last one. statekit rebuilds that trajectory from the state files in one forward pass, in pure
Python (no JVM). With Spark alone an SRE would start a session and count the ``statestore``
source once per retained batch (each read loads a snapshot plus deltas, or a RocksDB zip, and
scans the whole state), or — on HDFS — read the change feed once, which gives churn per batch
but not the key count. How much faster is the file path, end to end, on a realistically
growing store? The target is ≥ 10× against both.

Data. Spark itself writes the checkpoint (the providers' real files): a streaming
``groupBy(user).agg(count, sum(amount))`` in update mode, without a watermark, over generated
JSON input — one file per micro-batch (``maxFilesPerTrigger=1``, availableNow, ``noop`` sink),
``--batches`` micro-batches, ``--partitions`` shuffle partitions. Each batch brings
``--new-keys`` new users plus updates to a random 10% of the users seen so far, so the state
grows linearly (40 × 10k = 400k keys by default) and every version has real inserts and
updates. Providers (``--provider``): HDFS (maintenance every 1 s, ``minDeltasForSnapshot`` 10, so
Spark's reads find snapshots) and RocksDB with changelog checkpointing explicitly off (one zip
per version; statekit then uses each zip's ``numKeys``). ``minBatchesToRetain`` stays at its
default (100), so every batch is retained. After the query stops, the state stores are
unloaded and the script waits until the checkpoint's listing stops changing; generating is
timed and printed, but not part of the comparison.

Measured per provider, each in a fresh process (imports and JVM start count):

* ``statekit CLI (fresh)``: ``statekit growth CKPT --json`` end to end, best of ``--repeats``;
  the per-version key counts are taken from its JSON;
* ``statekit in-process``: ``all_histories(open_checkpoint(path))`` in one process, best of
  ``--repeats`` (imports excluded);
* ``Spark per batch``: ``build_session`` (the JVM start, reported separately), then for every
  retained batch ``spark.read.format("statestore").option("batchId", b).load(path).count()``
  under ``session_confs(spark, reader_confs(ckpt))``; the process wall time is compared;
* ``Spark change feed`` (HDFS only — RocksDB without changelogs has none): ``read_changes``
  over all retained batches + ``summarize_changes``. It cannot tell inserts from updates, so it
  yields no key count: only its time is compared, and its upserts / deletes per batch are
  checked against statekit's inserts + updates / deletes.

Speed-ups are process wall times over the statekit CLI's. Data lives in a temporary folder,
removed at the end, unless ``--data DIR`` names a folder to keep it in (and to reuse it from
on the next run with the same sizes). Not a test: nothing is asserted; the script prints
whether the per-version key counts of statekit and Spark agree.

Before / after (``--baseline FILE``, e.g. ``git show HEAD:toolkit/state/history.py >
/tmp/old.py``): the replay is timed for the installed ``statekit.state.history`` and for that
copy of the module, alternately (A B C, then C B A, … ``--rounds`` times), each in a fresh
process that makes one cold call (worker pool started from scratch, as the CLI does) and
``--repeats`` − 1 warm ones; the table gives medians and ranges. The installed module is
timed twice: called from the process's only thread (``after``: its workers may be forked),
and with a second thread alive (``after, 2 threads``, as in the TUI or under the CLI's
progress spinner: its workers come from the fork server). With ``--skip-spark`` only statekit
is measured.

Run: ``.venv/bin/python benchmarks/bench_growth.py [--batches 40 --new-keys 10000]
[--provider hdfs|rocksdb|both] [--quick] [--data DIR] [--skip-spark]
[--baseline FILE --rounds 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_common import wait_static  # noqa: E402

STATEKIT = str(ROOT / ".venv/bin/statekit")
PROVIDER_CLASS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
MAINTENANCE = "1s"
MIN_DELTAS = 10
UPDATE_SHARE = 0.10
QUICK = {"batches": 12, "new_keys": 2000}

STATEKIT_SCRIPT = r"""
import importlib, json, os, sys, threading, time
if os.environ.get("BENCH_IDLE_THREAD"):  # a second thread alive, as in the TUI
    threading.Thread(target=threading.Event().wait, daemon=True).start()
t0 = time.perf_counter()
from statekit.checkpoint import open_checkpoint
path, repeats = sys.argv[1], int(sys.argv[2])
module = sys.argv[3] if len(sys.argv) > 3 else None
if module:  # a copy of state_history (--baseline), importable by name in worker processes
    sys.path.insert(0, os.path.dirname(module))
    all_histories = importlib.import_module(os.path.basename(module)[:-3]).all_histories
else:
    from statekit.state.history import all_histories
t1 = time.perf_counter()
times = []
for _ in range(repeats):
    a = time.perf_counter()
    histories = all_histories(open_checkpoint(path))
    times.append(time.perf_counter() - a)
ckpt = open_checkpoint(path)
kinds = {}
for f in ckpt.inventory.all_files():
    kinds[f.kind] = kinds.get(f.kind, 0) + 1
print(json.dumps({
    "import_s": t1 - t0, "times": times, "kinds": kinds,
    "committed": ckpt.committed_batches,
    "stores": [{"operator": h.operator_id, "store": h.store, "method": h.method,
                "notes": list(h.notes),
                "versions": [[v.version, v.keys, v.inserts, v.updates, v.deletes]
                             for v in h.versions]} for h in histories]}))
"""

SPARK_PER_BATCH_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from statekit.jobs.session import build_session
from statekit.jobs.state_reader import reader_confs, session_confs, spark_path
from statekit.checkpoint import open_checkpoint
ckpt = open_checkpoint(sys.argv[1])
path, batches, confs = spark_path(ckpt), ckpt.committed_batches, reader_confs(ckpt)
t1 = time.perf_counter()
spark = build_session("bench-growth-per-batch")
t2 = time.perf_counter()
reads = []
with session_confs(spark, confs):
    for b in batches:
        a = time.perf_counter()
        rows = spark.read.format("statestore").option("batchId", str(b)).load(path).count()
        reads.append([b, rows, time.perf_counter() - a])
t3 = time.perf_counter()
print(json.dumps({"model_s": t1 - t0, "jvm_start_s": t2 - t1, "reads_s": t3 - t2,
                  "reads": reads, "confs": confs}))
"""

SPARK_CHANGE_FEED_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from statekit.jobs.session import build_session
from statekit.jobs.state_analysis import summarize_changes
from statekit.jobs.state_reader import read_changes, reader_confs, resolve_target, session_confs
from statekit.checkpoint import open_checkpoint
ckpt = open_checkpoint(sys.argv[1])
target, batches, confs = resolve_target(ckpt), ckpt.committed_batches, reader_confs(ckpt)
t1 = time.perf_counter()
spark = build_session("bench-growth-change-feed")
t2 = time.perf_counter()
with session_confs(spark, confs):
    feed = summarize_changes(read_changes(spark, target, batches[0], batches[-1]))
t3 = time.perf_counter()
print(json.dumps({"model_s": t1 - t0, "jvm_start_s": t2 - t1, "read_s": t3 - t2,
                  "batches": [[b.batch_id, b.upserts, b.deletes] for b in feed]}))
"""


# -- data ---------------------------------------------------------------------------------------

def write_input(folder: Path, batches: int, new_keys: int, seed: int) -> int:
    """One JSON-lines file per micro-batch (mtimes increasing): ``new_keys`` new users plus a
    random ``UPDATE_SHARE`` of the users seen so far. Returns the rows written."""
    folder.mkdir(parents=True)
    rng = random.Random(seed)
    base = time.time() - batches
    rows = 0
    for batch in range(batches):
        seen = batch * new_keys
        users = list(range(seen, seen + new_keys))
        users += rng.sample(range(seen), int(seen * UPDATE_SHARE))
        rng.shuffle(users)
        lines = [f'{{"user":"u{u:08d}","amount":{rng.randrange(100, 100_000) / 100}}}\n'
                 for u in users]
        target = folder / f"batch-{batch:05d}.json"
        target.write_text("".join(lines))
        os.utime(target, (base + batch, base + batch))
        rows += len(lines)
    return rows


def run_query(spark, source: Path, checkpoint: Path, provider: str, partitions: int) -> int:
    """The growing aggregation over ``source`` (availableNow, noop sink); keys at the end, as
    the query's last progress reports them. Leaves the checkpoint static."""
    from pyspark.sql import functions as F

    from statekit.jobs.state_reader import session_confs

    confs = {
        "spark.sql.streaming.stateStore.providerClass": PROVIDER_CLASS[provider],
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
        "spark.sql.streaming.stateStore.maintenanceInterval": MAINTENANCE,
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(MIN_DELTAS),
        "spark.sql.shuffle.partitions": str(partitions),
    }
    with session_confs(spark, confs):
        events = (spark.readStream.schema("user STRING, amount DOUBLE")
                  .option("maxFilesPerTrigger", 1).json(str(source)))
        query = (events.groupBy("user")
                 .agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("total"))
                 .writeStream.format("noop").outputMode("update")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{provider} query failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["stateOperators"]]
    # Unload the providers (local mode: driver = executor JVM) so background maintenance stops
    # writing snapshots/zips, then wait for the folder to be static (as tests/conftest.quiesce).
    getattr(spark._jvm, "org.apache.spark.sql.execution.streaming.state.StateStore").stop()
    wait_static(checkpoint)
    return int(progress[-1]["stateOperators"][0]["numRowsTotal"])


def setup(work: Path, providers: list[str], batches: int, new_keys: int, partitions: int,
          seed: int) -> dict:
    """Input and one checkpoint per provider under ``work``; what was done, timed."""
    from statekit.jobs.session import build_session

    lines, made = [], []
    started = time.perf_counter()
    rows = write_input(work / "input", batches, new_keys, seed)
    lines.append(f"generate {rows:,} input rows in {batches} JSON files: "
                 f"{time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    spark = build_session("bench-growth-setup", conf={"spark.driver.memory": "3g"})
    lines.append(f"setup JVM start: {time.perf_counter() - started:.1f} s")
    for provider in providers:
        started = time.perf_counter()
        checkpoint = work / f"ckpt-{provider}"
        keys = run_query(spark, work / "input", checkpoint, provider, partitions)
        lines.append(f"{provider}: {batches} micro-batches, {keys:,} keys (query progress) in "
                     f"{time.perf_counter() - started:.1f} s (incl. waiting for a static "
                     "checkpoint)")
        made.append([provider, keys, str(checkpoint)])
    spark.stop()
    return {"lines": lines, "checkpoints": made}


# -- measuring ----------------------------------------------------------------------------------

def run_json(command: list[str], what: str, env: dict | None = None) -> tuple[dict, float]:
    """Run a fresh process; its last stdout line as JSON and its wall time."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **env} if env else None)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{what} failed (exit {done.returncode})")
    text = done.stdout.strip()
    return json.loads(text if text.startswith("{\n") else text.splitlines()[-1]), wall


def pick_store(stores: list[dict]) -> dict:
    """The aggregation's state: operator 0, store ``default``."""
    return next(s for s in stores if s.get("operator", s.get("operator_id")) == 0
                and s["store"] == "default")


def measure(provider: str, checkpoint: Path, repeats: int, skip_spark: bool = False) -> dict:
    path = str(checkpoint)
    r: dict = {"provider": provider}
    if skip_spark:
        inproc, _ = run_json([sys.executable, "-c", STATEKIT_SCRIPT, path, str(repeats)],
                             "statekit in-process")
        r["inproc"] = {**inproc, "history": pick_store(inproc["stores"])}
        return r
    # statekit CLI: fresh processes, best of N; key counts from the JSON.
    cli_walls = []
    for _ in range(repeats):
        data, wall = run_json([STATEKIT, "growth", path, "--json"], "statekit growth")
        cli_walls.append(wall)
    store = pick_store(data["stores"])
    r["cli"] = {"walls": cli_walls, "method": store["method"], "verdict": store["verdict"],
                "keys": {v["version"]: v["keys"] for v in store["history"]["versions"]}}
    # statekit in-process
    inproc, _ = run_json([sys.executable, "-c", STATEKIT_SCRIPT, path, str(repeats)],
                         "statekit in-process")
    history = pick_store(inproc["stores"])
    r["inproc"] = {**inproc, "history": history}
    # Spark, one read per retained batch
    r["per_batch"], r["per_batch_wall"] = run_json(
        [sys.executable, "-c", SPARK_PER_BATCH_SCRIPT, path], "Spark per batch")
    # Spark's change feed (HDFS only: RocksDB without changelog checkpointing has none)
    if provider == "hdfs":
        r["feed"], r["feed_wall"] = run_json(
            [sys.executable, "-c", SPARK_CHANGE_FEED_SCRIPT, path], "Spark change feed")
    return r


def compare(r: dict) -> dict:
    """Agreement of key counts (statekit CLI vs Spark per batch; version v = batch v - 1) and
    of churn (statekit inserts+updates / deletes vs the change feed's upserts / deletes)."""
    ours = r["cli"]["keys"]
    theirs = {b + 1: rows for b, rows, _ in r["per_batch"]["reads"]}
    versions = sorted(set(ours) | set(theirs))
    keys_diff = [(v, ours.get(v), theirs.get(v)) for v in versions
                 if ours.get(v) != theirs.get(v)]
    inproc = {v: k for v, k, *_ in r["inproc"]["history"]["versions"]}
    out = {"keys_diff": keys_diff, "cli_vs_inproc": inproc == ours, "versions": len(versions)}
    if "feed" in r:
        feed = {b + 1: (u, d) for b, u, d in r["feed"]["batches"]}
        churn_diff = []
        compared = 0
        for v, _, ins, upd, dels in r["inproc"]["history"]["versions"]:
            if ins is None:
                continue
            compared += 1
            mine, spark = (ins + upd, dels), feed.get(v, (0, 0))
            if mine != spark:
                churn_diff.append((v, mine, spark))
        out.update(churn_diff=churn_diff, churn_compared=compared,
                   feed_rows=sum(u + d for u, d in feed.values()))
    return out


def fmt_s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def spread(values: list[float]) -> str:
    """Median [min–max] of ``values``, in seconds."""
    return (f"{statistics.median(values):.2f} s [{min(values):.2f}–{max(values):.2f}]"
            if values else "–")


def copy_baseline(source: Path, work: Path) -> Path:
    """The baseline module under a name of its own, in a folder of its own (its worker
    processes import it by that name)."""
    folder = work / "baseline"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "baseline_state_history.py"
    shutil.copyfile(source, target)
    return target


THREADED = "after, 2 threads"
VARIANTS = ("before", "after", THREADED)


def compare_modules(checkpoints: list[tuple[str, str]], baseline: Path, rounds: int,
                    repeats: int) -> dict:
    """Alternate fresh processes of the installed module (``after``) and ``baseline``
    (``before``): per provider and variant, each process's cold call and best warm call.
    The installed module is timed twice: called from a process's only thread, and with a
    second thread alive (as in the TUI, or the CLI's progress spinner), which changes how it
    may start its worker processes."""
    out: dict = {}
    for turn in range(rounds):
        order = [(v, str(baseline) if v == "before" else None,
                  {"BENCH_IDLE_THREAD": "1"} if v == THREADED else None) for v in VARIANTS]
        for provider, path in checkpoints:
            for variant, module, env in (order if turn % 2 == 0 else order[::-1]):
                command = [sys.executable, "-c", STATEKIT_SCRIPT, path, str(repeats)]
                data, wall = run_json(command + ([module] if module else []),
                                      f"statekit in-process ({variant})", env)
                times = data["times"]
                runs = out.setdefault(provider, {}).setdefault(
                    variant, {"cold": [], "warm": [], "process": [], "keys": None})
                runs["cold"].append(times[0])
                runs["warm"].extend([min(times[1:])] if len(times) > 1 else [])
                runs["process"].append(wall)
                keys = [v[1] for v in pick_store(data["stores"])["versions"]]
                if runs["keys"] not in (None, keys):
                    raise SystemExit(f"{provider} {variant}: key counts changed between runs")
                runs["keys"] = keys
                print(f"  round {turn + 1}/{rounds} {provider} {variant}: cold "
                      f"{times[0]:.2f} s, warm {min(times[1:] or times):.2f} s, process "
                      f"{wall:.2f} s", flush=True)
    return out


def report_modules(results: dict, baseline: Path, rounds: int, repeats: int) -> None:
    print(f"\nReplay before ({baseline}) / after (installed statekit.state.history), "
          f"{rounds} alternating rounds of one fresh process each; median [min–max]:")
    header = ("provider", "keys at end", "variant", "cold call (pool started)",
              f"warm call (best of {repeats - 1})", "process wall (imports + all calls)")
    print("\n| " + " | ".join(header) + " |")
    print("|---|---:|---|" + "---:|" * (len(header) - 3))
    for provider, variants in results.items():
        for variant in VARIANTS:
            runs = variants[variant]
            print(f"| {provider} | {runs['keys'][-1]:,} | {variant} | {spread(runs['cold'])} | "
                  f"{spread(runs['warm'])} | {spread(runs['process'])} |")
    print()
    for provider, variants in results.items():
        same = all(variants[v]["keys"] == variants["before"]["keys"] for v in VARIANTS)
        print(f"{provider}: per-version key counts {'identical' if same else 'DIFFER'} "
              "before and after")


def report(results: list[dict], setup_lines: list[str], args, began: float) -> None:
    print(f"\n{args.batches} micro-batches × {args.new_keys:,} new keys (+ updates to "
          f"{UPDATE_SHARE:.0%} of existing keys), {args.partitions} partitions; "
          "setup (not measured):")
    for line in setup_lines:
        print(f"  {line}")
    rows = []
    for r in results:
        c = compare(r)
        r["compare"] = c
        cli = min(r["cli"]["walls"])
        inproc = min(r["inproc"]["times"])
        pb = r["per_batch"]
        kinds = r["inproc"]["kinds"]
        keys_end = r["cli"]["keys"][max(r["cli"]["keys"])] if r["cli"]["keys"] else 0
        per_batch = (f"{fmt_s(r['per_batch_wall'])} ({pb['jvm_start_s']:.1f} + "
                     f"{pb['reads_s']:.1f})")
        if "feed" in r:
            f = r["feed"]
            feed = f"{fmt_s(r['feed_wall'])} ({f['jvm_start_s']:.1f} + {f['read_s']:.1f})"
            vs_feed = f"{r['feed_wall'] / cli:.1f}×"
        else:
            feed, vs_feed = "n/a (no changelog)", "n/a"
        rows.append((r["provider"], str(c["versions"]), f"{keys_end:,}",
                     f"{sum(kinds.values()):,}", fmt_s(cli), fmt_s(inproc), per_batch, feed,
                     f"{r['per_batch_wall'] / cli:.1f}×", vs_feed))
    header = ("provider", "versions", "keys at end", "state files", "statekit CLI (fresh)",
              "statekit in-process", "Spark per batch (JVM + reads)", "Spark change feed",
              "speed-up vs per batch", "vs change feed")
    print("\n| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\nTimes are process wall times (best of "
          f"{args.repeats} for statekit, one run for Spark); in parentheses: JVM start "
          "(build_session) + reads.\nstatekit in-process: all_histories(open_checkpoint(…)), "
          f"best of {args.repeats}. Speed-ups: Spark process wall / statekit CLI wall.")
    for r in results:
        c, pb, ip = r["compare"], r["per_batch"], r["inproc"]
        reads = [t for _, _, t in pb["reads"]]
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(ip["kinds"].items()))
        print(f"\n{r['provider']}: statekit method {r['cli']['method']} "
              f"(verdict {r['cli']['verdict']}); state files: {kinds}")
        notes = "; ".join(n for n in ip["history"]["notes"] if n)
        if notes:
            print(f"  statekit notes: {notes}")
        print(f"  statekit CLI runs: {', '.join(f'{w:.2f}' for w in r['cli']['walls'])} s; "
              f"in-process: {', '.join(f'{t:.2f}' for t in ip['times'])} s "
              f"(+ {ip['import_s']:.2f} s imports)")
        print(f"  Spark per batch: model {pb['model_s']:.2f} s, JVM start "
              f"{pb['jvm_start_s']:.1f} s, {len(reads)} reads {pb['reads_s']:.1f} s (first "
              f"{reads[0]:.2f} s, median {statistics.median(reads):.2f} s, slowest "
              f"{max(reads):.2f} s); reader confs {pb['confs'] or '{}'}")
        print(f"  warm (no imports, no JVM start): Spark reads {pb['reads_s']:.1f} s vs "
              f"statekit in-process {min(ip['times']):.2f} s → "
              f"{pb['reads_s'] / min(ip['times']):.1f}×")
        agree = not c["keys_diff"]
        print(f"  counts agree: {'yes' if agree else 'no'} ({c['versions']} versions, "
              "statekit CLI JSON vs Spark statestore count)")
        for v, ours, theirs in c["keys_diff"][:10]:
            print(f"    version {v} (batch {v - 1}): statekit {ours} · Spark {theirs}")
        if not c["cli_vs_inproc"]:
            print("  NOTE: the CLI's key counts differ from all_histories' in-process")
        if "feed" in r:
            f = r["feed"]
            print(f"  Spark change feed: model {f['model_s']:.2f} s, JVM start "
                  f"{f['jvm_start_s']:.1f} s, read + summarise {f['read_s']:.1f} s, "
                  f"{c['feed_rows']:,} change rows over {len(f['batches'])} batches")
            print(f"  churn agrees (inserts+updates / deletes vs upserts / deletes): "
                  f"{'yes' if not c['churn_diff'] else 'no'} ({c['churn_compared']} versions)")
            for v, mine, spark in c["churn_diff"][:10]:
                print(f"    version {v} (batch {v - 1}): statekit {mine} · Spark {spark}")
    print(f"\nScript run time: {time.perf_counter() - began:.0f} s")


def report_statekit(results: list[dict], setup_lines: list[str], args) -> None:
    """``--skip-spark``: the statekit in-process times alone."""
    print(f"\n{args.batches} micro-batches × {args.new_keys:,} new keys, {args.partitions} "
          "partitions; setup (not measured):")
    for line in setup_lines:
        print(f"  {line}")
    for r in results:
        ip = r["inproc"]
        keys = ip["history"]["versions"][-1][1] if ip["history"]["versions"] else 0
        print(f"{r['provider']}: {keys:,} keys at end, method {ip['history']['method']}; "
              f"all_histories: {', '.join(f'{t:.2f}' for t in ip['times'])} s (first call "
              f"cold, + {ip['import_s']:.2f} s imports)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=40, help="micro-batches (versions)")
    parser.add_argument("--new-keys", type=int, default=10_000, help="new keys per batch")
    parser.add_argument("--partitions", type=int, default=8, help="shuffle partitions")
    parser.add_argument("--provider", choices=("hdfs", "rocksdb", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=3,
                        help="best of N for the statekit measurements")
    parser.add_argument("--seed", type=int, default=7, help="input generator seed")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK['batches']} batches × {QUICK['new_keys']:,} "
                             "new keys")
    parser.add_argument("--data", type=Path,
                        help="keep the input and checkpoints in this folder, and reuse them "
                             "from there when it already holds them (same sizes and seed)")
    parser.add_argument("--skip-spark", action="store_true",
                        help="measure statekit only (no Spark reads)")
    parser.add_argument("--baseline", type=Path,
                        help="a copy of state/history.py to time the installed one against "
                             "(alternating fresh processes)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating before/after rounds with --baseline")
    parser.add_argument("--setup-in", type=Path, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.quick:
        args.batches, args.new_keys = QUICK["batches"], QUICK["new_keys"]
    providers = ["hdfs", "rocksdb"] if args.provider == "both" else [args.provider]
    if args.setup_in:  # the child that writes the data (its JVM exits with it)
        print(json.dumps(setup(args.setup_in, providers, args.batches, args.new_keys,
                               args.partitions, args.seed)))
        return
    began = time.perf_counter()
    keep = args.data is not None
    work = args.data.resolve() if keep else Path(tempfile.mkdtemp(prefix="bench-growth-"))
    try:
        made = load_setup(work, args, providers) if keep else None
        if made is None:
            if keep and work.exists() and any(work.iterdir()):
                raise SystemExit(f"{work} holds other data: give an empty or new folder")
            command = [sys.executable, __file__, "--setup-in", str(work), "--batches",
                       str(args.batches), "--new-keys", str(args.new_keys), "--partitions",
                       str(args.partitions), "--provider", args.provider, "--seed",
                       str(args.seed)]
            print(f"writing the checkpoints ({', '.join(providers)}) …", flush=True)
            made, _ = run_json(command, "setup")
            if keep:
                (work / SETUP_FILE).write_text(json.dumps({**made, "args": setup_args(args)}))
        else:
            print(f"reusing the checkpoints in {work}", flush=True)
        if args.baseline:
            baseline = copy_baseline(args.baseline, work)
            checkpoints = [(provider, checkpoint)
                           for provider, _keys, checkpoint in made["checkpoints"]]
            print(f"alternating before/after, {args.rounds} rounds …", flush=True)
            results = compare_modules(checkpoints, baseline, args.rounds, args.repeats)
            report_modules(results, args.baseline, args.rounds, args.repeats)
            return
        results = []
        for provider, _keys, checkpoint in made["checkpoints"]:
            waited = wait_static(Path(checkpoint))  # the setup JVM is gone; double-check
            if waited > 1.5:
                made["lines"].append(f"{provider}: checkpoint still changed after setup "
                                     f"(waited {waited:.1f} s)")
            print(f"measuring {provider} …", flush=True)
            results.append(measure(provider, Path(checkpoint), args.repeats, args.skip_spark))
        if args.skip_spark:
            report_statekit(results, made["lines"], args)
        else:
            report(results, made["lines"], args, began)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


SETUP_FILE = "setup.json"


def setup_args(args) -> dict:
    return {"batches": args.batches, "new_keys": args.new_keys,
            "partitions": args.partitions, "seed": args.seed}


def load_setup(work: Path, args, providers: list[str]) -> dict | None:
    """What an earlier run with ``--data`` wrote there, if it matches these sizes."""
    try:
        made = json.loads((work / SETUP_FILE).read_text())
    except (OSError, ValueError):
        return None
    if made.get("args") != setup_args(args):
        raise SystemExit(f"{work} holds checkpoints of other sizes: {made.get('args')}")
    have = {provider for provider, _keys, _path in made["checkpoints"]}
    if not set(providers) <= have:
        raise SystemExit(f"{work} holds checkpoints of {sorted(have)} only")
    made["checkpoints"] = [c for c in made["checkpoints"] if c[0] in providers]
    return made


if __name__ == "__main__":
    main()
