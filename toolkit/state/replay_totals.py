"""Live keys packed in one integer each, and the per-version totals they add up to.

Two readings of a store count the same statistics: the replay of its change files
(:mod:`statekit.state.partition_replay`) and the comparison of a RocksDB store's first and
last zips (:mod:`statekit.state.zip_history`); the history merges the totals of groups of
partitions into one :class:`~statekit.state.replay_records.VersionStats` the same way for
both (:func:`version_stats`). So the counting lives here, once, below both.

It is built for memory and speed: a live key is a 64-bit xxh3 digest mapped to one packed
integer (version last changed, touches, value size, no-timeout bit) — about 100 bytes per
key — and what crosses partitions is histograms of sizes and of last-change versions, so
percentiles and key ages cost nothing per key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import xxhash

from statekit.state.replay_records import Partial, VersionStats

key_digest = xxhash.xxh3_64_intdigest
"""A key's (or a record's) 64-bit digest: what a live key is held as."""
SIZE_BITS = 32
_TOUCH_BITS = 4
TOUCH_CAP = (1 << _TOUCH_BITS) - 1
"""Touch counts stop here: a key touched in this many versions or more counts as this many."""
TOUCH_SHIFT = SIZE_BITS + 1
VERSION_SHIFT = TOUCH_SHIFT + _TOUCH_BITS
# a live key, packed in one int: [version last changed | touches | value size | no timeout]


def pack(version: int, size: int, no_timeout: bool) -> int:
    return (version << VERSION_SHIFT) | (size << 1) | int(no_timeout)


def _unpack(packed: int) -> tuple[int, int, bool]:
    return packed >> VERSION_SHIFT, (packed >> 1) & ((1 << SIZE_BITS) - 1), bool(packed & 1)


def touch_count(packed: int) -> int:
    return (packed >> TOUCH_SHIFT) & TOUCH_CAP


@dataclass
class Accumulator:
    """Running totals of one store across partitions, updated record by record.

    ``sizes`` (value size → keys) and ``changed_at`` (version → keys last changed then) are
    plain dicts that may hold zero counts between snapshots (cheaper than deleting in the hot
    loop); :meth:`snapshot` drops them.
    """

    sizes: dict[int, int] = field(default_factory=dict)
    changed_at: dict[int, int] = field(default_factory=dict)
    keys: int = 0
    bytes: int = 0
    no_timeout: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0

    def add(self, packed: int, key_len: int) -> None:
        version, size, nt = _unpack(packed)
        self.sizes[size] = self.sizes.get(size, 0) + 1
        self.changed_at[version] = self.changed_at.get(version, 0) + 1
        self.keys += 1
        self.bytes += key_len + size
        self.no_timeout += nt

    def freeze(self, base_loaded: bool) -> Partial:
        """This group's totals after a version; churn counters restart for the next one."""
        self.sizes = {k: c for k, c in self.sizes.items() if c}
        self.changed_at = {k: c for k, c in self.changed_at.items() if c}
        partial = Partial(self.keys, self.bytes, self.no_timeout, self.inserts, self.updates,
                          self.deletes, dict(self.sizes), dict(self.changed_at), base_loaded)
        self.inserts = self.updates = self.deletes = 0
        return partial

    def snapshot(self, version: int, stale_after: int, timeouts: bool) -> VersionStats:
        return version_stats(version, [self.freeze(False)], stale_after, timeouts)


class Merged:
    """The running totals of several partitions' accumulators at one version."""

    def __init__(self) -> None:
        self.total = Accumulator()
        self.base_loaded = False

    def add(self, acc: Accumulator, base_loaded: bool) -> None:
        """Add one partition's totals at this version; its churn counters restart."""
        self._sum(acc, base_loaded)
        acc.inserts = acc.updates = acc.deletes = 0

    def add_partial(self, part: Partial) -> None:
        """Add one partition's frozen totals at this version (:meth:`add`, kept)."""
        self._sum(part, part.base_loaded)

    def _sum(self, part: Accumulator | Partial, base_loaded: bool) -> None:
        total = self.total
        add_counts(total.sizes, part.sizes)
        add_counts(total.changed_at, part.changed_at)
        total.keys += part.keys
        total.bytes += part.bytes
        total.no_timeout += part.no_timeout
        total.inserts += part.inserts
        total.updates += part.updates
        total.deletes += part.deletes
        self.base_loaded = self.base_loaded or base_loaded

    def frozen(self) -> Partial:
        return self.total.freeze(self.base_loaded)


def version_stats(version: int, parts: list[Partial], stale_after: int, timeouts: bool
                  ) -> VersionStats:
    """The store at ``version``, from the totals of every group of its partitions."""
    keys = sum(p.keys for p in parts)
    sizes: dict[int, int] = {}
    changed: dict[int, int] = {}
    for part in parts:
        add_counts(sizes, part.sizes)
        add_counts(changed, part.changed_at)
    p50 = p90 = p99 = top = None
    mean = None
    if keys:
        ordered = sorted(sizes.items())
        marks = {q: max(1, -(-keys * q // 100)) for q in (50, 90, 99)}
        found: dict[int, int] = {}
        seen = 0
        for size, count in ordered:
            seen += count
            for q, mark in marks.items():
                if q not in found and seen >= mark:
                    found[q] = size
        p50, p90, p99 = found[50], found[90], found[99]
        top = ordered[-1][0]
        mean = sum(s * c for s, c in ordered) / keys
    oldest = version - min(changed) if changed else None
    untouched = sum(c for v, c in changed.items() if v <= version - stale_after)
    churn_known = not any(p.base_loaded for p in parts)  # a snapshot load is not churn
    return VersionStats(
        version, keys, sum(p.bytes for p in parts), None,
        sum(p.inserts for p in parts) if churn_known else None,
        sum(p.updates for p in parts) if churn_known else None,
        sum(p.deletes for p in parts) if churn_known else None,
        mean, p50, p90, p99, top, oldest, untouched,
        sum(p.no_timeout for p in parts) if timeouts else None)


def add_counts(into: dict[int, int], counts: dict[int, int]) -> None:
    """Add a histogram (value → keys) into another; zero counts are skipped."""
    for value, count in counts.items():
        if count:
            into[value] = into.get(value, 0) + count
