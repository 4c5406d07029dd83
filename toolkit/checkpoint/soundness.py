"""Will the query restart? The problems that say no, found from the listing and the logs.

Every command that computes from a checkpoint's state (growth, recovery, repartition, the
``state`` commands) asks :func:`raise_if_unsound` first: where a restart would fail (a damaged
ledger, lost partitions, change files missing before the first snapshot, a corrupt schema)
their numbers would be answers about a query that no longer exists, so they stop and name
the file instead. The check lives with the checkpoint model and stops at the first problem:
no per-partition records, no orphan or lag analysis, no report. The report
(:mod:`statekit.report.checkpoint_report`) states the same problems with the same functions,
among its
warnings, so the two can never disagree on what blocks a restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.facts import loadable
from statekit.checkpoint.inventory import StoreInstance, newest_zip
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.logs import OffsetEntry
from statekit.checkpoint.operators import OperatorMetadata
from statekit.checkpoint.state_data import readable_zip_metadata, store_schemas
from statekit.formats.rocksdb_zip import RocksDBCheckpointMetadata
from statekit.support.errors import EXIT_CORRUPT, StatekitError, error_for


@dataclass(frozen=True)
class Finding:
    """One thing worth telling the person on call, in plain words."""

    code: str
    severity: str
    """``error`` (state cannot be loaded), ``warning`` or ``info``."""
    message: str
    operator_id: int | None = None
    store: str | None = None
    partitions: tuple[int, ...] = ()
    path: str | None = None
    """The file or folder the finding is about, as the user names it (errors name it)."""
    exit_code: int = EXIT_CORRUPT
    """The exit code a command that cannot work around an ``error`` finding stops with."""

    def to_error(self) -> StatekitError:
        return error_for(self.exit_code, f"{self.message} (statekit report lists every "
                         "problem)", path=self.path)


def span(parts: list[int]) -> str:
    shown = ", ".join(map(str, parts[:8]))
    return shown + (f" and {len(parts) - 8} more" if len(parts) > 8 else "")

@dataclass(frozen=True)
class StoreShape:
    """One store of one operator, as the metadata and the listing know it."""

    operator_id: int
    operator: OperatorMetadata | None
    store: str
    declared: int | None
    """Partitions its operator metadata records (``None``: no metadata)."""
    expected: int | None
    """Partitions the query runs with: declared, else the pinned shuffle partitions."""
    instances: list[StoreInstance]
    folder: str
    """The operator's state folder as the user names it (errors name it)."""

    @property
    def label(self) -> str:
        name = self.operator.name if self.operator else None
        return f"operator {self.operator_id} ({name or '?'}) store {self.store}"


def store_shapes(ckpt: Checkpoint, operators: dict[int, OperatorMetadata],
                 operator: int | None = None) -> Iterator[StoreShape]:
    """Every store the metadata declares or the listing shows, in operator/store order."""
    inventory = ckpt.inventory
    latest = ckpt.ledger.newest_readable_offset
    for op_id in sorted(set(inventory.operator_ids) | set(operators)):
        if operator is not None and op_id != operator:
            continue
        meta = operators.get(op_id)
        names = sorted(set(inventory.stores(op_id)) |
                       {s.name for s in (meta.stores if meta else ())})
        for store in names:
            declared = next((s.num_partitions for s in (meta.stores if meta else ())
                             if s.name == store), None)
            expected = declared or (latest.shuffle_partitions if latest else None)
            yield StoreShape(op_id, meta, store, declared, expected,
                             inventory.instances_of(op_id, store),
                             ckpt.display(ckpt.location.path("state", str(op_id))))


@dataclass(frozen=True)
class PartitionLoad:
    """Whether one partition's committed version loads, and what stops it."""

    partition: int
    loadable: bool
    missing_ssts: int = 0
    """SST files the newest zip references that are not in ``SSTs/``."""
    first_missing: str | None = None
    """The change file whose absence stops the committed version from loading."""


def partition_load(instance: StoreInstance, committed_version: int | None, can_load: bool,
                   zip_meta: RocksDBCheckpointMetadata | None) -> PartitionLoad:
    present = ({f.name for f in instance.files if f.kind == "sst"}
               if zip_meta is not None else set())
    missing = ([s for s in zip_meta.sst_files if s.dfs_name not in present]
               if zip_meta is not None else [])
    first_missing = None
    if not can_load and committed_version is not None:
        base = instance.latest_snapshot(committed_version) or 0
        versions = {f.version for f in instance.of_kind("delta", "changelog")}
        kind = "changelog" if any(f.kind in ("zip", "changelog") for f in instance.files) \
            else "delta"
        gap = next((v for v in range(base + 1, committed_version + 1)
                    if v not in versions), None)
        first_missing = f"{gap}.{kind}" if gap is not None else None
    return PartitionLoad(instance.partition, can_load, len(missing), first_missing)


@dataclass(frozen=True)
class StoreLoad:
    """What :func:`store_errors` judges: one store's partitions against the query's."""

    operator_id: int
    store: str
    label: str
    folder: str
    """The operator's state folder as the user names it (errors name it)."""
    num_partitions: int | None
    committed_version: int | None
    partitions: tuple[PartitionLoad, ...]
    missing_partitions: tuple[int, ...]


def store_errors(load: StoreLoad) -> list[Finding]:
    """Partitions that cannot load, are missing, or are beyond the query's count."""
    op, store, label, folder = load.operator_id, load.store, load.label, load.folder
    found: list[Finding] = []
    broken = [p for p in load.partitions if not p.loadable or p.missing_ssts]
    unloadable = [p.partition for p in broken]
    if unloadable:
        first = broken[0]
        store_part = "" if store == "default" else f"/{store}"
        cause = (f"{first.first_missing} is missing" if first.first_missing else
                 f"{first.missing_ssts} SST files its zip lists are missing")
        found.append(Finding(
            "cannot-load", "error",
            f"{label}: partitions {span(unloadable)} lack the files to rebuild version "
            f"{load.committed_version} (partition {first.partition}: {cause}); the query "
            "will fail to restart with CANNOT_LOAD_STATE_STORE", partitions=tuple(unloadable),
            operator_id=op, store=store,
            path=f"{folder}/{first.partition}{store_part}"
                 + (f"/{first.first_missing}" if first.first_missing else "")))
    if load.missing_partitions and load.committed_version:
        found.append(Finding(
            "missing-partitions", "error",
            f"{label}: no state files at all for partitions "
            f"{span(list(load.missing_partitions))} of {load.num_partitions}; they were "
            "deleted or never copied, and Spark cannot load their state on restart",
            partitions=load.missing_partitions, operator_id=op, store=store,
            path=f"{folder}/{load.missing_partitions[0]}"))
    extra = [p.partition for p in load.partitions
             if load.num_partitions is not None and p.partition >= load.num_partitions]
    if extra:
        found.append(Finding(
            "extra-partitions", "error",
            f"{label}: partitions {span(extra)} are beyond the {load.num_partitions} "
            "partitions the query runs with (left over from a repartition, or copied from "
            "another checkpoint?); Spark ignores them, and statekit's totals would be wrong",
            partitions=tuple(extra), operator_id=op, store=store,
            path=f"{folder}/{extra[0]}"))
    return found


def partition_mismatch(ckpt: Checkpoint, shape: StoreShape,
                       pinned_entry: OffsetEntry | None) -> Finding | None:
    """The operator metadata's partition count against the one the offsets log pins."""
    pinned = pinned_entry.shuffle_partitions if pinned_entry is not None else None
    declared, op_id, store = shape.declared, shape.operator_id, shape.store
    if declared is None or pinned is None or declared == pinned:
        return None
    return Finding(
        "partition-mismatch", "error",
        f"operator {op_id} store {store}: its operator metadata says {declared} partitions, "
        f"the offsets log pins spark.sql.shuffle.partitions={pinned}; one of them was "
        "edited or copied from another query", operator_id=op_id, store=store,
        path=ckpt.display(ckpt.location.path("state", str(op_id), "_metadata")))


def corrupt_metadata(error: StatekitError) -> Finding:
    """The operators' metadata does not parse: a restart fails on it too."""
    return Finding("corrupt-metadata", "error", str(error), path=error.path,
                   exit_code=error.exit_code)


def odd_entries_finding(ckpt: Checkpoint) -> Finding | None:
    """Entries under ``state/`` that are neither files nor folders."""
    odd = ckpt.odd_state_entries
    if not odd:
        return None
    return Finding(
        "not-a-file", "error",
        f"{len(odd)} entries under state/ are neither files nor folders (FIFO, socket, "
        f"dangling or looping symlink), first {ckpt.display(odd[0])}; Spark fails "
        "reading them and statekit never opens them", path=ckpt.display(odd[0]))


def log_findings(ckpt: Checkpoint) -> list[Finding]:
    ledger = ckpt.ledger
    found = [Finding(p.code, p.severity, p.line, path=p.path, exit_code=p.exit_code)
             for p in ledger.problems]
    uncommitted = ckpt.uncommitted_batches
    if not uncommitted:
        return found
    last = ckpt.last_committed_batch
    committed_entry = ledger.offsets.get(last) if last is not None else None
    committed_parts = committed_entry.shuffle_partitions if committed_entry else None
    entries = {b: ledger.offsets[b] for b in uncommitted if b in ledger.offsets}
    repartition = [b for b, e in entries.items()
                   if committed_parts is not None and e.shuffle_partitions is not None
                   and e.shuffle_partitions != committed_parts]
    if repartition:
        batch = repartition[-1]
        found.append(Finding(
            "unfinished-repartition", "error",
            f"batch {batch} is a repartition to {entries[batch].shuffle_partitions} partitions "
            f"(from {committed_parts}) that never committed; Spark refuses to restart "
            "(STREAMING_UNFINISHED_REPARTITION_DETECTED) until it is completed or the entry is "
            "removed; Spark's in-place repartition supports the RocksDB provider only",
            path=ckpt.display(ckpt.log_paths("offsets")[batch])))
    others = [b for b in entries if b not in repartition]
    if others:
        found.append(Finding(
            "uncommitted-batch", "warning",
            f"batch{'es' if len(others) > 1 else ''} {span(others)} planned but not committed: "
            "the query crashed or is running right now. On restart Spark re-runs "
            f"{'them' if len(others) > 1 else 'it'} with the same offsets",
            path=ckpt.display(ckpt.log_paths("offsets")[others[-1]])))
    return found


def newest_zip_metadata(ckpt: Checkpoint, instances: list[StoreInstance],
                        last: int | None) -> dict[int, RocksDBCheckpointMetadata]:
    """Metadata of each partition's newest zip at or below the committed version: one read
    per partition, all in one call (concurrent on object stores)."""
    if last is None:
        return {}
    chosen: dict[int, StateFile] = {}
    for instance in instances:
        newest = newest_zip(instance.files, last + 1)
        if newest is not None:
            chosen[instance.partition] = newest
    found = readable_zip_metadata(ckpt, list(chosen.values())) if chosen else {}
    return {part: found[file.path] for part, file in chosen.items() if file.path in found}


def schema_findings(ckpt: Checkpoint) -> list[Finding]:
    """Schema files Spark reads at every start (its schema compatibility check)."""
    try:
        store_schemas(ckpt)
    except StatekitError as error:
        return [Finding("corrupt-schema", "error",
                        f"{error}; Spark reads this schema file when the query starts and "
                        "fails", path=error.path, exit_code=error.exit_code)]
    return []


def checksum_size_findings(ckpt: Checkpoint, last: int | None) -> list[Finding]:
    """Data files whose size does not fit their Hadoop ``.crc`` file: truncated or extended
    after Spark wrote them — found from the listing alone, no file is read. (A checkpoint
    written with a non-default ``io.bytes.per.checksum`` would mismatch everywhere; then
    nothing is said.)"""
    inventory = ckpt.inventory
    checked, bad = inventory.hadoop_checksums_checked, inventory.hadoop_checksum_mismatches
    if not bad or len(bad) * 2 > checked:
        return []
    needed = {f.path for i in inventory.instances.values()
              for f in (i.files_to_load(last + 1) if last is not None else ())}
    # a damaged snapshot/zip with an older chain on disk is repaired on restart (Spark 4.3)
    restart = [f for f in bad if f.path in needed and not (
        last is not None and f.kind in ("snapshot", "zip") and f.version is not None
        and any(inventory.instances[(f.operator_id, f.store, f.partition)]
                .older_chains(last + 1, f.version)))]
    first = (restart or bad)[0]
    return [Finding(
        "size-mismatch", "error" if restart else "warning",
        f"{len(bad)} state files do not have the size their checksum file records "
        f"(truncated or extended after Spark wrote them), first {ckpt.display(first.path)} "
        f"({first.size} bytes)" + (f"; {len(restart)} of them are read on restart, which "
                                   "fails" if restart else "; none is read on restart"),
        operator_id=first.operator_id, store=first.store,
        partitions=tuple(sorted({f.partition for f in bad})), path=ckpt.display(first.path))]


def restart_errors(ckpt: Checkpoint) -> Iterator[Finding]:
    """The problems that stop a restart, in the report's order, each computed only when
    the ones before it were not found (a caller may stop at the first)."""
    odd = odd_entries_finding(ckpt)
    if odd is not None:
        yield odd
    yield from (f for f in log_findings(ckpt) if f.severity == "error")
    try:
        operators = ckpt.operators
    except StatekitError as error:
        yield corrupt_metadata(error)
        operators = {}
    yield from schema_findings(ckpt)
    last = ckpt.last_committed_batch
    committed = None if last is None else last + 1
    pinned_entry = (ckpt.ledger.offsets.get(last) if last is not None
                    else ckpt.ledger.newest_readable_offset)
    for shape in store_shapes(ckpt, operators):
        zips = newest_zip_metadata(ckpt, shape.instances, last)
        present = {i.partition for i in shape.instances}
        yield from store_errors(StoreLoad(
            shape.operator_id, shape.store, shape.label, shape.folder, shape.expected, committed,
            tuple(partition_load(i, committed, loadable(i, committed),
                                 zips.get(i.partition)) for i in shape.instances),
            tuple(p for p in range(shape.expected or 0) if p not in present)))
        mismatch = partition_mismatch(ckpt, shape, pinned_entry)
        if mismatch is not None:
            yield mismatch
    yield from (f for f in checksum_size_findings(ckpt, last) if f.severity == "error")


def raise_if_unsound(ckpt: Checkpoint) -> None:
    """Raise the first problem that stops a restart as a one-line ``StatekitError``."""
    ckpt.require_sound_ledger()
    for finding in restart_errors(ckpt):
        raise finding.to_error()
