"""A RocksDB store's history from its zips, for a store whose change files do not replay.

A RocksDB store without changelog checkpointing (or whose changelog chain has a gap, or
records a replay cannot apply) has nothing to replay forward: each version is a zip listing
the SST files of the whole state. The zips' small metadata still record every version's
``numKeys`` and the SSTs it references, so the history (:mod:`statekit.state.history`) gets
exact counts and disk bytes per version at the cost of reading metadata only. Contents (value
sizes, timeouts, unchanged keys) come from the SSTs of the first and the last version only,
a key counting as unchanged when its bytes are identical in both: reading every version's
SSTs would cost the whole state per version. No churn comes from zips, and key ages only
as far as "unchanged since the first version".

A history that read whole is kept in the decode cache (:mod:`statekit.state.decode_cache`)
under the identity of every zip and SST it could have read; one with a zip or SST that did
not read is not kept, since the file may read the next time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import file_records, readable_zip_metadata
from statekit.state.decode_cache import DecodeCache
from statekit.state.replay_records import (
    OLDEST_KEYS_SHOWN,
    Partial,
    Unreplayable,
    VersionStats,
    ZipKept,
    zip_kept_json,
    zip_kept_of,
)
from statekit.state.replay_totals import Accumulator, key_digest, pack, version_stats
from statekit.state.timeouts import TimeoutField, timeout_check
from statekit.state.workers import GroupRunner, Progress, map_groups
from statekit.support.errors import StatekitError


def history_from_zips(ckpt: Checkpoint, instances: list[StoreInstance], last_version: int,
                      timeouts: str, timeout: TimeoutField | None, stale_after: int | None,
                      runner: GroupRunner | None = None) -> ZipKept:
    """Counts from every version's zip metadata; contents (value sizes, timeouts, unchanged
    keys) from the SSTs of the first and last version only — reading every version's SSTs
    would cost the whole state per version. From the decode cache when every zip and SST
    is the one read before (a history that read whole; not with a runner)."""
    zips = {i.partition: {f.version: f for f in i.of_kind("zip")
                          if f.version is not None and f.version <= last_version}
            for i in instances}
    cache = DecodeCache.of(ckpt) if runner is None else None
    key = None
    if cache is not None:
        ids = cache.identities([(f.path, f.size) for p in sorted(zips) for f in
                                zips[p].values()] +
                               [(f.path, f.size) for i in instances for f in i.of_kind("sst")])
        key = cache.key("zip-history", last_version, stale_after, timeouts,
                        asdict(timeout) if timeout is not None else None, ids) \
            if ids is not None else None
    kept = zip_kept_of(cache.get(key)) if cache is not None and key else None
    if kept is None:
        kept, whole = _zip_history(ckpt, zips, last_version, timeouts, timeout, stale_after,
                                   runner)
        if cache is not None and key and whole:
            cache.put(key, zip_kept_json(kept))
    return kept


def _zip_history(ckpt: Checkpoint, zips: dict[int, dict[int, StateFile]], last_version: int,
                 timeouts: str, timeout: TimeoutField | None, stale_after: int | None,
                 runner: GroupRunner | None) -> tuple[ZipKept, bool]:
    """The history and whether it read whole (what the decode cache keeps: a zip or SST
    that did not read may read the next time)."""
    common = sorted(set.intersection(*(set(z) for z in zips.values()))) if zips else []
    wanted = [zips[p][v] for p in zips for v in common]
    metadata = readable_zip_metadata(ckpt, wanted)
    notes: list[str] = []
    damaged = [f for f in wanted if f.path not in metadata]
    if damaged:  # (the doctor names them; the history goes on without their versions)
        notes.append(f"{len(damaged)} zip(s) do not read, e.g. {ckpt.display(damaged[0].path)}"
                     ": their versions are left out")
        gone = {f.version for f in damaged}
        common = [v for v in common if v not in gone]
    versions: list[VersionStats] = []
    per_partition: dict[int, list[int]] = {p: [] for p in zips}
    for version in common:
        keys = disk = 0
        for partition, by_version in zips.items():
            meta = metadata[by_version[version].path]
            if meta.num_keys is None and "some zips record no numKeys" not in notes:
                notes.append("some zips record no numKeys")
            count = meta.num_keys or 0
            keys += count
            disk += sum(sst.size_bytes for sst in meta.sst_files)
            per_partition[partition].append(count)
        versions.append(VersionStats(version, keys, None, disk))
    span = common[-1] - common[0] if common else 0
    stale = stale_after or max(1, span)
    unchanged: list[tuple[int, bytes, bytes]] = []
    first = None
    failed = None
    if len(common) >= 2:
        try:
            last_stats, unchanged = _zip_contents(
                ckpt, zips, common[0], common[-1], timeout, timeouts == "per-key",
                stale, (versions[0].disk_bytes or 0) + (versions[-1].disk_bytes or 0), runner)
        except (StatekitError, Unreplayable) as why:
            failed = f"SST contents not read ({why})"
            notes.append(failed)
        else:
            versions[-1] = replace(last_stats, disk_bytes=versions[-1].disk_bytes)
            first = common[0]
            notes.append(f"value sizes, timeouts and unchanged keys from the SSTs of versions "
                         f"{common[0]} and {common[-1]}")
    ended = None
    if damaged and max(f.version or 0 for f in damaged) >= (common[-1] if common else 0):
        ended = (f"{ckpt.display(damaged[0].path)} does not read; the history ends at version "
                 f"{common[-1] if common else '-'}")
    kept = (tuple(versions), {p: tuple(k) for p, k in per_partition.items()}, stale, first,
            tuple(notes), unchanged, ended)
    return kept, not damaged and failed is None


def _zip_contents(ckpt: Checkpoint, zips: dict[int, dict[int, StateFile]], first: int,
                  last: int, timeout: TimeoutField | None, timeouts: bool, stale: int,
                  sst_bytes: int, runner: GroupRunner | None = None
                  ) -> tuple[VersionStats, list[tuple[int, bytes, bytes]]]:
    """Statistics of the last version's state, a key counting as changed at ``first`` when
    its bytes are identical in the first version (unchanged for at least the whole span),
    and the first few such keys (partition, key and value bytes)."""
    ends = [(p, by_version[first], by_version[last]) for p, by_version in sorted(zips.items())]
    results = map_groups(ckpt, ends, sst_bytes, _ZipWork(first, last, timeout), None, runner)
    stats = version_stats(last, [partial for partial, _ in results], stale, timeouts)
    return stats, sorted(u for _, found in results for u in found)[:OLDEST_KEYS_SHOWN]


_ZipEnds = tuple[int, StateFile, StateFile]
"""A partition and its zips of the first and the last common version."""


@dataclass(frozen=True)
class _ZipWork:
    """Statistics of the last version's SST contents for a group of partitions, a key counting
    as changed at ``first`` when its bytes are identical in the first version's."""

    first: int
    last: int
    timeout: TimeoutField | None

    def __call__(self, ckpt: Checkpoint, ends: list[_ZipEnds], progress: Progress | None
                 ) -> tuple[Partial, list[tuple[int, bytes, bytes]]]:
        no_timeout = timeout_check(self.timeout)
        acc = Accumulator()
        unchanged: list[tuple[int, bytes, bytes]] = []
        for partition, first_zip, last_zip in ends:
            before = {key_digest(r.key + b"\0" + (r.value or b""))
                      for r in file_records(ckpt, first_zip)}
            for record in file_records(ckpt, last_zip):
                value = record.value or b""
                same = key_digest(record.key + b"\0" + value) in before
                acc.add(pack(self.first if same else self.last, len(value),
                             bool(no_timeout and no_timeout(value))), len(record.key))
                if same and len(unchanged) < OLDEST_KEYS_SHOWN:
                    unchanged.append((partition, record.key, value))
        return acc.freeze(True), unchanged
