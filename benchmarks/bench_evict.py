"""Benchmark: ``statekit evict`` throughput and driver memory at realistic sizes.

The question: how long does evicting a tenth of the keys take on ~1M keys of state, per
provider, and what does the verification add? ``statekit evict`` rebuilds every row from the
files in executor tasks and decodes key and value to Spark's types (so Spark can evaluate the
predicate), removes the selected rows, writes the rest and reads both checkpoints back through
Spark's ``statestore`` reader — each row crosses Python several times, so this is the number
a user must know before evicting from a big checkpoint.

Data: the same checkpoints as ``bench_repartition.py`` (its ``setup`` is reused, so a
``--workdir`` holds both): a streaming ``groupBy(user_id)`` written by Spark, 8 partitions,
HDFS at ``--keys`` (default 250k and 1M), RocksDB (zips) at ``--rocksdb-keys`` (1M).

Measured, each run in a fresh process (imports and the JVM start count):
``statekit evict SRC --out DST --where "key.user_id LIKE '%7'" --force --json`` (a tenth of
the keys: ids end in 0-9), with and without ``--no-verify``, and the ``--dry-run``. ``job``:
the JSON's ``seconds``; keys/s is the source's keys over the job time. Peak memory of the
driver (Python + JVM) and of the largest Python worker, polled like ``bench_repartition``.

One run per configuration on the machine it runs on; nothing is asserted (the script warns
when the removed count is not a tenth or verification fails).

Run: ``.venv/bin/python benchmarks/bench_evict.py [--quick] [--workdir DIR]
[--provider hdfs|rocksdb|both]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_repartition as repartition_bench  # noqa: E402  (data and process monitor)

STATEKIT = repartition_bench.STATEKIT
WHERE = "key.user_id LIKE '%7'"
QUICK = {"keys": [20_000, 80_000], "rocksdb_keys": 80_000}


def evict_run(checkpoint: Path, out: Path, mode: str, interval: float) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [STATEKIT, "evict", str(checkpoint), "--out", str(out), "--where", WHERE,
               "--force", "--json"]
    command += {"verify": [], "no-verify": ["--no-verify"], "dry-run": ["--dry-run"]}[mode]
    data, wall, _, memory = repartition_bench.run_monitored(command, interval,
                                                            "statekit evict")
    shutil.rmtree(out, ignore_errors=True)
    check = data["verification"]
    return {"mode": mode, "wall": wall, "job": data["seconds"],
            "removed": data["plan"]["removed_total"], "memory": memory,
            "verified": None if check is None else check["ok"],
            "source_rows": None if check is None else
            sum(s["source_rows"] for s in check["stores"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--rocksdb-keys", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--provider", choices=["hdfs", "rocksdb", "both"], default="both")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args()
    if args.quick:
        args.keys, args.rocksdb_keys = QUICK["keys"], QUICK["rocksdb_keys"]
    providers = ["hdfs", "rocksdb"] if args.provider == "both" else [args.provider]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-evict-"))
    work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    needed = repartition_bench.wanted(args.keys, args.rocksdb_keys, providers)
    repartition_bench.setup(work, needed, args.batches)
    done = json.loads((work / "setup.json").read_text())
    rows = []
    try:
        for provider, keys in needed:
            entry = done[f"{provider}-{keys}-b{args.batches}"]
            for mode in ("dry-run", "no-verify", "verify"):
                result = evict_run(Path(entry["checkpoint"]), work / "evicted", mode,
                                   args.poll)
                rows.append((provider, entry["keys"], result))
                share = result["removed"] / entry["keys"] if entry["keys"] else 0
                if not 0.08 < share < 0.12 or result["verified"] is False:
                    print(f"WARNING: {provider} {keys} {mode}: removed {result['removed']} "
                          f"of {entry['keys']}, verified {result['verified']}")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"statekit evict --where \"{WHERE}\" ({platform.machine()}, "
          f"{os.cpu_count()} cores; total {time.perf_counter() - began:.0f} s"
          " incl. setup)")
    print("| provider | keys | mode | removed | wall s | job s | keys/s (job) | driver peak "
          "(Python + JVM) | largest worker |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for provider, keys, r in rows:
        memory = r["memory"]
        print(f"| {provider} | {keys:,} | {r['mode']} | {r['removed']:,} | {r['wall']:.1f} | "
              f"{r['job']:.1f} | {keys / r['job']:,.0f} | "
              f"{repartition_bench.mib(memory['driver_kib'] + memory['jvm_kib'])} | "
              f"{repartition_bench.mib(memory['worker_kib'])} |")


if __name__ == "__main__":
    main()
