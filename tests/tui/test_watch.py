"""``--watch``: a running query's checkpoint grows under the open app, and the app follows.

The "running query" is replayed from the frozen reference checkpoint (tests/data/tui): the app
opens a copy holding only the first batches, then the later batches' files arrive in the order
Spark writes them (state files, offsets, commits) while the watch timer re-reads the folder.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from statekit.tui.app import StatekitApp
from statekit.tui.chart_widget import Chart
from statekit.tui.panes.batches import BatchesPane
from statekit.tui.panes.growth import GrowthPane
from tests.tui.helpers import until

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "tui" / "reference_hdfs"
FIRST = 7  # batches 0..6 at the start: state versions 1..7


def _later(path: Path) -> bool:
    """Files of batches ≥ FIRST (state versions > FIRST) in the fixture."""
    rel = path.relative_to(FIXTURE)
    number = path.name.lstrip(".").split(".")[0]
    if not number.isdigit():
        return False
    if rel.parts[0] in ("offsets", "commits"):
        return int(number) >= FIRST
    return rel.parts[0] == "state" and int(number) > FIRST


def test_watch_shows_new_batches_and_extends_the_growth_chart(tmp_path):
    later = sorted((p for p in FIXTURE.rglob("*") if p.is_file() and _later(p)),
                   key=lambda p: (p.parts[len(FIXTURE.parts)] != "state",
                                  p.parts[len(FIXTURE.parts)] == "commits", str(p)))
    target = tmp_path / "checkpoint"
    shutil.copytree(FIXTURE, target, ignore=lambda folder, names: [
        n for n in names if (Path(folder) / n).is_file() and _later(Path(folder) / n)])

    async def scenario():
        app = StatekitApp(str(target), watch=0.5, cores=2)
        async with app.run_test(size=(120, 36)) as pilot:

            await until(pilot, lambda: app.snapshot is not None, "the first load")
            await pilot.press("4")
            growth = app.query_one(GrowthPane)
            await until(pilot, lambda: growth.result is not None, "the growth analysis")
            first_versions = len(growth.result.stores[0].history.versions)
            first_chart = list(growth.query_one("#growth-keys", Chart).spec.series[0].y)
            assert first_versions == FIRST and len(first_chart) == FIRST
            assert app.query_one(BatchesPane).table.row_count == FIRST

            for path in later:  # the query runs on: state files, then offsets, then commits
                copy = target / path.relative_to(FIXTURE)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy)

            await until(pilot, lambda: app.snapshot.timeline.last_committed == 11, "batch 11")
            await until(pilot, lambda: growth.result is not None and
                        len(growth.result.stores[0].history.versions) == 12,
                        "the growth chart extended to version 12")
            chart = list(growth.query_one("#growth-keys", Chart).spec.series[0].y)
            assert len(chart) == 12 and chart[:FIRST] == first_chart
            assert app.query_one(BatchesPane).table.row_count == 12

    asyncio.run(scenario())


def test_a_watch_faster_than_the_fleet_reads_never_stacks_readings(tmp_path, monkeypatch):
    """``--watch`` ticking every half second over a fleet that takes seconds to read (a
    checkpoint behind an S3 server that answers each request after 60 ms): one reading of
    the fleet runs at a time — a thread cannot be stopped, so a reading started per tick
    would pile up threads and read each checkpoint several times at once."""
    import json
    import subprocess
    import sys
    import threading

    from statekit.tui import fleet_screen
    from statekit.tui.fleet_screen import FleetScreen

    lock, now, most, calls = threading.Lock(), [0], [0], [0]
    real = fleet_screen.read_fleet

    def counted(*args, **kwargs):  # the real reading, its concurrency counted
        with lock:
            now[0] += 1
            calls[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(fleet_screen, "read_fleet", counted)

    served = tmp_path / "bucket"
    small = FIXTURE.parents[1] / "golden" / "spark-4.1.4" / "aggregation_hdfs" / "checkpoint"
    shutil.copytree(small, served / "ck")
    local = tmp_path / "local"
    shutil.copytree(FIXTURE, local)
    slow = subprocess.Popen([sys.executable, "-m", "tests.s3_lite", "--root", str(served),
                             "--bucket", "slow", "--latency-ms", "60"],
                            stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])

    async def scenario(endpoint: str) -> None:
        per_url = {"s3://slow/ck": {"endpoint_url": endpoint, "key": "k", "secret": "s"}}
        app = StatekitApp(str(local), cores=1, fleet=[str(local), *per_url],
                          fleet_options=per_url, timeout_s=60, watch=0.5)
        async with app.run_test(size=(160, 40)) as pilot:
            assert isinstance(app.get_screen("fleet"), FleetScreen)
            for _ in range(20):  # 10 s: 20 ticks
                await asyncio.sleep(0.5)
                await pilot.pause()

    try:
        assert slow.stdout is not None
        endpoint = json.loads(slow.stdout.readline())["endpoint"]
        asyncio.run(scenario(endpoint))
    finally:
        slow.terminate()
        slow.wait(timeout=20)
    assert most[0] == 1  # one reading of the fleet at a time, however many ticks
    assert calls[0] >= 2  # and read again when one ended
