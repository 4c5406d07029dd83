"""Benchmark: ``statekit report`` versus doing the same with Spark, on a large checkpoint.

The claim to prove: opening a checkpoint and reporting on it is a sub-second, JVM-free job,
at least 20× faster end to end than what an SRE would otherwise do with Spark (start a
session, read ``state-metadata``, count state files per partition through Spark's own
filesystem listing) — and on object storage it lists, it does not probe file by file.

Data: the reference pipeline writes a small real checkpoint per provider with Spark (2
partitions); the script then synthesises a large one from those real files, faithfully: 200
partitions × 100 retained batches, offsets/commits 0..99 with the partition count rewritten,
operator metadata for 200 partitions, per partition the real ``.delta`` files cycled for
versions 1..100 with ``.snapshot`` every 10 versions (HDFS) or a real ``.zip`` per version plus
its SSTs (RocksDB), each with its Hadoop ``.crc`` (a copy of a file's bytes keeps the same
checksum, so the copies stay valid).

Measured, best of N:

* ``statekit report --no-decode`` cold: a fresh ``statekit report --no-decode --json``
  process (the listing and the logs only);
* ``statekit recovery`` cold: a fresh ``statekit recovery --json`` process (the restart path
  decoded, the history replayed for the loaded version's keys, the estimate);
* ``statekit report`` cold: the same as the first, also reading and decoding every file the
  restart loads (one snapshot/zip + its SSTs and the change files after it, per partition),
  as ``report`` does by default;
* ``statekit report`` warm: ``open_checkpoint`` + ``build_report`` in-process;
* ``statekit doctor`` cold: a fresh ``statekit doctor --json`` process on the healthy
  checkpoint (the restart path decoded, as ``--verify``), then on a broken copy (partition
  0's newest version removed: delta + snapshot, or zip), where it also searches for the
  newest batch a rollback can keep (every committed batch's logs, source log and state
  chain checked) and prints it;
* Spark cold: a fresh Python process that starts a session, collects ``state-metadata`` and
  counts files per partition via ``binaryFile`` (path/length only); with its split;
* Spark warm: the same two reads again in the running session;
* S3 (``--s3``): the HDFS checkpoint uploaded to moto's S3 server on 127.0.0.1, report through
  s3fs, with the request count by kind.

Run: ``.venv/bin/python benchmarks/bench_report.py [--partitions 200 --versions 100] [--s3]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPARK_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
from statekit.jobs.session import build_session
spark = build_session("bench-report")
t1 = time.perf_counter()
from pyspark.sql import functions as F
def run(ckpt):
    a = time.perf_counter()
    meta = spark.read.format("state-metadata").load(ckpt).collect()
    b = time.perf_counter()
    files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
             .load(ckpt + "/state").select("path", "length")
             .withColumn("partition", F.regexp_extract("path", r"/state/\d+/(\d+)/", 1))
             .groupBy("partition").agg(F.count("*").alias("files"), F.sum("length").alias("bytes"))
             .collect())
    c = time.perf_counter()
    return len(meta), len(files), b - a, c - b
n_meta, n_parts, meta_s, files_s = run(sys.argv[1])
t2 = time.perf_counter()
_, _, warm_meta, warm_files = run(sys.argv[1])
print(json.dumps({"jvm_start_s": t1 - t0, "metadata_s": meta_s, "file_count_s": files_s,
                  "total_s": t2 - t0, "warm_s": warm_meta + warm_files,
                  "stores": n_meta, "partitions": n_parts}))
"""


def make_template(work: Path, provider: str) -> Path:
    """A small real checkpoint written by the reference pipeline with Spark."""
    landing = work / "landing"
    if not landing.exists():
        from statekit.reference_pipeline.generator import GeneratorConfig, generate
        generate(landing, GeneratorConfig(seed=3, users=400, events_per_batch=150), 12)
    checkpoint = work / f"template-{provider}"
    subprocess.run([str(ROOT / ".venv/bin/statekit"), "pipeline", "run", "--landing",
                    str(landing), "--checkpoint", str(checkpoint), "--output",
                    str(work / f"out-{provider}"), "--provider", provider, "--partitions", "2",
                    "--min-deltas-for-snapshot", "3", "--maintenance-interval", "200ms"],
                   check=True, capture_output=True)
    return checkpoint


def _copy(src: Path, dst: Path, link: bool = False) -> None:
    """Copy ``src`` (and its Hadoop ``.crc``) to ``dst``; hard-link instead when ``link``
    (the 400k-file checkpoints of bench_object_store.py: same bytes, no disk)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    place = os.link if link else shutil.copyfile
    place(src, dst)
    crc = src.parent / f".{src.name}.crc"
    if crc.exists():
        place(crc, dst.parent / f".{dst.name}.crc")


def _write_file_source_log(folder: Path, batches: int, compact_interval: int = 10) -> None:
    """The file source's log the offsets point at (``logOffset`` = batch): one input file per
    batch, every ``compact_interval``-th entry a ``.compact`` file holding all entries so far,
    as Spark's ``FileStreamSourceLog`` writes them. Without it the checkpoint will not
    restart (the offsets say entries were read that the log does not have) and the report
    rightly says so."""
    folder.mkdir(parents=True)
    lines = []
    for batch in range(batches):
        lines.append(json.dumps({"path": f"file:///synthetic/landing/batch-{batch:06d}.jsonl",
                                 "timestamp": 1_790_000_000_000 + batch * 10_000,
                                 "batchId": batch}))
        if (batch + 1) % compact_interval == 0:
            (folder / f"{batch}.compact").write_text("v1\n" + "\n".join(lines))
        else:
            (folder / str(batch)).write_text("v1\n" + lines[-1])


def synthesize(template: Path, out: Path, partitions: int, versions: int,
               link: bool = False) -> Path:
    """A large checkpoint made of the template's real files (see the module docstring)."""
    out.mkdir(parents=True)
    _copy(template / "metadata", out / "metadata")
    offsets = sorted((template / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    last = offsets[-1].read_text().split("\n")
    meta = json.loads(last[1])
    meta["conf"]["spark.sql.shuffle.partitions"] = str(partitions)
    for batch in range(versions):
        meta["batchTimestampMs"] = 1_790_000_000_000 + batch * 10_000
        text = f"v1\n{json.dumps(meta)}\n" + json.dumps({"logOffset": batch})
        (out / "offsets").mkdir(exist_ok=True)
        (out / "offsets" / str(batch)).write_text(text)
        (out / "commits").mkdir(exist_ok=True)
        (out / "commits" / str(batch)).write_text(
            "v1\n" + json.dumps({"nextBatchWatermarkMs": meta["batchWatermarkMs"]}))
    _write_file_source_log(out / "sources/0", versions)
    op_meta = (template / "state/0/_metadata/metadata").read_text()
    op_meta = re.sub(r'"numPartitions":\d+', f'"numPartitions":{partitions}', op_meta)
    (out / "state/0/_metadata").mkdir(parents=True)
    (out / "state/0/_metadata/metadata").write_text(op_meta)
    _copy(template / "state/0/0/_metadata/schema", out / "state/0/0/_metadata/schema")
    for part in range(partitions):
        src = template / "state/0" / str(part % 2)
        dst = out / "state/0" / str(part)
        deltas = sorted(src.glob("*.delta"))
        snapshot = next(iter(sorted(src.glob("*.snapshot"))), None)
        zips = sorted(src.glob("*.zip"))
        # beside a snapshot, the delta Spark wrote with it: a snapshot holding a key its
        # version's delta removes is a damaged pair (the doctor says so)
        paired = src / f"{snapshot.stem}.delta" if snapshot is not None else None
        for version in range(1, versions + 1):
            if deltas:
                with_snapshot = paired is not None and version % 10 == 0
                delta = paired if with_snapshot else deltas[version % len(deltas)]
                _copy(delta, dst / f"{version}.delta", link)
                if with_snapshot:
                    _copy(snapshot, dst / f"{version}.snapshot", link)
            if zips:
                _copy(zips[version % len(zips)], dst / f"{version}.zip", link)
        for sst in (src / "SSTs").glob("*.sst") if (src / "SSTs").exists() else ():
            _copy(sst, dst / "SSTs" / sst.name, link)
    # Spark writes a batch's state files before its commit entry; a state file modified
    # after it is one copied over (the doctor's state-file-copied). The files above are
    # copies of a few real ones, so the commits get the newer times Spark would give them.
    after = time.time() + 60
    for batch in range(versions):
        os.utime(out / "commits" / str(batch), (after + batch, after + batch))
    return out


def best_of(n: int, action) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(checkpoint: Path, repeats: int) -> dict:
    # cold reads, every repeat: the decode cache (benchmarks/bench_decode_cache.py measures
    # it) would make every repeat after the first a warm one
    os.environ["STATEKIT_DECODE_CACHE"] = "0"
    from statekit.checkpoint import open_checkpoint
    from statekit.checkpoint.soundness import raise_if_unsound
    from statekit.report.checkpoint_report import build_report

    statekit = str(ROOT / ".venv/bin/statekit")
    cold = best_of(repeats, lambda: subprocess.run(
        [statekit, "report", str(checkpoint), "--no-decode", "--json"], check=True,
        capture_output=True))
    warm = best_of(repeats, lambda: build_report(open_checkpoint(str(checkpoint))))
    entry = best_of(repeats, lambda: raise_if_unsound(open_checkpoint(str(checkpoint))))
    recovery = best_of(repeats, lambda: subprocess.run(
        [statekit, "recovery", str(checkpoint), "--json"], check=True, capture_output=True))
    verify = best_of(repeats, lambda: subprocess.run(
        [statekit, "report", str(checkpoint), "--json"], check=True, capture_output=True))
    doctor = best_of(repeats, lambda: _doctor(checkpoint, (0, 9)))
    folder = checkpoint / "state/0/0"
    newest = max(int(p.stem) for p in folder.iterdir() if p.suffix in (".delta", ".zip"))
    saved = {p: p.read_bytes() for p in folder.iterdir()
             if p.suffix in (".delta", ".snapshot", ".zip") and p.stem == str(newest)}
    for path in saved:  # the newest version's delta and snapshot (HDFS) or zip (RocksDB)
        path.unlink()
    try:
        broken = best_of(repeats, lambda: _doctor(checkpoint, (11,)))
        fix = json.loads(_doctor(checkpoint, (11,)))["fix_command"]
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
    report = build_report(open_checkpoint(str(checkpoint)))
    spark = json.loads(subprocess.run(
        [sys.executable, "-c", SPARK_SCRIPT, str(checkpoint)], check=True, capture_output=True,
        text=True, cwd=ROOT).stdout.strip().splitlines()[-1])
    files = sum(1 for p in checkpoint.rglob("*") if p.is_file())
    return {"files": files, "state_files": report.state_files, "cold": cold, "warm": warm,
            "entry": entry,
            "recovery": recovery, "verify": verify, "doctor": doctor,
            "doctor_broken": broken, "fix": fix, "spark": spark}


def _doctor(checkpoint: Path, expected: tuple[int, ...]) -> str:
    done = subprocess.run([str(ROOT / ".venv/bin/statekit"), "doctor", str(checkpoint),
                           "--json"], capture_output=True, text=True)
    assert done.returncode in expected, (done.returncode, done.stderr[-500:])
    return done.stdout


def measure_s3(checkpoint: Path) -> dict:
    from statekit.checkpoint import open_checkpoint
    from statekit.report.checkpoint_report import build_report
    from tests.s3_server import start_server

    server, httpd = start_server()
    try:
        fs = server.filesystem()
        fs.mkdir("bench")
        payload = {f"bench/ck/{p.relative_to(checkpoint)}": p.read_bytes()
                   for p in checkpoint.rglob("*") if p.is_file()}
        fs.pipe(payload)
        server.reset()
        start = time.perf_counter()
        report = build_report(open_checkpoint("s3://bench/ck", server.storage_options()))
        elapsed = time.perf_counter() - start
        return {"objects": len(payload), "seconds": elapsed, "requests": dict(server.summary()),
                "state_files": report.state_files}
    finally:
        httpd.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--s3", action="store_true", help="also measure on moto's S3 server")
    args = parser.parse_args()
    # statekit's processes are timed as a user's run: with Python's bytecode cache (a
    # sandbox's PYTHONDONTWRITEBYTECODE=1 makes every process compile ~100 modules, ~0.1 s);
    # best-of-N keeps the runs after the first wrote the cache
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        rows = []
        for provider in ("hdfs", "rocksdb"):
            template = make_template(work, provider)
            big = synthesize(template, work / f"big-{provider}", args.partitions, args.versions)
            result = measure(big, args.repeats)
            rows.append((provider, result))
            if args.s3 and provider == "hdfs":
                s3 = measure_s3(big)
        print(f"\ncheckpoint: {args.partitions} partitions × {args.versions} retained versions")
        print(f"{'provider':9} {'files':>7} {'statekit cold':>14} {'warm':>8} "
              f"{'spark cold':>11} {'(jvm':>7} {'meta':>7} {'count)':>7} {'warm':>7} "
              f"{'cold ×':>7} {'warm ×':>7}")
        for provider, r in rows:
            s = r["spark"]
            print(f"{provider:9} {r['files']:>7} {r['cold']:>13.3f}s {r['warm']:>7.3f}s "
                  f"{s['total_s']:>10.2f}s {s['jvm_start_s']:>6.2f}s {s['metadata_s']:>6.2f}s "
                  f"{s['file_count_s']:>6.2f}s {s['warm_s']:>6.2f}s "
                  f"{s['total_s'] / r['cold']:>6.1f}× {s['warm_s'] / r['warm']:>6.1f}×")
        for provider, r in rows:
            print(f"statekit recovery --json, cold process, {provider}: {r['recovery']:.3f}s")
            print(f"statekit report --decode --json (reads the restart path), cold process, "
                  f"{provider}: {r['verify']:.3f}s")
            print(f"the state commands' restart check (raise_if_unsound), warm, {provider}: "
                  f"{r['entry']:.3f}s (the whole report: {r['warm']:.3f}s)")
            print(f"statekit doctor --json, cold process, {provider}: healthy "
                  f"{r['doctor']:.3f}s, partition 0's newest version removed "
                  f"{r['doctor_broken']:.3f}s → {r['fix']}")
        if args.s3:
            print(f"\nS3 (moto on 127.0.0.1, hdfs): {s3['objects']} objects, report in "
                  f"{s3['seconds']:.2f}s, requests {s3['requests']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
