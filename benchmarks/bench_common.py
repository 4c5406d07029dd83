"""Plumbing the benchmarks share: waiting until a stopped query's checkpoint stops changing.

A query's state stores stay loaded after it stops, and their maintenance keeps writing
snapshots (RocksDB uploads zips) for a while; a benchmark that copies or measures a
checkpoint must wait for that to end first.
"""

from __future__ import annotations

import time
from pathlib import Path


def listing(folder: Path) -> list[tuple[str, int]]:
    """Every file below ``folder`` with its size, sorted."""
    return sorted((str(p), p.stat().st_size) for p in folder.rglob("*") if p.is_file()) \
        if folder.exists() else []


def wait_static(folder: Path, timeout: float = 30.0) -> float:
    """Wait until the folder's listing (names and sizes) stops changing; seconds waited."""
    started = time.monotonic()
    previous = None
    while time.monotonic() - started < timeout:
        current = listing(folder)
        if current == previous:
            break
        previous = current
        time.sleep(0.5)
    return time.monotonic() - started
