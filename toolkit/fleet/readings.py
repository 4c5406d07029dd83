"""Many checkpoints at a glance: one reading per checkpoint, one row per reading.

An SRE rarely owns one stream. ``statekit metrics`` and the TUI's fleet list answer the same
questions for each checkpoint — will it restart (the doctor), how big is its state, is it
growing, how long would a restart take and does that meet the RTO, how far behind are its
snapshots, when did it last run — so both take them from one
:class:`~statekit.assess.assessment.Assessment` per checkpoint, and a checkpoint that cannot
be read is a row with its one-line error, never a failure of the whole list.

:func:`read_fleet` reads the checkpoints in parallel and hands each row over as soon as it is
read (first rows visible before the last is read); a slow or broken checkpoint delays only
its own row.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.storage_errors import deadline_error, user_error
from statekit.growth.trend import ACCELERATING, BOUNDED, GROWING, INSUFFICIENT, SATURATING
from statekit.state.memory import ONE_EXECUTOR, ExecutorSizing
from statekit.support.presentation import printable

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment
    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.report.checkpoint_report import CheckpointReport, StoreReport

MAX_WORKERS = 8
"""Checkpoints read at once at most."""
GROWTH_ORDER = (ACCELERATING, GROWING, SATURATING, BOUNDED, INSUFFICIENT)
"""Growth verdicts from the most to the least alarming (a checkpoint shows its worst)."""


def read_checkpoint(url: str, open_checkpoint: Callable[[str], Checkpoint], *, cores: int,
                    sizing: ExecutorSizing = ONE_EXECUTOR,
                    decode: bool = True, rto_s: float | None = None) -> Assessment:
    """The assessment of one checkpoint — the doctor's verdict (the restart path decoded,
    through the decode cache), the report, the growth analysis, the loaded version's keys and
    the restart estimate. Raises the ``StatekitError`` of a checkpoint that cannot be
    opened."""
    return assessed(url, open_checkpoint(url), cores=cores, decode=decode, rto_s=rto_s,
                    sizing=sizing)


def assessed(url: str, ckpt: Checkpoint, *, cores: int, decode: bool = True,
             rto_s: float | None = None, listed: CheckpointReport | None = None,
             sizing: ExecutorSizing = ONE_EXECUTOR) -> Assessment:
    """``read_checkpoint`` of an opened checkpoint (``listed``: its report, already built)."""
    from statekit.assess.assessment import EstimateOptions, assess

    return assess(ckpt, shown=url, decode=decode, fix=False, growth=True,
                  estimate=EstimateOptions(cores=cores, executors=sizing.executors,
                                           memory_limit=sizing.memory),
                  rto_s=rto_s, listed_report=listed)


@dataclass(frozen=True)
class FleetRow:
    """One checkpoint in the fleet list, as plain values (what the screen sorts and shows)."""

    url: str
    seconds: float
    """How long its reading took."""
    error: str | None = None
    """The one-line error of a checkpoint that could not be read (nothing else is set)."""
    exit_code: int | None = None
    """The documented exit code of that error, or the doctor's."""
    health: str | None = None
    """The doctor's verdict: ``restarts``, ``restarts with warnings``, ``will not restart``."""
    outcome: str | None = None
    """What the restart ends in (``same``, ``loses``, …; ``None``: it does not restart)."""
    problems: int = 0
    summary: str = ""
    """The doctor's one line (its verdict and first fatal problem)."""
    last_batch: int | None = None
    last_batch_ms: int | None = None
    keys: int | None = None
    bytes: int | None = None
    growth: str | None = None
    """The most alarming growth verdict of its stores."""
    restart_s: float | None = None
    rto_s: float | None = None
    meets_rto: bool | None = None
    """The assessment's RTO judgement (``None``: no RTO or no estimate)."""
    snapshot_lag: int | None = None
    """The largest number of versions any partition is behind its last snapshot."""
    complete: bool = True
    """``False`` for the first step's row: growth and the restart estimate still to come."""

    @property
    def over_rto(self) -> bool | None:
        return None if self.meets_rto is None else not self.meets_rto

    def age_s(self, now: float) -> float | None:
        """Seconds since its last batch ran."""
        return None if self.last_batch_ms is None else max(0.0, now - self.last_batch_ms / 1000)


def worst_growth(verdicts: Iterable[str]) -> str | None:
    seen = set(verdicts)
    return next((verdict for verdict in GROWTH_ORDER if verdict in seen), None)


def store_lag(store: StoreReport) -> int | None:
    """The most versions any of its partitions is behind its last snapshot."""
    lags = [p.versions_since_snapshot for p in store.partitions
            if p.versions_since_snapshot is not None]
    return max(lags) if lags else None


def listed_row(url: str, report: CheckpointReport, seconds: float,
               rto_s: float | None = None) -> FleetRow:
    """The first step's row: what the listing says, the verdict still to come."""
    lags = [lag for lag in map(store_lag, report.stores) if lag is not None]
    return FleetRow(
        url=url, seconds=seconds, last_batch=report.last_committed_batch,
        last_batch_ms=report.last_batch_timestamp_ms,
        bytes=sum(p.bytes for s in report.stores for p in s.partitions), rto_s=rto_s,
        snapshot_lag=max(lags) if lags else None, complete=False)


def row_of(url: str, assessment: Assessment, seconds: float) -> FleetRow:
    """The complete row: the listing's values and the assessment's."""
    growth, estimate = assessment.growth, assessment.estimate
    return replace(
        listed_row(url, assessment.report, seconds, assessment.rto_s),
        exit_code=assessment.diagnosis.exit_code, health=assessment.verdict,
        outcome=assessment.outcome,
        problems=len(assessment.diagnosis.problems), summary=assessment.headline,
        keys=assessment.loaded.keys,
        growth=worst_growth(s.verdict for s in growth.stores) if growth else None,
        restart_s=estimate.estimate_s if estimate is not None else None,
        meets_rto=assessment.rto.meets if assessment.rto is not None else None,
        complete=True)


def _error_row(url: str, error: BaseException, seconds: float) -> FleetRow:
    known = user_error(error, url)  # statekit's own, or a store's (credentials, endpoint…)
    if known is not None:
        return FleetRow(url=url, seconds=seconds, exit_code=known.exit_code,
                        error=printable(" ".join(str(known).split())), complete=True)
    if isinstance(error, OSError):  # a reading that fails below statekit's own checks
        return FleetRow(url=url, seconds=seconds, exit_code=3, complete=True,
                        error=printable(f"{url}: {error.strerror or error}"))
    return FleetRow(url=url, seconds=seconds, exit_code=1, complete=True,  # a bug: its row
                    error=printable(f"{url}: reading failed: {type(error).__name__}: {error}"))


class _Fleet:
    """One :func:`read_fleet` call's checkpoints, read in two steps each (see there)."""

    def __init__(self, urls: list[str], storage_options: Mapping[str, Any] | None,
                 per_url: Mapping[str, Mapping[str, Any]] | None,
                 cores: int, rto_s: float | None, on_row: Callable[[int, FleetRow], None] | None,
                 clock: Callable[[], float]) -> None:
        self.urls, self.cores, self.rto_s = urls, cores, rto_s
        self.options = dict(storage_options or {})
        self.per_url = per_url or {}
        self.on_row, self.clock = on_row, clock
        self.rows: list[FleetRow | None] = [None] * len(urls)
        self.given_up: set[int] = set()
        """Checkpoints whose reading passed its deadline: a late row is dropped."""
        self._lock = threading.Lock()

    def _open(self, url: str) -> Checkpoint:
        from statekit.checkpoint import open_checkpoint

        return open_checkpoint(url, self.per_url.get(url, self.options),
                               allow_missing_metadata=True)

    def _deliver(self, index: int, row: FleetRow) -> None:
        with self._lock:
            if index in self.given_up:
                return
            self.rows[index] = row
        if self.on_row is not None:
            self.on_row(index, row)

    def give_up(self, index: int, error: BaseException, seconds: float) -> None:
        """The checkpoint's reading passed its deadline: its row says so, for good."""
        self._deliver(index, _error_row(self.urls[index], error, seconds))
        with self._lock:
            self.given_up.add(index)

    def listed(self, index: int) -> tuple[Checkpoint, CheckpointReport, float] | None:
        from statekit.report.checkpoint_report import build_report

        url, started = self.urls[index], self.clock()
        try:
            ckpt = self._open(url)
            report = build_report(ckpt)
        except Exception as error:
            self._deliver(index, _error_row(url, error, self.clock() - started))
            return None
        seconds = self.clock() - started
        self._deliver(index, listed_row(url, report, seconds, self.rto_s))
        return ckpt, report, seconds

    def completed(self, index: int, ckpt: Checkpoint, report: CheckpointReport,
                  seconds: float) -> None:
        url, started = self.urls[index], self.clock()
        try:
            done = assessed(url, ckpt, cores=self.cores, rto_s=self.rto_s, listed=report)
        except Exception as error:
            self._deliver(index, _error_row(url, error, seconds + self.clock() - started))
            return
        self._deliver(index, row_of(url, done, seconds + self.clock() - started))


def default_workers(count: int) -> int:
    return max(1, min(count, MAX_WORKERS))


def read_fleet(urls: Iterable[str], storage_options: Mapping[str, Any] | None = None, *,
               cores: int, rto_s: float | None = None, workers: int | None = None,
               on_row: Callable[[int, FleetRow], None] | None = None,
               timeout_s: float | None = None,
               per_url: Mapping[str, Mapping[str, Any]] | None = None,
               clock: Callable[[], float] = time.perf_counter) -> list[FleetRow]:
    """Every checkpoint's complete row, in ``urls``' order.

    Each checkpoint is read in two steps: first what the listing says (bytes, snapshot lag,
    the last batch: milliseconds for a local checkpoint), then its assessment — the doctor's
    verdict with the restart path decoded (through the decode cache), the loaded version's
    keys, growth and the restart estimate against the RTO. ``on_row(index, row)`` hears both
    — ``row.complete`` tells them apart — and the first steps are queued before any second
    step, so the whole list appears before the slow columns fill in.

    Each checkpoint has ``timeout_s`` for both steps together (its own deadline,
    :mod:`statekit.support.deadlines`): one that takes longer, or whose store never
    answers, gets an error row at the deadline while the others go on; a reading given up
    that way is not started again, by a later call either, until it has ended.
    ``storage_options`` apply to every checkpoint, ``per_url`` to one each (a fleet file's
    own options). The steps run on ``workers`` threads: object stores' reads overlap, and a
    big local checkpoint's growth replay spreads over processes of its own
    (:mod:`statekit.state.workers`)."""
    from statekit.support.deadlines import Finished, Readings

    targets = list(dict.fromkeys(urls))
    if not targets:
        return []
    fleet = _Fleet(targets, storage_options, per_url, cores, rto_s, on_row, clock)
    readings = Readings(workers or default_workers(len(targets)), name="statekit-fleet")
    deadline = {index: clock() + timeout_s for index in range(len(targets))} \
        if timeout_s is not None else {}

    def left(index: int) -> float | None:
        return None if timeout_s is None else max(0.0, deadline[index] - clock())

    def failed(index: int, finished: Finished) -> None:
        if finished.busy or finished.timed_out:
            fleet.give_up(index, deadline_error(targets[index], timeout_s,
                                                still_running=finished.busy),
                          finished.seconds)
        else:
            assert finished.error is not None
            fleet.give_up(index, finished.error, finished.seconds)

    def first_done(index: int) -> Callable[[Finished], None]:
        def done(finished: Finished) -> None:
            if not finished.ok:
                failed(index, finished)
            elif finished.value is not None:
                readings.submit(("fleet", targets[index]),
                                lambda: fleet.completed(index, *finished.value),
                                second_done(index), timeout=left(index))
        return done

    def second_done(index: int) -> Callable[[Finished], None]:
        def done(finished: Finished) -> None:
            if not finished.ok:
                failed(index, finished)
        return done

    for index, url in enumerate(targets):
        readings.submit(("fleet", url), functools.partial(fleet.listed, index),
                        first_done(index), timeout=left(index))
    readings.wait_idle()
    readings.close()
    return [row for row in fleet.rows if row is not None]
