"""Benchmark: how long a restarted query really takes to process again, against its load work.

The question. ``statekit recovery`` will estimate, from a checkpoint's files alone (no JVM),
"if this query dies now, how long until it is processing again": per state store instance a
restart loads the newest snapshot (HDFS ``.snapshot`` / RocksDB ``<v>.zip`` plus the SST files
it references) at or below the version to load, then replays every change file after it
(HDFS ``.delta`` / RocksDB ``.changelog``); tasks of different partitions run in parallel over
the cores; a batch that was planned but not committed (``offsets/N`` without ``commits/N``)
is re-run first. That model needs *measured* restart times to be validated against, and
calibrated constants. This script measures them and prints the files' load work beside them.

Data. The reference pipeline (``reference_pipeline``: applyInPandasWithState with event-time
timeouts into a Parquet sink, ``--partitions`` shuffle partitions, state maintenance every
1 s) runs over ``--batches`` files of the reference generator (``GeneratorConfig(users=2000,
events_per_batch=400)``, like ``make demo``), availableNow, one file per micro-batch, each
configuration in a fresh subprocess (one at a time by default: the runs are CPU-bound; not
measured). Then
the state stores are unloaded (``StateStore.stop()``), the session stopped, and the script
waits until the checkpoint stops changing. Configurations (``--configs`` picks some):

* ``hdfs-nosnap``: HDFS provider, ``minDeltasForSnapshot`` 1000 — no snapshot ever, so a
  restart replays every delta (~``--batches`` per partition);
* ``hdfs-snap5``: HDFS, ``minDeltasForSnapshot`` 5 — a snapshot plus a few deltas;
* ``hdfs-leaky``: HDFS, the leaky variant (no timeout, no remove: state keeps growing, values
  grow too), ``minDeltasForSnapshot`` 10;
* ``rocksdb``: RocksDB without changelog checkpointing (a zip per version: load = the latest
  zip + copying its SST files);
* ``rocksdb-leaky``: the same with the leaky variant — a larger RocksDB state (more and bigger
  SST files), so the zip load path has two load shapes to fit;
* ``rocksdb-changelog``: RocksDB with changelog checkpointing, ``minDeltasForSnapshot`` 1000
  (no zip: every changelog is replayed);
* ``hdfs-crash-sink-committed``: a copy of ``hdfs-nosnap``'s checkpoint and sink whose
  newest ``commits/N`` (and ``.N.crc``) is deleted — a crash between the sink's commit and the
  commit log's. Spark re-plans batch N and its file sink *skips* it (``_spark_metadata/N``
  exists): no state is loaded or written for it; the next batch loads version N + 1, which
  the crashed run wrote. statekit sees the sink's log (``--sink``) and predicts the skip.
* ``hdfs-crash-mid-batch``: a copy whose newest batch *with input*, M, crashed while running
  (the usual crash): ``commits/M``, ``output/_spark_metadata/M`` and the state files of
  version M + 1 are deleted, and the later no-data batch that fired the timeouts with them
  (offsets too), as if it never ran. The restart re-runs batch M (loading version M) first.
* optional (``--large``): ``hdfs-large`` (HDFS, ``minDeltasForSnapshot`` 1000, a 10× larger
  generator ``users=20000, events_per_batch=4000`` over ``--large-batches`` files — the
  pipeline's Python UDF manages only ~270 keys/s here, so it is not in the default run).

Then ONE more generated batch file is appended to the landing folder (the generator's append:
same config, next batch index) and copied, alone, into a second landing folder.

Measured, each in a fresh Python process (cold JVM, like a restarted driver; ``build_session``
plus the pipeline's own ``start_query`` with ``trigger(availableNow=True)``), ``--repeats``
times, interleaved (repeat 1 of everything, then repeat 2, …):

* **restart**: a fresh copy of the configuration's checkpoint and sink; the query restarts on
  it and runs until the first batch that reads the new file has finished (then it is
  stopped). Recorded from each batch's StreamingQueryProgress: ``batchId``, input rows,
  ``durationMs`` (``triggerExecution``, ``addBatch``, ``queryPlanning``, …) and the state
  operator's ``customMetrics``; wall times: JVM start, and ``writeStream.start()`` → end of
  that batch.
* **baseline**: an EMPTY new checkpoint whose input is only the new file (same provider,
  partitions, confs and variant); its first batch. Configurations with the same pipeline
  (provider, changelog, variant, generator) share one baseline series — the baseline does not
  depend on the checkpoint's history.

Every measured process of a configuration without a crash also writes Spark's event log
(``spark.eventLog.enabled``) and a state-store log (log4j:
``org.apache.spark.sql.execution.streaming.state`` at DEBUG into a file). Crash restarts run
a whole extra batch whose logging cost their baseline's single batch would not have, so
they and their baseline (family ``…-plain``) run without both and are measured by A only.
Definitions of "measured recovery" compared (per repeat i, restart_i − baseline_i,
then the median over repeats; the spread is max − min over repeats):

* **A trigger**: Σ ``triggerExecution`` of the restart's batches up
  to and including the first one that reads the new file (re-run batches included) − the
  baseline's first-batch ``triggerExecution``.
* **B ready**: from ``writeStream.start()`` to the end of that batch, restart − baseline (adds
  the query's start-up: reading the offset/commit/source/sink logs).
* **C stage**: the stateful stage's wall time (event log: the stage with a ``StateStoreRDD``,
  completion − submission) of those batches, restart − baseline.
* **D Spark load**: Spark's own per-partition state-load times — HDFS: the provider's DEBUG
  line ``Loading state for <v> takes <ms> ms.`` (logged on a loadedMaps miss); RocksDB: the
  time between ``Loading <v>`` and ``Loaded <v>`` of one partition (the same total as the
  ``rocksdbLoadLatencyMs`` custom metric, which is only a sum) — combined over the cores as
  the critical path below, restart − baseline (the baseline "loads" an empty store). D is
  the state load only: a crash's re-run batch is shown beside it, as measured in the restart
  and as the same batch took (warm) in the setup run. D does not contain the Python workers'
  cold start (seconds of task time in every first batch, restart and baseline alike), the
  main noise of A–C.

Load work from the files (pure Python, no JVM): ``open_checkpoint(path).inventory``; the
version to load is the last committed batch + 1; per partition ``files_to_load(version)``:
files (a RocksDB zip counts with the SST files it references, which a cold restart copies),
bytes, and records — those Spark iterates one by one while loading: HDFS snapshot + delta
records, RocksDB changelog records (zip/SST contents are copied as files, not iterated;
``statekit.checkpoint.state_data.file_records``).

Critical path: with P partitions and C cores (``os.cpu_count()``) tasks run in ceil(P/C) waves;
per quantity (files, bytes, records, measured load ms), partitions are sorted slowest first
and the slowest of each wave of C are summed.

**The measured recovery** compared with statekit's estimate (the headline table) is D for a
configuration without a crash — all a restart adds then is the state load, and D measures it
with a tenth of A's noise (A's spread, ~1 s, is the Python workers' cold start, which the
baseline pays too) — and A for a crash, whose restart also re-runs (or re-plans) a batch that
D does not see. The target: median absolute error ≤ 25 % and no configuration off by more
than 2×.

If ``statekit recovery --help`` exits 0, ``statekit recovery CKPT --json --cores C --sink
<its output> --progress <the setup run's progress log>`` is run on each configuration's
checkpoint; its ``estimate_s`` (seconds of recovery beyond a normal first batch) is compared
with the measured recovery, and its ``state_load_s`` with D; otherwise the columns show
``-``.

Fitted costs: per provider load path (HDFS; RocksDB zip + SSTs; RocksDB changelog replay —
their one-time and per-file costs differ), least squares of the recovery ≈ a·files +
b·bytes + c·records (critical paths) + d over the configurations' repeats (D, and A for
configurations without a re-run batch), and — better determined — of Spark's per-partition
load time (minus the baseline's for the same partition) ≈ a·files + b·bytes + c·records + d
+ e·warmup over every (configuration, repeat, partition), where warmup = 1 in the first wave
(partitions < cores: the JVM's one-time class loading/JIT/native-library cost of the load
path lands there); with non-negative constants (best subset), unconstrained for comparison,
and leave-one-configuration-out ranges and held-out predictions to show how stable they are.
A load path measured by one configuration only gets per-partition medians instead of a fit.

Caveats: the machine may be shared (the CPU busy share in the second before each measured
process is printed); the checkpoint copies are in the page cache (a restart from a cold
disk or an object store pays more per file and per byte). Data lives in a temporary folder,
removed at the end (``--workdir`` keeps it and reuses a finished setup). Not a test: nothing
is asserted.

Run: ``.venv/bin/python benchmarks/bench_recovery.py [--quick] [--repeats 3] [--batches 60]
[--configs hdfs-nosnap,rocksdb] [--large] [--workdir DIR]``
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_common import (  # noqa: E402
    CORES,
    LOG4J,
    STATE_PACKAGE,
    cpu_busy,
    critical_path,
    parse_state_log,
    slim_progress,
    wait_static,
)

STATEKIT = str(ROOT / ".venv/bin/statekit")
MAINTENANCE = "1s"
QUICK = {"batches": 12, "repeats": 1}
GENERATORS = {  # GeneratorConfig keyword arguments
    "small": {"users": 2000, "events_per_batch": 400},  # like `make demo`
    "large": {"users": 20000, "events_per_batch": 4000, "new_users_per_batch": 100},
}


@dataclass(frozen=True)
class Config:
    """One measured configuration."""

    name: str
    provider: str
    min_deltas: int | None
    changelog: bool = False
    leaky: bool = False
    crash_of: str | None = None
    """Copy this configuration's checkpoint and sink and simulate a crash in it (no own run)."""
    crash: str = ""
    """``sink-committed``: delete the newest ``commits/N`` only (a crash between the sink's
    commit and the commit log's: Spark re-plans N and skips its write). ``mid-batch``: the
    newest batch with input, M, crashes while running — ``commits/M``, the sink's
    ``_spark_metadata/M`` and the state files M + 1 are deleted, and any later (no-data)
    batch with them, as if it never ran; the restart really re-runs M."""
    generator: str = "small"

    @property
    def instrumented(self) -> bool:
        """Whether the restart and its baseline log the state store at DEBUG (for D) and
        write an event log (for C). A crash's restart runs a whole extra batch, whose
        logging the baseline's single batch does not have: crashes run plain and are
        measured by A."""
        return not self.crash

    @property
    def family(self) -> str:
        """Configurations sharing a baseline: same pipeline, same new input file, same
        instrumentation."""
        return (f"{self.provider}{'-changelog' if self.changelog else ''}"
                f"{'-leaky' if self.leaky else ''}{'-large' if self.generator != 'small' else ''}"
                f"{'' if self.instrumented else '-plain'}")


CONFIGS = (
    Config("hdfs-nosnap", "hdfs", 1000),
    Config("hdfs-snap5", "hdfs", 5),
    Config("hdfs-leaky", "hdfs", 10, leaky=True),
    Config("rocksdb", "rocksdb", None),
    Config("rocksdb-leaky", "rocksdb", None, leaky=True),
    Config("rocksdb-changelog", "rocksdb", 1000, changelog=True),
    Config("hdfs-crash-sink-committed", "hdfs", 1000, crash_of="hdfs-nosnap",
           crash="sink-committed"),
    Config("hdfs-crash-mid-batch", "hdfs", 1000, crash_of="hdfs-nosnap", crash="mid-batch"),
)
OPTIONAL = (  # not in the default run: a slow setup run
    Config("hdfs-large", "hdfs", 1000, generator="large"),
)
LARGE = OPTIONAL[0]
SETUP_ORDER = ("hdfs-leaky", "rocksdb-leaky", "hdfs-large", "rocksdb-changelog", "rocksdb",
               "hdfs-nosnap", "hdfs-snap5")


# -- children (fresh processes) ---------------------------------------------------------------

def run_options(spec: dict):
    from statekit.reference_pipeline.pipeline import RunOptions

    return RunOptions(landing=Path(spec["landing"]), checkpoint=spec["checkpoint"],
                      output=spec["output"], provider=spec["provider"],
                      partitions=spec["partitions"], min_deltas_for_snapshot=spec["min_deltas"],
                      maintenance_interval=MAINTENANCE, changelog=spec["changelog"],
                      leaky=spec["leaky"], progress_log=spec.get("progress_log") and
                      Path(spec["progress_log"]))


def child_setup(spec: dict) -> dict:
    """Run the pipeline over the landing folder into a checkpoint; leave it static."""
    from statekit.jobs.session import build_session
    from statekit.reference_pipeline.pipeline import MAINTENANCE_CONF, run

    opts = run_options(spec)
    spark = build_session("bench-recovery-setup",
                          conf={**opts.sql_confs(), MAINTENANCE_CONF: MAINTENANCE,
                                "spark.sql.streaming.numRecentProgressUpdates": "10000"})
    started = time.perf_counter()
    result = run(spark, opts)
    seconds = time.perf_counter() - started
    getattr(spark._jvm, f"{STATE_PACKAGE}.StateStore").stop()
    waited = wait_static(Path(spec["checkpoint"]))
    spark.stop()
    return {"batches": len(result.batches), "last_batch": max(result.batches),
            "state_keys": result.state_keys(), "seconds": seconds, "waited": waited}


def child_measure(spec: dict) -> dict:
    """Start the query (availableNow) in this fresh process; stop it once the first batch
    reading new input (batch id ≥ ``first_new_batch``: re-run batches read old input) has
    finished. Progress, wall times, event-log and state-log facts."""
    began = time.perf_counter()
    from statekit.jobs.session import build_session
    from statekit.reference_pipeline.pipeline import MAINTENANCE_CONF, start_query

    opts = run_options(spec)
    Path(spec["event_dir"]).mkdir(parents=True, exist_ok=True)
    confs = {**opts.sql_confs(), MAINTENANCE_CONF: MAINTENANCE}
    if spec["instrumented"]:
        java = (f"-Dlog4j2.configurationFile=file:{spec['log4j']} "
                f"-Dstatekit.bench.statelog={spec['state_log']}")
        confs.update({"spark.driver.extraJavaOptions": java,
                      "spark.eventLog.enabled": "true", "spark.eventLog.dir": spec["event_dir"],
                      "spark.eventLog.compress": "false",
                      "spark.eventLog.rolling.enabled": "false"})
    imported = time.perf_counter()
    spark = build_session(f"bench-recovery-{spec['role']}", conf=confs)
    jvm_s = time.perf_counter() - imported
    start_epoch = time.time()
    query = start_query(spark, opts)
    batches: list[dict] = []
    deadline = time.monotonic() + spec["timeout_s"]
    reached = False

    def is_new(p: dict) -> bool:
        return p.get("numInputRows", 0) > 0 and p["batchId"] >= spec["first_new_batch"]

    while time.monotonic() < deadline:
        batches = [json.loads(p.json) if hasattr(p, "json") else dict(p)
                   for p in query.recentProgress]
        batches = [p for p in batches if "addBatch" in p.get("durationMs", {})]
        if any(is_new(p) for p in batches):
            reached = True
            break
        if not query.isActive:
            break
        time.sleep(0.2)
    failure = query.exception()
    query.stop()
    spark.stop()  # flushes the event log
    if reached:  # keep the batches up to and including the first one with input
        first = next(i for i, p in enumerate(batches) if is_new(p))
        batches = batches[:first + 1]
    return {
        "import_s": imported - began, "jvm_s": jvm_s, "start_epoch": start_epoch,
        "reached": reached, "failure": str(failure) if failure else None,
        "batches": [slim_progress(p) for p in batches],
        "loads": parse_state_log(Path(spec["state_log"])),
        "stages": parse_event_log(Path(spec["event_dir"])),
    }


def parse_event_log(folder: Path) -> dict[str, dict]:
    """Per micro-batch id: the stateful stages' wall time and their tasks' times."""
    events = []
    for path in sorted(folder.glob("*")):
        if path.is_file() and not path.name.startswith("."):
            with open(path, errors="replace") as handle:
                for line in handle:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        continue
    stage_batch: dict[int, str] = {}
    stages: dict[int, dict] = {}
    tasks: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        kind = e.get("Event")
        if kind == "SparkListenerJobStart":
            batch = (e.get("Properties") or {}).get("streaming.sql.batchId")
            for sid in e.get("Stage IDs", []):
                if batch is not None:
                    stage_batch[sid] = batch
        elif kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            stages[info["Stage ID"]] = info
        elif kind == "SparkListenerTaskEnd":
            tasks[e["Stage ID"]].append(e)
    out: dict[str, dict] = {}
    for sid, info in stages.items():
        names = [r.get("Name", "") for r in info.get("RDD Info", [])]
        if "StateStoreRDD" not in names or sid not in stage_batch:
            continue
        entry = out.setdefault(stage_batch[sid], {"wall_ms": 0, "tasks": 0, "run_ms": 0,
                                                  "python_start_ms": 0, "task_ms": []})
        if info.get("Submission Time") and info.get("Completion Time"):
            entry["wall_ms"] += info["Completion Time"] - info["Submission Time"]
        for t in tasks.get(sid, []):
            accum = {a.get("Name"): a.get("Update") for a in t["Task Info"].get("Accumulables", [])}
            entry["tasks"] += 1
            entry["run_ms"] += (t.get("Task Metrics") or {}).get("Executor Run Time", 0)
            entry["python_start_ms"] += sum(int(accum.get(k) or 0) for k in (
                "time to start Python workers", "time to initialize Python workers"))
            entry["task_ms"].append([t["Task Info"].get("Partition ID", t["Task Info"]["Index"]),
                                     t["Task Info"]["Finish Time"] - t["Task Info"]["Launch Time"]])
    return out


# -- plumbing ---------------------------------------------------------------------------------

def run_child(mode: str, spec: dict, what: str) -> tuple[dict, float]:
    """A fresh process running ``child_<mode>(spec)``: its JSON result and its wall time."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", mode, json.dumps(spec)],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{what} failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1]), wall


def progress_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- setup ------------------------------------------------------------------------------------

def setup(work: Path, configs: list[Config], args) -> dict:
    """Landing folders, one pipeline run per configuration (in subprocesses), crash copies,
    then the one appended batch file. Reused when ``work/setup.json`` matches."""
    from statekit.reference_pipeline.generator import GeneratorConfig, events_file, generate

    marker = work / "setup.json"
    wanted = {"batches": args.batches, "large_batches": args.large_batches,
              "partitions": args.partitions, "configs": [asdict(c) for c in configs]}
    if marker.exists():
        done = json.loads(marker.read_text())
        if done["params"] == wanted:
            print(f"reusing the setup in {work}", flush=True)
            return done
        raise SystemExit(f"{work} holds a setup with other parameters; use another --workdir")
    if any(work.iterdir()):  # an interrupted setup: keep the pipeline runs that finished
        print(f"resuming the setup in {work}", flush=True)
    lines = []
    landings = {}
    for gen in sorted({c.generator for c in configs}):
        landing = work / f"landing-{gen}"
        n = args.batches if gen == "small" else args.large_batches
        landings[gen] = landing
        generated = work / f"landing-{gen}.json"
        if generated.exists():  # resuming
            lines.append(json.loads(generated.read_text()))
            continue
        started = time.perf_counter()
        result = generate(landing, GeneratorConfig(**GENERATORS[gen]), n)
        lines.append(f"generate {gen} ({GENERATORS[gen]}): {n} files, {result.events_written:,} "
                     f"events in {time.perf_counter() - started:.1f} s")
        generated.write_text(json.dumps(lines[-1]))
    own = sorted((c for c in configs if c.crash_of is None),
                 key=lambda c: SETUP_ORDER.index(c.name) if c.name in SETUP_ORDER else 99)

    def run_one(config: Config) -> tuple[Config, dict, float]:
        base = work / config.name
        finished = base / "setup-run.json"
        if finished.exists():
            kept = json.loads(finished.read_text())
            return config, kept["result"], kept["wall"]
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True, exist_ok=True)
        spec = {"landing": str(landings[config.generator]), "checkpoint": str(base / "ckpt"),
                "output": str(base / "output"), "provider": config.provider,
                "partitions": args.partitions, "min_deltas": config.min_deltas,
                "changelog": config.changelog, "leaky": config.leaky,
                "progress_log": str(base / "progress.jsonl")}
        result, wall = run_child("setup", spec, f"setup {config.name}")
        print(f"  setup {config.name}: {result['batches']} batches, {result['state_keys']} "
              f"state keys, {result['seconds']:.0f} s ({wall:.0f} s with the JVM)", flush=True)
        finished.write_text(json.dumps({"result": result, "wall": wall}))
        return config, result, wall

    print(f"running the pipeline for {len(own)} configurations ({args.setup_jobs} at a time) …",
          flush=True)
    runs = {}
    with ThreadPoolExecutor(max_workers=max(1, args.setup_jobs)) as pool:
        for config, result, wall in pool.map(run_one, own):
            runs[config.name] = {**result, "wall": wall}
            lines.append(f"{config.name}: {result['batches']} micro-batches, "
                         f"{result['state_keys']} state keys, run {result['seconds']:.0f} s "
                         f"(process {wall:.0f} s)")
    for config in own:
        waited = wait_static(work / config.name / "ckpt")
        if waited > 1.5:
            lines.append(f"{config.name}: checkpoint still changed after setup "
                         f"(waited {waited:.1f} s)")
    crashes = {}
    for config in configs:
        if config.crash_of is None:
            continue
        source, base = work / config.crash_of, work / config.name
        shutil.rmtree(base, ignore_errors=True)
        shutil.copytree(source / "ckpt", base / "ckpt")
        shutil.copytree(source / "output", base / "output")
        shutil.copy2(source / "progress.jsonl", base / "progress.jsonl")
        crashed, what = simulate_crash(base, config.crash)
        crashes[config.name] = crashed
        action = "re-plans and skips" if config.crash == "sink-committed" else "re-runs"
        lines.append(f"{config.name}: copy of {config.crash_of} with {what} deleted (the "
                     f"restart {action} batch {crashed})")
    new_files = {}
    for gen, landing in landings.items():
        result = generate(landing, GeneratorConfig(**GENERATORS[gen]), 1)
        new = events_file(landing, result.first_batch)
        alone = work / f"baseline-landing-{gen}" / "events"
        alone.mkdir(parents=True)
        shutil.copy2(new, alone / new.name)
        new_files[gen] = {"batch": result.first_batch, "events": result.events_written,
                          "bytes": new.stat().st_size}
        lines.append(f"appended batch file {new.name} ({result.events_written} events) to "
                     f"landing-{gen}; baseline landing holds only it")
    done = {"params": wanted, "lines": lines, "runs": runs, "crashes": crashes,
            "new_files": new_files}
    marker.write_text(json.dumps(done, indent=1))
    return done


def _drop_batch(base: Path, batch: int, *, offsets: bool, sink: bool) -> list[str]:
    """Delete what batch ``batch`` left: its commit (and offsets), the sink's log entry and
    the state files of version ``batch + 1``. Returns what was deleted."""
    gone = []
    logs = ["commits"] + (["offsets"] if offsets else [])
    for log in logs:
        for name in (str(batch), f".{batch}.crc"):
            path = base / "ckpt" / log / name
            if path.exists():
                path.unlink()
        gone.append(f"{log}/{batch}")
    if sink:
        # A compaction batch's entry (N.compact) can go too while the plain entries it
        # compacted are still there (the sink keeps them for 10 minutes): the re-run
        # compacts them again.
        sink_log = base / "output/_spark_metadata"
        entry = str(batch) if (sink_log / str(batch)).exists() else f"{batch}.compact"
        if not (sink_log / entry).exists() or \
                (entry.endswith(".compact") and not (sink_log / str(batch - 1)).exists()):
            raise SystemExit(f"{base.name}: cannot undo the sink log's entry {batch}; "
                             "pick another --batches")
        for name in (entry, f".{entry}.crc"):
            if (sink_log / name).exists():
                (sink_log / name).unlink()
        gone.append(f"output/_spark_metadata/{entry}")
    version = batch + 1
    state = [p for p in (base / "ckpt/state").rglob("*")
             if p.is_file() and (p.name.startswith(f"{version}.") or
                                 p.name.startswith(f".{version}."))]
    for path in state:
        path.unlink()
    if state:
        gone.append(f"{len(state)} state files of version {version}")
    return gone


def simulate_crash(base: Path, mode: str) -> tuple[int, str]:
    """Turn the copied checkpoint + sink in ``base`` into one a crash left (see
    ``Config.crash``). Returns the batch the restart re-runs and what was deleted."""
    commits = sorted(int(p.name) for p in (base / "ckpt/commits").iterdir() if p.name.isdigit())
    newest = commits[-1]
    if mode == "sink-committed":
        for name in (str(newest), f".{newest}.crc"):
            if (base / "ckpt/commits" / name).exists():
                (base / "ckpt/commits" / name).unlink()
        return newest, f"commits/{newest}"
    rows = {p["batchId"]: p.get("numInputRows", 0)
            for p in progress_log(base / "progress.jsonl")}
    gone = []
    batch = newest
    while batch > 0 and not rows.get(batch):
        gone += _drop_batch(base, batch, offsets=True, sink=True)  # a no-data batch: never ran
        batch -= 1
    gone += _drop_batch(base, batch, offsets=False, sink=True)
    return batch, ", ".join(gone)


# -- load work from the files (statekit's side, no JVM) ---------------------------------------

def load_work(checkpoint: Path, version: int | None = None) -> dict:
    """Per partition: the files, bytes and records a restart loads (see the docstring), for
    ``version`` (default: the last committed batch + 1, what a restart loads)."""
    from statekit.checkpoint import open_checkpoint
    from statekit.checkpoint.state_data import file_records, zip_metadata

    ckpt = open_checkpoint(str(checkpoint))
    last = ckpt.last_committed_batch
    if version is None:
        version = (last if last is not None else -1) + 1
    parts = []
    kinds_total: Counter = Counter()
    for key in sorted(ckpt.inventory.instances):
        inst = ckpt.inventory.instances[key]
        files = inst.files_to_load(version)
        kinds: Counter = Counter()
        n_files = n_bytes = records = zip_keys = 0
        for f in files:
            kinds[f.kind] += 1
            n_files += 1
            n_bytes += f.size
            if f.kind == "zip":
                meta = zip_metadata(ckpt, [f])[f.path]
                kinds["sst"] += len(meta.sst_files)
                n_files += len(meta.sst_files)
                n_bytes += sum(s.size_bytes for s in meta.sst_files)
                zip_keys += meta.num_keys or 0
            else:
                records += sum(1 for _ in file_records(ckpt, f))
        kinds_total.update(kinds)
        parts.append({"operator": key[0], "store": key[1], "partition": key[2],
                      "files": n_files, "bytes": n_bytes, "records": records,
                      "zip_keys": zip_keys, "loadable": bool(files) or version == 0,
                      "kinds": dict(kinds)})
    return {"version": version, "last_committed": last,
            "uncommitted": ckpt.uncommitted_batches, "partitions": parts,
            "kinds": dict(kinds_total),
            **{f"{q}_{agg}": (sum if agg == "total" else max)([p[q] for p in parts] or [0])
               for q in ("files", "bytes", "records") for agg in ("total", "max")},
            **{f"{q}_cp": critical_path([p[q] for p in parts]) for q in
               ("files", "bytes", "records")}}


def statekit_estimates(work: Path, configs: list[Config]) -> dict[str, dict]:
    """``statekit recovery CKPT --json --cores C --progress <setup progress log>`` per
    configuration, if the command exists (its ``--help`` exits 0)."""
    probe = subprocess.run([STATEKIT, "recovery", "--help"], capture_output=True, text=True,
                           cwd=ROOT)
    if probe.returncode != 0:
        return {}
    out = {}
    for config in configs:
        base = work / config.name
        command = [STATEKIT, "recovery", str(base / "ckpt"), "--json", "--cores", str(CORES),
                   "--sink", str(base / "output")]
        if (base / "progress.jsonl").exists():
            command += ["--progress", str(base / "progress.jsonl")]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        entry: dict = {"wall": time.perf_counter() - started, "exit": done.returncode,
                       "command": " ".join(command[1:])}
        if done.returncode == 0:
            try:
                data = json.loads(done.stdout)
            except ValueError as exc:
                entry["error"] = f"not JSON: {exc}"
            else:
                for key in ("estimate_s", "state_load_s", "rerun_s"):
                    entry[key] = find_key(data, key)
                reruns = data.get("reruns") or [] if isinstance(data, dict) else []
                entry["rerun_source"] = "; ".join(f"batch {r['batch']} {r['action']} "
                                                  f"({r['source']})" for r in reruns) or None
        else:
            entry["error"] = (done.stderr.strip().splitlines() or ["?"])[-1][:200]
        out[config.name] = entry
    return out


def find_key(data, key: str):
    """The value of ``key`` nearest the top of a JSON document (breadth first)."""
    queue = [data]
    while queue:
        item = queue.pop(0)
        if isinstance(item, dict):
            if key in item and isinstance(item[key], (int, float)):
                return float(item[key])
            queue.extend(item.values())
        elif isinstance(item, list):
            queue.extend(item)
    return None


# -- measuring --------------------------------------------------------------------------------

def measure_one(work: Path, config: Config, role: str, repeat: int, args) -> dict:
    """One fresh process: a restart on a copy of the checkpoint, or a baseline."""
    tag = f"{role}-{config.name if role == 'restart' else config.family}-r{repeat}"
    run = work / "runs" / tag
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    first_new = 0
    if role == "restart":
        shutil.copytree(work / config.name / "ckpt", run / "ckpt")
        shutil.copytree(work / config.name / "output", run / "output")
        landing = work / f"landing-{config.generator}"
        first_new = 1 + max(int(p.name) for p in (run / "ckpt/offsets").iterdir()
                            if p.name.isdigit())
    else:
        landing = work / f"baseline-landing-{config.generator}"
    spec = {"role": role, "landing": str(landing), "checkpoint": str(run / "ckpt"),
            "output": str(run / "output"), "provider": config.provider,
            "partitions": args.partitions, "min_deltas": config.min_deltas,
            "changelog": config.changelog, "leaky": config.leaky,
            "log4j": str(work / "log4j2-bench.properties"), "state_log": str(run / "state.log"),
            "event_dir": str(run / "events"), "timeout_s": args.timeout,
            "first_new_batch": first_new, "instrumented": config.instrumented}
    busy = cpu_busy()
    result, wall = run_child("measure", spec, tag)
    result.update(wall=wall, busy=busy, role=role, repeat=repeat, tag=tag)
    if not args.workdir or not args.keep_runs:
        shutil.rmtree(run, ignore_errors=True)
    derive(result, args.partitions)
    print(f"  {tag}: batches {[b['batchId'] for b in result['batches']]}, trigger "
          f"{result['trigger_s']:.2f} s, ready {result['ready_s']:.2f} s, Spark load cp "
          f"{result['load_cp_s']:.2f} s (process {wall:.0f} s, JVM {result['jvm_s']:.1f} s, "
          f"CPU busy before {busy:.0%})", flush=True)
    if not result["reached"]:
        print(f"    WARNING: no batch read the new file ({result['failure']})", flush=True)
    return result


def derive(r: dict, partitions: int) -> None:
    """Add the per-definition numbers of one measured process."""
    batches = r["batches"]
    r["trigger_s"] = sum(b["durationMs"].get("triggerExecution", 0) for b in batches) / 1000
    if batches:
        last = batches[-1]
        end = last["epoch"] + last["durationMs"].get("triggerExecution", 0) / 1000
        r["ready_s"] = end - r["start_epoch"]
        r["startup_s"] = batches[0]["epoch"] - r["start_epoch"]
    else:
        r["ready_s"] = r["startup_s"] = float("nan")
    ids = {str(b["batchId"]) for b in batches}
    stages = [s for b, s in r["stages"].items() if b in ids]
    r["stage_s"] = sum(s["wall_ms"] for s in stages) / 1000
    r["python_start_s"] = sum(s["python_start_ms"] for s in stages) / 1000
    per_part: dict[tuple[int, int], int] = defaultdict(int)
    first: dict[str, list[int]] = {}
    for op, part, version, ms in r["loads"]:
        per_part[(op, part)] += ms
        first.setdefault(f"{op}/{part}", [version, ms])
    r["load_ms"] = {f"{op}/{part}": ms for (op, part), ms in sorted(per_part.items())}
    r["first_load"] = first  # "op/part" -> [version, ms] of the partition's first load
    values = list(per_part.values()) + [0] * max(0, partitions - len(per_part))
    r["load_cp_s"] = critical_path(values) / 1000
    r["load_sum_s"] = sum(per_part.values()) / 1000


def measure_all(work: Path, configs: list[Config], args) -> dict[str, list[dict]]:
    (work / "log4j2-bench.properties").write_text(LOG4J)
    families: dict[str, Config] = {}
    for c in configs:
        families.setdefault(c.family, c)
    results: dict[str, list[dict]] = defaultdict(list)
    for repeat in range(1, args.repeats + 1):
        print(f"repeat {repeat}/{args.repeats} …", flush=True)
        for config in configs:
            results[config.name].append(measure_one(work, config, "restart", repeat, args))
        for family, config in families.items():
            results[f"baseline:{family}"].append(
                measure_one(work, config, "baseline", repeat, args))
    return results


# -- analysis ---------------------------------------------------------------------------------

DEFINITIONS = (("A", "trigger_s", "Σ triggerExecution, restart − baseline"),
               ("B", "ready_s", "start() → first new batch done, restart − baseline"),
               ("C", "stage_s", "stateful stage wall (event log), restart − baseline"),
               ("D", "load_cp_s", "Spark's own state-load times, critical path, restart − "
                                  "baseline (load only)"))
FEATURES = ("files", "bytes", "records")
NAMES = [*FEATURES, "const"]
PART_NAMES = [*NAMES, "warmup"]
"""Partition level adds ``warmup``: 1 for the first wave's partitions (< cores), which pay the
JVM's one-time costs of the load path (class loading, JIT, native libraries) — once per
restart on the critical path."""
UNITS = {"files": (1e3, "ms/file"), "bytes": (1e9, "s/GB"), "records": (1e6, "µs/record"),
         "const": (1e3, "ms"), "warmup": (1e3, "ms")}
LOAD_METRIC = re.compile(r"(?i)load|replay|cachemiss|cachehit")


@dataclass
class Row:
    """One configuration: its load work from the files and its measured series."""

    config: Config
    work: dict
    restarts: list[dict]
    baselines: list[dict]
    rerun_setup_s: float
    """Warm duration (setup run) of the batch a crash re-runs; 0 without one."""

    def per_repeat(self, key: str) -> list[float]:
        """Recovery per repeat under one definition (paired with the baseline's repeat)."""
        return [r[key] - self.baselines[min(i, len(self.baselines) - 1)][key]
                for i, r in enumerate(self.restarts)]

    def median(self, key: str) -> float:
        return statistics.median(self.per_repeat(key))

    def spread(self, key: str) -> float:
        values = self.per_repeat(key)
        return max(values) - min(values)

    def rerun_restart(self) -> list[float]:
        """Per repeat: Σ triggerExecution of the batches before the first new one."""
        return [sum(b["durationMs"].get("triggerExecution", 0) for b in r["batches"][:-1]) / 1000
                for r in self.restarts]

    def baseline_load_ms(self) -> dict[str, float]:
        keys = {k for b in self.baselines for k in b["load_ms"]}
        return {k: statistics.median(b["load_ms"].get(k, 0) for b in self.baselines)
                for k in keys}


def rerun_setup(work: Path, config: Config, crashes: dict) -> float:
    if config.name not in crashes:
        return 0.0
    batch = crashes[config.name]
    for p in progress_log(work / config.name / "progress.jsonl"):
        if p["batchId"] == batch:
            return p["durationMs"].get("triggerExecution", 0) / 1000
    return 0.0


_FEATURES_AT: dict[tuple[str, int], dict[tuple[int, int], dict]] = {}


def features_at(checkpoint: Path, version: int) -> dict[tuple[int, int], dict]:
    """Per (operator, partition): files/bytes/records to load ``version`` (cached)."""
    key = (str(checkpoint), version)
    if key not in _FEATURES_AT:
        _FEATURES_AT[key] = {(p["operator"], p["partition"]): p
                             for p in load_work(checkpoint, version)["partitions"]}
    return _FEATURES_AT[key]


def fmt_s(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:  # None or NaN
        return "-"
    return f"{seconds:.2f}" if abs(seconds) < 10 else f"{seconds:.1f}"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_coef(name: str, value: float) -> str:
    scale, unit = UNITS[name]
    return f"{value * scale:.3g} {unit}"


def fmt_fit(fit: dict[str, float]) -> str:
    return ", ".join(f"{n} = {fmt_coef(n, v)}" for n, v in fit.items())


def table(header: tuple[str, ...], rows: list[tuple]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")


def lstsq(xs: list[list[float]], ys: list[float]) -> tuple[list[float], float]:
    import numpy as np

    a, y = np.array(xs, dtype=float), np.array(ys, dtype=float)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    coef, *_ = np.linalg.lstsq(a / scale, y, rcond=None)
    coef = coef / scale
    return [float(c) for c in coef], float(((a @ coef - y) ** 2).sum())


def nonneg_fit(xs: list[list[float]], ys: list[float], names: list[str] = NAMES
               ) -> tuple[dict[str, float], float]:
    """Least squares with every constant ≥ 0: the best subset of columns whose unconstrained
    fit is non-negative (exact NNLS for these few columns). Returns ({name: value}, sse)."""
    best = None
    for mask in range(1, 1 << len(names)):
        cols = [i for i in range(len(names)) if mask >> i & 1]
        coef, sse = lstsq([[row[i] for i in cols] for row in xs], ys)
        if all(c >= 0 for c in coef) and (best is None or sse < best[1] - 1e-12):
            best = ({names[i]: c for i, c in zip(cols, coef, strict=True)}, sse)
    if best is None:
        return {n: 0.0 for n in names}, sum(y * y for y in ys)
    return {n: best[0].get(n, 0.0) for n in names}, best[1]


def part_x(p: dict) -> list[float]:
    """Partition-level regressors (PART_NAMES order)."""
    return [p["files"], p["bytes"], p["records"], 1.0, 1.0 if p["partition"] < CORES else 0.0]


def predict(fit: dict[str, float], p: dict) -> float:
    return sum(v * x for v, x in zip(fit.values(), part_x(p), strict=False))


def report(work: Path, configs: list[Config], done: dict, works: dict, results: dict,
           estimates: dict, args, began: float) -> None:
    rows = [Row(c, works[c.name], results[c.name], results[f"baseline:{c.family}"],
                rerun_setup(work, c, done["crashes"])) for c in configs]
    print(f"\n## Setup (not measured) — {args.partitions} partitions, {CORES} cores, "
          f"maintenance {MAINTENANCE}")
    for line in done["lines"]:
        print(f"- {line}")

    headline(rows, estimates, args)

    print("\n## Load work from the files (pure Python, statekit's inventory)\n")
    table(("config", "last commit → version to load", "uncommitted", "files by kind",
           "files total / max", "bytes total / max", "records total / max",
           "critical path files / bytes / records"),
          [(r.config.name, f"{r.work['last_committed']} → {r.work['version']}",
            ",".join(map(str, r.work["uncommitted"])) or "-",
            ", ".join(f"{n} {k}" for k, n in sorted(r.work["kinds"].items())),
            f"{r.work['files_total']} / {r.work['files_max']}",
            f"{fmt_bytes(r.work['bytes_total'])} / {fmt_bytes(r.work['bytes_max'])}",
            f"{r.work['records_total']:,} / {r.work['records_max']:,}",
            f"{r.work['files_cp']:.0f} / {fmt_bytes(r.work['bytes_cp'])} / "
            f"{r.work['records_cp']:,.0f}") for r in rows])

    print(f"\n## Recovery (median of {args.repeats} repeat(s); seconds)\n")
    out = []
    for r in rows:
        restart = statistics.median(x["trigger_s"] for x in r.restarts)
        base = statistics.median(x["trigger_s"] for x in r.baselines)
        n = max(len(x["batches"]) for x in r.restarts)
        parts = [statistics.median(x["batches"][i]["durationMs"].get("triggerExecution", 0)
                                   / 1000 for x in r.restarts if len(x["batches"]) > i)
                 for i in range(n)]
        measured, load = r.median("trigger_s"), r.median("load_cp_s")
        e = estimates.get(r.config.name, {})
        est = e.get("estimate_s")
        if est is None:
            est_s, err, load_err = "-", "-", "-"
        else:
            est_s = f"{fmt_s(est)} ({fmt_s(e.get('state_load_s'))} + {fmt_s(e.get('rerun_s'))})"
            err = f"{est - measured:+.2f}"
            load_err = "-" if e.get("state_load_s") is None else \
                f"{e['state_load_s'] - load:+.2f}"
        rerun = "-"
        if n > 1:
            rerun = f"{fmt_s(statistics.median(r.rerun_restart()))} / {fmt_s(r.rerun_setup_s)}"
        batches = done["runs"].get(r.config.crash_of or r.config.name, {}).get("batches", "?")
        out.append((r.config.name, batches, args.partitions,
                    f"{r.work['files_total']} / {r.work['files_max']}",
                    fmt_bytes(r.work["bytes_total"]), f"{r.work['records_total']:,}",
                    fmt_s(restart) + (f" ({' + '.join(fmt_s(p) for p in parts)})"
                                      if n > 1 else ""),
                    fmt_s(base), f"{fmt_s(measured)} [{fmt_s(r.spread('trigger_s'))}]",
                    f"{fmt_s(load)} [{fmt_s(r.spread('load_cp_s'))}]", rerun, est_s, err,
                    load_err))
    table(("config", "batches", "partitions", "files to load (total / max per partition)",
           "bytes", "records", "restart first batch(es)", "baseline",
           "measured recovery A [spread]", "Spark state load D [spread]",
           "re-run batch: restart / setup", "statekit estimate (load + re-run)", "error vs A",
           "load error vs D"), out)
    print("\nbatches: micro-batches of the setup run (with timeouts, its last one is the "
          "no-data batch that fires them). restart first batch(es): Σ triggerExecution up to "
          "the first batch reading the new file (with a crash: re-run + new, in parentheses); "
          "baseline: an empty checkpoint's first batch over the same file. A = restart − "
          "baseline per repeat, median; [spread] = max − min over repeats. D = Spark's own "
          "per-partition state-load times on the critical path, restart − baseline (load "
          "only). re-run batch: the crash's re-run batch as measured in the restart (cold) / "
          "as the same batch took in the setup run (warm).")
    if not estimates:
        print("\n`statekit recovery` is not available (its --help did not exit 0): no "
              "estimates.")
    else:
        first = next(iter(estimates.values()))
        sources = sorted({str(e.get("rerun_source")) for e in estimates.values()
                          if e.get("rerun_s")})
        print(f"\nstatekit: `statekit {first.get('command', 'recovery …')}` (per configuration;"
              f" re-run source: {', '.join(sources) or '-'}); "
              f"{statistics.median(e['wall'] for e in estimates.values()):.2f} s per call.")
        for name, e in estimates.items():
            if "error" in e:
                print(f"- statekit recovery {name}: exit {e['exit']}: {e.get('error')}")

    print("\n## Definitions compared (median [spread] over repeats, seconds)\n")
    table(("config", *(f"{d}: {what}" for d, _, what in DEFINITIONS)),
          [(r.config.name, *(f"{fmt_s(r.median(k))} [{fmt_s(r.spread(k))}]"
                             for _, k, _ in DEFINITIONS)) for r in rows])
    if args.repeats > 1:
        print()
        for d, key, _ in DEFINITIONS:
            spreads = [r.spread(key) for r in rows]
            print(f"- {d}: median spread {statistics.median(spreads):.2f} s, largest "
                  f"{max(spreads):.2f} s")
        best = min(DEFINITIONS, key=lambda d: statistics.median(r.spread(d[1]) for r in rows))
        print(f"- least noisy: {best[0]} ({best[2]})")

    print("\n## Raw measurements (every fresh process)\n")
    raw = []
    for name, series in results.items():
        for x in series:
            trig = " + ".join(f"{b['durationMs'].get('triggerExecution', 0) / 1000:.2f}"
                              for b in x["batches"])
            plan = " + ".join(f"{b['durationMs'].get('queryPlanning', 0) / 1000:.2f}"
                              for b in x["batches"])
            raw.append((name, x["repeat"], ",".join(str(b["batchId"]) for b in x["batches"]),
                        ",".join(str(b["rows"]) for b in x["batches"]), trig, plan,
                        fmt_s(x["startup_s"]), fmt_s(x["ready_s"]), fmt_s(x["stage_s"]),
                        fmt_s(x["python_start_s"]), fmt_s(x["load_cp_s"]),
                        fmt_s(x["load_sum_s"]), f"{x['jvm_s']:.1f}", f"{x['wall']:.0f}",
                        f"{x['busy']:.0%}"))
    table(("series", "repeat", "batch ids", "input rows", "triggerExecution s",
           "queryPlanning s", "start→first batch s", "ready s", "stateful stage s",
           "Python workers start+init s (Σ tasks)", "Spark load cp s", "Spark load Σ s",
           "JVM start s", "process s", "CPU busy before"), raw)
    print("\nSpark's per-partition state loads (repeat 1; operator/partition: version ms):")
    for r in [*rows, *({"name": k, "series": v} for k, v in results.items()
                       if k.startswith("baseline:"))]:
        name, series = (r.config.name, r.restarts) if isinstance(r, Row) else \
            (r["name"], r["series"])
        if series:
            loads = ", ".join(f"{k}: v{v} {ms}" for k, (v, ms) in
                              sorted(series[0]["first_load"].items()))
            print(f"- {name}: {loads or '(none logged)'}")

    print("\n## Spark's state-load evidence in the progress (stateOperators[0].customMetrics, "
          "repeat 1)\n")
    shown = set()
    for r in rows:
        family = r.config.provider + ("-changelog" if r.config.changelog else "")
        if family not in shown and r.restarts and r.restarts[0]["batches"]:
            shown.add(family)
            keys = sorted(r.restarts[0]["batches"][0]["customMetrics"])
            print(f"- {family}: {len(keys)} keys: {', '.join(keys)}")
    for r in rows:
        if not r.restarts:
            continue
        per_batch = []
        for b in r.restarts[0]["batches"]:
            m = {k: v for k, v in sorted(b["customMetrics"].items())
                 if LOAD_METRIC.search(k) and not k.startswith("SnapshotLastUploaded")}
            per_batch.append(f"batch {b['batchId']}: {m}")
        base = r.baselines[0]["batches"][-1]["customMetrics"] if r.baselines and \
            r.baselines[0]["batches"] else {}
        base_m = {k: v for k, v in sorted(base.items())
                  if LOAD_METRIC.search(k) and not k.startswith("SnapshotLastUploaded")}
        print(f"- {r.config.name}: {'; '.join(per_batch)}; baseline: {base_m}")
        if "rocksdbLoadLatencyMs" in base:
            total = sum(b["customMetrics"].get("rocksdbLoadLatencyMs", 0)
                        for b in r.restarts[0]["batches"])
            copied = {k: r.restarts[0]["batches"][-1]["customMetrics"].get(k) for k in
                      ("rocksdbFilesCopied", "rocksdbBytesCopied", "rocksdbFilesReused")}
            base_copied = {k: base.get(k) for k in copied}
            print(f"  - rocksdbLoadLatencyMs Σ {total} ms vs the state log's Σ "
                  f"{r.restarts[0]['load_sum_s'] * 1000:.0f} ms; {copied} (baseline "
                  f"{base_copied}: these count the commit's upload, not the load)")
    fits(work, rows)
    print(f"\nScript run time: {time.perf_counter() - began:.0f} s")


TARGET_MEDIAN_ERROR = 0.25
TARGET_MAX_RATIO = 2.0


def measured_recovery(r: Row) -> tuple[str, float, float]:
    """The measured recovery of one configuration: (definition, median, spread).

    Without a re-run batch, everything a restart adds is state load, and D — Spark's own
    per-partition load times — measures exactly that with a tenth of A's noise. With a
    re-run (or skipped) batch the restart also processes (or re-plans) a batch, which D does
    not see: A, Σ triggerExecution up to the first new batch minus the empty-state
    baseline's, is the measure then.
    """
    key = "trigger_s" if r.config.crash else "load_cp_s"
    return ("A" if r.config.crash else "D"), r.median(key), r.spread(key)


def headline(rows: list[Row], estimates: dict, args) -> None:
    """Estimate versus measured, per configuration, and the target's verdict."""
    print(f"\n## Estimate versus measured recovery (median of {args.repeats} repeat(s); "
          "seconds)\n")
    out, errors, ratios = [], [], []
    for r in rows:
        definition, measured, spread = measured_recovery(r)
        e = estimates.get(r.config.name, {})
        est = e.get("estimate_s")
        if est is None or measured <= 0:
            out.append((r.config.name, definition, f"{fmt_s(measured)} [{fmt_s(spread)}]",
                        "-", "-", "-", "-"))
            continue
        error = (est - measured) / measured
        ratio = max(est / measured, measured / est) if est > 0 else float("inf")
        errors.append(abs(error))
        ratios.append(ratio)
        out.append((r.config.name, definition, f"{fmt_s(measured)} [{fmt_s(spread)}]",
                    f"{fmt_s(est)} ({fmt_s(e.get('state_load_s'))} + "
                    f"{fmt_s(e.get('rerun_s'))})", e.get("rerun_source") or "-",
                    f"{error:+.0%}", f"{ratio:.2f}×"))
    table(("config", "measured as", "measured [spread]", "statekit estimate (load + re-run)",
           "re-run", "error", "off by"), out)
    print("\nmeasured as: D = Spark's own per-partition state-load times (state-store DEBUG "
          "log), critical path over the cores, restart − empty-state baseline — a restart "
          "without a re-run adds nothing else; A = Σ triggerExecution of the restart's "
          "batches up to the first one reading new input, restart − baseline — with a "
          "re-run or skipped batch; those restarts and their baseline run without the "
          "state-store DEBUG log and the event log, whose cost the restart's extra batch "
          "would otherwise carry alone. [spread] = max − min over repeats. statekit: "
          "`statekit recovery CKPT --json --cores C --sink OUTPUT --progress SETUP_LOG`, no "
          "JVM.")
    if errors:
        median_error = statistics.median(errors)
        worst = max(ratios)
        ok = median_error <= TARGET_MEDIAN_ERROR and worst <= TARGET_MAX_RATIO
        print(f"\n**median absolute error {median_error:.0%}, worst configuration off by "
              f"{worst:.2f}× — target (≤ {TARGET_MEDIAN_ERROR:.0%}, none off by more than "
              f"{TARGET_MAX_RATIO:.0f}×) {'MET' if ok else 'MISSED'}**")


def load_path(config: Config) -> str:
    """The code path a restart's load takes: HDFS snapshot + deltas, RocksDB zip + SSTs, or
    RocksDB changelog replay — their one-time and per-file costs differ, so they are fitted
    apart."""
    if config.provider != "rocksdb":
        return config.provider
    return "rocksdb-changelog" if config.changelog else "rocksdb-zip"


def fits(work: Path, rows: list[Row]) -> None:
    """Least-squares constants per provider load path (see the docstring)."""
    print("\n## Fitted costs\n")
    print("Configuration level: per repeat, y = the recovery (D: load only; A: only "
          "configurations without a re-run, whose A holds a batch that is not load work), x = "
          "the critical path of files, bytes, records + 1. Partition level: y = Spark's "
          "state-load time of one partition (its first load in the restart, minus the "
          "baseline's load of the same partition), x = that partition's files, bytes, records "
          "(at the version Spark loaded) + 1 + warmup (1 in the first wave: partitions < "
          "cores); predictions are combined over the cores as the critical path.\n")
    rows = [r for r in rows if r.config.instrumented]  # D needs the state-store log
    for path in sorted({load_path(r.config) for r in rows}):
        mine = [r for r in rows if load_path(r.config) == path]
        print(f"### {path} ({len(mine)} configuration(s): "
              f"{', '.join(r.config.name for r in mine)})\n")
        for d, key in (("D", "load_cp_s"), ("A", "trigger_s")) if len(mine) > 1 else ():
            xs, ys = [], []
            for r in mine:
                if d == "A" and r.rerun_setup_s:
                    continue
                for value in r.per_repeat(key):
                    xs.append([r.work["files_cp"], r.work["bytes_cp"], r.work["records_cp"], 1.0])
                    ys.append(value)
            if not ys:
                continue
            distinct = len({tuple(x) for x in xs})
            coef, sse = lstsq(xs, ys)
            nn, nn_sse = nonneg_fit(xs, ys)
            note = ("; no more distinct load shapes than constants: the fit is exact or "
                    "underdetermined, not a calibration" if distinct <= len(NAMES) else "")
            print(f"- {d}, configuration level ({len(ys)} points, {distinct} distinct load "
                  f"shapes{note}):")
            print(f"  - least squares: {fmt_fit(dict(zip(NAMES, coef, strict=True)))} "
                  f"(rms residual {math.sqrt(sse / len(ys)):.2f} s)")
            print(f"  - non-negative: {fmt_fit(nn)} (rms residual "
                  f"{math.sqrt(nn_sse / len(ys)):.2f} s)")
        pts = []  # (config, features, seconds)
        for r in mine:
            base = r.baseline_load_ms()
            for x in r.restarts:
                for k, (version, ms) in x["first_load"].items():
                    op, part = (int(v) for v in k.split("/"))
                    p = features_at(work / r.config.name / "ckpt", version).get((op, part))
                    if p is not None:
                        pts.append((r.config.name, p, (ms - base.get(k, 0)) / 1000))
        if not pts:
            print("- partition level: no Spark state-load times logged\n")
            continue
        with_pts = sorted({c for c, _, _ in pts})
        if len(with_pts) == 1:
            first = [y for _, p, y in pts if p["partition"] < CORES]
            later = [y for _, p, y in pts if p["partition"] >= CORES]
            p0 = mine[0].work
            print(f"- partition level: one configuration, so per-file, per-byte and per-record "
                  f"costs are not separable. Per partition (Spark's load − baseline's): first "
                  f"wave median {statistics.median(first) * 1000:.0f} ms, later waves median "
                  f"{statistics.median(later or [0]) * 1000:.0f} ms for ~"
                  f"{p0['files_total'] / max(1, len(p0['partitions'])):.0f} files, "
                  f"{fmt_bytes(p0['bytes_total'] / max(1, len(p0['partitions'])))}, "
                  f"{p0['records_total'] / max(1, len(p0['partitions'])):.0f} records "
                  f"(first wave − later = the one-time warm-up).")
            for r in mine:
                print(f"  - {r.config.name}: D {r.median('load_cp_s'):.2f} s; A "
                      f"{r.median('trigger_s'):.2f} s")
            print()
            continue
        xs = [part_x(p) for _, p, _ in pts]
        ys = [y for _, _, y in pts]
        nn, sse = nonneg_fit(xs, ys, PART_NAMES)
        coef, _ = lstsq(xs, ys)
        print(f"- partition level ({len(pts)} points from {len(with_pts)} configurations):")
        print(f"  - non-negative: {fmt_fit(nn)} (rms residual "
              f"{math.sqrt(sse / len(ys)) * 1000:.0f} ms per partition)")
        print(f"  - unconstrained: {fmt_fit(dict(zip(PART_NAMES, coef, strict=True)))}")
        if len(with_pts) > 1:
            ranges: dict[str, list[float]] = defaultdict(list)
            held = []
            for left_out in with_pts:
                train = [(x, y) for (c, _, _), x, y in zip(pts, xs, ys, strict=True)
                         if c != left_out]
                fit, _ = nonneg_fit([x for x, _ in train], [y for _, y in train], PART_NAMES)
                for n, v in fit.items():
                    ranges[n].append(v)
                row = next(r for r in mine if r.config.name == left_out)
                predicted = critical_path([predict(fit, p) for p in row.work["partitions"]])
                held.append(f"{left_out} {predicted:.2f} vs {row.median('load_cp_s'):.2f}")
            print("  - leave one configuration out (constants' range): " + ", ".join(
                f"{n} {fmt_coef(n, min(v))} … {fmt_coef(n, max(v))}" for n, v in ranges.items()))
            print("  - held-out configuration, predicted critical path vs D (s): "
                  + "; ".join(held))
        for r in mine:
            predicted = critical_path([predict(nn, p) for p in r.work["partitions"]])
            extra = (f" + re-run {statistics.median(r.rerun_restart()):.2f} measured"
                     if r.rerun_setup_s else "")
            print(f"  - {r.config.name}: model {predicted:.2f} s{extra}; D "
                  f"{r.median('load_cp_s'):.2f} s; A {r.median('trigger_s'):.2f} s")
        print()


# -- main -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=60, help="micro-batches per setup run")
    parser.add_argument("--partitions", type=int, default=8, help="shuffle partitions")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per series")
    parser.add_argument("--configs", default=",".join(c.name for c in CONFIGS),
                        help="comma-separated configurations (default: all but "
                             f"{', '.join(c.name for c in OPTIONAL)})")
    parser.add_argument("--large", action="store_true",
                        help="also measure hdfs-large (10× generator; slow)")
    parser.add_argument("--large-batches", type=int, default=20,
                        help="micro-batches of the hdfs-large setup run")
    parser.add_argument("--setup-jobs", type=int, default=1,
                        help="setup runs at a time (not measured; the runs are CPU-bound, so "
                             "2 at a time on 2 cores gained nothing here)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds a measured restart may take")
    parser.add_argument("--workdir", type=Path,
                        help="keep data here (and reuse a finished setup) instead of a temp dir")
    parser.add_argument("--reuse-measurements", action="store_true",
                        help="with --workdir: report on the last run's measurements (re-runs "
                             "only statekit's estimates and the analysis)")
    parser.add_argument("--keep-runs", action="store_true",
                        help="with --workdir: keep every measured process's folder and logs")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK['batches']} batches, {QUICK['repeats']} repeat")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, spec = args.child
        handler = {"setup": child_setup, "measure": child_measure}[mode]
        print(json.dumps(handler(json.loads(spec))))
        return
    if args.quick:
        args.batches, args.repeats = QUICK["batches"], QUICK["repeats"]
        args.large_batches = min(args.large_batches, 6)
    known = {c.name: c for c in (*CONFIGS, *OPTIONAL)}
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    if args.large and LARGE.name not in names:
        names.append(LARGE.name)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {sorted(known)}")
    configs = [known[n] for n in names]
    for c in list(configs):  # a crash copy needs its source run
        if c.crash_of and c.crash_of not in names:
            configs.insert(0, known[c.crash_of])
            names.insert(0, c.crash_of)
    began = time.perf_counter()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"bench_recovery: {', '.join(names)}; {args.batches} batches, {args.partitions} "
              f"partitions, {args.repeats} repeat(s), {CORES} cores; data in {work}", flush=True)
        done = setup(work, configs, args)
        works = {c.name: load_work(work / c.name / "ckpt") for c in configs}
        estimates = statekit_estimates(work, configs)
        print(f"statekit recovery: {'available' if estimates else 'not available'}", flush=True)
        measured = work / "measured.json"
        if args.reuse_measurements and measured.exists():
            print(f"reusing the measurements in {measured}", flush=True)
            results = json.loads(measured.read_text())
        else:
            results = measure_all(work, configs, args)
            measured.write_text(json.dumps(results))
        (work / "results.json").write_text(json.dumps(
            {"results": results, "works": works, "estimates": estimates}, default=str))
        report(work, configs, done, works, results, estimates, args, began)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
