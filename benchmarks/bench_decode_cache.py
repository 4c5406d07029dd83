"""Benchmark: the decode cache — a second ``statekit metrics --decode`` next to a listing.

The claim to prove: with the decode cache (``statekit.state.decode_cache``) a checkpoint's
state files are decoded once; a second run — the next cron job, the exporter's next scrape
— re-decodes only new or changed files, so it costs about what a run that only lists the
checkpoint costs (the goal: within 20 % of ``statekit report --no-decode --json``).

Data, generated here without a JVM:

* ``200×100``: an HDFS checkpoint of 200 partitions × 100 retained versions, as
  ``bench_report.py`` synthesises it, from the real files pyspark wrote in
  ``tests/data/formats/aipws_hdfs`` (deltas cycled, a snapshot every 10 versions, each with
  its Hadoop ``.crc``) and the layout of ``tests/unit/checkpoint_builder.py``;
* ``1M keys``: ``bench_replay_memory.py``'s layout, 1,000,000 keys over 200 partitions × 20
  versions in real lz4 delta files (10 % of a partition's keys updated per version);
* ``RocksDB 200×7``: the real RocksDB store of ``tests/data/formats/rocksdb_sst/window_lz4``
  (zips of versions 1-7 and their SSTs, no changelogs) in each of 200 partitions: its growth
  history comes from every zip's metadata and the SSTs of the first and last version;
* ``1×3``: one partition, three versions — what the two commands cost whatever the
  checkpoint (imports: ``metrics`` loads numpy, prometheus_client, the doctor, the growth
  fits and the recovery model, ``report`` far less).

Measured, each a fresh ``statekit`` process (imports count, from Python's bytecode cache),
best of ``--repeats``, every repeat with an empty cache folder (``STATEKIT_CACHE_DIR``):

* first: ``statekit metrics CKPT --decode`` (the doctor decodes the restart path, the growth
  analysis replays every retained file) with the cache empty;
* second: the same again, the cache filled by the first;
* off: the same with ``STATEKIT_DECODE_CACHE=0`` (what every run cost before);
* listing only: ``statekit report CKPT --no-decode --json`` (listing and small files, no
  decoding).

Runs set ``STATEKIT_MACHINE_SPEED=reference``: the recovery estimate's speed probe keeps its
own cache (three probes until it settles), which would otherwise land on the first runs. The
data is left to settle for :data:`RACY_SECONDS` first (files younger than that are not kept:
the cache's "racily clean" rule). ``--serve`` also starts the exporter
(``statekit metrics --decode --serve 127.0.0.1:0 --cache-seconds 0``: every scrape reads the
checkpoint again) and times two scrapes; ``--profile`` prints where a second run's time goes.

Run: ``.venv/bin/python benchmarks/bench_decode_cache.py [--repeats 3] [--serve]
[--profile] [--keys 1000000]``
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_replay_memory import build as build_keys  # noqa: E402

STATEKIT = str(ROOT / ".venv/bin/statekit")
RACY_SECONDS = 2.5
"""A little more than the cache's own window (statekit.state.decode_cache.RACY_SECONDS)."""
VOLATILE = re.compile(r"^statekit_(last_batch_age_seconds|scrape_duration_seconds)\b")
"""Metric lines that move with the clock, left out when two outputs are compared."""


def hadoop_crc(data: bytes) -> bytes:
    """Hadoop's ``.crc`` of ``data``: a header, then a CRC32 per 512 bytes."""
    return b"crc\0" + struct.pack(">i", 512) + b"".join(
        struct.pack(">I", zlib.crc32(data[at:at + 512])) for at in range(0, len(data), 512))


def build_versions(root: Path, partitions: int, versions: int) -> None:
    """``partitions`` × ``versions`` of real HDFS files, each with its Hadoop ``.crc``."""
    import fsspec

    from tests.unit.checkpoint_builder import REAL_SCHEMA_FILE, write_checkpoint

    real = REAL_SCHEMA_FILE.parent
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=versions,
                     committed=versions, partitions=partitions, crc=False)
    deltas = [(real / f"{v}.delta").read_bytes() for v in (7, 8, 9)]
    snapshot = (real / "9.snapshot").read_bytes()  # written with 9.delta: a matching pair
    crcs = {id(d): hadoop_crc(d) for d in [*deltas, snapshot]}
    for part in range(partitions):
        folder = root / "state/0" / str(part)
        for version in range(1, versions + 1):
            delta = deltas[2] if version % 10 == 0 else deltas[version % 3]
            (folder / f"{version}.delta").write_bytes(delta)
            (folder / f".{version}.delta.crc").write_bytes(crcs[id(delta)])
            if version % 10 == 0:
                (folder / f"{version}.snapshot").write_bytes(snapshot)
                (folder / f".{version}.snapshot.crc").write_bytes(crcs[id(snapshot)])


def build_rocksdb(root: Path, partitions: int) -> None:
    """``partitions`` copies of a real RocksDB store's folder (zips 1-7 and their SSTs)."""
    import fsspec

    from tests.unit.checkpoint_builder import (
        REAL_SCHEMA_FILE,
        operator_metadata_text,
        write_checkpoint,
    )

    real = REAL_SCHEMA_FILE.parent.parent / "rocksdb_sst" / "window_lz4"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=7, committed=7,
                     partitions=partitions, provider="rocksdb", crc=False)
    (root / "state/0/_metadata/metadata").write_text(
        operator_metadata_text(name="stateStoreSave", partitions=partitions))
    for part in range(partitions):
        shutil.rmtree(root / "state/0" / str(part))
        shutil.copytree(real, root / "state/0" / str(part),
                        ignore=shutil.ignore_patterns("expected.json", "schema"))
    (root / "state/0/0/_metadata").mkdir()
    shutil.copy(real / "schema", root / "state/0/0/_metadata/schema")


def run(args: list[str], cache: Path, *, off: bool = False) -> tuple[float, str]:
    """Seconds of one fresh ``statekit`` process, and what it printed."""
    env = {**os.environ, "STATEKIT_CACHE_DIR": str(cache),
           "STATEKIT_MACHINE_SPEED": "reference"}
    if off:
        env["STATEKIT_DECODE_CACHE"] = "0"
    started = time.perf_counter()
    done = subprocess.run([STATEKIT, *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 9):  # 9: restarts with warnings
        raise SystemExit(f"statekit {' '.join(args)}: exit {done.returncode}\n"
                         f"{done.stderr[-800:]}")
    return seconds, done.stdout


def stable(exposition: str) -> list[str]:
    return [line for line in exposition.splitlines() if not VOLATILE.match(line)]


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file()) / 2**20


def measure(checkpoint: Path, work: Path, repeats: int) -> dict:
    metrics = ["metrics", str(checkpoint), "--decode"]
    first, second, off, listing = [], [], [], []
    same = True
    for repeat in range(repeats):
        cache = work / f"cache-{checkpoint.name}-{repeat}"
        seconds, cold = run(metrics, cache)
        first.append(seconds)
        seconds, warm = run(metrics, cache)
        second.append(seconds)
        seconds, uncached = run(metrics, cache, off=True)
        off.append(seconds)
        same = same and stable(cold) == stable(warm) == stable(uncached)
        listing.append(run(["report", str(checkpoint), "--no-decode", "--json"], cache)[0])
    files = sum(1 for p in checkpoint.rglob("*") if p.is_file())
    return {"files": files, "first": min(first), "second": min(second), "off": min(off),
            "listing": min(listing), "same": same, "cache_mb": disk_mb(cache)}


def serve(checkpoint: Path, work: Path) -> dict:
    """Two scrapes of a fresh exporter that reads the checkpoint on every scrape."""
    cache = work / f"cache-serve-{checkpoint.name}"
    env = {**os.environ, "STATEKIT_CACHE_DIR": str(cache),
           "STATEKIT_MACHINE_SPEED": "reference"}
    exporter = subprocess.Popen(
        [STATEKIT, "metrics", str(checkpoint), "--decode", "--serve", "127.0.0.1:0",
         "--cache-seconds", "0"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert exporter.stderr is not None
        line = exporter.stderr.readline()
        found = re.search(r"http://[^ ]+/metrics", line)
        if found is None:
            raise SystemExit(f"the exporter did not start: {line}")
        scrapes = []
        bodies = []
        for _ in range(2):
            started = time.perf_counter()
            with urllib.request.urlopen(found.group(0), timeout=600) as response:
                bodies.append(response.read().decode())
            scrapes.append(time.perf_counter() - started)
    finally:
        exporter.terminate()
        exporter.wait(timeout=30)
    return {"first": scrapes[0], "second": scrapes[1],
            "same": stable(bodies[0]) == stable(bodies[1])}


def profile(checkpoint: Path, work: Path) -> None:
    """Where a second run's time goes: the CLI in this process, under cProfile."""
    cache = work / f"cache-profile-{checkpoint.name}"
    run(["metrics", str(checkpoint), "--decode"], cache)
    os.environ.update({"STATEKIT_CACHE_DIR": str(cache), "STATEKIT_MACHINE_SPEED": "reference"})
    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    profiler = cProfile.Profile()
    profiler.enable()
    with open(os.devnull, "w") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            run_cli(cli, "statekit", ["metrics", str(checkpoint), "--decode"])
        finally:
            sys.stdout = stdout
    profiler.disable()
    print(f"\nsecond run of statekit metrics --decode on {checkpoint.name}, in-process "
          "(imports already done), cumulative:")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"statekit|toolkit", 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--key-versions", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help="also time two exporter scrapes")
    parser.add_argument("--profile", action="store_true", help="profile a second run")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # time runs as a user's, compiled once
    work = Path(tempfile.mkdtemp(prefix="bench-decode-cache-"))
    try:
        checkpoints = {f"{args.partitions}×{args.versions}": work / "versions",
                       f"{args.keys / 1e6:g}M keys": work / "keys",
                       f"RocksDB {args.partitions}×7": work / "rocksdb", "1×3": work / "tiny"}
        build_versions(checkpoints[f"{args.partitions}×{args.versions}"], args.partitions,
                       args.versions)
        build_keys(checkpoints[f"{args.keys / 1e6:g}M keys"], args.keys, args.partitions,
                   args.key_versions)
        build_rocksdb(checkpoints[f"RocksDB {args.partitions}×7"], args.partitions)
        build_versions(checkpoints["1×3"], 1, 3)
        time.sleep(RACY_SECONDS)
        rows = [(name, measure(path, work, args.repeats)) for name, path in checkpoints.items()]
        served = [(name, serve(path, work)) for name, path in checkpoints.items()
                  if name != "1×3"] if args.serve else []
        print(f"\nstatekit metrics CKPT --decode, fresh processes, best of {args.repeats}")
        print(f"{'checkpoint':>14} {'files':>7} {'first':>8} {'second':>8} {'off':>8} "
              f"{'listing only':>13} {'second/listing':>15} {'cache':>8} {'same output':>12}")
        for name, r in rows:
            print(f"{name:>14} {r['files']:>7} {r['first']:>7.2f}s {r['second']:>7.2f}s "
                  f"{r['off']:>7.2f}s {r['listing']:>12.2f}s "
                  f"{r['second'] / r['listing']:>15.2f} {r['cache_mb']:>5.1f} MB "
                  f"{'yes' if r['same'] else 'NO':>12}")
        if served:
            print("\nstatekit metrics CKPT --decode --serve (--cache-seconds 0), one exporter")
            print(f"{'checkpoint':>14} {'first scrape':>13} {'second scrape':>14} "
                  f"{'same output':>12}")
            for name, s in served:
                print(f"{name:>14} {s['first']:>12.2f}s {s['second']:>13.2f}s "
                      f"{'yes' if s['same'] else 'NO':>12}")
        if args.profile:
            for name, path in checkpoints.items():
                if name != "1×3":
                    profile(path, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
