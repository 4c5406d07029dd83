"""The file-level health report of a checkpoint — the answer to "what is in here, is it healthy?"

Built from the checkpoint model only (listings plus a few small metadata reads), so it runs in
well under a second without a JVM, also on object storage. Per operator/store it counts the
delta/snapshot (HDFS) or changelog/zip/SST (RocksDB) files of every partition, works out the
snapshot lag and orphan files (:mod:`statekit.checkpoint.facts`), totals and skew, and turns
what looks wrong into :class:`Finding` objects phrased for the person on call.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import chain
from operator import attrgetter
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.facts import ORPHAN_STALE, InstanceFacts, instance_facts
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.logs import CONF_MIN_DELTAS
from statekit.checkpoint.soundness import (
    Finding,
    PartitionLoad,
    StoreLoad,
    StoreShape,
    checksum_size_findings,
    corrupt_metadata,
    log_findings,
    newest_zip_metadata,
    odd_entries_finding,
    partition_load,
    partition_mismatch,
    schema_findings,
    span,
    store_errors,
    store_shapes,
)
from statekit.formats.rocksdb_zip import RocksDBCheckpointMetadata
from statekit.state.verify import Progress, Verification, verify_restart_path
from statekit.state.workers import GroupRunner
from statekit.support.errors import StatekitError
from statekit.support.gc_pause import gc_paused

SPARK_DEFAULT_MIN_DELTAS = 10


@dataclass(frozen=True)
class PartitionReport:
    partition: int
    deltas: int
    """Change files: HDFS ``.delta`` or RocksDB ``.changelog``."""
    snapshots: int
    """Full-state files: HDFS ``.snapshot`` or RocksDB ``.zip``."""
    sst_files: int
    files: int
    bytes: int
    latest_version: int | None
    latest_snapshot: int | None
    versions_since_snapshot: int | None
    loadable: bool
    orphans: int
    orphan_bytes: int
    keys: int | None = None
    """RocksDB: ``numKeys`` of the newest zip ≤ the committed version (HDFS: unknown
    without replaying the state; see ``statekit growth``)."""
    keys_version: int | None = None
    missing_ssts: int = 0
    """SST files the newest zip references that are not in ``SSTs/``."""
    first_missing: str | None = None
    """The change file whose absence stops the committed version from loading."""


@dataclass(frozen=True)
class StoreReport:
    operator_id: int
    operator_name: str | None
    store: str
    provider: str
    codec: str
    num_partitions: int | None
    """From operator metadata (else the pinned shuffle partitions)."""
    last_committed_batch: int | None
    committed_version: int | None
    partitions: tuple[PartitionReport, ...]
    missing_partitions: tuple[int, ...]
    files_by_kind: dict[str, int]
    bytes_by_kind: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_kind.values())

    @property
    def bytes_skew(self) -> float | None:
        """Largest partition's bytes over the mean (1.0 = perfectly even)."""
        sizes = [p.bytes for p in self.partitions]
        mean = statistics.fmean(sizes) if sizes else 0
        return round(max(sizes) / mean, 2) if mean else None

    @property
    def max_snapshot_lag(self) -> int | None:
        lags = [p.versions_since_snapshot for p in self.partitions
                if p.versions_since_snapshot is not None]
        return max(lags) if lags else None

    def to_dict(self) -> dict[str, Any]:
        data = _fields_of(self)
        data.update(partitions=[_fields_of(p) for p in self.partitions],
                    files_by_kind=dict(self.files_by_kind),
                    bytes_by_kind=dict(self.bytes_by_kind), total_bytes=self.total_bytes,
                    bytes_skew=self.bytes_skew, max_snapshot_lag=self.max_snapshot_lag)
        return data


@dataclass(frozen=True)
class CheckpointReport:
    location: str
    query_id: str
    provider: str
    codec: str
    shuffle_partitions: int | None
    min_deltas_for_snapshot: int
    min_deltas_source: str
    """``conf`` when pinned in the offsets log, ``option`` when given, else ``spark-default``."""
    checkpoint_format_version: int
    changelog_checkpointing: bool
    planned_batches: tuple[int, ...]
    committed_batches: tuple[int, ...]
    last_committed_batch: int | None
    last_batch_timestamp_ms: int | None
    watermark_ms: int | None
    stores: tuple[StoreReport, ...]
    findings: tuple[Finding, ...]
    crc_files: int
    state_files: int
    state_bytes: int
    elapsed_s: float = field(compare=False, default=0.0)
    verification: Verification | None = None
    """``--decode``: what reading the restart path found (``None``: not read)."""
    listing: dict[str, Any] = field(compare=False, default_factory=dict)
    """What listing the checkpoint cost: method, requests, objects, seconds, concurrency."""

    def to_dict(self) -> dict[str, Any]:
        data = _fields_of(self)
        data.update(stores=[store.to_dict() for store in self.stores],
                    findings=[asdict(finding) for finding in self.findings],
                    listing=dict(self.listing),
                    verification=(self.verification.to_dict()
                                  if self.verification is not None else None))
        return data


def _fields_of(record: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict, not converted further (``asdict`` deep-copies every
    value: a fifth of a 2,000-partition report's time)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _partition_report(instance: StoreInstance, facts: InstanceFacts,
                      zip_meta: RocksDBCheckpointMetadata | None) -> PartitionReport:
    kinds = {kind: count for kind, (count, _size) in instance.kind_totals.items()}
    load = partition_load(instance, facts.committed_version, facts.loadable, zip_meta)
    return PartitionReport(
        partition=instance.partition,
        deltas=kinds.get("delta", 0) + kinds.get("changelog", 0),
        snapshots=kinds.get("snapshot", 0) + kinds.get("zip", 0),
        sst_files=kinds.get("sst", 0),
        files=len(instance.files),
        bytes=instance.total_bytes,
        latest_version=instance.latest_version,
        latest_snapshot=facts.latest_snapshot,
        versions_since_snapshot=facts.snapshot_lag,
        loadable=facts.loadable,
        orphans=len(facts.orphans),
        orphan_bytes=sum(o.file.size for o in facts.orphans),
        keys=zip_meta.num_keys if zip_meta is not None else None,
        keys_version=facts.latest_snapshot if zip_meta is not None else None,
        missing_ssts=load.missing_ssts,
        first_missing=load.first_missing,
    )


def _store_findings(report: StoreReport, shape: StoreShape, min_deltas: int,
                    orphan_reasons: Counter[str]) -> list[Finding]:
    op, store, label = report.operator_id, report.store, shape.label
    found = store_errors(StoreLoad(
        op, store, label, shape.folder, report.num_partitions, report.committed_version,
        tuple(PartitionLoad(p.partition, p.loadable, p.missing_ssts, p.first_missing)
              for p in report.partitions), report.missing_partitions))
    committed = report.committed_version or 0
    never = [p.partition for p in report.partitions
             if p.latest_snapshot is None and p.deltas > min_deltas]
    if never:
        found.append(Finding(
            "no-snapshot", "warning",
            f"{label}: partitions {span(never)} never got a snapshot; a restart replays every "
            f"change file since version 1 (up to {committed}). Snapshots come from the "
            "background maintenance task (spark.sql.streaming.stateStore.maintenanceInterval); "
            "check that executors live long enough for it to run",
            partitions=tuple(never), operator_id=op, store=store))
    threshold = 2 * min_deltas
    lagging = [p.partition for p in report.partitions
               if p.latest_snapshot is not None and (p.versions_since_snapshot or 0) > threshold]
    if lagging:
        worst = max(p.versions_since_snapshot or 0 for p in report.partitions)
        found.append(Finding(
            "snapshot-lag", "warning",
            f"{label}: partitions {span(lagging)} are more than 2×minDeltasForSnapshot "
            f"({threshold}) versions past their last snapshot (worst: {worst}); restarts replay "
            "that many change files. Maintenance is falling behind (slow storage, short-lived "
            "executors, or a long maintenanceInterval)", partitions=tuple(lagging),
            operator_id=op, store=store))
    orphaned = [p.partition for p in report.partitions if p.orphans]
    if orphaned:
        count = sum(p.orphans for p in report.partitions)
        size = sum(p.orphan_bytes for p in report.partitions)
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(orphan_reasons.items()))
        explain = ("stale files predate every retained batch and are normally deleted by "
                   "maintenance; files beyond the last commit were written by a batch that "
                   "never committed and are rewritten when it re-runs")
        found.append(Finding(
            "orphan-files", "warning" if orphan_reasons.get(ORPHAN_STALE) else "info",
            f"{label}: {count} files ({size} bytes) belong to no retained version ({reasons}): "
            f"{explain}", partitions=tuple(orphaned), operator_id=op, store=store))
    return found


def read_ahead(ckpt: Checkpoint, *, operator: int | None = None,
               partition: int | None = None) -> None:
    """Start what :func:`build_report` reads: ``state/``, ``offsets/`` and ``commits/`` are
    listed at once, and on object stores the ledger (and, for a whole report, each
    partition's newest zip) is read while ``state/`` is still being listed. Call it before
    anything else touches the checkpoint (a no-op once the state is listed)."""
    ckpt.warm(newest_zips=partition is None and operator is None)


def build_report(ckpt: Checkpoint, *, operator: int | None = None,
                 partition: int | None = None, min_deltas: int | None = None,
                 verify: bool = False, progress: Progress | None = None,
                 runner: GroupRunner | None = None,
                 verification: Verification | None = None) -> CheckpointReport:
    """Build the report; ``operator``/``partition`` narrow what is shown (not what is read).

    ``min_deltas`` is ``spark.sql.streaming.stateStore.minDeltasForSnapshot`` when the offsets
    log does not pin it (Spark does not); it sets the lag thresholds. ``verify`` also reads
    and decodes every file a restart loads (:mod:`statekit.state.verify`); ``verification``: that
    reading, when the caller already did it (the doctor does, for ``report --decode``).
    """
    # a record per partition and file, all kept: nothing to collect (not around --decode's
    # long decoding, whose passing cycles should go as they come)
    with contextlib.nullcontext() if verify else gc_paused():
        return _build_report(ckpt, operator=operator, partition=partition,
                             min_deltas=min_deltas, verify=verify, progress=progress,
                             runner=runner, verification=verification)


def _build_report(ckpt: Checkpoint, *, operator: int | None, partition: int | None,
                  min_deltas: int | None, verify: bool, progress: Progress | None,
                  runner: GroupRunner | None,
                  verification: Verification | None) -> CheckpointReport:
    started = time.perf_counter()
    read_ahead(ckpt, operator=operator, partition=partition)
    inventory = ckpt.inventory
    # A damaged newest entry is an error finding; the confs come from the newest that parses.
    latest = ckpt.ledger.newest_readable_offset
    conf = latest.conf if latest is not None else {}
    if min_deltas is not None:
        deltas, source = min_deltas, "option"
    elif str(conf.get(CONF_MIN_DELTAS, "")).isdigit():
        deltas, source = int(conf[CONF_MIN_DELTAS]), "conf"
    else:
        deltas, source = SPARK_DEFAULT_MIN_DELTAS, "spark-default"
    findings = log_findings(ckpt)
    try:
        operators = ckpt.operators
    except StatekitError as error:  # a restart fails on it too; the files are still shown
        operators = {}
        findings.append(corrupt_metadata(error))
    findings.extend(schema_findings(ckpt))
    committed = ckpt.committed_batches
    first = committed[0] if committed else None
    last = ckpt.last_committed_batch
    codec = latest.codec if latest else "lz4"
    stores: list[StoreReport] = []
    # The committed batch's confs (an uncommitted repartition has a finding of its own).
    pinned_entry = ckpt.ledger.offsets.get(last) if last is not None else latest
    for shape in store_shapes(ckpt, operators, operator):
        op_id, meta, store = shape.operator_id, shape.operator, shape.store
        expected, instances = shape.expected, shape.instances
        shown = [i for i in instances if partition is None or i.partition == partition]
        latest_zips = newest_zip_metadata(ckpt, shown, last)
        kinds: Counter[str] = Counter()
        sizes: Counter[str] = Counter()
        for instance in instances:
            for kind, (count, size) in instance.kind_totals.items():
                kinds[kind] += count
                sizes[kind] += size
        parts: list[PartitionReport] = []
        reasons: Counter[str] = Counter()  # of the shown partitions, like the finding's counts
        for instance in shown:
            facts = instance_facts(instance, first, last)
            reasons.update(o.reason for o in facts.orphans)
            parts.append(_partition_report(instance, facts,
                                           latest_zips.get(instance.partition)))
        present = {i.partition for i in instances}
        missing = tuple(p for p in range(expected or 0) if p not in present)
        provider = _provider_of(kinds, latest.provider if latest else "hdfs")
        report = StoreReport(
            operator_id=op_id, operator_name=meta.name if meta else None, store=store,
            provider=provider, codec=codec, num_partitions=expected,
            last_committed_batch=last, committed_version=None if last is None else last + 1,
            partitions=tuple(parts), missing_partitions=missing,
            files_by_kind=dict(sorted(kinds.items())),
            bytes_by_kind=dict(sorted(sizes.items())))
        stores.append(report)
        findings.extend(_store_findings(report, shape, deltas, reasons))
        mismatch = partition_mismatch(ckpt, shape, pinned_entry)
        if mismatch is not None:
            findings.append(mismatch)
    findings.extend(checksum_size_findings(ckpt, last))
    odd = odd_entries_finding(ckpt)
    if odd is not None:  # first: the most specific cause of what follows
        findings.insert(0, odd)
    if verification is not None and (operator is not None or partition is not None):
        verification = _narrowed(verification, operator, partition)
    if verify and verification is None:
        verification = verify_restart_path(
            ckpt, operator=operator, partitions={partition} if partition is not None else None,
            progress=progress, runner=runner)
    if verification is not None:
        findings.extend(damaged_findings(verification))
    every = inventory.instances.values()
    totals = [t for i in every for t in i.kind_totals.items()]
    return CheckpointReport(
        location=ckpt.location.url,
        query_id=_query_id(ckpt),
        provider=latest.provider if latest else "hdfs",
        codec=codec,
        shuffle_partitions=latest.shuffle_partitions if latest else None,
        min_deltas_for_snapshot=deltas,
        min_deltas_source=source,
        checkpoint_format_version=2 if any(map(_unique_id, chain.from_iterable(
            i.files for i in every))) else 1,
        changelog_checkpointing=any(kind == "changelog" for kind, _ in totals),
        planned_batches=tuple(ckpt.planned_batches),
        committed_batches=tuple(committed),
        last_committed_batch=last,
        last_batch_timestamp_ms=latest.timestamp_ms if latest else None,
        watermark_ms=latest.watermark_ms if latest else None,
        stores=tuple(stores),
        findings=tuple(findings),
        crc_files=inventory.crc_files,
        state_files=sum(count for _, (count, _size) in totals),
        state_bytes=sum(size for _, (_count, size) in totals),
        elapsed_s=round(time.perf_counter() - started, 4),
        verification=verification,
        listing=ckpt.listing_stats.to_dict(),
    )


_unique_id = attrgetter("unique_id")


def _query_id(ckpt: Checkpoint) -> str:
    """The query id, or why there is none (the doctor says what a restart makes of it)."""
    if not ckpt.has_metadata:
        return "(metadata file missing)"
    try:
        return ckpt.query_id
    except StatekitError as error:
        return f"(unreadable: {error.message})"


def _narrowed(verification: Verification, operator: int | None, partition: int | None
              ) -> Verification:
    """The damaged files of one operator/partition only (the counts stay the whole
    reading's)."""
    from dataclasses import replace

    return replace(verification, damaged=tuple(
        d for d in verification.damaged
        if (operator is None or d.operator_id == operator)
        and (partition is None or d.partition == partition)))


def _provider_of(kinds: Counter[str], pinned: str) -> str:
    """The provider the files show (they win over the conf if they disagree)."""
    if kinds["zip"] or kinds["changelog"] or kinds["sst"]:
        return "rocksdb"
    if kinds["delta"] or kinds["snapshot"]:
        return "hdfs"
    return pinned


def damaged_findings(verification: Verification) -> list[Finding]:
    """A ``damaged-file`` finding for each file reading the restart path found damaged."""
    return [Finding(
        "damaged-file", "error" if d in verification.fatal else "warning",
        f"{d.line}; " + (
            "the checksum file itself is damaged: Hadoop ignores it when Spark reads the "
            "data file (which decodes), so only the corruption check is lost"
            if d.checksum_only else
            "the damage is where Spark's reader does not look: a restart reads the file"
            if d.beyond_spark else "a restart reads this file and fails"
            if d.repaired_from is None else
            f"Spark 4.3 repairs it on restart (autoSnapshotRepair) by loading version "
            f"{d.repaired_from} and replaying the change files after it; Spark versions "
            "without that repair fail"),
        operator_id=d.operator_id, partitions=(d.partition,) if d.partition is not None
        else (), path=d.path, exit_code=d.exit_code) for d in verification.damaged]


def with_verification(report: CheckpointReport, verification: Verification | None
                      ) -> CheckpointReport:
    """A report built from the listing (no selection), with what reading the restart path
    found: the same as building it with ``verification``, without listing again."""
    if verification is None:
        return report
    return replace(report, verification=verification,
                   findings=(*report.findings, *damaged_findings(verification)))
