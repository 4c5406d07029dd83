"""Benchmark: ``statekit repartition`` throughput and peak driver memory, HDFS and RocksDB.

The question: how many keys per second does
``statekit repartition`` move for ~1M keys of HDFS-backed state, and does the driver's peak
memory stay flat as the state grows (the HDFS path re-buckets in executor tasks and collects
only per-partition counts, so it must)? For RocksDB statekit runs Spark's own offline
repartition on a staged copy: how does that compare with Spark's in-place repartition
(``spark._streamingCheckpointManager.repartition(path, n, True)``) on an identical copy?

Data. Spark itself writes the state, with ``bench_state_export``'s stand-in for the reference
pipeline (imported, not copied): ``write_landing`` makes ``--batches`` Parquet input files
whose later batches also update 10% of the earlier keys, and ``aggregate_checkpoint`` runs a
streaming ``groupBy(user_id)`` over them (8 shuffle partitions, maintenance every 1 s) whose
value is the 12-field session struct plus a timeout (~360 bytes as JSON). HDFS checkpoints
are written at every ``--keys`` size (default 250k and 1M), RocksDB (changelog
checkpointing off, as the reference pipeline) at ``--rocksdb-keys`` (default 1M). The setup
runs in a child process; afterwards the state stores are unloaded and the script waits until
each checkpoint's state listing is static. Its times are printed but not measured.

Measured, each run in a fresh process (imports and the JVM start count), ``--to`` (3)
partitions from 8:

* ``statekit repartition SRC --partitions 3 --out DST --force --json``, with verification and
  with ``--no-verify`` (``--force``: the checkpoint was just written, so it looks live).
  ``wall``: the process; ``job``: the JSON's ``seconds`` (``run_repartition``: logs,
  re-bucketing or Spark's repartition, verification, publish); ``before job``: from the start
  until the JSON is printed, minus the job (imports, planning, JVM start, session);
  ``exit``: from printing the JSON to the process's end (Spark's shutdown); ``JVM launched
  at``: when the Spark JVM process appeared (imports + planning). Keys are the sum of the
  JSON's ``written`` keys; keys/s is given over the wall time and over the job time. The
  verification's cost is the job time with it minus without it.
* RocksDB only, ``Spark in-place``: a fresh Python process that builds the same session
  (``build_session``, with ``reader_confs`` of the checkpoint, as statekit does) and calls
  ``spark._streamingCheckpointManager.repartition(copy, 3, True)`` on a fresh
  ``copytree`` of the source checkpoint; ``job`` is that call alone, ``wall`` the process.
  Its keys are read back (without a JVM) from the copy's new RocksDB zips.

Memory. A poller walks the process tree of each run every ``--poll`` seconds (no psutil:
``/proc/*/stat`` for the parent links, ``/proc/<pid>/status`` for ``VmHWM``, the peak
resident set, which only grows, so the last reading before a process exits is its peak to
within one poll). The *driver* is the Python process (statekit) plus the JVM it launches
(``org.apache.spark.deploy.SparkSubmit``; in local mode it is also the executor, so its RSS
includes the tasks' and the shuffle's memory); the Python workers (pyspark daemon and its
forks, children of the JVM) run the HDFS re-bucketing tasks and are reported separately
(largest single worker). The JVM heap limit in effect is read from the JVM's command line
(``-Xmx``, i.e. ``spark.driver.memory``; statekit sets none, so Spark's default 1g).

Caveats: one run per configuration on a 2-core machine (local[*], so the driver JVM also
runs every task); RSS counts shared pages; the poller itself costs a little CPU. Data lives in
a temporary folder, removed at the end unless ``--workdir`` is given (then a finished setup
there is reused). Not a test: nothing is asserted; the script warns when the keys written
differ from the keys in the source or verification fails.

Run: ``.venv/bin/python benchmarks/bench_repartition.py [--quick] [--workdir DIR]
[--provider hdfs|rocksdb|both]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_state_export as export_bench  # noqa: E402  (the data generator, reused)
from bench_common import wait_static  # noqa: E402

STATEKIT = str(ROOT / ".venv/bin/statekit")
FROM_PARTITIONS = export_bench.PARTITIONS  # 8, like the demo checkpoint
QUICK = {"keys": [20_000, 80_000], "rocksdb_keys": 80_000}
STATE_STORE_CLASS = "org.apache.spark.sql.execution.streaming.state.StateStore"

INPLACE_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from statekit.jobs.session import build_session
from statekit.jobs.state_reader import reader_confs, session_confs
from statekit.checkpoint import open_checkpoint
path, n = sys.argv[1], int(sys.argv[2])
confs = reader_confs(open_checkpoint(path))
t1 = time.perf_counter()
spark = build_session("bench-repartition-inplace")
t2 = time.perf_counter()
with session_confs(spark, confs):
    a = time.perf_counter()
    spark._streamingCheckpointManager.repartition(path, n, True)
    call = time.perf_counter() - a
print(json.dumps({"model_s": t1 - t0, "jvm_start_s": t2 - t1, "seconds": call,
                  "confs": confs}))
"""


# -- data ---------------------------------------------------------------------------------------

def wanted(keys: list[int], rocksdb_keys: int, providers: list[str]) -> list[tuple[str, int]]:
    """The (provider, keys) checkpoints a run needs."""
    out = [("hdfs", k) for k in keys] if "hdfs" in providers else []
    if "rocksdb" in providers:
        out.append(("rocksdb", rocksdb_keys))
    return out


def setup(work: Path, needed: list[tuple[str, int]], batches: int) -> None:
    """Write the missing landings and checkpoints under ``work``; ``setup.json`` records each
    finished one (what a later run with the same ``--workdir`` reuses)."""
    from statekit.jobs.session import build_session

    record = work / "setup.json"
    done = json.loads(record.read_text()) if record.exists() else {}
    spark = None
    for provider, keys in needed:
        name = f"{provider}-{keys}-b{batches}"
        if name in done:
            continue
        if spark is None:
            started = time.perf_counter()
            spark = build_session("bench-repartition-setup",
                                  conf={"spark.driver.memory": "4g"})
            done.setdefault("lines", []).append(
                f"setup JVM start: {time.perf_counter() - started:.1f} s")
        landing = work / f"landing-{keys}-b{batches}"
        if f"landing-{keys}-b{batches}" not in done:
            shutil.rmtree(landing, ignore_errors=True)
            for tmp in work.glob("tmp-*"):
                shutil.rmtree(tmp, ignore_errors=True)
            started = time.perf_counter()
            rows = export_bench.write_landing(spark, landing, keys, batches)
            done[f"landing-{keys}-b{batches}"] = True
            done["lines"].append(f"generate {rows:,} input rows for {keys:,} keys in "
                                 f"{batches} files: {time.perf_counter() - started:.1f} s")
        checkpoint = work / f"ckpt-{name}"
        shutil.rmtree(checkpoint, ignore_errors=True)
        started = time.perf_counter()
        n = export_bench.aggregate_checkpoint(spark, landing, checkpoint, provider)
        # Unload the providers (local mode: driver = executor JVM) so maintenance stops
        # writing, then wait until the state folder is static.
        getattr(spark._jvm, STATE_STORE_CLASS).stop()
        wait_static(checkpoint)
        done[name] = {"provider": provider, "keys": n, "checkpoint": str(checkpoint)}
        done["lines"].append(f"{provider}: streaming aggregation wrote {n:,} keys in "
                             f"{time.perf_counter() - started:.1f} s")
        record.write_text(json.dumps(done, indent=1))
    if spark is not None:
        spark.stop()


# -- measuring ----------------------------------------------------------------------------------

def _ppid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def _status(pid: int) -> dict[str, str]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("Name", "VmHWM", "VmRSS"):
                    out[key] = value.strip()
    except OSError:
        pass
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def _kib(value: str | None) -> int:
    return int(value.split()[0]) if value else 0


class TreeMonitor:
    """Polls a process tree; per process: role, command line, last ``VmHWM`` (peak RSS)."""

    def __init__(self, root: int, interval: float):
        self.root, self.interval = root, interval
        self.seen: dict[int, dict] = {}
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                ppid = _ppid(entry)
                if ppid is not None:
                    parents[int(entry)] = ppid
        tree, frontier = [self.root], {self.root}
        while frontier:
            frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
            tree += sorted(frontier)
        return tree

    def poll(self) -> None:
        for pid in self._tree():
            status = _status(pid)
            hwm = _kib(status.get("VmHWM"))
            if not hwm:  # gone, or a zombie
                continue
            info = self.seen.setdefault(pid, {"first_s": time.perf_counter() - self.started})
            args = _cmdline(pid) or info.get("args", [])
            info.update(name=status.get("Name", ""), args=args, hwm_kib=hwm,
                        role=self._role(pid, status.get("Name", ""), args))
            if info["role"] == "jvm":  # spark-class execs java in its own (bash) process
                info.setdefault("jvm_s", time.perf_counter() - self.started)

    def _role(self, pid: int, name: str, args: list[str]) -> str:
        joined = " ".join(args)
        if pid == self.root:
            return "driver"
        if name == "java" or (args and args[0].endswith("/java")):
            # spark-class first runs a small launcher JVM (-Xmx128m) that prints the command.
            if "org.apache.spark.launcher.Main" in joined:
                return "launcher"
            return "jvm" if "org.apache.spark.deploy.SparkSubmit" in joined else "other"
        if name.startswith("python") or (args and "python" in os.path.basename(args[0])):
            return "worker"  # pyspark.daemon and its forked workers
        return "other"

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        by_role: dict[str, list[dict]] = {}
        for info in self.seen.values():
            by_role.setdefault(info["role"], []).append(info)
        jvm = by_role.get("jvm", [])
        xmx = None
        for info in jvm:
            for arg in info["args"]:
                if arg.startswith("-Xmx"):
                    xmx = arg
        return {
            "driver_kib": max((i["hwm_kib"] for i in by_role.get("driver", [])), default=0),
            "jvm_kib": max((i["hwm_kib"] for i in jvm), default=0),
            "jvm_at_s": min((i["jvm_s"] for i in jvm), default=None),
            "worker_kib": max((i["hwm_kib"] for i in by_role.get("worker", [])), default=0),
            "workers": len(by_role.get("worker", [])),
            "xmx": xmx or ("JVM default" if jvm else None),
        }


def run_monitored(command: list[str], interval: float, what: str
                  ) -> tuple[dict, float, float, dict]:
    """Run ``command`` in a fresh process while polling its tree; (last stdout JSON, wall
    seconds, seconds until it printed its result, memory)."""
    lines: list[str] = []
    printed: list[float] = []

    def read(stream) -> None:
        for line in stream:
            if not printed:
                printed.append(time.perf_counter())
            lines.append(line)

    with tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True,
                                   cwd=ROOT)
        monitor = TreeMonitor(process.pid, interval)
        reader = threading.Thread(target=read, args=(process.stdout,), daemon=True)
        reader.start()
        code = process.wait()
        wall = time.perf_counter() - started
        reader.join()
        memory = monitor.stop()
        err.seek(0)
        stderr = err.read()
    if code != 0:
        sys.stderr.write(stderr[-4000:])
        raise SystemExit(f"{what} failed (exit {code}): {' '.join(command)}")
    text = "".join(lines).strip()
    data = json.loads(text if text.startswith("{\n") else text.splitlines()[-1])
    return data, wall, (printed[0] if printed else started + wall) - started, memory


def statekit_run(checkpoint: Path, out: Path, to: int, verify: bool, interval: float) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [STATEKIT, "repartition", str(checkpoint), "--partitions", str(to),
               "--out", str(out), "--force", "--json"]
    if not verify:
        command.append("--no-verify")
    data, wall, printed, memory = run_monitored(command, interval, "statekit repartition")
    written = data["written"]
    keys = sum(p["keys"] for parts in written.values() for p in parts)
    size = sum(p["bytes"] for parts in written.values() for p in parts)
    check = data["verification"]
    shutil.rmtree(out, ignore_errors=True)
    return {"mode": "statekit, verify" if verify else "statekit, --no-verify", "wall": wall,
            "printed": printed, "job": data["seconds"], "keys": keys, "bytes": size,
            "memory": memory,
            "partitions": {k: len(v) for k, v in written.items()},
            "verified": None if check is None else check["ok"],
            "problems": [] if check is None else check["problems"],
            "estimate": data["plan"]["estimate"]["seconds"], "command": command}


def rocksdb_keys_at_end(checkpoint: Path, to: int) -> tuple[int | None, int]:
    """Keys and bytes the repartitioned copy's partitions < ``to`` load at the last version
    (from the RocksDB zips' metadata: no JVM)."""
    from statekit.checkpoint import open_checkpoint
    from statekit.checkpoint.state_data import zip_metadata

    ckpt = open_checkpoint(str(checkpoint))
    version = ckpt.last_committed_batch + 1
    keys, size = 0, 0
    for instance in ckpt.inventory.instances.values():
        if instance.partition >= to:
            continue
        files = instance.files_to_load(version)
        metas = zip_metadata(ckpt, [f for f in files if f.kind == "zip"])
        if not metas or any(m.num_keys is None for m in metas.values()):
            return None, 0
        keys += sum(m.num_keys for m in metas.values())
        ssts = {s.dfs_name for m in metas.values() for s in m.sst_files}
        size += sum(f.size for f in files)
        size += sum(f.size for f in instance.of_kind("sst") if f.path.rsplit("/", 1)[-1] in ssts)
    return keys, size


def inplace_run(checkpoint: Path, copy: Path, to: int, interval: float) -> dict:
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(checkpoint, copy)
    command = [sys.executable, "-c", INPLACE_SCRIPT, str(copy.resolve()), str(to)]
    data, wall, printed, memory = run_monitored(command, interval,
                                                "Spark in-place repartition")
    keys, size = rocksdb_keys_at_end(copy, to)
    shutil.rmtree(copy, ignore_errors=True)
    return {"mode": "Spark in-place (copy)", "wall": wall, "printed": printed,
            "job": data["seconds"], "keys": keys, "bytes": size, "memory": memory,
            "jvm_start": data["jvm_start_s"], "verified": None, "problems": []}


# -- report -------------------------------------------------------------------------------------

def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def report(results: list[dict], setup_lines: list[str], args, began: float) -> None:
    print(f"\n{FROM_PARTITIONS} → {args.to} partitions; {args.batches} input batches; "
          "setup (not measured):")
    for line in setup_lines:
        print(f"  {line}")
    heaps = sorted({r["memory"]["xmx"] for r in results if r["memory"]["xmx"]})
    header = ("keys", "partitions", "mode", "wall s", "before job s", "job s", "exit s",
              "JVM launched at s", "keys/s (wall)", "keys/s (job)", "peak driver python RSS",
              "peak JVM RSS", "peak python worker RSS", "written")
    for provider in ("hdfs", "rocksdb"):
        rows = [r for r in results if r["provider"] == provider]
        if not rows:
            continue
        print(f"\n### {'HDFS' if provider == 'hdfs' else 'RocksDB'}\n")
        print("| " + " | ".join(header) + " |")
        print("|---:|---|---|" + "---:|" * (len(header) - 3))
        for r in rows:
            m, keys = r["memory"], r["keys"]
            at = "" if m["jvm_at_s"] is None else f"{m['jvm_at_s']:.1f}"
            worker = f"{mib(m['worker_kib'])} ({m['workers']})" if m["workers"] else "–"
            print("| " + " | ".join((
                "?" if keys is None else f"{keys:,}",
                f"{FROM_PARTITIONS} → {args.to}", r["mode"], f"{r['wall']:.1f}",
                f"{r['printed'] - r['job']:.1f}", f"{r['job']:.1f}",
                f"{r['wall'] - r['printed']:.1f}", at,
                "?" if keys is None else f"{keys / r['wall']:,.0f}",
                "?" if keys is None else f"{keys / r['job']:,.0f}",
                mib(m["driver_kib"]), mib(m["jvm_kib"]), worker,
                f"{r['bytes'] / 2**20:,.0f} MiB")) + " |")
        print()
        verify = {r["source_keys"]: r for r in rows if r["mode"] == "statekit, verify"}
        plain = {r["source_keys"]: r for r in rows if r["mode"] == "statekit, --no-verify"}
        for keys in sorted(set(verify) & set(plain)):
            cost = verify[keys]["job"] - plain[keys]["job"]
            estimate = verify[keys]["estimate"]
            outcome = "ok" if verify[keys]["verified"] else "FAILED"
            print(f"{provider} {keys:,} keys: verification {outcome}, {cost:.1f} s (job with − "
                  "without); the plan's estimated run time: "
                  + ("none (no key count before the job)" if estimate is None
                     else f"{estimate:.1f} s"))
        inplace = [r for r in rows if r["mode"].startswith("Spark")]
        for r in inplace:
            base = plain.get(r["source_keys"])
            line = (f"Spark in-place: JVM start {r['jvm_start']:.1f} s, repartition call "
                    f"{r['job']:.1f} s")
            if base:
                line += (f"; statekit --no-verify job / Spark's call: "
                         f"{base['job'] / r['job']:.2f}×, process wall: "
                         f"{base['wall'] / r['wall']:.2f}×")
            print(line)
    print("\nwall: the fresh process; job: the JSON's `seconds` (statekit: run_repartition) or "
          "the repartition call alone (Spark in-place); before job: until the result was printed, "
          "minus job (imports, plan, JVM start, session); exit: from printing the result to the "
          "process's end; JVM launched at: when the SparkSubmit JVM process appeared.\n"
          "Peak RSS = VmHWM: driver python = the statekit (or script) process; JVM = the "
          "SparkSubmit JVM (local mode: also the executor); worker = the largest pyspark worker "
          "(processes seen in parentheses). written: state bytes of the new partitions.\n"
          f"JVM heap limit in effect: {', '.join(heaps) or 'n/a'} (spark.driver.memory; "
          "statekit sets none).")
    for r in results:
        if r["keys"] is not None and r["keys"] != r["source_keys"]:
            print(f"WARNING: {r['provider']} {r['mode']}: {r['keys']:,} keys written, source "
                  f"has {r['source_keys']:,}")
        if r["verified"] is False:
            print(f"WARNING: {r['provider']} {r['mode']}: verification failed: "
                  f"{'; '.join(r['problems'])}")
    print(f"\nScript run time: {time.perf_counter() - began:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=lambda s: [int(k) for k in s.split(",")],
                        default=[250_000, 1_000_000],
                        help="HDFS state sizes, comma-separated (default 250000,1000000)")
    parser.add_argument("--rocksdb-keys", type=int, default=1_000_000,
                        help="RocksDB state size")
    parser.add_argument("--to", type=int, default=3, help="new partition count")
    parser.add_argument("--provider", choices=("hdfs", "rocksdb", "both"), default="both")
    parser.add_argument("--batches", type=int, default=4, help="input micro-batches")
    parser.add_argument("--poll", type=float, default=0.2,
                        help="seconds between process-tree memory polls")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: HDFS {QUICK['keys']}, RocksDB {QUICK['rocksdb_keys']} "
                             "keys")
    parser.add_argument("--workdir", type=Path,
                        help="keep data here (and reuse a finished setup) instead of a "
                             "temporary folder")
    parser.add_argument("--setup-in", type=Path, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.quick:
        args.keys, args.rocksdb_keys = QUICK["keys"], QUICK["rocksdb_keys"]
    providers = ["hdfs", "rocksdb"] if args.provider == "both" else [args.provider]
    needed = wanted(args.keys, args.rocksdb_keys, providers)
    if args.setup_in:  # the child that writes the data (its JVM exits with it)
        setup(args.setup_in, needed, args.batches)
        return
    began = time.perf_counter()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    work = args.workdir.resolve() if args.workdir else \
        Path(tempfile.mkdtemp(prefix="bench-repartition-"))
    try:
        print(f"setting up in {work} …", flush=True)
        command = [sys.executable, __file__, "--setup-in", str(work), "--batches",
                   str(args.batches), "--keys", ",".join(map(str, args.keys)),
                   "--rocksdb-keys", str(args.rocksdb_keys), "--provider", args.provider]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"setup failed (exit {done.returncode})")
        made = json.loads((work / "setup.json").read_text())
        results = []
        for provider, keys in needed:
            entry = made[f"{provider}-{keys}-b{args.batches}"]
            checkpoint = Path(entry["checkpoint"])
            for verify in (True, False):
                print(f"{provider} {entry['keys']:,} keys: statekit repartition "
                      f"{'' if verify else '--no-verify '}…", flush=True)
                r = statekit_run(checkpoint, work / f"out-{provider}-{keys}", args.to, verify,
                                 args.poll)
                results.append({**r, "provider": provider, "source_keys": entry["keys"]})
            if provider == "rocksdb":
                print(f"{provider} {entry['keys']:,} keys: Spark in-place on a copy …",
                      flush=True)
                r = inplace_run(checkpoint, work / f"inplace-{provider}-{keys}", args.to,
                                args.poll)
                results.append({**r, "provider": provider, "source_keys": entry["keys"]})
        report(results, made.get("lines", []), args, began)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
