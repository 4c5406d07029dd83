"""Benchmark: what a statekit command costs on a Spark cluster vs on ``local[*]``.

The question an SRE asks before adding ``--master``: is the cluster worth its start-up? On a
cluster every command pays the driver's JVM as locally, plus executors starting on the
workers (a JVM and a Python daemon each), statekit's zip shipped and the probe task; with
``--env-archive`` also the archive fetched and unpacked by every executor on first use.

Data: the stand-in streaming aggregation of ``bench_state_export.py`` (Spark writes the
state; one row per user, a nested 12-field value) with ``--keys`` keys, 8 partitions, HDFS
provider. Cluster: ``tests/cluster.py``'s standalone master and two workers of one core each
on this machine (so the cluster has the same two cores as ``local[*]``: the comparison is the
overhead, not more hardware). Each command is a fresh ``statekit`` process, as a user runs it;
the best of ``--repeats`` wall times is reported.

    python benchmarks/bench_cluster.py --keys 1000000
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_state_export import aggregate_checkpoint, write_landing  # noqa: E402

from tests.cluster import start_cluster  # noqa: E402

COMMANDS = {
    "growth (key counts: every delta replayed)": ["growth", "{ckpt}", "--json"],
    "report --decode": ["report", "{ckpt}", "--decode", "--json"],
    "state export (parquet)": ["state", "export", "{ckpt}", "--out", "{out}", "--json"],
    "repartition 8 -> 4 (verified)": ["repartition", "{ckpt}", "--partitions", "4",
                                      "--out", "{out}", "--json", "--force"],
}


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 10):  # growth exits 10 on a GROWING verdict
        raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr}")
    return elapsed


def runs(args: list[str], checkpoint: Path, work: Path, repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` fresh processes of one command, in order."""
    times = []
    for attempt in range(repeats):
        out = work / f"out-{time.monotonic_ns()}-{attempt}"
        times.append(timed([a.format(ckpt=checkpoint, out=out) for a in args]))
        shutil.rmtree(out, ignore_errors=True)
    return times


def best(args: list[str], checkpoint: Path, work: Path, repeats: int) -> float:
    return min(runs(args, checkpoint, work, repeats))


def arguments(description: str) -> argparse.ArgumentParser:
    """The options every local-vs-elsewhere comparison takes (this one, bench_connect)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    return parser


def hdfs_checkpoint(work: Path, keys: int, batches: int) -> Path:
    """The stand-in aggregation's HDFS checkpoint under ``work`` (written by Spark, or kept
    from an earlier run with the same ``--work``)."""
    checkpoint = work / "ckpt-hdfs"
    if (checkpoint / "commits").exists():
        return checkpoint
    from statekit.jobs.session import build_session

    spark = build_session("bench-setup", conf={"spark.driver.memory": "4g"})
    started = time.perf_counter()
    shutil.rmtree(work / "landing", ignore_errors=True)
    write_landing(spark, work / "landing", keys, batches)
    written = aggregate_checkpoint(spark, work / "landing", checkpoint, "hdfs")
    spark.stop()
    print(f"checkpoint: {written:,} keys, {batches} batches, HDFS, 8 partitions "
          f"({time.perf_counter() - started:.0f} s to write)")
    return checkpoint


def main() -> None:
    options = arguments(__doc__.split("\n")[0]).parse_args()
    work = options.work or Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    checkpoint = hdfs_checkpoint(work, options.keys, options.batches)

    started = time.perf_counter()
    cluster = start_cluster(work / "cluster")
    print(f"cluster: master + 2 workers of 1 core ready in {time.perf_counter() - started:.1f} s")
    try:
        on_cluster = ["--master", cluster.master_url, *cluster.confs()]
        rows = []
        for name, args in COMMANDS.items():
            local = best(args, checkpoint, work, options.repeats)
            remote = best([*args, *on_cluster], checkpoint, work, options.repeats)
            rows.append((name, local, remote))
        archive = work / "env.tar.gz"
        started = time.perf_counter()
        timed(["pack", str(archive), "--json"])
        pack_s = time.perf_counter() - started
        packed = ["growth", "{ckpt}", "--json", "--master", cluster.master_url,
                  "--env-archive", str(archive), *cluster.confs(python=False)]
        first = timed([a.format(ckpt=checkpoint) for a in packed])
        rows.append(("growth --env-archive (first run)", None, first))
    finally:
        cluster.stop()
    print(f"statekit pack: {pack_s:.1f} s, {archive.stat().st_size / 2**20:.0f} MiB")
    print()
    print(f"| command ({options.keys:,} keys) | local[*] s | cluster s | cluster / local |")
    print("|---|---:|---:|---:|")
    for name, local, remote in rows:
        ratio = f"{remote / local:.2f}×" if local else "—"
        local_text = f"{local:.1f}" if local else "—"
        print(f"| {name} | {local_text} | {remote:.1f} | {ratio} |")
    if options.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
