"""Is the state growing without bound? A verdict per store and overall, with its evidence.

The verdict combines three independent signals, because each alone misleads:

* **the key-count trend** (Theil–Sen + Mann–Kendall over the recent half of the history, see
  :mod:`statekit.growth.trend`) — but bursty traffic makes a bounded store rise for a while;
* **turnover** — in a bounded store keys expire: over the recent window most inserted keys
  are deleted again, and no live key is older than the window. A rising key count whose keys
  all turn over follows traffic; it is not a leak, so the verdict is ``bounded``. A store
  where keys survive the whole window (never-expiring keys) keeps its ``growing`` verdict;
* **the value-size trend** — the growing-object anti-pattern (a list of every event kept in
  the state) shows as a rising mean value size even when the key count is flat.

Everything comes from :mod:`statekit.state.history` (files, no JVM) and, optionally, a
StreamingQueryProgress log (:mod:`statekit.checkpoint.progress_log`) for history beyond
retention. The
result explains itself in sentences an on-call engineer can act on, and projects when the
state reaches ``max_keys`` / ``max_bytes`` at the current rate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.progress_log import OperatorProgress, ProgressPoint
from statekit.growth.outlook import Outlook, StorePath, moment_after, outlook
from statekit.growth.population import DiscoveryPoint, batches_until
from statekit.growth.recapture import MAX_DELETE_SHARE
from statekit.growth.saturation import (
    DEFAULT_THRESHOLDS,
    LEAK,
    PLATEAU_REACHED,
    UNDECIDED,
    Saturation,
    Thresholds,
    analyse_discovery,
)
from statekit.growth.saturation import SATURATING as FITS_A_POPULATION
from statekit.growth.sources import SourceAgreement, reconcile
from statekit.growth.trend import (
    ACCELERATING,
    BOUNDED,
    GROWING,
    INSUFFICIENT,
    SATURATING,
    Trend,
    classify,
    severity,
    theil_sen,
)
from statekit.growth.trend import MIN_POINTS as TREND_POINTS
from statekit.state.history import StoreHistory, VersionStats, all_histories
from statekit.state.workers import GroupRunner
from statekit.support.errors import BadInput
from statekit.support.presentation import human_duration

TURNOVER_MIN = 0.5
"""Deletes/inserts over the recent window above which keys count as turning over."""
VALUE_MIN_RELATIVE = 0.10
"""Mean value size must rise at least this much over the window to count as growing values."""


def worst(verdicts: Sequence[str]) -> str:
    return max(verdicts, key=severity) if verdicts else INSUFFICIENT


@dataclass(frozen=True)
class PartitionShare:
    partition: int
    keys: int
    slope: float
    """Keys per version over the recent window (Theil–Sen)."""
    share: float
    """Share of the store's rise (positive slopes only)."""


@dataclass(frozen=True)
class Projection:
    limit_name: str
    limit: float
    current: float
    batches: float | None
    hours: float | None
    at: str | None
    """ISO time when the limit is reached, from the last batch's timestamp."""
    note: str | None = None
    """Why there is no time (a saturating state that levels off below the limit)."""


@dataclass(frozen=True)
class Plateau:
    """Where a saturating state levels off: the stores' plateaus plus the bounded stores'
    current keys."""

    keys: float
    low: float
    high: float
    fraction_seen: float
    bytes: float | None
    batches: float | None
    """Batches until ``PLATEAU_REACHED`` of it (the slowest store)."""
    hours: float | None


@dataclass(frozen=True)
class StoreGrowth:
    operator_id: int
    store: str
    operator_name: str | None
    method: str
    verdict: str
    keys: Trend
    value_size: Trend | None
    turnover: float | None
    """Deletes / inserts over the recent window (None when unknown)."""
    inserts_per_version: float | None
    deletes_per_version: float | None
    oldest_age: int | None
    untouched_share: float | None
    untouched_share_first: float | None
    no_timeout_share: float | None
    partitions: tuple[PartitionShare, ...]
    evidence: tuple[str, ...]
    history: StoreHistory
    saturation: Saturation | None = None
    """The discovery-curve analysis, when the key count grows without turning over."""
    key_verdict: str = INSUFFICIENT
    """The keys' verdict (turnover and the discovery curve weighed); ``verdict`` is the worse
    of it and the value sizes'."""
    value_verdict: str | None = None
    """The mean value size's trend (``None``: values not replayed)."""

    @property
    def leak_keys_per_batch(self) -> float | None:
        """The leak's rate, when the store's keys grow by one (``None``: no leak) — what the
        summary, the stores table and the metrics gauge report."""
        sat = self.saturation
        if sat is None or sat.outcome != LEAK or self.key_verdict not in (GROWING,
                                                                            ACCELERATING):
            return None
        return sat.leak_keys_per_batch

    @property
    def label(self) -> str:
        name = f" ({self.operator_name})" if self.operator_name else ""
        store = "" if self.store == "default" else f" store {self.store}"
        return f"operator {self.operator_id}{name}{store}"

    def to_dict(self, *, with_history: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["history"] = self.history.to_dict() if with_history else None
        data["label"] = self.label
        return data


@dataclass(frozen=True)
class ProgressGrowth:
    """The verdict on one operator's progress-log history."""

    label: str
    verdict: str
    keys: Trend
    memory_per_key: Trend | None
    turnover: float | None
    batches: int
    evidence: tuple[str, ...]
    rows_total: tuple[int, ...] = ()
    saturation: Saturation | None = None


@dataclass(frozen=True)
class GrowthReport:
    checkpoint: str | None
    verdict: str
    total_keys: Trend | None
    total_bytes: Trend | None
    stores: tuple[StoreGrowth, ...]
    progress: tuple[ProgressGrowth, ...]
    projections: tuple[Projection, ...]
    summary: tuple[str, ...] = field(default=())
    plateau: Plateau | None = None
    outlook: Outlook | None = None
    """Keys and memory per executor in 1, 7 and 30 days, and when the memory given fills."""
    sources: tuple[SourceAgreement, ...] = ()
    """Per operator in both the state files and the progress log: whether they agree."""

    @property
    def is_growth(self) -> bool:
        return self.verdict in (GROWING, ACCELERATING)

    def to_dict(self, *, with_history: bool = True) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint, "verdict": self.verdict,
            "total_keys": self.total_keys.to_dict() if self.total_keys else None,
            "total_bytes": self.total_bytes.to_dict() if self.total_bytes else None,
            "stores": [s.to_dict(with_history=with_history) for s in self.stores],
            "progress": [asdict(p) for p in self.progress],
            "projections": [asdict(p) for p in self.projections],
            "summary": list(self.summary),
            "projected_plateau_keys": self.plateau.keys if self.plateau else None,
            "projected_plateau_range": [self.plateau.low, self.plateau.high]
            if self.plateau else None,
            "fraction_seen": self.plateau.fraction_seen if self.plateau else None,
            "projected_plateau_bytes": self.plateau.bytes if self.plateau else None,
            "plateau": asdict(self.plateau) if self.plateau else None,
            "outlook": self.outlook.to_dict() if self.outlook else None,
            "sources": [asdict(a) for a in self.sources],
        }

    def exceeds(self, max_keys: float | None, max_bytes: float | None) -> bool:
        """A saturating state whose plateau is above a limit (``--fail-on`` fires)."""
        if self.plateau is None:
            return False
        return (max_keys is not None and self.plateau.keys > max_keys) or (
            max_bytes is not None and self.plateau.bytes is not None
            and self.plateau.bytes > max_bytes)


def _window(history: StoreHistory, trend: Trend) -> list[VersionStats]:
    start = trend.window_first_x
    return [v for v in history.versions if start is None or v.version >= start]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _partition_shares(history: StoreHistory, start: int | None) -> tuple[PartitionShare, ...]:
    versions = [v.version for v in history.versions]
    first = next((i for i, v in enumerate(versions) if start is None or v >= start), 0)
    rows = []
    for partition, keys in sorted(history.partition_keys.items()):
        window = keys[first:]
        slope = theil_sen(versions[first:], window) if len(window) > 1 else 0.0
        rows.append((partition, keys[-1] if keys else 0, slope))
    rising = sum(max(0.0, s) for _, _, s in rows)
    return tuple(sorted((PartitionShare(p, k, s, max(0.0, s) / rising if rising else 0.0)
                         for p, k, s in rows), key=lambda r: (-r.slope, r.partition)))


def _fmt(n: float | None, unit: str = "") -> str:
    if n is None:
        return "?"
    if abs(n) >= 100 or float(n).is_integer():
        return f"{n:,.0f}{unit}"
    return f"{n:,.2f}{unit}"


def _rate(trend: Trend, what: str) -> str:
    per_hour = f", {_fmt(trend.slope_per_hour)}/hour of batch time" \
        if trend.slope_per_hour is not None else ""
    return f"{_fmt(trend.slope)} {what}/batch{per_hour}"


def discovery_points(history: StoreHistory) -> list[DiscoveryPoint]:
    """Each replayed version's inserts and updates against the live keys before it."""
    return [DiscoveryPoint(v.version, before.keys, v.inserts, v.updates)
            for before, v in itertools.pairwise(history.versions)
            if v.inserts is not None and v.updates is not None]


def comebacks(history: StoreHistory) -> tuple[tuple[int, ...] | None, str | None]:
    """The touch counts the leak test may use, or why not: deleted keys take theirs along."""
    if history.touch_counts is None:
        return None, None
    churn = [v for v in history.versions[1:] if v.inserts is not None]
    inserted = sum(v.inserts or 0 for v in churn)
    deleted = sum(v.deletes or 0 for v in churn)
    if inserted and deleted > MAX_DELETE_SHARE * inserted:
        return None, (f"{deleted / inserted:.0%} as many keys were deleted as inserted, and "
                      "a deleted key's touch count goes with it")
    return history.touch_counts, None


def _hours_per_batch(trend: Trend) -> float | None:
    if trend.slope and trend.slope_per_hour and trend.slope > 0 and trend.slope_per_hour > 0:
        return trend.slope / trend.slope_per_hour
    return None


def hours_per_batch(xs: Sequence[int], timestamps: Sequence[int | None]) -> float | None:
    """The recent pace of batch time: hours per batch over the newer half of the batches
    whose times are known (``None``: fewer than two, or no time between them)."""
    known = [(x, t) for x, t in zip(xs, timestamps, strict=True) if t is not None]
    known = known[len(known) // 2:] if len(known) >= 4 else known
    if len(known) < 2 or known[-1][0] == known[0][0] or known[-1][1] <= known[0][1]:
        return None
    return (known[-1][1] - known[0][1]) / 3_600_000 / (known[-1][0] - known[0][0])


def _per_day(rate: float | None, per_batch_hours: float | None) -> str:
    if rate is None or not per_batch_hours:
        return ""
    return f" (≈ {_fmt(rate * 24 / per_batch_hours)} a day at the recent pace)"


def _saturation_evidence(sat: Saturation, keys: Trend, bytes_per_key: float | None,
                         per_batch_hours: float | None = None) -> list[str]:
    """The discovery curve's finding in words (saturating, leak or undecided)."""
    if sat.outcome == LEAK:
        beside = (f", beside a finite population of about {_fmt(sat.population)} keys "
                  f"({min(1.0, sat.keys / sat.population):.0%} of the live keys' worth)"
                  if sat.population else "")
        return [f"Leak: new keys no finite population explains ({sat.method}): {sat.reason}: "
                f"about {_fmt(sat.leak_keys_per_batch)} keys per batch that will never stop"
                f"{_per_day(sat.leak_keys_per_batch, per_batch_hours)}{beside} "
                "(a leak, or an open population)."]
    if sat.outcome != FITS_A_POPULATION:
        if sat.more_batches is not None:
            hours = f" (~{human_duration(sat.more_batches * per_batch_hours * 3600)} of " \
                "batch time)" if per_batch_hours else ""
            return [f"Too early to tell a finite population from a leak: {sat.reason}. If the "
                    f"best fit (about {_fmt(sat.plateau)} keys) holds, ~"
                    f"{sat.more_batches:,.0f} more batches{hours} would see "
                    f"{sat.settle_at or 0:.0%} of it and settle it."]
        return [f"Cannot tell a finite population from a leak: {sat.reason}."]
    assert sat.plateau is not None and sat.plateau_low is not None  # saturating: all set
    assert sat.plateau_high is not None and sat.fraction_seen is not None
    skew = "uniform draws" if not sat.skew else f"Zipf-skewed draws, exponent {sat.skew:.2f}"
    lines = [f"The key count saturates: {sat.reason} (discovery curve, {skew}; "
             f"{sat.points} versions). "
             f"Projected plateau ≈ {_fmt(sat.plateau)} keys (range {_fmt(sat.plateau_low)}–"
             f"{_fmt(sat.plateau_high)}), {sat.fraction_seen:.0%} of it seen."]
    if sat.batches_to_plateau is not None:
        per = _hours_per_batch(keys)
        hours = (f" (~{human_duration(sat.batches_to_plateau * per * 3600)} of batch time)"
                 if per else "")
        lines.append(f"At {_fmt(sat.touched_per_batch)} keys touched per batch it reaches "
                     f"{PLATEAU_REACHED:.0%} of the plateau in ~{sat.batches_to_plateau:,.0f} "
                     f"batches{hours}.")
    if sat.touch_f is not None and sat.seen_once_closed is not None:
        chao = (f"; Chao's lower bound on the population: {_fmt(sat.chao1_keys)} keys"
                if sat.chao1_keys else "")
        lines.append(f"Comebacks agree: {sat.seen_once:,} keys were written in one version "
                     f"only, {sat.seen_once_closed:,.0f} expected of a closed population "
                     f"(a leak would not improve the fit: F = {sat.touch_f:.1f}){chao}.")
    elif sat.touch_note:
        lines.append(f"Comebacks not tested ({sat.touch_note}): a slow leak inside the "
                     "population cannot be ruled out.")
    if bytes_per_key:
        lines.append(f"State at the plateau ≈ {_fmt(sat.plateau * bytes_per_key)} B "
                     f"({_fmt(bytes_per_key)} B per key now).")
    return lines


def weighed(key_verdict: str, saturation: Saturation) -> str:
    """The keys' verdict once the discovery curve has weighed a rise: ``saturating`` for a
    finite population, ``insufficient-history`` when it is too early to tell (say when, do
    not guess), else the trend's."""
    if saturation.outcome == FITS_A_POPULATION:
        return SATURATING
    if saturation.outcome == UNDECIDED and saturation.more_batches is not None:
        return INSUFFICIENT
    return key_verdict


def analyse_store(history: StoreHistory, timestamps: dict[int, int | None],
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> StoreGrowth:
    """The verdict and evidence for one store's history."""
    versions = [v.version for v in history.versions]
    times = [timestamps.get(v) for v in versions]
    per_batch_hours = hours_per_batch(versions, times)
    keys = classify(versions, history.series("keys"), times)
    window = _window(history, keys)
    inserts = [v.inserts for v in window[1:] if v.inserts is not None]
    deletes = [v.deletes for v in window[1:] if v.deletes is not None]
    turnover = (sum(deletes) / sum(inserts)) if inserts and sum(inserts) else None
    last = history.versions[-1] if history.versions else None
    first = history.versions[0] if history.versions else None
    oldest = last.oldest_age if last else None
    window_span = (window[-1].version - window[0].version) if window else 0
    untouched = (last.untouched / last.keys) if last and last.keys and last.untouched \
        is not None else None
    untouched_first = (first.untouched / first.keys) if first and first.keys and \
        first.untouched is not None else None
    no_timeout = (last.no_timeout / last.keys) if last and last.keys and last.no_timeout \
        is not None else (1.0 if history.timeouts == "disabled" and last and last.keys
                          else None)
    value_trend = None
    if history.method == "replay":
        means = history.series("value_mean")
        if all(m is not None for m in means):
            value_trend = classify(versions, means, times, min_relative=VALUE_MIN_RELATIVE)
    evidence: list[str] = []
    key_verdict = keys.verdict
    turns_over = (turnover is not None and turnover >= TURNOVER_MIN and oldest is not None
                  and oldest < window_span)
    if keys.is_growth and turns_over:
        key_verdict = BOUNDED
        evidence.append(
            f"Key count rises ({keys.relative_growth:+.0%} over the last {len(window)} "
            f"versions) but the keys turn over: {turnover:.0%} as many keys were removed as "
            f"inserted and no live key is older than {oldest} versions — the rise follows "
            "traffic, it is not accumulation.")
    elif keys.is_growth and last is not None:  # always: a growing series has points
        evidence.append(f"Live keys {_fmt(window[0].keys)} → {_fmt(last.keys)} over versions "
                        f"{window[0].version}–{last.version}: {_rate(keys, 'keys')} "
                        f"(Mann–Kendall p={keys.p_value:.2g}).")
    elif keys.verdict == INSUFFICIENT:
        more = max(1, TREND_POINTS - keys.points)
        evidence.append(f"Only {keys.points} retained version(s): {keys.reason}; {more} more "
                        f"batch{'es' if more > 1 else ''} would give a verdict (or the progress "
                        "log, or a higher spark.sql.streaming.minBatchesToRetain).")
    saturation = None
    if keys.is_growth and not turns_over:
        touch_counts, why_not = comebacks(history)
        saturation = analyse_discovery(discovery_points(history), last.keys if last else 0,
                                       thresholds=thresholds, touch_counts=touch_counts)
        if why_not:  # no touch counts went in: the fit has no note of its own
            saturation = replace(saturation, touch_note=why_not)
        evidence.extend(_saturation_evidence(saturation, keys, _bytes_per_key(last),
                                             per_batch_hours))
        key_verdict = weighed(key_verdict, saturation)
    verdict = key_verdict
    value_verdict = value_trend.verdict if value_trend is not None else None
    if value_trend is not None and value_trend.is_growth:
        verdict = worst([verdict, value_trend.verdict])
        if verdict != key_verdict:
            evidence.insert(0, f"Verdict {verdict.upper()} from the values: the keys are "
                            f"{key_verdict}, but each key's state grows.")
        if last is not None:  # always: a growing series has points
            evidence.append(
                f"Values grow: mean value size {_fmt(window[0].value_mean, ' B')} → "
                f"{_fmt(last.value_mean, ' B')} (p99 {_fmt(window[0].value_p99, ' B')} → "
                f"{_fmt(last.value_p99, ' B')}); state objects accumulate data.")
    if verdict in (GROWING, ACCELERATING):
        if inserts:
            driver = ("New keys drive it" if turnover is not None and turnover < TURNOVER_MIN
                      else "Keys churn")
            evidence.append(f"{driver}: {_fmt(_mean(inserts))} keys inserted and "
                            f"{_fmt(_mean(deletes))} removed per batch.")
            if deletes and sum(deletes) == 0:
                evidence.append("No key was removed in the window: keys never expire "
                                "(no timeout, no watermark, or no state.remove()).")
        if untouched is not None:
            before = f" (was {untouched_first:.0%} at version {first.version})" \
                if untouched_first is not None and first is not None else ""
            evidence.append(f"{untouched:.0%} of live keys unchanged for ≥ "
                            f"{history.stale_after} versions{before}; the oldest unchanged "
                            f"for {'≥ ' if history.history_starts_at is not None else ''}"
                            f"{oldest} versions.")
    if no_timeout is not None and (verdict in (GROWING, ACCELERATING) or no_timeout > 0):
        why = " (the query uses NoTimeout)" if history.timeouts == "disabled" else ""
        evidence.append(f"{no_timeout:.0%} of live keys have no timeout set{why}.")
    shares = _partition_shares(history, keys.window_first_x)
    if verdict in (GROWING, ACCELERATING) and shares and len(shares) > 1:
        rising = [s for s in shares if s.slope > 0]
        top = rising[:max(1, len(shares) // 5)]
        concentrated = sum(s.share for s in top)
        if len(shares) >= 4 and concentrated >= 0.6:
            evidence.append("Growth is concentrated in partition(s) "
                            + ", ".join(str(s.partition) for s in top)
                            + f" ({concentrated:.0%}): look for hot keys.")
        else:
            evidence.append(f"Growth is spread over {len(rising)} of {len(shares)} "
                            "partitions (many keys, not one hot key).")
    if verdict == BOUNDED and keys.verdict == BOUNDED and window:
        low, high = min(v.keys for v in window), max(v.keys for v in window)
        churn = (f"; {turnover:.0%} as many keys removed as inserted" if turnover is not None
                 else "")
        age = f"; no live key older than {oldest} versions" if oldest is not None else ""
        evidence.append(f"Live keys stay between {_fmt(low)} and {_fmt(high)} over versions "
                        f"{window[0].version}–{window[-1].version} ({keys.reason}){churn}{age}.")
    if history.notes:
        evidence.extend(f"Note: {n}." for n in history.notes)
    return StoreGrowth(history.operator_id, history.store, history.operator_name,
                       history.method, verdict, keys, value_trend, turnover,
                       _mean(inserts), _mean(deletes), oldest, untouched, untouched_first,
                       no_timeout, shares, tuple(evidence), history, saturation,
                       key_verdict, value_verdict)


def progress_discovery(points: Sequence[ProgressPoint]) -> list[DiscoveryPoint]:
    """The discovery curve from a progress log: a batch's keys touched (``numRowsUpdated``)
    and inserted (the change of ``numRowsTotal`` plus ``numRowsRemoved``)."""
    out = []
    for before, p in itertools.pairwise(points):
        if p.rows_updated is None or before.rows_total is None or p.rows_total is None:
            continue
        inserted = p.rows_total - before.rows_total + (p.rows_removed or 0)
        if 0 <= inserted <= p.rows_updated:
            out.append(DiscoveryPoint(p.batch_id, before.rows_total, inserted,
                                      p.rows_updated - inserted))
    return out


def analyse_progress(progress: OperatorProgress,
                     thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
                     with_bytes: bool = True) -> ProgressGrowth:
    """The verdict on one operator's progress-log history; ``with_bytes``: say what the
    state takes at its plateau (memory per key now: ``memoryUsedBytes``) — not when the
    state files say it, in the one figure every page shows."""
    points = [p for p in progress.points if p.rows_total is not None]
    batches = [p.batch_id for p in points]
    times = [p.timestamp_ms for p in points]
    per_batch_hours = hours_per_batch(batches, times)
    keys = classify(batches, [p.rows_total or 0 for p in points], times)  # none is None
    per_key = [(p.memory_bytes / p.rows_total) if p.memory_bytes and p.rows_total else None
               for p in points]
    known = [v for v in per_key if v is not None]
    memory = classify(batches, known, times, min_relative=VALUE_MIN_RELATIVE) \
        if len(known) == len(per_key) and per_key else None
    start = keys.window_first_x
    window = [p for p in points if start is None or p.batch_id >= start]
    removed = sum(p.rows_removed or 0 for p in window[1:])
    grown = ((window[-1].rows_total or 0) - (window[0].rows_total or 0)) if len(window) > 1 \
        else 0
    inserted = grown + removed
    turnover = removed / inserted if inserted > 0 else None
    key_verdict = keys.verdict
    evidence = [f"{len(points)} batches ({batches[0]}–{batches[-1]}) in the progress log: "
                f"{keys.reason}."] if points else ["no numRowsTotal in the progress log"]
    if turnover is not None:
        evidence.append(f"{removed:,} rows removed against {inserted:,} inserted in the "
                        f"recent window ({turnover:.0%} turnover).")
    turns_over = turnover is not None and turnover >= TURNOVER_MIN
    if keys.is_growth and turns_over:
        key_verdict = BOUNDED
        evidence.append("The rows rise but turn over: the rise follows traffic, it is not "
                        "accumulation.")
    saturation = None
    if keys.is_growth and not turns_over:
        saturation = analyse_discovery(progress_discovery(points), points[-1].rows_total or 0,
                                       thresholds=thresholds)
        last = points[-1]
        bytes_per_key = last.memory_bytes / last.rows_total if with_bytes and \
            last.memory_bytes and last.rows_total else None
        evidence.extend(_saturation_evidence(saturation, keys, bytes_per_key,
                                             per_batch_hours))
        key_verdict = weighed(key_verdict, saturation)
    verdict = key_verdict
    if memory is not None and memory.is_growth:
        verdict = worst([key_verdict, memory.verdict])
        evidence.append(f"Memory per key rises: {memory.reason}.")
    return ProgressGrowth(progress.label, verdict, keys, memory, turnover, len(points),
                          tuple(evidence), tuple(p.rows_total or 0 for p in points),
                          saturation)


def _sum_series(histories: Sequence[StoreHistory], name: str
                ) -> tuple[list[int], list[float]] | None:
    """A total over stores, on the versions every store has."""
    if not histories or any(not h.versions for h in histories):
        return None
    by_version = [{v.version: getattr(v, name) for v in h.versions} for h in histories]
    common = sorted(set.intersection(*(set(values) for values in by_version)))
    totals = []
    for version in common:
        values = [of_store[version] for of_store in by_version]
        if any(v is None for v in values):
            return None
        totals.append(float(sum(values)))
    return common, totals


def _projection(name: str, limit: float | None, trend: Trend | None,
                last_ms: int | None) -> Projection | None:
    if limit is None or trend is None or trend.last_value is None:
        return None
    eta = trend.time_to(limit)
    batches, hours = eta if eta else (None, None)
    at = moment_after(last_ms, hours) if hours is not None and math.isfinite(hours) and \
        hours < 24 * 3650e2 else None
    return Projection(name, limit, trend.last_value, batches, hours, at)


def batch_timestamps(ckpt: Checkpoint, versions: Sequence[int]) -> dict[int, int | None]:
    """Version → its batch's timestamp (version v is written by batch v − 1); ``None`` where
    the ledger audit found the entry unreadable or its clock skewed (a rate from such a
    timestamp would be wrong; ``statekit report`` names the file)."""
    ledger = ckpt.ledger
    skewed = {p.batch_id for p in ledger.problems if p.code == "clock-skew"}
    return {v: ledger.offsets[v - 1].timestamp_ms
            if v - 1 in ledger.offsets and v - 1 not in skewed else None
            for v in versions if v - 1 in ledger.offsets}


def analyse(ckpt: Checkpoint | None, *, operator: int | None = None,
            progress: Sequence[OperatorProgress] = (), max_keys: float | None = None,
            max_bytes: float | None = None, stale_after: int | None = None,
            on_progress: Callable[[str], None] | None = None,
            runner: GroupRunner | None = None,
            thresholds: Thresholds = DEFAULT_THRESHOLDS, executors: int = 1,
            executor_memory: float | None = None) -> GrowthReport:
    """The growth report of a checkpoint (and/or a progress log); ``runner``: replay the
    state files on Spark (:mod:`statekit.jobs.distributed`), the same results;
    ``executors``, ``executor_memory``: what the outlook spreads the state over and
    measures it against (:mod:`statekit.growth.outlook`)."""
    if ckpt is not None and operator is not None and \
            operator not in ckpt.inventory.operator_ids:
        known = ", ".join(map(str, ckpt.inventory.operator_ids)) or "none"
        raise BadInput(f"no operator {operator} (operators: {known})", path=ckpt.location.url)
    histories = all_histories(ckpt, operator=operator, stale_after=stale_after,
                              progress=on_progress, runner=runner) if ckpt is not None else []
    versions = sorted({v.version for h in histories for v in h.versions})
    timestamps = batch_timestamps(ckpt, versions) if ckpt is not None and versions else {}
    stores = tuple(analyse_store(h, timestamps, thresholds) for h in histories)
    total_keys = total_bytes = None
    keys_series = _sum_series(histories, "keys")
    if keys_series:
        total_keys = classify(keys_series[0], keys_series[1],
                              [timestamps.get(v) for v in keys_series[0]])
    bytes_series = _sum_series(histories, "bytes") or _sum_series(histories, "disk_bytes")
    if bytes_series:
        total_bytes = classify(bytes_series[0], bytes_series[1],
                               [timestamps.get(v) for v in bytes_series[0]])
    from_progress = tuple(analyse_progress(p, thresholds, with_bytes=not stores)
                          for p in progress)
    sources = reconcile(stores, from_progress)
    verdict = one_verdict(stores, from_progress, sources)
    last_ms = timestamps.get(versions[-1]) if versions else None
    if last_ms is None and from_progress:
        last_ms = next((p.timestamp_ms for op in progress for p in op.points[-1:]), None)
    pace = hours_per_batch(versions, [timestamps.get(v) for v in versions]) if versions \
        else _progress_pace(progress)
    provider = ckpt.latest_offset.provider if ckpt is not None and \
        ckpt.latest_offset is not None else None
    ahead = outlook(_paths(stores, from_progress, progress), provider=provider or "hdfs",
                    hours_per_batch=pace, last_ms=last_ms, executors=executors,
                    limit_bytes=executor_memory)
    keys_trend = total_keys if total_keys is not None else (
        from_progress[0].keys if from_progress else None)
    plateau = None
    if verdict == SATURATING:
        plateau = plateau_of(stores) if stores else _progress_plateau(from_progress)
    if plateau is not None:
        projections = tuple(p for p in (
            _plateau_projection("max_keys", max_keys, plateau, stores, keys_trend, last_ms),
            _plateau_projection("max_bytes", max_bytes, plateau, stores, keys_trend, last_ms))
            if p is not None)
    else:
        projections = tuple(p for p in (
            _projection("max_keys", max_keys, keys_trend, last_ms),
            _projection("max_bytes", max_bytes, total_bytes, last_ms)) if p is not None)
    summary = _summary(verdict, stores, from_progress, projections, plateau, sources, ahead,
                       pace)
    if ckpt is not None and not histories:
        summary = ("The checkpoint holds no state store files (a stateless query, or no "
                   "batch has run yet).", *summary[1:])
    return GrowthReport(ckpt.location.url if ckpt is not None else None, verdict, total_keys,
                        total_bytes, stores, from_progress, projections, summary, plateau,
                        ahead, sources)


def one_verdict(stores: Sequence[StoreGrowth], progress: Sequence[ProgressGrowth],
                sources: Sequence[SourceAgreement]) -> str:
    """The state's verdict: the worst operator's, each operator judged once — by the
    source :func:`statekit.growth.sources.reconcile` chose where both cover it."""
    decided = {a.operator_id: a.verdict for a in sources}
    matched = {a.label for a in sources}
    return worst([s.verdict for s in stores if s.operator_id not in decided]
                 + list(decided.values())
                 + [p.verdict for p in progress if p.label not in matched])


def _progress_pace(progress: Sequence[OperatorProgress]) -> float | None:
    for op in progress:
        pace = hours_per_batch([p.batch_id for p in op.points],
                               [p.timestamp_ms for p in op.points])
        if pace is not None:
            return pace
    return None


def _paths(stores: Sequence[StoreGrowth], from_progress: Sequence[ProgressGrowth],
           progress: Sequence[OperatorProgress]) -> list[StorePath]:
    """What the outlook projects: the stores, or without them the progress log's operators
    (memory per key as Spark measured it)."""
    if stores:
        return [StorePath(
            float(s.history.versions[-1].keys) if s.history.versions else 0.0, s.key_verdict,
            s.keys, s.saturation, _bytes_per_key(s.history.versions[-1])
            if s.history.versions else None,
            max(0.0, s.value_size.slope or 0.0) if s.value_size is not None
            and s.value_size.is_growth else 0.0,
            {p: float(k[-1]) for p, k in s.history.partition_keys.items() if k})
            for s in stores]
    out = []
    for grown, op in zip(from_progress, progress, strict=True):
        last = next((p for p in reversed(op.points) if p.rows_total is not None), None)
        per_key = last.memory_bytes / last.rows_total if last is not None and \
            last.memory_bytes and last.rows_total else None
        out.append(StorePath(float(grown.rows_total[-1]) if grown.rows_total else 0.0,
                             grown.verdict, grown.keys, grown.saturation, None, 0.0, {},
                             memory_per_key=per_key))
    return out


def outlook_lines(ahead: Outlook) -> list[str]:
    """The outlook in sentences (the CLI's summary, the TUI's chart title)."""
    from statekit.support.presentation import human_bytes

    where = f"on the busiest of {ahead.executors} executors ({ahead.executor_share:.0%} of " \
        "the keys)" if ahead.executors > 1 else "on one executor"
    lines = []
    if ahead.batches_per_day is not None:
        lines.append(f"Projected {where}, {ahead.memory}: {ahead.horizon_text}.")
    else:
        lines.append("No projection in days: the batches' times are unknown.")
    if ahead.limit_bytes is not None:
        limit = human_bytes(int(ahead.limit_bytes))
        if ahead.limit_days is not None:
            at = f" (around {ahead.limit_at})" if ahead.limit_at else ""
            when = "already" if ahead.limit_days == 0 else \
                f"in {human_duration(ahead.limit_days * 86400)}{at}"
            lines.append(f"Executor memory {limit}: the state fills its usable "
                         f"{human_bytes(int(ahead.usable_bytes or 0))} {when}.")
        else:
            lines.append(f"Executor memory {limit}: {ahead.limit_note}.")
    return lines


def _bytes_per_key(last: VersionStats | None) -> float | None:
    return last.bytes / last.keys if last and last.keys and last.bytes else None


_PlateauPart = tuple[float, Saturation | None, float | None, float | None]
"""One store's (or operator's) share of the state's plateau: its keys now, its saturation
when its verdict is saturating, bytes per key, hours per batch."""


def _sum_plateaus(parts: Iterable[_PlateauPart]) -> Plateau | None:
    """The state's plateau: saturating parts at theirs, the others at today's keys; the
    time to it is the slowest part's."""
    keys = low = high = now = 0.0
    total_bytes: float | None = 0.0
    batches: float | None = 0.0
    hours: float | None = 0.0
    for current, sat, per_key, per in parts:
        if sat is not None and sat.plateau is not None:
            top, bottom, peak = sat.plateau, sat.plateau_low or sat.plateau, \
                sat.plateau_high or sat.plateau
            when = sat.batches_to_plateau
            batches = None if batches is None or when is None else max(batches, when)
            hours = None if hours is None or when is None or per is None else \
                max(hours, when * per)
        else:
            top = bottom = peak = current
        keys, low, high, now = keys + top, low + bottom, high + peak, now + current
        total_bytes = None if total_bytes is None or (per_key is None and top) else \
            total_bytes + top * (per_key or 0.0)
    if not keys:
        return None
    return Plateau(keys, low, high, now / keys, total_bytes, batches, hours)


def plateau_of(stores: Sequence[StoreGrowth]) -> Plateau | None:
    """The state's plateau from its stores."""
    parts = []
    for store in stores:
        last = store.history.versions[-1] if store.history.versions else None
        parts.append((float(last.keys) if last else 0.0,
                      store.saturation if store.verdict == SATURATING else None,
                      _bytes_per_key(last), _hours_per_batch(store.keys)))
    return _sum_plateaus(parts)


def _progress_plateau(progress: Sequence[ProgressGrowth]) -> Plateau | None:
    """The plateau from the progress log alone (no checkpoint: no bytes, no hours)."""
    return _sum_plateaus((float(p.rows_total[-1]) if p.rows_total else 0.0,
                          p.saturation if p.verdict == SATURATING else None, None, None)
                         for p in progress)


def _plateau_projection(name: str, limit: float | None, plateau: Plateau,
                        stores: Sequence[StoreGrowth], trend: Trend | None,
                        last_ms: int | None) -> Projection | None:
    """When a saturating state reaches ``limit``: never if its plateau (the whole range)
    stays below it; otherwise along the discovery curve of the state's total."""
    if limit is None:
        return None
    if name == "max_keys":
        scale = 1.0
    elif plateau.bytes is None:
        return None
    else:
        scale = plateau.bytes / plateau.keys  # bytes per key at the plateau
    level, top = plateau.keys * scale, plateau.high * scale
    current = plateau.keys * plateau.fraction_seen * scale
    if current >= limit:
        return Projection(name, limit, current, 0.0, 0.0, None)
    if top < limit:
        return Projection(name, limit, current, None, None, None,
                          note=f"levels off near {_fmt(level)} (at most {_fmt(top)}), "
                               "below the limit: never reached")
    if level <= limit:
        return Projection(name, limit, current, None, None, None,
                          note=f"levels off near {_fmt(level)}, below the limit, but the "
                               f"plateau's range reaches {_fmt(top)}")
    sats = [s.saturation for s in stores if s.verdict == SATURATING and s.saturation]
    # the state's total as one population: the skew of its biggest store, all their draws
    skew = max(sats, key=lambda x: x.plateau or 0.0).skew or 0.0 if sats else 0.0
    pace = sum(x.events_per_batch or 0.0 for x in sats)
    # the curve counts keys: a byte limit is the keys that many bytes hold
    batches = batches_until(current / scale, limit / scale, plateau.keys, skew, pace)
    per = _hours_per_batch(trend) if trend is not None else None
    hours = batches * per if batches is not None and per is not None else None
    return Projection(name, limit, current, batches, hours, moment_after(last_ms, hours),
                      note=f"along the discovery curve to a plateau near {_fmt(level)}")


def _summary(verdict: str, stores: Sequence[StoreGrowth], progress: Sequence[ProgressGrowth],
             projections: Sequence[Projection], plateau: Plateau | None = None,
             sources: Sequence[SourceAgreement] = (), ahead: Outlook | None = None,
             pace: float | None = None) -> tuple[str, ...]:
    lines = []
    growing = [s for s in stores if s.verdict in (GROWING, ACCELERATING)]
    if growing:
        lines.append("State grows in " + ", ".join(f"{s.label} ({s.verdict})"
                                                   for s in growing) + ".")
    elif plateau is not None:
        when = f"; {PLATEAU_REACHED:.0%} of it in ~{plateau.batches:,.0f} batches" \
            if plateau.batches is not None else ""
        size = f" (≈ {_fmt(plateau.bytes)} B)" if plateau.bytes else ""
        lines.append(f"State is saturating: a finite population being discovered, levelling "
                     f"off near {_fmt(plateau.keys)} keys{size} (range {_fmt(plateau.low)}–"
                     f"{_fmt(plateau.high)}), {plateau.fraction_seen:.0%} seen{when}.")
    elif verdict == BOUNDED:
        lines.append("State is bounded: no store shows sustained growth.")
    elif verdict == INSUFFICIENT:
        judged: list[tuple[str, Saturation | None]] = [
            *((x.verdict, x.saturation) for x in stores),
            *((x.verdict, x.saturation) for x in progress)]
        waits = [sat.more_batches for verdict_of, sat in judged
                 if verdict_of == INSUFFICIENT and sat is not None
                 and sat.more_batches is not None]
        if waits:
            lines.append(f"Keys rise, but it is too early to tell a finite population from a "
                         f"leak: ~{max(waits):,.0f} more batches would tell (the evidence "
                         "says why).")
        else:
            lines.append("Not enough retained history for a verdict; pass a progress log "
                         "(--progress-log) or raise spark.sql.streaming.minBatchesToRetain.")
    for s in stores:
        rate = s.leak_keys_per_batch
        if rate is not None and s.saturation is not None:
            population = s.saturation.population
            beside = f" beside a finite population of about {_fmt(population)} keys" \
                if population else ""
            lines.append(f"{s.label[0].upper()}{s.label[1:]} leaks about {_fmt(rate)} keys "
                         f"per batch{_per_day(rate, pace)}{beside}.")
    matched = {a.label for a in sources}
    for p in progress:
        if p.verdict in (GROWING, ACCELERATING) and p.label not in matched:
            lines.append(f"The progress log shows {p.label} {p.verdict}.")
    lines.extend(a.sentence for a in sources)
    if ahead is not None and (ahead.basis not in ("flat", "unknown")
                              or ahead.limit_bytes is not None):
        lines.extend(outlook_lines(ahead))
    for proj in projections:
        if proj.note and proj.batches is None:
            lines.append(f"{proj.limit_name.replace('_', ' ').capitalize()} "
                         f"{proj.limit:,.0f}: the state {proj.note}.")
        elif proj.hours is not None or proj.batches is not None:
            when = f" around {proj.at}" if proj.at else ""
            hours = f"{proj.hours:,.1f} hours" if proj.hours is not None else "?"
            batches = f"{proj.batches:,.0f} batches" if proj.batches is not None else "?"
            lines.append(f"At this rate the state reaches {proj.limit_name.replace('_', ' ')} "
                         f"{proj.limit:,.0f} in {batches} ({hours}){when}.")
    return tuple(lines)
