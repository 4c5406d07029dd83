"""Benchmark: how fast ``statekit tui`` shows its first screen on a 200-partition checkpoint.

The question: does the Overview appear in under 1.5 s on a 200-partition checkpoint, with
no JVM? The checkpoint is the one ``bench_report.py`` builds:
a small real checkpoint written by the reference pipeline with Spark (setup, not measured),
synthesised into 200 partitions × 100 retained versions from those real files (~44,000 files
with their ``.crc`` for HDFS).

Measured, in a fresh Python process per repeat that starts the way ``statekit tui`` does
(open the checkpoint, start building the first snapshot in a thread, then import and start
the app; imports count; Textual runs headless through ``App.run_test``, which renders like a
terminal of 160 × 48): from the process's first line
to the moment the Overview holds the loaded report (the title shows the query id and the
findings table is filled), and separately the time of ``load_snapshot`` alone. The best and
the median of ``--repeats`` are printed. The machine's page cache is warm after the first
repeat, as it would be for an engineer who has just listed the folder.

Run: ``.venv/bin/python benchmarks/bench_tui.py [--partitions 200] [--versions 100]
[--repeats 5] [--provider hdfs|rocksdb]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_report import make_template, synthesize  # noqa: E402

CHILD = r"""
import time
started = time.perf_counter()
import asyncio, json, sys
from statekit.checkpoint import open_checkpoint
from statekit.tui.model import snapshot_in_background
options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
# as `statekit tui` does: open the checkpoint, start the first snapshot, then load the app
first = snapshot_in_background(sys.argv[1], options,
                               opened=open_checkpoint(sys.argv[1], options))
from statekit.tui.app import StatekitApp
from statekit.tui.panes.overview import OverviewPane
imported = time.perf_counter()

async def main():
    app = StatekitApp(sys.argv[1], storage_options=options, first=first)
    async with app.run_test(size=(160, 48)) as pilot:
        while True:
            await pilot.pause()
            pane = app.query_one(OverviewPane)
            if app.snapshot is not None and pane.table.row_count:
                break
            await asyncio.sleep(0.005)
        shown = time.perf_counter()
        return app.snapshot.seconds, shown, "pyspark" in sys.modules

load_s, shown, jvm = asyncio.run(main())
print(json.dumps({"first_screen_s": shown - started, "imports_s": imported - started,
                  "load_snapshot_s": load_s, "pyspark_imported": jvm}))
"""


def first_screen(checkpoint: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(checkpoint)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--provider", choices=("hdfs", "rocksdb"), default="hdfs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    try:
        template = make_template(work, args.provider)
        big = synthesize(template, work / "big", args.partitions, args.versions)
        files = sum(1 for p in (big / "state").rglob("*") if p.is_file())
        runs = [first_screen(big) for _ in range(args.repeats)]
        firsts = [r["first_screen_s"] for r in runs]
        loads = [r["load_snapshot_s"] for r in runs]
        imports = [r["imports_s"] for r in runs]
        print(f"\n{args.provider}: {args.partitions} partitions × {args.versions} versions, "
              f"{files:,} files under state/; {args.repeats} fresh processes\n")
        print("| measure | best | median |")
        print("|---|---:|---:|")
        for name, values in (("first screen (process start → Overview filled)", firsts),
                             ("of which imports (textual, toolkit)", imports),
                             ("of which load_snapshot (listing + report + batches)", loads)):
            print(f"| {name} | {min(values):.2f} s | {statistics.median(values):.2f} s |")
        print(f"\npyspark imported: {any(r['pyspark_imported'] for r in runs)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
