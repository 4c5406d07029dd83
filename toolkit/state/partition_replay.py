"""The replay of some partitions of one store, version by version: what a worker is handed.

A store's history (:mod:`statekit.state.history`) is replayed by worker processes, a group of
partitions each, by the calling thread, or by Spark tasks (:mod:`statekit.state.workers`).
What a worker runs must be plain data and module-level code it can import — a
:class:`ReplayWork`, the :class:`Replay` plans it covers — and it sends back plain records
(:mod:`statekit.state.replay_records`). This module is that worker side, apart from the
planning and assembling of a history, which never run in a worker.

It holds the hot loop of growth analysis (:func:`_apply`), and keeps each partition's result
in the decode cache (:mod:`statekit.state.decode_cache`) as soon as it is replayed, under the
identities of the files it read (:func:`partition_keys`): forked workers keep what they
replayed, and a changed file costs its partition's replay only.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import file_records
from statekit.formats.records import StateRecord
from statekit.state.decode_cache import DecodeCache
from statekit.state.replay_records import (
    OLDEST_KEYS_SHOWN,
    Candidate,
    GroupResult,
    Partial,
    Unreplayable,
    result_json,
)
from statekit.state.replay_totals import (
    SIZE_BITS,
    TOUCH_CAP,
    TOUCH_SHIFT,
    VERSION_SHIFT,
    Accumulator,
    Merged,
    key_digest,
    touch_count,
)
from statekit.state.timeouts import TimeoutField, timeout_check
from statekit.state.workers import Progress


@dataclass
class Replay:
    """The live keys of one store instance, as digests, and the files that rebuild them.

    Plain data (no open filesystem): a worker process is handed it as it is."""

    partition: int
    base: StateFile | None
    base_version: int
    changes: dict[int, StateFile]
    live: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayWork:
    """The replay of a group of partitions (the group is the work's items), as plain data: a
    worker process is handed this, never a closure or an open filesystem."""

    first: int
    last_version: int
    start: int
    timeout: TimeoutField | None
    keys: dict[int, str] | None = None
    """Each partition's decode-cache entry, when its result is to be kept."""
    cache_root: str | None = None
    """The decode cache's folder: the caller's, whatever environment the worker process
    started with (a fork server's workers keep the server's)."""

    def __call__(self, ckpt: Checkpoint, plans: list[Replay], progress: Progress | None
                 ) -> GroupResult:
        return _replay_group(ckpt, plans, self.first, self.last_version, self.start,
                             timeout_check(self.timeout), progress, self.keys,
                             self.cache_root)


def partition_keys(cache: DecodeCache, plans: list[Replay], first: int, last_version: int,
                   start: int, timeout: TimeoutField | None) -> dict[int, str]:
    """The decode-cache entry of each partition's replay result: the identity of every file
    it reads and what else shapes the result; partitions with a file of no identity have
    none."""
    where = asdict(timeout) if timeout is not None else None
    keys = {}
    for plan in plans:
        ids = cache.identities((f.path, f.size) for f in _chain(plan, first, last_version)[1])
        if ids is not None:
            keys[plan.partition] = cache.key("replay-partition", plan.partition, first,
                                             last_version, start, where, ids)
    return keys


def _replay_group(ckpt: Checkpoint, plans: list[Replay], first: int, last_version: int,
                  start: int, no_timeout: Callable[[bytes], bool] | None,
                  progress: Progress | None = None, keys: dict[int, str] | None = None,
                  cache_root: str | None = None) -> GroupResult:
    """Replay some partitions of a store; their totals after each version ≥ ``start``.

    Partition by partition: one partition's live keys are in memory at a time (its digests
    are dropped before the next one starts), so memory is bounded by the largest partition,
    not by the store — the same bound a Spark task has. The per-version totals are summed
    across the partitions as they finish. ``keys``: the decode-cache entry of each
    partition's own result (see :func:`partition_keys`), kept as it is replayed."""
    cache = DecodeCache.of(ckpt, cache_root) if keys else None
    merged = [Merged() for _ in range(start, last_version + 1)]
    per_partition: dict[int, list[int]] = {}
    candidates: list[Candidate] = []
    touches = [0] * (TOUCH_CAP + 1)
    for done, plan in enumerate(plans, start=1):
        key = keys.get(plan.partition) if cache is not None and keys else None
        own: list[Partial] = []
        acc = Accumulator()
        counts: list[int] = []
        versions, files = _chain(plan, first, last_version)
        for version, file, records in zip(versions, files, _read_chain(ckpt, files),
                                          strict=True):
            base = file is plan.base
            _apply(plan, records, version, acc, no_timeout, base=base,
                   counted=not base and version > start)  # the discovery curve's versions
            if version >= start:
                if key is None:
                    merged[version - start].add(acc, base)
                else:  # this partition's own totals are kept too
                    own.append(acc.freeze(base))
                    merged[version - start].add_partial(own[-1])
                counts.append(len(plan.live))
            else:
                acc.inserts = acc.updates = acc.deletes = 0
        per_partition[plan.partition] = counts
        mine = heapq.nsmallest(OLDEST_KEYS_SHOWN, (
            (packed >> VERSION_SHIFT, plan.partition, digest)
            for digest, packed in plan.live.items()))  # a generator: no list of every key
        candidates = heapq.nsmallest(OLDEST_KEYS_SHOWN, itertools.chain(candidates, mine))
        own_touches = [0] * (TOUCH_CAP + 1)
        for touched, count in Counter(map(touch_count, plan.live.values())).items():
            own_touches[touched] += count
            touches[touched] += count
        plan.live.clear()
        if cache is not None and key is not None:
            cache.put(key, result_json((own, {plan.partition: counts}, mine,
                                        own_touches[1:])))
        if progress:
            progress(f"{done}/{len(plans)} partitions")
    return [m.frozen() for m in merged], per_partition, candidates, touches[1:]


def _chain(plan: Replay, first: int, last_version: int
           ) -> tuple[range, list[StateFile]]:
    """The versions a partition's replay goes through and the file it reads for each: from
    its base (or version 1 when replaying from empty), never before ``first``."""
    versions = range(max(first, plan.base_version), last_version + 1)
    return versions, [plan.base if plan.base is not None and v == plan.base_version
                      else plan.changes[v] for v in versions]


def _apply(rep: Replay, records: Iterable[StateRecord], version: int, acc: Accumulator,
           no_timeout: Callable[[bytes], bool] | None, *, base: bool, counted: bool = False
           ) -> None:
    """Apply one file's records. The hot loop of the replay: packed integers and local
    counters instead of objects and method calls (about 3x faster). ``counted``: the version
    is in the touch-count window — a key it inserts starts at one touch, a counted key it
    writes again gains one (up to ``TOUCH_CAP``); keys from before the window keep 0
    (unknown)."""
    live, sizes, changed, digest_of = rep.live, acc.sizes, acc.changed_at, key_digest
    shift, mask = VERSION_SHIFT, (1 << SIZE_BITS) - 1
    stamp = version << shift
    one = (1 << TOUCH_SHIFT) if counted else 0
    touch_field = TOUCH_CAP << TOUCH_SHIFT
    keys = size_sum = unset = inserts = updates = deletes = now = 0
    for record in records:
        key = record.key
        digest = digest_of(key)
        old = live.get(digest)
        if old is not None:
            old_size = (old >> 1) & mask
            sizes[old_size] -= 1
            if old >> shift == version:
                now -= 1
            else:
                changed[old >> shift] -= 1
            keys -= 1
            size_sum -= len(key) + old_size
            unset -= old & 1
        op = record.op
        if op == "put":
            value = record.value or b""
            size = len(value)
            flag = 1 if no_timeout is not None and no_timeout(value) else 0
            if old is None:
                touched = one
            else:
                touched = old & touch_field
                if touched and one and touched != touch_field:
                    touched += one
            live[digest] = stamp | touched | (size << 1) | flag
            sizes[size] = sizes.get(size, 0) + 1
            now += 1
            keys += 1
            size_sum += len(key) + size
            unset += flag
            if old is None:
                inserts += 1
            else:
                updates += 1
        elif op == "delete":
            if old is not None:
                del live[digest]
            deletes += 1
        else:
            raise Unreplayable(f"{op} records (list state)")
    changed[version] = changed.get(version, 0) + now
    acc.keys += keys
    acc.bytes += size_sum
    acc.no_timeout += unset
    acc.deletes += deletes
    if not base:
        acc.inserts += inserts
        acc.updates += updates


#: On object stores a partition's chain is fetched this many files at a time (concurrently).
_FETCH_BATCH = 32


def _read_chain(ckpt: Checkpoint, files: list[StateFile]) -> Iterator[Iterator[StateRecord]]:
    """Each file's records, in order. On object stores the files are fetched concurrently,
    ``_FETCH_BATCH`` at a time (memory: that many files, never the whole chain)."""
    if ckpt.location.is_local:
        for file in files:
            yield file_records(ckpt, file, check_end=False)
        return
    for at in range(0, len(files), _FETCH_BATCH):
        batch = files[at:at + _FETCH_BATCH]
        data = ckpt.read_many(f.path for f in batch)
        for file in batch:
            yield file_records(ckpt, file, data[file.path], check_end=False)
