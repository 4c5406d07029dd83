"""The records a growth replay exchanges between worker processes and keeps in the decode cache.

A store's replay (:mod:`statekit.state.history`) is shared among worker processes, a group of
partitions each (:mod:`statekit.state.partition_replay`), and what it finds outlives the call:
each partition's result and the merged store are kept in the decode cache
(:mod:`statekit.state.decode_cache`), so that an unchanged checkpoint is not replayed again.
What crosses a process boundary or goes to disk is therefore plain data (tuples, dicts,
frozen dataclasses that pickle as they are), and this module holds those records and their
JSON forms in one place, below every module that makes or reads them: the worker side, the
RocksDB zip history (:mod:`statekit.state.zip_history`) and the assembling of a history share
them without importing each other.

Each ``…_of`` converter reads back what its ``…_json`` wrote; a kept entry that does not read
(another release's, or damaged) comes back as ``None``: a miss, never an error.
"""

from __future__ import annotations

import itertools
from dataclasses import astuple, dataclass
from typing import Any

OLDEST_KEYS_SHOWN = 5
"""How many of the least recently changed live keys a history shows (and each group of
partitions sends back as candidates)."""


class Unreplayable(Exception):
    """Records a replay cannot apply (list state): the store's history falls back to its
    zips' counts, if it has zips."""


@dataclass(frozen=True)
class VersionStats:
    """One store (all partitions together) right after one version."""

    version: int
    keys: int
    bytes: int | None
    """Key + value bytes of the live keys (logical, uncompressed); None when not replayed."""
    disk_bytes: int | None = None
    """RocksDB: bytes of the SST files the version's zips reference."""
    inserts: int | None = None
    updates: int | None = None
    deletes: int | None = None
    value_mean: float | None = None
    value_p50: int | None = None
    value_p90: int | None = None
    value_p99: int | None = None
    value_max: int | None = None
    oldest_age: int | None = None
    """Versions since the least recently changed live key last changed."""
    untouched: int | None = None
    """Live keys unchanged for at least ``stale_after`` versions."""
    no_timeout: int | None = None
    """Live keys without a timeout (timeout-capable operators only)."""


@dataclass(frozen=True)
class Partial:
    """One group of partitions right after one version (merged across groups by
    :func:`statekit.state.replay_totals.version_stats`)."""

    keys: int
    bytes: int
    no_timeout: int
    inserts: int
    updates: int
    deletes: int
    sizes: dict[int, int]
    changed_at: dict[int, int]
    base_loaded: bool


Candidate = tuple[int, int, int]
"""A possibly oldest live key: (version it last changed, partition, digest)."""
GroupResult = tuple[list[Partial], dict[int, list[int]], list[Candidate], list[int]]
"""One group's totals after each version, live keys per partition, oldest-key candidates,
touch counts (see :attr:`statekit.state.history.StoreHistory.touch_counts`)."""
MergedReplay = tuple[tuple[VersionStats, ...], dict[int, tuple[int, ...]], tuple[int, ...],
                     list[Candidate], dict[int, tuple[bytes, bytes]]]
"""A store's merged replay: versions, keys per partition, touch counts, oldest-key candidates
and their bytes."""
ZipKept = tuple[tuple[VersionStats, ...], dict[int, tuple[int, ...]], int, int | None,
                tuple[str, ...], list[tuple[int, bytes, bytes]], str | None]
"""A RocksDB store's history from its zips: versions, keys per partition, stale-after, the
first version of the contents, notes, unchanged keys' bytes, and what did not read (only a
history that read whole is kept in the decode cache)."""


def partial_json(part: Partial) -> list[Any]:
    return [part.keys, part.bytes, part.no_timeout, part.inserts, part.updates, part.deletes,
            part.base_loaded, list(itertools.chain.from_iterable(part.sizes.items())),
            list(itertools.chain.from_iterable(part.changed_at.items()))]


def partial_of(data: list[Any]) -> Partial:
    keys, size, no_timeout, inserts, updates, deletes, base, sizes, changed = data
    return Partial(keys, size, no_timeout, inserts, updates, deletes,
                   dict(zip(sizes[::2], sizes[1::2], strict=True)),
                   dict(zip(changed[::2], changed[1::2], strict=True)), bool(base))


def result_json(result: GroupResult) -> dict[str, Any]:
    partials, counts, candidates, touches = result
    return {"partials": [partial_json(p) for p in partials],
            "counts": [[p, c] for p, c in counts.items()],
            "candidates": [list(c) for c in candidates], "touches": touches}


def result_of(data: Any) -> GroupResult | None:
    """A kept partition result (``None``: none, or it does not read)."""
    try:
        return ([partial_of(p) for p in data["partials"]],
                {int(p): list(c) for p, c in data["counts"]},
                [(int(v), int(p), int(d)) for v, p, d in data["candidates"]],
                [int(t) for t in data["touches"]])
    except (TypeError, KeyError, ValueError):
        return None


def merged_json(kept: MergedReplay) -> dict[str, Any]:
    versions, per_partition, touch_counts, candidates, found = kept
    return {"versions": [list(astuple(v)) for v in versions],
            "partitions": [[p, list(c)] for p, c in per_partition.items()],
            "touches": list(touch_counts), "candidates": [list(c) for c in candidates],
            "found": [[d, k.hex(), v.hex()] for d, (k, v) in found.items()]}


def merged_of(data: Any) -> MergedReplay | None:
    """A kept store history (``None``: none, or it does not read)."""
    try:
        return (tuple(VersionStats(*v) for v in data["versions"]),
                {int(p): tuple(c) for p, c in data["partitions"]},
                tuple(int(t) for t in data["touches"]),
                [(int(v), int(p), int(d)) for v, p, d in data["candidates"]],
                {int(d): (bytes.fromhex(k), bytes.fromhex(v)) for d, k, v in data["found"]})
    except (TypeError, KeyError, ValueError):
        return None


def zip_kept_json(kept: ZipKept) -> dict[str, Any]:
    versions, per_partition, stale, first, notes, unchanged, _ = kept
    return {"versions": [list(astuple(v)) for v in versions],
            "partitions": [[p, list(c)] for p, c in per_partition.items()], "stale": stale,
            "first": first, "notes": list(notes),
            "unchanged": [[p, k.hex(), v.hex()] for p, k, v in unchanged]}


def zip_kept_of(data: Any) -> ZipKept | None:
    """A kept RocksDB history (``None``: none, or it does not read)."""
    try:
        return (tuple(VersionStats(*v) for v in data["versions"]),
                {int(p): tuple(c) for p, c in data["partitions"]}, int(data["stale"]),
                None if data["first"] is None else int(data["first"]),
                tuple(str(n) for n in data["notes"]),
                [(int(p), bytes.fromhex(k), bytes.fromhex(v)) for p, k, v in data["unchanged"]],
                None)
    except (TypeError, KeyError, ValueError):
        return None
