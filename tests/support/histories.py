"""Replayed store histories of simulated key streams, for growth verdicts without a checkpoint.

Lives here rather than in a test module because the growth-saturation tests and the TUI's
Growth chart test both draw on ``finite`` populations turned into histories by ``history_of``.
"""

from __future__ import annotations

import numpy as np

from statekit.state.history import TOUCH_CAP, StoreHistory, VersionStats


def history_of(batches: list[np.ndarray], key_bytes: int = 40) -> StoreHistory:
    """A keyed aggregation's replayed history: one version per batch, no removals; touch
    counts as the replay keeps them (keys first written after the first version)."""
    seen: set[int] = set()
    touches: dict[int, int] = {}
    versions = []
    for version, keys in enumerate(batches, start=1):
        touched = set(np.unique(keys).tolist())
        new = touched - seen
        seen |= touched
        for key in touched:
            if key in touches:
                touches[key] += 1
            elif version > 1 and key in new:
                touches[key] = 1
        versions.append(VersionStats(
            version, len(seen), len(seen) * key_bytes, None,
            len(new) if version > 1 else None, len(touched - new) if version > 1 else None,
            0 if version > 1 else None, 24.0, 24, 24, 24, 24, version - 1, 0, None))
    keys = tuple(v.keys for v in versions)
    counts = [0] * TOUCH_CAP
    for count in touches.values():
        counts[min(count, TOUCH_CAP) - 1] += 1
    return StoreHistory(0, "default", "aggregate", "replay", (0,), tuple(versions), {0: keys},
                        "n/a", 3, None, touch_counts=tuple(counts))


def finite(population: int, per_batch: int, batches: int = 16) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.integers(0, population, per_batch) for _ in range(batches)]


MINUTE_MS = 60_000


def saturated_with_leak(leak: int, population: int = 100_000, batches: int = 16,
                        per_batch: int = 60_000, seed: int = 58) -> list[np.ndarray]:
    """A keyed aggregation whose keys never expire: a population all but fully seen within
    a few batches, plus ``leak`` brand-new keys every batch."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(batches):
        fresh = np.arange(10**9 + b * leak, 10**9 + (b + 1) * leak)
        out.append(np.concatenate([rng.integers(0, population, per_batch), fresh]))
    return out


def one_a_minute(versions: int) -> dict[int, int | None]:
    return {v: 1_700_000_000_000 + v * MINUTE_MS for v in range(1, versions + 1)}
