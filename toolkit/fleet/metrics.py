"""statekit's numbers as Prometheus metrics: what ``statekit metrics`` exposes.

Spark's own metrics are per-query sums (``stateOperators[].numRowsTotal``…); nothing
reports snapshot lag, a growth verdict or a restart estimate *per checkpoint*. This module
turns the report, the growth analysis and the recovery estimate of each checkpoint into
metric families — plain data, so the core stays free of any exporter library; the CLI
renders them with ``prometheus_client`` (printed once for a textfile collector, or served).

Conventions (Prometheus' naming guide): base units in names (``_bytes``, ``_seconds``),
``_total`` only on counters, a ``checkpoint`` label on everything, ``operator`` and
``store`` per store; the ``statekit_partition_*`` families (a ``partition`` label) only
with ``per_partition`` (cardinality: a checkpoint with 2,000 partitions would otherwise emit
thousands of series per scrape; and kept apart so a ``sum()`` never counts a store twice).
A verdict is an enum as Prometheus' "stateset" idiom: one series per possible value, 1 for
the current one.

A checkpoint that cannot be read yields ``statekit_checkpoint_up 0`` with a one-word
``reason`` label (and the error's exit code) instead of failing the whole scrape; every
exception, not only statekit's own, stays inside its checkpoint's series.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from statekit.checkpoint.storage_errors import reason_of, user_error
from statekit.doctor.problems import OUTCOMES, SAME
from statekit.growth.trend import ACCELERATING, BOUNDED, GROWING, INSUFFICIENT, SATURATING
from statekit.state.memory import ONE_EXECUTOR, ExecutorSizing
from statekit.support.errors import StatekitError
from statekit.support.presentation import printable

VERDICTS = (BOUNDED, SATURATING, GROWING, ACCELERATING, INSUFFICIENT)
RESTART_VERDICTS = ("restarts", "restarts-with-warnings", "will-not-restart", "not-checked")
"""The assessment's restart verdicts as label values (its words, hyphenated)."""
RESTART_OUTCOMES = (SAME, *OUTCOMES)
"""What a restart that runs ends in, as label values."""
Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    """One metric family: its samples as ``(labels, value)``."""

    name: str
    kind: str
    """``gauge`` or ``counter`` (a counter's ``name`` has no ``_total``: the exposition
    adds it, as prometheus_client does)."""
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, value: float | None, **labels: Any) -> None:
        if value is not None:
            self.samples.append((tuple((k, str(v)) for k, v in labels.items()), float(value)))


FAMILIES: dict[str, tuple[str, str]] = {
    "statekit_checkpoint_up": (
        "gauge", "1 when the checkpoint was read, 0 when it failed or outlived --timeout "
        "(then a one-word reason label: timeout, unreachable, credentials, denied, missing, "
        "not-checkpoint, corrupt, unsupported, environment, invalid, error)"),
    "statekit_checkpoint_read_timestamp_seconds": (
        "gauge", "Unix time the checkpoint's last reading ended: every other value of the "
        "checkpoint is from that reading"),
    "statekit_checkpoint_error_exit_code": (
        "gauge", "statekit's exit code for why the checkpoint could not be read"),
    "statekit_scrape_duration_seconds": ("gauge", "Seconds spent reading the checkpoint"),
    "statekit_last_committed_batch": ("gauge", "Id of the last committed batch"),
    "statekit_last_batch_timestamp_seconds": (
        "gauge", "Unix time the last planned batch started (offsets batchTimestampMs)"),
    "statekit_last_batch_age_seconds": ("gauge", "Seconds since the last planned batch started"),
    "statekit_watermark_seconds": ("gauge", "The event-time watermark, as Unix time"),
    "statekit_state_keys": ("gauge", "Keys in the store at the version a restart loads"),
    "statekit_restart_state_version": ("gauge", "The state version a restart loads"),
    "statekit_state_bytes": ("gauge", "Bytes of the store's retained state files"),
    "statekit_state_files": ("gauge", "Retained state files by kind"),
    "statekit_snapshot_lag_versions": (
        "gauge", "Versions since the newest snapshot/zip (the worst partition unless "
        "per partition)"),
    "statekit_unloadable_partitions": (
        "gauge", "Partitions whose latest version cannot be rebuilt from retained files"),
    "statekit_orphan_files": ("gauge", "State files no retained version will ever load"),
    "statekit_partition_state_keys": (
        "gauge", "Keys in one partition (only with --per-partition)"),
    "statekit_partition_state_bytes": (
        "gauge", "Bytes of one partition's retained state files (only with --per-partition)"),
    "statekit_partition_snapshot_lag_versions": (
        "gauge", "Versions since one partition's newest snapshot/zip (only with "
        "--per-partition)"),
    "statekit_growth_verdict": (
        "gauge", "The store's key-growth verdict (stateset: 1 for the current verdict)"),
    "statekit_growth_keys_per_version": (
        "gauge", "Theil-Sen slope of the store's keys over its recent versions"),
    "statekit_growth_projected_plateau_keys": (
        "gauge", "Where a saturating store levels off: its projected plateau in keys (only "
        "for the verdict saturating)"),
    "statekit_growth_fraction_seen": (
        "gauge", "Share of a saturating store's projected plateau already live"),
    "statekit_growth_leak_keys_per_batch": (
        "gauge", "New keys per batch that no finite population explains (only for a store "
        "whose keys grow by a leak)"),
    "statekit_growth_projected_keys": (
        "gauge", "Keys on the busiest executor projected 1, 7 and 30 days ahead (label "
        "horizon_days) at the recent pace of batch time"),
    "statekit_growth_projected_executor_bytes": (
        "gauge", "Memory the state takes on the busiest executor projected 1, 7 and 30 days "
        "ahead (HDFS: heap; RocksDB: key and value bytes)"),
    "statekit_growth_executor_memory_full_in_seconds": (
        "gauge", "Time until the state fills the usable --executor-memory on the busiest "
        "executor (0: already; absent without --executor-memory or when it levels off "
        "below it)"),
    "statekit_restart_verdict": (
        "gauge", "Will the query restart on this checkpoint, statekit doctor's verdict with "
        "the restart path decoded; not-checked when only listed (--no-decode) (stateset: 1 "
        "for the current verdict)"),
    "statekit_restart_outcome": (
        "gauge", "What a restart that runs ends in, statekit doctor's outcome: same state "
        "and output, or it loses, repeats or differs (stateset: 1 for each that holds; all "
        "0 when it will not restart)"),
    "statekit_restart_problems": (
        "gauge", "Problems statekit doctor found, by code and severity"),
    "statekit_doctor_exit_code": (
        "gauge", "statekit doctor's exit code (0 restarts, 9 warnings, 14 restarts but loses, "
        "repeats or differs, 11 fixable, 12 not)"),
    "statekit_growth_damaged": (
        "gauge", "1 when the store's history stops before its committed version (a change "
        "file missing or damaged): the verdict is the one of the history up to there"),
    "statekit_recovery_estimate_seconds": (
        "gauge", "Estimated restart time: from the restart until its first batch completes, "
        "beyond what that batch costs on an empty checkpoint, plus re-run batches (absent "
        "when the checkpoint will not restart)"),
    "statekit_recovery_state_load_seconds": (
        "gauge", "The part of the estimate Spark's own state-load log would time"),
    "statekit_recovery_memory_bytes": (
        "gauge", "Memory the loaded state holds per executor (HDFS: heap; RocksDB: native)"),
    "statekit_recovery_estimate_low_seconds": ("gauge", "Low end of the estimate's range"),
    "statekit_recovery_estimate_high_seconds": ("gauge", "High end of the estimate's range"),
    "statekit_recovery_meets_rto": (
        "gauge", "1 when the high end of the estimate's range is within --rto, 0 when not "
        "(absent without --rto or without an estimate)"),
}


def _families() -> dict[str, Family]:
    return {name: Family(name, kind, text) for name, (kind, text) in FAMILIES.items()}


def checkpoint_metrics(url: str, open_checkpoint: Callable[[str], Any], *, cores: int,
                       sizing: ExecutorSizing = ONE_EXECUTOR,
                       per_partition: bool = False, decode: bool = True,
                       rto_s: float | None = None,
                       now: Callable[[], float] = time.time,
                       clock: Callable[[], float] = time.perf_counter,
                       on_error: Callable[[StatekitError], None] | None = None
                       ) -> list[Family]:
    """Every family for one checkpoint (``open_checkpoint(url)`` → a Checkpoint), rendered
    from its :class:`~statekit.assess.assessment.Assessment`: a checkpoint that will not
    restart has no restart estimate (none is exported). ``decode``: the doctor decodes every
    state file the restart loads (through the decode cache); else the verdict is
    ``not-checked`` unless the listing shows a fatal problem."""
    from statekit.fleet.readings import read_checkpoint, store_lag

    families = _families()
    started = clock()
    label = printable(url)
    try:
        assessment = read_checkpoint(url, open_checkpoint, cores=cores, sizing=sizing,
                                     decode=decode,
                                     rto_s=rto_s)
    except Exception as failed:  # a checkpoint's fault is its own series, never the scrape's
        error = as_user_error(failed, url)
        if on_error is not None:
            on_error(error)
        return failed_metrics(url, error, clock() - started, read_at=now())
    health, report, growth, recovery = (assessment.diagnosis, assessment.report,
                                        assessment.growth, assessment.estimate)
    f = families
    f["statekit_checkpoint_up"].add(1, checkpoint=label)
    f["statekit_checkpoint_read_timestamp_seconds"].add(now(), checkpoint=label)
    verdict_now = assessment.verdict.replace(" ", "-")
    for verdict in RESTART_VERDICTS:
        f["statekit_restart_verdict"].add(int(verdict_now == verdict), checkpoint=label,
                                          verdict=verdict)
    outcomes = set(health.outcomes or ()) if health.outcomes is not None else None
    for outcome in RESTART_OUTCOMES:
        holds = outcomes is not None and (outcome in outcomes if outcome != SAME
                                          else not outcomes)
        f["statekit_restart_outcome"].add(int(holds), checkpoint=label, outcome=outcome)
    f["statekit_doctor_exit_code"].add(health.exit_code, checkpoint=label)
    counted: dict[tuple[str, str], int] = {}
    for problem in health.problems:
        key = (problem.code, problem.severity)
        counted[key] = counted.get(key, 0) + 1
    for (code, severity), count in sorted(counted.items()):
        f["statekit_restart_problems"].add(count, checkpoint=label, code=code,
                                           severity=severity)
    f["statekit_restart_state_version"].add(assessment.loaded.version, checkpoint=label)
    f["statekit_last_committed_batch"].add(report.last_committed_batch, checkpoint=label)
    if report.last_batch_timestamp_ms is not None:
        stamp = report.last_batch_timestamp_ms / 1000
        f["statekit_last_batch_timestamp_seconds"].add(stamp, checkpoint=label)
        f["statekit_last_batch_age_seconds"].add(max(0.0, now() - stamp), checkpoint=label)
    if report.watermark_ms:
        f["statekit_watermark_seconds"].add(report.watermark_ms / 1000, checkpoint=label)
    verdicts = {(s.operator_id, s.store): s for s in growth.stores} if growth else {}
    for loaded in assessment.loaded.stores:  # the stores of the version a restart loads
        if loaded.keys is not None:
            f["statekit_state_keys"].add(loaded.keys, checkpoint=label,
                                         operator=loaded.operator_id, store=loaded.store)
    for store in report.stores:
        where = {"checkpoint": label, "operator": store.operator_id, "store": store.store}
        parts = store.partitions
        grown = verdicts.get((store.operator_id, store.store))
        f["statekit_state_bytes"].add(sum(p.bytes for p in parts), **where)
        for kind, count in sorted(store.files_by_kind.items()):
            f["statekit_state_files"].add(count, **where, kind=kind)
        f["statekit_snapshot_lag_versions"].add(store_lag(store), **where)
        f["statekit_unloadable_partitions"].add(
            sum(1 for p in parts if not p.loadable) + len(store.missing_partitions), **where)
        f["statekit_orphan_files"].add(sum(p.orphans for p in parts), **where)
        if per_partition:
            for p in parts:
                at = {**where, "partition": p.partition}
                f["statekit_partition_state_bytes"].add(p.bytes, **at)
                f["statekit_partition_state_keys"].add(p.keys, **at)
                f["statekit_partition_snapshot_lag_versions"].add(p.versions_since_snapshot,
                                                                  **at)
        if grown is not None:
            for verdict in VERDICTS:
                f["statekit_growth_verdict"].add(int(grown.verdict == verdict), **where,
                                                 verdict=verdict)
            f["statekit_growth_keys_per_version"].add(grown.keys.slope, **where)
            sat = grown.saturation
            if grown.leak_keys_per_batch is not None:
                f["statekit_growth_leak_keys_per_batch"].add(grown.leak_keys_per_batch, **where)
            if grown.verdict == SATURATING and sat is not None:
                f["statekit_growth_projected_plateau_keys"].add(sat.plateau, **where)
                f["statekit_growth_fraction_seen"].add(sat.fraction_seen, **where)
            f["statekit_growth_damaged"].add(int(bool(grown.history.damaged)), **where)
    ahead = growth.outlook if growth else None
    if ahead is not None:
        for h in ahead.horizons if ahead.batches_per_day is not None else ():
            f["statekit_growth_projected_keys"].add(h.keys_per_executor, checkpoint=label,
                                                    horizon_days=f"{h.days:g}")
            if h.bytes_per_executor is not None:
                f["statekit_growth_projected_executor_bytes"].add(
                    h.bytes_per_executor, checkpoint=label, horizon_days=f"{h.days:g}")
        if ahead.limit_days is not None:
            f["statekit_growth_executor_memory_full_in_seconds"].add(ahead.limit_days * 86400,
                                                                checkpoint=label)
    if recovery is not None:
        f["statekit_recovery_estimate_seconds"].add(recovery.estimate_s, checkpoint=label)
        f["statekit_recovery_estimate_low_seconds"].add(recovery.low_s, checkpoint=label)
        f["statekit_recovery_estimate_high_seconds"].add(recovery.high_s, checkpoint=label)
        f["statekit_recovery_state_load_seconds"].add(recovery.state_load_s, checkpoint=label)
        if recovery.memory is not None:
            f["statekit_recovery_memory_bytes"].add(recovery.memory.bytes, checkpoint=label)
    if assessment.rto is not None:
        f["statekit_recovery_meets_rto"].add(int(assessment.rto.meets), checkpoint=label)
    f["statekit_scrape_duration_seconds"].add(clock() - started, checkpoint=label)
    return list(f.values())


def as_user_error(error: BaseException, url: str) -> StatekitError:
    """``error`` as the one-line error a person can act on; a bug keeps its type's name
    (reason ``error``, exit code 1)."""
    known = user_error(error, url)
    if known is not None:
        return known
    bug = StatekitError(f"reading failed: {type(error).__name__}: "
                        f"{' '.join(str(error).split())[:300]}", path=url)
    return bug


def failed_metrics(url: str, error: StatekitError, seconds: float, *,
                   read_at: float) -> list[Family]:
    """The families of a checkpoint whose reading failed (or outlived its deadline):
    ``statekit_checkpoint_up 0`` with the error's one-word reason, its exit code, how long
    the reading ran."""
    families = _families()
    label = printable(url)
    families["statekit_checkpoint_up"].add(0, checkpoint=label, reason=reason_of(error))
    families["statekit_checkpoint_error_exit_code"].add(error.exit_code, checkpoint=label)
    families["statekit_checkpoint_read_timestamp_seconds"].add(read_at, checkpoint=label)
    families["statekit_scrape_duration_seconds"].add(seconds, checkpoint=label)
    return list(families.values())


def merge(per_checkpoint: Iterable[Sequence[Family]]) -> list[Family]:
    """One family per name, every checkpoint's samples in it, in :data:`FAMILIES` order."""
    merged = _families()
    for families in per_checkpoint:
        for family in families:
            merged[family.name].samples.extend(family.samples)
    return [family for family in merged.values() if family.samples]


def read_checkpoint_list(text: str) -> list[str]:
    """``--checkpoints-from``: the URL of each line (see :mod:`statekit.fleet.fleet_file`:
    blank lines and ``#`` comments skipped, a line's own storage options after its URL)."""
    from statekit.fleet.fleet_file import parse_fleet_file

    return [entry.url for entry in parse_fleet_file(text)]
