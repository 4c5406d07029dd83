"""Benchmark: how fast the fleet list (``statekit tui CKPT CKPT…``) shows N local checkpoints.

The question: an SRE opens the dashboard over every checkpoint they own — how long until the
first row is on screen, until every checkpoint has its row (the doctor's verdict, keys,
bytes, snapshot lag, last batch), and until every row is complete (growth verdict and
restart estimate)? Measured twice: through :func:`statekit.fleet.readings.read_fleet` alone, and on
screen, in the headless Textual app (what a user sees, rendering included).

Data: ``--count`` copies (default 50) of the repository's real checkpoints, dealt round-robin
— the 15 golden ones (Spark 3.5/4.0/4.1, both providers, five operators) and the TUI
fixture (the reference pipeline, 8 partitions, 36 batches: the slowest to analyse) — copied
into a temporary folder so that every path is distinct (no cache can help).

    python benchmarks/bench_fleet.py --count 50
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def make_fleet(work: Path, count: int) -> list[str]:
    sources = [*sorted((DATA / "golden").glob("spark-*/*/checkpoint")),
               DATA / "tui" / "reference_hdfs"]
    urls = []
    for n in range(count):
        target = work / f"ckpt-{n:03d}"
        shutil.copytree(sources[n % len(sources)], target)
        urls.append(str(target))
    return urls


def direct(urls: list[str]) -> dict[str, float]:
    from statekit.fleet.readings import read_fleet

    started = time.perf_counter()
    first: list[float] = []
    listed: set[int] = set()
    at: dict[str, float] = {}

    def arrived(index: int, row) -> None:
        now = time.perf_counter() - started
        if not first:
            first.append(now)
        listed.add(index)
        if len(listed) == len(urls) and "listed" not in at:
            at["listed"] = now

    read_fleet(urls, cores=2, on_row=arrived)
    return {"first": first[0], "listed": at["listed"],
            "complete": time.perf_counter() - started}


async def on_screen(urls: list[str]) -> dict[str, float]:
    from statekit.tui.app import StatekitApp
    from statekit.tui.fleet_screen import FleetScreen

    app = StatekitApp(urls[0], cores=2, fleet=urls)
    async with app.run_test(size=(200, 60)) as pilot:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            screen = app.screen
            if isinstance(screen, FleetScreen) and screen.last_row_s is not None:
                return {"first": screen.first_row_s or 0.0, "listed": screen.listed_s or 0.0,
                        "complete": screen.last_row_s}
            await pilot.pause(0.05)
    raise RuntimeError("the fleet list never completed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as folder:
        urls = make_fleet(Path(folder), options.count)
        direct(urls[:2])  # imports, once
        results = {"read_fleet": [direct(urls) for _ in range(options.repeats)],
                   "on screen (TUI)": [asyncio.run(on_screen(urls))
                                       for _ in range(options.repeats)]}
    print(f"{options.count} local checkpoints, median of {options.repeats} runs (s)")
    print()
    print("| path | first row | every checkpoint listed | every row complete |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        cells = [statistics.median(run[key] for run in runs)
                 for key in ("first", "listed", "complete")]
        print(f"| {name} | " + " | ".join(f"{value:.2f}" for value in cells) + " |")


if __name__ == "__main__":
    main()
