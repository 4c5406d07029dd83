"""``statekit doctor`` on the 200-partition benchmark checkpoint, against an earlier revision.

The doctor must stay cheap as it learns new checks (the witnesses of content that decodes
cleanly: a copy of another version's file, the query's progress reports against the
offsets). This times a fresh ``statekit doctor --json`` process — decode cache off, every
run a cold read — on the checkpoint ``bench_report.py`` synthesises (200 partitions × 100
retained versions of real HDFS delta and snapshot files, built JVM-free from the frozen
``make demo`` checkpoint), healthy and with a state file replaced by another version's,
for the working tree and for ``--baseline REV`` (the code of that revision, from ``git
archive``). Runs alternate between the two so a busy machine slows both alike.

Run::

    .venv/bin/python benchmarks/bench_doctor.py [--baseline 9bd22b6] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def code_at(revision: str, into: Path) -> Path:
    """A folder whose ``statekit`` package is ``toolkit/`` at ``revision``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "toolkit"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "statekit").symlink_to(into / "toolkit")
    return into


def doctor_seconds(checkpoint: Path, code: Path | None) -> tuple[float, int]:
    env = {**os.environ, "STATEKIT_DECODE_CACHE": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "statekit", "doctor", str(checkpoint),
                           "--json"], capture_output=True, env=env, cwd=tempfile.gettempdir())
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default=None, help="git revision to compare with")
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from tests.support.scripts import load_script

    synthesize = load_script("benchmarks/bench_report.py").synthesize
    work = Path(tempfile.mkdtemp(prefix="bench-doctor-"))
    try:
        healthy = synthesize(ROOT / "tests/data/demo/checkpoint", work / "healthy",
                             args.partitions, args.versions)
        copied = work / "copied"
        shutil.copytree(healthy, copied)
        folder = copied / "state/0/0"
        newest = max(int(p.stem) for p in folder.glob("*.delta"))
        for snapshot in (folder / f"{newest}.snapshot", folder / f".{newest}.snapshot.crc"):
            snapshot.unlink(missing_ok=True)  # so the restart replays the copied delta
        shutil.copyfile(folder / f"{newest - 1}.delta", folder / f"{newest}.delta")
        later = (copied / "commits" / str(newest - 1)).stat().st_mtime + 10
        os.utime(folder / f"{newest}.delta", (later, later))  # copied after the batch ran
        codes = {"working tree": None}
        if args.baseline:
            codes[args.baseline] = code_at(args.baseline, Path(tempfile.mkdtemp(
                prefix="bench-doctor-code-", dir=work)))
        times: dict[tuple[str, str], list[float]] = {}
        exits: dict[tuple[str, str], int] = {}
        for _ in range(args.repeats):
            for case, checkpoint in (("healthy", healthy), ("a delta copied", copied)):
                for name, code in codes.items():
                    seconds, exit_code = doctor_seconds(checkpoint, code)
                    times.setdefault((case, name), []).append(seconds)
                    exits[(case, name)] = exit_code
        print(f"statekit doctor --json, cold process, decode cache off: {args.partitions} "
              f"partitions × {args.versions} versions (HDFS), best / median of "
              f"{args.repeats}")
        print(f"{'checkpoint':16} {'code':14} {'best':>7} {'median':>7} {'exit':>5}")
        for (case, name), values in times.items():
            print(f"{case:16} {name:14} {min(values):6.2f}s {statistics.median(values):6.2f}s "
                  f"{exits[(case, name)]:>5}")
        if args.baseline:
            for case in ("healthy", "a delta copied"):
                now = min(times[(case, "working tree")])
                before = min(times[(case, args.baseline)])
                print(f"{case}: {now / before:.2f}× the baseline's time")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
