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
from dataclasses import asdict, dataclass, field, fields
from itertools import chain
from operator import attrgetter
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.facts import ORPHAN_STALE, InstanceFacts, instance_facts
from statekit.checkpoint.inventory import StoreInstance, newest_zip
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.logs import CONF_MIN_DELTAS
from statekit.checkpoint.state_data import readable_zip_metadata, store_schemas
from statekit.errors import EXIT_CORRUPT, StatekitError, error_for
from statekit.formats.rocksdb_zip import RocksDBCheckpointMetadata
from statekit.gc_pause import gc_paused
from statekit.partition_workers import GroupRunner
from statekit.verify import Progress, Verification, verify_restart_path

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
    present = {f.name for f in instance.files if f.kind == "sst"} if kinds.get("sst") else set()
    missing = ([s for s in zip_meta.sst_files if s.dfs_name not in present]
               if zip_meta is not None else [])
    first_missing = None
    if not facts.loadable and facts.committed_version is not None:
        base = instance.latest_snapshot(facts.committed_version) or 0
        versions = {f.version for f in instance.of_kind("delta", "changelog")}
        kind = "changelog" if any(f.kind in ("zip", "changelog") for f in instance.files) \
            else "delta"
        gap = next((v for v in range(base + 1, facts.committed_version + 1)
                    if v not in versions), None)
        first_missing = f"{gap}.{kind}" if gap is not None else None
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
        missing_ssts=len(missing),
        first_missing=first_missing,
    )


def _span(parts: list[int]) -> str:
    shown = ", ".join(map(str, parts[:8]))
    return shown + (f" and {len(parts) - 8} more" if len(parts) > 8 else "")


def _store_findings(report: StoreReport, min_deltas: int, orphan_reasons: Counter[str],
                    folder: str) -> list[Finding]:
    """``folder``: the operator's state folder as the user names it (errors name it)."""
    op, store = report.operator_id, report.store
    label = f"operator {report.operator_id} ({report.operator_name or '?'}) store {report.store}"
    found: list[Finding] = []
    broken = [p for p in report.partitions if not p.loadable or p.missing_ssts]
    unloadable = [p.partition for p in broken]
    if unloadable:
        first = broken[0]
        store_part = "" if store == "default" else f"/{store}"
        cause = (f"{first.first_missing} is missing" if first.first_missing else
                 f"{first.missing_ssts} SST files its zip lists are missing")
        found.append(Finding(
            "cannot-load", "error",
            f"{label}: partitions {_span(unloadable)} lack the files to rebuild version "
            f"{report.committed_version} (partition {first.partition}: {cause}); the query "
            "will fail to restart with CANNOT_LOAD_STATE_STORE", partitions=tuple(unloadable),
            operator_id=op, store=store,
            path=f"{folder}/{first.partition}{store_part}"
                 + (f"/{first.first_missing}" if first.first_missing else "")))
    if report.missing_partitions and report.committed_version:
        found.append(Finding(
            "missing-partitions", "error",
            f"{label}: no state files at all for partitions "
            f"{_span(list(report.missing_partitions))} of {report.num_partitions}; they were "
            "deleted or never copied, and Spark cannot load their state on restart",
            partitions=report.missing_partitions, operator_id=op, store=store,
            path=f"{folder}/{report.missing_partitions[0]}"))
    extra = [p.partition for p in report.partitions
             if report.num_partitions is not None and p.partition >= report.num_partitions]
    if extra:
        found.append(Finding(
            "extra-partitions", "error",
            f"{label}: partitions {_span(extra)} are beyond the {report.num_partitions} "
            "partitions the query runs with (left over from a repartition, or copied from "
            "another checkpoint?); Spark ignores them, and statekit's totals would be wrong",
            partitions=tuple(extra), operator_id=op, store=store,
            path=f"{folder}/{extra[0]}"))
    committed = report.committed_version or 0
    never = [p.partition for p in report.partitions
             if p.latest_snapshot is None and p.deltas > min_deltas]
    if never:
        found.append(Finding(
            "no-snapshot", "warning",
            f"{label}: partitions {_span(never)} never got a snapshot; a restart replays every "
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
            f"{label}: partitions {_span(lagging)} are more than 2×minDeltasForSnapshot "
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


def _log_findings(ckpt: Checkpoint) -> list[Finding]:
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
            f"batch{'es' if len(others) > 1 else ''} {_span(others)} planned but not committed: "
            "the query crashed or is running right now. On restart Spark re-runs "
            f"{'them' if len(others) > 1 else 'it'} with the same offsets",
            path=ckpt.display(ckpt.log_paths("offsets")[others[-1]])))
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
    and decodes every file a restart loads (:mod:`statekit.verify`); ``verification``: that
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
    findings = _log_findings(ckpt)
    try:
        operators = ckpt.operators
    except StatekitError as error:  # a restart fails on it too; the files are still shown
        operators = {}
        findings.append(Finding("corrupt-metadata", "error", str(error), path=error.path,
                                exit_code=error.exit_code))
    findings.extend(_schema_findings(ckpt))
    committed = ckpt.committed_batches
    first = committed[0] if committed else None
    last = ckpt.last_committed_batch
    codec = latest.codec if latest else "lz4"
    stores: list[StoreReport] = []
    # The committed batch's confs (an uncommitted repartition has a finding of its own).
    pinned_entry = ckpt.ledger.offsets.get(last) if last is not None else latest
    op_ids = sorted(set(inventory.operator_ids) | set(operators))
    for op_id in op_ids:
        if operator is not None and op_id != operator:
            continue
        meta = operators.get(op_id)
        store_names = sorted(set(inventory.stores(op_id)) |
                             {s.name for s in (meta.stores if meta else ())})
        for store in store_names:
            declared = next((s.num_partitions for s in (meta.stores if meta else ())
                             if s.name == store), None)
            expected = declared or (latest.shuffle_partitions if latest else None)
            instances = inventory.instances_of(op_id, store)
            shown = [i for i in instances if partition is None or i.partition == partition]
            latest_zips = _latest_zips(ckpt, shown, last)
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
            findings.extend(_store_findings(
                report, deltas, reasons, ckpt.display(ckpt.location.path("state", str(op_id)))))
            pinned = pinned_entry.shuffle_partitions if pinned_entry is not None else None
            if declared is not None and pinned is not None and declared != pinned:
                findings.append(Finding(
                    "partition-mismatch", "error",
                    f"operator {op_id} store {store}: its operator metadata says "
                    f"{declared} partitions, the offsets log pins "
                    f"spark.sql.shuffle.partitions={pinned}; one of them was "
                    "edited or copied from another query", operator_id=op_id, store=store,
                    path=ckpt.display(ckpt.location.path("state", str(op_id), "_metadata"))))
    findings.extend(_checksum_size_findings(ckpt, last))
    if ckpt.odd_state_entries:  # first: the most specific cause of what follows
        odd = ckpt.odd_state_entries
        findings.insert(0, Finding(
            "not-a-file", "error",
            f"{len(odd)} entries under state/ are neither files nor folders (FIFO, socket, "
            f"dangling or looping symlink), first {ckpt.display(odd[0])}; Spark fails "
            "reading them and statekit never opens them", path=ckpt.display(odd[0])))
    if verification is not None and (operator is not None or partition is not None):
        verification = _narrowed(verification, operator, partition)
    if verify and verification is None:
        verification = verify_restart_path(
            ckpt, operator=operator, partitions={partition} if partition is not None else None,
            progress=progress, runner=runner)
    if verification is not None:
        findings.extend(Finding(
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
            else (), path=d.path, exit_code=d.exit_code) for d in verification.damaged)
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


def _latest_zips(ckpt: Checkpoint, instances: list[StoreInstance], last: int | None
                 ) -> dict[int, RocksDBCheckpointMetadata]:
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


def _provider_of(kinds: Counter[str], pinned: str) -> str:
    """The provider the files show (they win over the conf if they disagree)."""
    if kinds["zip"] or kinds["changelog"] or kinds["sst"]:
        return "rocksdb"
    if kinds["delta"] or kinds["snapshot"]:
        return "hdfs"
    return pinned


def _schema_findings(ckpt: Checkpoint) -> list[Finding]:
    """Schema files Spark reads at every start (its schema compatibility check)."""
    try:
        store_schemas(ckpt)
    except StatekitError as error:
        return [Finding("corrupt-schema", "error",
                        f"{error}; Spark reads this schema file when the query starts and "
                        "fails", path=error.path, exit_code=error.exit_code)]
    return []


def _checksum_size_findings(ckpt: Checkpoint, last: int | None) -> list[Finding]:
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


def raise_if_unsound(ckpt: Checkpoint) -> None:
    """Raise the first ``error`` finding of the report as a one-line ``StatekitError``.

    The commands that compute from a checkpoint's state (growth, recovery, repartition, the
    ``state`` commands) call this first: where a restart would fail (a damaged ledger, lost
    partitions, change files missing before the first snapshot) their numbers would be
    answers about a query that no longer exists, so they stop and name the file instead.
    """
    ckpt.require_sound_ledger()
    for finding in build_report(ckpt).findings:
        if finding.severity == "error":
            raise finding.to_error()
