"""Benchmark: what a statekit command costs over Spark Connect vs on ``local[*]``.

The question a team on Spark Connect asks: what does ``--remote`` cost next to a local JVM?
Locally every Spark-side command starts its own JVM (about 8 s here) and the JVM-free paths
(``report --decode``) start none; over Connect the server's JVM already runs, and a command
pays the gRPC session, statekit's zip added as a session artifact, and the server's Python
workers importing it — and it runs on the server's cores, not the client's.

Data: the stand-in streaming aggregation of ``bench_state_export.py`` (Spark writes the
state; one row per user, a nested 12-field value) with ``--keys`` keys, 8 partitions, HDFS
provider. Server: ``tests/connect_server.py`` — the pyspark wheel's ``SparkConnectServer`` on
127.0.0.1 with ``local[2]``, so the server has the same two cores as ``local[*]`` (the
comparison is the protocol's overhead, not more hardware), its Python workers without
statekit. Each command is a fresh ``statekit`` process, as a user runs it, ``--repeats``
times in a row; the first and the best wall time are reported (the first Connect run of a
command also warms the server's JIT and Python workers). The decode cache is off.

    python benchmarks/bench_connect.py --keys 1000000
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cluster import arguments, hdfs_checkpoint, runs  # noqa: E402

from tests.connect_server import start_connect_server  # noqa: E402

COMMANDS = {
    "state show --limit 20": ["state", "show", "{ckpt}", "--limit", "20", "--json"],
    "state stats": ["state", "stats", "{ckpt}", "--json"],
    "state export (parquet)": ["state", "export", "{ckpt}", "--out", "{out}", "--json"],
    "report --decode": ["report", "{ckpt}", "--decode", "--json"],
    "repartition 8 -> 4 (verified)": ["repartition", "{ckpt}", "--partitions", "4",
                                      "--out", "{out}", "--json", "--force"],
    "evict a tenth (verified)": ["evict", "{ckpt}", "--where", "key.user_id LIKE '%7'",
                                 "--out", "{out}", "--json", "--force"],
    "rollback one batch (verified)": ["rollback", "{ckpt}", "--to-batch", "{previous}",
                                      "--out", "{out}", "--json", "--force"],
}


def main() -> None:
    parser = arguments(__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="command names to run")
    options = parser.parse_args()
    # every run decodes: the best of two would otherwise time the decode cache's answer
    os.environ["STATEKIT_DECODE_CACHE"] = "0"
    work = options.work or Path(tempfile.mkdtemp(prefix="bench-connect-"))
    checkpoint = hdfs_checkpoint(work, options.keys, options.batches)
    from statekit.checkpoint import open_checkpoint

    previous = open_checkpoint(str(checkpoint)).last_committed_batch - 1

    started = time.perf_counter()
    server = start_connect_server(work / "connect", driver_memory="6g")
    print(f"Connect server (local[2], 6g) listening after {time.perf_counter() - started:.1f} s")
    rows = []
    try:
        for name, args in COMMANDS.items():
            if options.only and name not in options.only:
                continue
            args = [a.replace("{previous}", str(previous)) for a in args]
            local = runs(args, checkpoint, work, options.repeats)
            remote = runs([*args, "--remote", server.url], checkpoint, work, options.repeats)
            rows.append((name, local, remote))
            print(f"  {name}: local {', '.join(f'{t:.1f}' for t in local)} s, Connect "
                  f"{', '.join(f'{t:.1f}' for t in remote)} s", flush=True)
    finally:
        server.stop()
    print()
    print(f"| command ({options.keys:,} keys, HDFS) | local s (first / best) "
          "| Connect s (first / best) | Connect / local (best) |")
    print("|---|---:|---:|---:|")
    for name, local, remote in rows:
        print(f"| {name} | {local[0]:.1f} / {min(local):.1f} | {remote[0]:.1f} / "
              f"{min(remote):.1f} | {min(remote) / min(local):.2f}× |")
    if options.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
