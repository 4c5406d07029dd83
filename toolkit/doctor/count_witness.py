"""The query's own row counts as a witness of the change files on the restart path.

Each batch the query ran reported, per stateful operator, how many rows it updated and
removed (``numRowsUpdated``, ``numRowsRemoved``). For the operators that write one record per
update and per removal — aggregations, deduplication, ``[flatMap|applyInPandas]GroupsWithState``
— those are exactly the put and remove records of the batch's change files (HDFS deltas,
RocksDB changelogs) summed over the partitions (measured with pyspark 4.3 on every such
operator, both providers, checkpoint format 1 and 2). A change file with another version's
bytes — copied from a version no longer retained, from another run, or in from a newer
batch — no longer sums to the query's report of its batch. Joins (four stores, each counted
its own way), session windows and transformWithState count otherwise and are not checked.

Only versions on the restart path are held against the report (every partition's change
file of that version is counted; each count is remembered in the decode cache).

A RocksDB zip records how many keys its version holds (``numKeys``); summed over the
partitions it is the ``numRowsTotal`` the query reported for the batch that wrote the
version (measured: aggregations, session windows, deduplication, transformWithState, with
and without changelogs). A zip on the restart path from another version or run no longer
adds up.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.progress_log import BatchRecord
from statekit.checkpoint.state_data import file_records
from statekit.doctor.problems import DIFFERS, WARNING, Problem, rollback_before_version
from statekit.doctor.state import StateCheck
from statekit.state.decode_cache import remembered
from statekit.support.errors import StatekitError

COUNTED_OPERATORS = frozenset({"stateStoreSave", "dedupe", "dedupeWithinWatermark",
                               "applyInPandasWithState", "flatMapGroupsWithState"})
"""Operators whose reported updates and removals are their change files' records."""
CHANGE_KINDS = ("delta", "changelog")


@dataclass(frozen=True)
class CountedVersion:
    """A version on the restart path whose batch the query reported, with the change file
    of each of its operator's partitions."""

    op_id: int
    version: int
    reported: tuple[int, int]
    """``(numRowsUpdated, numRowsRemoved)`` of the batch that wrote the version."""
    files: tuple[StateFile, ...]


def _counted_versions(check: StateCheck, records: Mapping[int, BatchRecord]
                      ) -> Iterator[CountedVersion]:
    """Every change version on the restart path of the operators whose reports count their
    change files' records (oldest first, per operator)."""
    version = check.plan.version
    if version is None or not records:
        return
    for op_id, name in sorted(check.names.items()):
        if name not in COUNTED_OPERATORS:
            continue
        keys = [k for k in check.expected() if k[0] == op_id]
        if not keys or {k[1] for k in keys} != {"default"}:
            continue
        versions = sorted({f.version for key in keys for f in check.files_at(key, version) or []
                           if f.kind in CHANGE_KINDS and f.version is not None})
        for v in versions:
            reported = _reported(records.get(v - 1), op_id, name)
            files = [_change_file(check, key, v) for key in keys]
            if reported is not None and all(f is not None for f in files):
                yield CountedVersion(op_id, v, reported,
                                     tuple(f for f in files if f is not None))


def _sum(counts: Iterable[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The puts and removes of several files (``None``: one of them does not decode)."""
    known = list(counts)
    if any(c is None for c in known):
        return None
    return (sum(c[0] for c in known if c is not None), sum(c[1] for c in known if c is not None))


def count_problems(ckpt: Checkpoint, check: StateCheck,
                   records: Mapping[int, BatchRecord], explained: Container[str] = ()
                   ) -> list[Problem]:
    """A warning for the oldest version on the restart path whose change files do not sum
    to the query's report of the batch that wrote them, per operator (``explained``: change
    files, as displayed, whose extra records :func:`harmless_repeats` accounts for)."""
    found = []
    flagged: set[int] = set()
    for counted in _counted_versions(check, records):
        if counted.op_id in flagged or \
                any(ckpt.display(f.path) in explained for f in counted.files):
            continue
        total = _sum(_counts(ckpt, f) for f in counted.files)
        if total is None or total == counted.reported:
            continue
        (puts, removes), (updated, removed) = total, counted.reported
        v, partitions = counted.version, len(counted.files)
        found.append(_problem(
            ckpt, counted.op_id, v, partitions,
            f"the change files of version {v} hold {puts} updates and {removes} removals "
            f"over its {partitions} partitions; the query reported {updated} and {removed} "
            f"for batch {v - 1}: a change file of that version is another version's"))
        flagged.add(counted.op_id)
    return found


def harmless_repeats(ckpt: Checkpoint, check: StateCheck,
                     records: Mapping[int, BatchRecord]) -> dict[str, str]:
    """Change files on the restart path that are byte for byte their own partition's
    previous version, where the query's report says that partition changed nothing in the
    batch: ``{file as displayed: why the restart loads the same state}``.

    Replaying version V-1's changes on the state they made changes nothing (each key gets
    the value it already has, each removed key is already gone), so the restart loads
    version V-1's state — the same as Spark's own version V when the batch changed nothing
    there: the other partitions' change files alone add up to the batch's report."""
    found: dict[str, str] = {}
    for counted in _counted_versions(check, records):
        repeats = [f for f in counted.files if _repeats_previous(ckpt, f)]
        if repeats and _sum(_counts(ckpt, f) for f in counted.files
                            if f not in repeats) == counted.reported:
            for file in repeats:
                found[ckpt.display(file.path)] = (
                    f"it repeats version {counted.version - 1}'s changes on the state they "
                    f"made, and the query reported no change in its partition for batch "
                    f"{counted.version - 1}: the restart loads the same state")
    return found


def _repeats_previous(ckpt: Checkpoint, file: StateFile) -> bool:
    """Whether ``file`` (version V, with records) has the bytes of its instance's V-1."""
    instance = ckpt.inventory.instances.get((file.operator_id, file.store, file.partition))
    previous = next((f for f in instance.of_kind(file.kind)
                     if f.version == (file.version or 0) - 1), None) \
        if instance is not None else None
    if previous is None or previous.size != file.size:
        return False
    try:
        return ckpt.read_bytes(previous.path) == ckpt.read_bytes(file.path) and \
            (_counts(ckpt, file) or (0, 0)) != (0, 0)
    except StatekitError:
        return False


def zip_problems(ckpt: Checkpoint, check: StateCheck,
                 records: Mapping[int, BatchRecord]) -> list[Problem]:
    """A warning for a version whose zips on the restart path do not add up to the keys
    the query reported for the batch that wrote it, per operator (joins are not checked)."""
    from statekit.checkpoint.state_data import readable_zip_metadata

    version = check.plan.version
    if version is None or not records:
        return []
    found = []
    for op_id, name in sorted(check.names.items()):
        keys = [k for k in check.expected() if k[0] == op_id]
        if not keys or {k[1] for k in keys} != {"default"}:
            continue
        chains = [check.files_at(key, version) or [] for key in keys]
        for v in sorted({chain[0].version for chain in chains
                         if chain and chain[0].kind == "zip" and chain[0].version is not None}):
            record = records.get(v - 1)
            if record is None or op_id >= len(record.totals) or \
                    record.operators[op_id][0] != name or record.totals[op_id] is None:
                continue
            zips = [_zip_at(check, key, v) for key in keys]
            if any(z is None for z in zips):
                continue
            metadata = readable_zip_metadata(ckpt, [z for z in zips if z is not None])
            counts = [getattr(m, "num_keys", None) for m in metadata.values()]
            if len(counts) != len(zips) or any(c is None for c in counts):
                continue
            total = sum(c for c in counts if c is not None)
            if total != record.totals[op_id]:
                found.append(_problem(
                    ckpt, op_id, v, len(keys),
                    f"the zips of version {v} hold {total} keys over its {len(keys)} "
                    f"partitions; the query reported {record.totals[op_id]} for batch "
                    f"{v - 1}: a zip of that version is another version's"))
                break
    return found


def _zip_at(check: StateCheck, key: tuple[int, str, int], version: int) -> StateFile | None:
    """The zip version ``version`` of the instance loads from, when it loads from one."""
    chain = check.files_at(key, version) or []
    return chain[0] if chain and chain[0].kind == "zip" and chain[0].version == version \
        else None


def _reported(record: BatchRecord | None, op_id: int, name: str) -> tuple[int, int] | None:
    if record is None or op_id >= len(record.operators):
        return None
    op_name, updated, removed = record.operators[op_id]
    if op_name != name or updated is None or removed is None:
        return None
    return updated, removed


def _change_file(check: StateCheck, key: tuple[int, str, int], version: int
                 ) -> StateFile | None:
    """The change file that version ``version`` of the instance loads (format v2: the one
    its chain names)."""
    chain = check.files_at(key, version) or []
    last = chain[-1] if chain else None
    return last if last is not None and last.kind in CHANGE_KINDS and \
        last.version == version else None


def _counts(ckpt: Checkpoint, file: StateFile) -> tuple[int, int] | None:
    result = remembered(ckpt, "record-counts", [file], partial(_count, ckpt, file))
    return (int(result[0]), int(result[1])) if result is not None else None


def _count(ckpt: Checkpoint, file: StateFile) -> list[int] | None:
    puts = removes = 0
    try:
        for record in file_records(ckpt, file, check_end=False):
            if record.op == "put":
                puts += 1
            else:
                removes += 1
    except StatekitError:  # the verification names a file that does not decode
        return None
    return [puts, removes]


def _problem(ckpt: Checkpoint, op_id: int, version: int, partitions: int, what: str
             ) -> Problem:
    remedy, batch = rollback_before_version(version, "that version")
    return Problem(
        "state-counts-contradict-progress", WARNING,
        ckpt.display(ckpt.location.path("state", str(op_id))),
        f"operator {op_id}: {what} (copied over it?)",
        "Spark loads it and restarts on other state, silently", None, remedy, batch,
        outcome=DIFFERS,
        affects=f"operator {op_id}: version {version} of one or more of its {partitions} "
                "partitions")
