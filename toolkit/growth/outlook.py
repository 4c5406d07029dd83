"""When does growing state hurt? Keys and memory per executor in a day, a week, a month — and
the day the state no longer fits the executor's memory.

A verdict says *whether* the state grows; an on-call engineer next asks *when it hurts*. This
module projects each store along what its verdict found — a saturating store along its
discovery curve to its plateau, a leak at its rate on top of what it holds, any other rise at
its recent Theil–Sen slope (an accelerating one at its newest third's), a bounded store flat —
and value sizes that grow at their own slope. Batches turn into days at the recent pace of
batch time (the offsets log's timestamps, or the progress log's).

Memory is what the state takes on the busiest executor: the partitions spread evenly over
``executors``, the largest ones together on one (skew matters), and per key:

* HDFS-backed stores: the heap a loaded row takes (:func:`statekit.state.memory.bytes_per_row`,
  fitted on Spark's own ``memoryUsedBytes``), against the heap given (``--executor-memory``)
  less what Spark reserves — the figure the restart estimate's memory check uses;
* RocksDB: the key and value bytes (what its block cache / bounded memory must hold for the
  working set to stay in memory), against the memory given.

One function, :func:`outlook`, for every surface (CLI, ``--json``, metrics, the TUI chart).
Pure Python; no Spark, no files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from statekit.growth.population import keys_after
from statekit.growth.saturation import LEAK
from statekit.growth.saturation import SATURATING as FITS_A_POPULATION
from statekit.growth.trend import ACCELERATING, GROWING, INSUFFICIENT, SATURATING, Trend
from statekit.state.memory import RESERVED_HEAP_BYTES, bytes_per_row

HORIZON_DAYS = (1.0, 7.0, 30.0)
LIMIT_SEARCH_DAYS = 3650.0
"""Beyond ten years a limit is "not reached" (the projection is no forecast that far)."""


@dataclass(frozen=True)
class Horizon:
    """The state projected ``days`` ahead."""

    days: float
    batches: float | None
    """``None``: the pace of batch time is unknown (the state is shown as it is now)."""
    keys: float
    keys_per_executor: float
    bytes_per_executor: float | None
    """Memory on the busiest executor (see :class:`Outlook`'s ``memory``)."""


@dataclass(frozen=True)
class Outlook:
    """Where the state is headed, and when it no longer fits."""

    basis: str
    """What the projection follows: ``leak``, ``trend``, ``plateau``, ``flat``, or
    ``unknown`` (a store too short a history to project: held at today's size)."""
    keys_now: float
    keys_per_batch: float
    """The rate keys grow at now (a leak's rate, the trend's, or 0)."""
    keys_per_day: float | None
    batches_per_day: float | None
    provider: str
    memory: str
    """What the bytes are: ``heap`` (HDFS) or ``key and value bytes`` (RocksDB)."""
    bytes_per_key: float | None
    executors: int
    executor_share: float
    """The busiest executor's share of the keys (the largest partitions together)."""
    horizons: tuple[Horizon, ...]
    limit_bytes: float | None = None
    """The memory given per executor (``--executor-memory``)."""
    usable_bytes: float | None = None
    """What of it the state may take (HDFS: the heap less Spark's reserved memory)."""
    limit_batches: float | None = None
    limit_days: float | None = None
    """Days until the busiest executor's state reaches ``usable_bytes`` (0: already);
    ``None``: not within ten years, or unknown (see ``limit_note``)."""
    limit_at: str | None = None
    limit_note: str | None = None
    limit_keys: float | None = None
    """The state's keys (all executors) at which the busiest executor's usable memory is full,
    at today's memory per key: where the TUI draws the limit on its keys chart."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def horizon_text(self) -> str:
        """``1 d: 1.2M keys, 310 MiB · 7 d: …`` — the horizons in one line."""
        from statekit.support.presentation import human_bytes

        parts = []
        for h in self.horizons:
            size = f", {human_bytes(int(h.bytes_per_executor))}" \
                if h.bytes_per_executor is not None else ""
            parts.append(f"{h.days:g} d: {h.keys_per_executor:,.0f} keys{size}")
        return " · ".join(parts)


@dataclass(frozen=True)
class StorePath:
    """One store as the projection needs it (from its verdict and history)."""

    keys: float
    verdict: str
    """The keys' verdict (not the values')."""
    keys_trend: Trend
    saturation: Any | None
    """:class:`statekit.growth.saturation.Saturation`, when the discovery curve was fitted."""
    row_bytes: float | None
    """Key + value bytes per key now."""
    value_growth_per_batch: float
    """Bytes per key per batch that growing values add (0 when they do not grow)."""
    partition_keys: dict[int, float]
    memory_per_key: float | None = None
    """Memory per key as Spark measured it (the progress log's ``memoryUsedBytes``), used as
    is where there are no key and value bytes."""


def _key_path(store: StorePath) -> tuple[str, Callable[[float], float], float]:
    """(basis, keys after b batches, keys per batch now)."""
    sat, now = store.saturation, store.keys
    if store.verdict == SATURATING and sat is not None and sat.outcome == FITS_A_POPULATION \
            and sat.plateau and sat.events_per_batch:
        def along(b: float) -> float:
            return keys_after(now, sat.plateau, sat.skew or 0.0, sat.events_per_batch, b)
        return "plateau", along, max(0.0, along(1.0) - now)
    basis, rate = rising(store.verdict, store.keys_trend, sat)
    if basis in ("flat", "unknown"):
        return basis, lambda b: now, 0.0
    return basis, lambda b: now + rate * b, rate


def rising(verdict: str, trend: Trend, saturation: Any | None) -> tuple[str, float]:
    """(basis, keys per batch) a store whose keys' verdict is ``verdict`` rises at: a leak's
    rate where the discovery curve found one, else the trend's recent slope (an accelerating
    one's newest third); ``("flat", 0)`` when the keys do not grow. The one rate every
    surface draws (the TUI's projection too)."""
    if verdict == INSUFFICIENT:
        return "unknown", 0.0
    if verdict not in (GROWING, ACCELERATING):
        return "flat", 0.0
    if saturation is not None and saturation.outcome == LEAK and \
            saturation.leak_keys_per_batch:
        return "leak", float(saturation.leak_keys_per_batch)
    slope = trend.late_slope if verdict == ACCELERATING and trend.late_slope else trend.slope
    return "trend", max(0.0, float(slope or 0.0))


_BASIS_ORDER = ("flat", "unknown", "plateau", "trend", "leak")


def executor_share(partition_keys: dict[int, float], executors: int) -> float:
    """The busiest executor's share of the keys: the partitions spread evenly (as many per
    executor as can be), the largest together."""
    total = sum(partition_keys.values())
    if executors <= 1 or not partition_keys or total <= 0:
        return 1.0
    per = math.ceil(len(partition_keys) / executors)
    return sum(sorted(partition_keys.values(), reverse=True)[:per]) / total


def outlook(stores: Sequence[StorePath], *, provider: str, hours_per_batch: float | None,
            last_ms: int | None, executors: int = 1, limit_bytes: float | None = None
            ) -> Outlook | None:
    """The state's projection over :data:`HORIZON_DAYS` and against ``limit_bytes`` per
    executor; ``None`` without stores."""
    if not stores:
        return None
    paths = [_key_path(s) for s in stores]
    basis = max((p[0] for p in paths), key=_BASIS_ORDER.index)
    rate = sum(p[2] for p in paths)
    keys_now = sum(s.keys for s in stores)
    per_day = 24.0 / hours_per_batch if hours_per_batch and hours_per_batch > 0 else None
    merged: dict[int, float] = {}
    for s in stores:
        for partition, keys in s.partition_keys.items():
            merged[partition] = merged.get(partition, 0.0) + keys
    share = executor_share(merged, executors)
    heap = provider == "hdfs"
    measured = all(s.row_bytes is None and s.memory_per_key is not None for s in stores)
    known = measured or all(s.row_bytes is not None for s in stores)

    def state_at(b: float) -> tuple[float, float | None]:
        """(keys, memory) of the whole state after ``b`` batches."""
        keys = memory = 0.0
        for s, (_, path, _) in zip(stores, paths, strict=True):
            k = path(b)
            keys += k
            if measured:
                memory += k * (s.memory_per_key or 0.0)
            elif known:
                row = (s.row_bytes or 0.0) + s.value_growth_per_batch * b
                memory += k * (bytes_per_row("hdfs", row) if heap else row)
        return keys, memory if known else None

    horizons = []
    for days in HORIZON_DAYS:
        b = days * per_day if per_day is not None else None
        keys, memory = state_at(b or 0.0)
        horizons.append(Horizon(days, b, keys, keys * share,
                                None if memory is None else memory * share))
    now_keys, now_memory = state_at(0.0)
    result = Outlook(basis, keys_now, rate, rate * per_day if per_day is not None else None,
                     per_day, provider, "memoryUsedBytes" if measured else
                     "heap" if heap else "key and value bytes",
                     now_memory / now_keys if now_memory is not None and now_keys else None,
                     max(1, executors), share, tuple(horizons))
    if limit_bytes is None:
        return result
    usable = max(0.0, limit_bytes - RESERVED_HEAP_BYTES) if heap else float(limit_bytes)
    fields: dict[str, Any] = {"limit_bytes": float(limit_bytes), "usable_bytes": usable}
    if result.bytes_per_key:
        fields["limit_keys"] = usable / share / result.bytes_per_key
    if now_memory is None:
        fields["limit_note"] = "state sizes unknown (RocksDB zips only: keys, no bytes)"
    elif now_memory * share >= usable:
        fields.update(limit_batches=0.0, limit_days=0.0, limit_note="already over the limit")
    elif per_day is None:
        fields["limit_note"] = "the pace of batch time is unknown (no batch timestamps)"
    else:
        fields.update(_time_to(lambda b: (state_at(b)[1] or 0.0) * share, usable, per_day,
                               last_ms, basis))
    return replace(result, **fields)


def moment_after(last_ms: int | None, hours: float | None) -> str | None:
    """The ISO time ``hours`` after the last batch's timestamp (``None`` when either is
    unknown): when a projection says a limit is reached."""
    if last_ms is None or hours is None:
        return None
    return (datetime.fromtimestamp(last_ms / 1000, timezone.utc)
            + timedelta(hours=hours)).isoformat(timespec="seconds")


def _time_to(memory_at: Callable[[float], float], usable: float, per_day: float,
             last_ms: int | None, basis: str) -> dict[str, Any]:
    """Batches and days until ``memory_at`` reaches ``usable`` (bisection: it only grows)."""
    high = LIMIT_SEARCH_DAYS * per_day
    if memory_at(high) < usable:
        why = {"plateau": "levels off below it", "flat": "levels off below it",
               "unknown": "too little history to project it (insufficient-history)"}.get(
                   basis, "not within ten years at this rate")
        return {"limit_note": why}
    low = 0.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if memory_at(mid) < usable else (low, mid)
    days = high / per_day
    return {"limit_batches": high, "limit_days": days,
            "limit_at": moment_after(last_ms, days * 24)}
