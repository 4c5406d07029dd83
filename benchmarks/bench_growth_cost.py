"""Benchmark: what ``statekit growth`` costs per replayed record, before and after a change.

The question. A change to the growth verdicts (new fits, a projection, one verdict across
sources) must not make ``statekit growth`` slower on the checkpoints it reads: its cost per
record must stay what it was. This script times the whole command, ``statekit growth CKPT
--json``, in a fresh process, JVM-free as users run it, with the decode cache off (every file
decoded, every fit computed), for the installed statekit and for an earlier commit
(``--baseline REF``, default ``HEAD``: the working tree against its last commit),
alternately (A B, B A, … ``--rounds`` times). The table gives the median wall time, its
range, and the microseconds per record: the records are the change-file records the replay
reads (every version's inserts, updates and deletes, plus its first version's keys),
counted once from the current version's JSON so both sides divide by the same number.

Data. Checkpoints real queries write (``benchmarks/bench_growth_verdicts.py``'s writer, one
JVM per provider): a saturated population of 1M keys seen 95 % with a leak of 1,000 keys a
batch (40 batches, the growth verdicts' realistic size), the same population without a leak
(16 batches), and sessions whose keys expire — on HDFS and RocksDB with changelogs. Kept in
``--workdir`` (reused when present). Not a test: nothing is asserted.

Run: ``.venv/bin/python benchmarks/bench_growth_cost.py [--workdir DIR] [--baseline REF]
[--rounds 3] [--providers hdfs,rocksdb]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_growth_verdicts as verdicts  # noqa: E402

NAMES = ("leakpop-0.1pct-uniform-1m-95-40v", "finite-1m-95", "sessions-80k")
PACKAGES = {"toolkit": "statekit", "jobs": "statekit/jobs", "tui": "statekit/tui",
            "reference_pipeline": "statekit/reference_pipeline"}
"""Where each folder of the repository lives in the installed package (pyproject.toml)."""


def baseline_tree(ref: str, into: Path) -> Path:
    """The statekit package of commit ``ref``, laid out as installed, under ``into``."""
    archive = subprocess.run(["git", "archive", ref, *PACKAGES], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        for member in tar.getmembers():
            top, _, rest = member.name.partition("/")
            if top not in PACKAGES or not member.isfile():
                continue
            target = into / PACKAGES[top] / rest
            target.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(member)
            assert extracted is not None
            target.write_bytes(extracted.read())
    return into


def timed(checkpoint: Path, pythonpath: str | None) -> tuple[float, dict]:
    """Wall seconds of ``statekit growth CKPT --json`` in a fresh process, and its JSON."""
    env = {**os.environ, "STATEKIT_DECODE_CACHE": "0"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "statekit", "growth", str(checkpoint),
                           "--json"], env=env, capture_output=True, text=True, check=False,
                          cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - started
    if not done.stdout.strip():
        raise SystemExit(f"statekit growth {checkpoint} failed: {done.stderr.strip()}")
    return seconds, json.loads(done.stdout)


def records(report: dict) -> int:
    """The change-file records the replay reads, from a growth report's histories."""
    total = 0
    for store in report["stores"]:
        versions = store["history"]["versions"]
        total += versions[0]["keys"] if versions else 0
        total += sum((v["inserts"] or 0) + (v["updates"] or 0) + (v["deletes"] or 0)
                     for v in versions[1:])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--baseline", default="HEAD")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--providers", default="hdfs,rocksdb")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="statekit-growth-cost-"))
    providers = args.providers.split(",")
    items = [w for w in verdicts.workloads() if w.name in NAMES]
    verdicts.write_checkpoints(work, items, providers)
    with tempfile.TemporaryDirectory(prefix="statekit-baseline-") as tmp:
        before = str(baseline_tree(args.baseline, Path(tmp)))
        print(f"baseline {args.baseline} in {before}; decode cache off; {args.rounds} rounds")
        print("| checkpoint | provider | records | before (median [range]) | after | "
              "before µs/record | after µs/record | after/before |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for provider in providers:
            for w in items:
                path = work / "ckpt" / provider / w.name
                runs: dict[str, list[float]] = {"before": [], "after": []}
                report: dict = {}
                for round_ in range(args.rounds):
                    order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                    for side in order:
                        seconds, data = timed(path, before if side == "before" else None)
                        runs[side].append(seconds)
                        if side == "after":
                            report = data
                count = records(report)
                b, a = statistics.median(runs["before"]), statistics.median(runs["after"])
                print(f"| {w.name} | {provider} | {count:,} | {b:.2f} s "
                      f"[{min(runs['before']):.2f}–{max(runs['before']):.2f}] | {a:.2f} s "
                      f"[{min(runs['after']):.2f}–{max(runs['after']):.2f}] | "
                      f"{b / count * 1e6:.2f} | {a / count * 1e6:.2f} | {a / b:.2f}× |",
                      flush=True)


if __name__ == "__main__":
    main()
