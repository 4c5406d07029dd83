"""Benchmark: the local replay's memory and time per record as the key count grows.

The claim to prove: the growth replay's memory is bounded by the largest *partition*, not
by the state (each worker replays its partitions one after another and drops a partition's
live-key digests before the next), and its time per record stays flat from 1M to 10M keys.

Data: an HDFS checkpoint layout (real log formats, ``tests/unit/checkpoint_builder.py``) whose
``.delta`` files are real lz4-java streams of put records written here: ``--keys`` keys over
``--partitions`` partitions and ``--versions`` versions (each version inserts its share of
new keys and updates 10 % of the partition's earlier keys), 24-byte keys and 64–160-byte
values. Spark is not needed to write it (a 10M-key state takes Spark hours on 2 cores); the
replay reads these files exactly as it reads Spark's (the format tests prove the encoding).

Measured in a fresh process per size (``statekit growth``'s replay, in-process, one worker so
the peak is one process's): wall time, records replayed, µs per record, peak RSS, and the
peak above the process's baseline divided by the largest partition's live keys.

With ``--spark-master local[2]`` the same replay also runs on Spark (``statekit growth
--master``: one task per store instance, per-version histograms merged on the driver): the
wall time with and without the session start, the tasks run, the driver's peak RSS (the
Python process; the JVM's heap is Spark's), and whether the per-version key counts equal the
local replay's.

Run: ``.venv/bin/python benchmarks/bench_replay_memory.py [--keys 1000000,10000000]
[--partitions 200] [--versions 20] [--spark-master local[2]]``
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
import statekit.state.workers as pw
pw.MAX_WORKERS = 1  # one process: its peak is the bound per worker
from statekit.checkpoint import open_checkpoint
from statekit.state.history import all_histories
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
(history,) = all_histories(open_checkpoint(sys.argv[1]))
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "base_kib": base, "peak_kib": peak,
                  "keys": history.versions[-1].keys,
                  "per_version": [v.keys for v in history.versions],
                  "largest_partition": max(k[-1] for k in history.partition_keys.values())}))
"""

SPARK_CHILD = r"""
import json, os, resource, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
started = time.perf_counter()
from statekit.jobs.session import build_session
from statekit.jobs.distributed import SparkGroupRunner
from statekit.checkpoint import open_checkpoint
from statekit.state.history import all_histories
spark = build_session("bench-replay", sys.argv[2], {})
session_s = time.perf_counter() - started
runner = SparkGroupRunner(spark)
replay_started = time.perf_counter()
(history,) = all_histories(open_checkpoint(sys.argv[1]), runner=runner)
replay_s = time.perf_counter() - replay_started
print(json.dumps({"seconds": time.perf_counter() - started, "session_s": session_s,
                  "replay_s": replay_s, "tasks": runner.tasks,
                  "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "per_version": [v.keys for v in history.versions]}))
spark.stop()
"""


def build(root: Path, keys: int, partitions: int, versions: int) -> int:
    """Write the checkpoint; returns the records written."""
    import fsspec

    from tests.unit.checkpoint_builder import write_checkpoint
    from tests.unit.formats.builders import END, lz4_stream, put

    write_checkpoint(fsspec.filesystem("file"), str(root), planned=versions,
                     committed=versions, partitions=partitions, crc=False)
    rng = random.Random(7)
    per_version = keys // partitions // versions
    records = 0
    for part in range(partitions):
        folder = root / "state" / "0" / str(part)
        live: list[bytes] = []
        for version in range(1, versions + 1):
            fresh = [b"k%011d%012d" % (part, len(live) + i) for i in range(per_version)]
            updated = rng.sample(live, len(live) // 10) if live else []
            body = b"".join(put(k, bytes(rng.randrange(64, 160))) for k in fresh + updated)
            (folder / f"{version}.delta").write_bytes(lz4_stream(body + END))
            records += len(fresh) + len(updated)
            live.extend(fresh)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", default="1000000,10000000")
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--spark-master", help="also replay on Spark with this master")
    args = parser.parse_args()
    rows = []
    spark_rows = []
    for keys in [int(k) for k in args.keys.split(",")]:
        work = Path(tempfile.mkdtemp(prefix="bench-replay-"))
        try:
            records = build(work / "ck", keys, args.partitions, args.versions)
            done = subprocess.run([sys.executable, "-c", CHILD, str(work / "ck")],
                                  capture_output=True, text=True, check=True, cwd=ROOT)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append((keys, records, result))
            if args.spark_master:
                done = subprocess.run(
                    [sys.executable, "-c", SPARK_CHILD, str(work / "ck"), args.spark_master],
                    capture_output=True, text=True, check=True, cwd=ROOT)
                on_spark = json.loads(done.stdout.strip().splitlines()[-1])
                on_spark["same"] = on_spark["per_version"] == result["per_version"]
                spark_rows.append((keys, records, on_spark))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nlocal replay, {args.partitions} partitions × {args.versions} versions, one process")
    print(f"{'keys':>11} {'records':>11} {'wall':>8} {'µs/record':>10} {'peak RSS':>10} "
          f"{'above base':>11} {'largest partition':>18} {'bytes/key of it':>16}")
    for _keys, records, r in rows:
        above = (r["peak_kib"] - r["base_kib"]) * 1024
        print(f"{r['keys']:>11,} {records:>11,} {r['seconds']:>7.1f}s "
              f"{r['seconds'] / records * 1e6:>10.2f} {r['peak_kib'] / 1024:>8.0f} MB "
              f"{above / 2**20:>8.0f} MB {r['largest_partition']:>18,} "
              f"{above / max(r['largest_partition'], 1):>16.0f}")
    if spark_rows:
        print(f"\nthe same replay on Spark ({args.spark_master}), one task per store instance")
        print(f"{'keys':>11} {'wall':>8} {'session':>8} {'replay':>8} {'µs/record':>10} "
              f"{'tasks':>6} {'driver peak':>12} {'same counts':>12}")
        for keys, records, r in spark_rows:
            print(f"{keys:>11,} {r['seconds']:>7.1f}s {r['session_s']:>7.1f}s "
                  f"{r['replay_s']:>7.1f}s {r['replay_s'] / records * 1e6:>10.2f} "
                  f"{r['tasks']:>6} {r['peak_kib'] / 1024:>9.0f} MB {r['same']!s:>12}")


if __name__ == "__main__":
    main()
