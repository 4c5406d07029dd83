"""The query's own restarts, read from its progress log: what the estimate learns from.

Why: the cost model is fitted on one machine, and a user's cluster differs in ways no probe
run here carries (cores, an object store's per-request latency, another heap, another JVM).
But the query has restarted before: every start writes a new ``runId`` into the progress
events, and the first batch of each run is a measured restart on exactly that cluster and
that state. Its user-visible cost is that first batch over the run's steady batches of
similar input (the second batch of a run is still warming up and is left out when the run
has others). The query's first start (its run from batch 0, on an empty checkpoint) costs
what any cold first batch costs there: the part of a restart that is not the state.

:func:`learn` holds those measurements against what the uncalibrated model says for the
state each restart loaded, and fits the model to them: the restarts weighted by how close
their state's modelled cost is to today's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from statekit.checkpoint.event_log import StatefulTask
from statekit.checkpoint.progress_log import BatchTiming, runs

SIMILAR_INPUT = 2.0
"""A steady batch counts as similar input when its rows are within this factor of the
first batch's."""

COLD_NOISE_S = 1.0
"""How much a cold first batch varies between starts, where the log cannot measure it
(the benchmark grid: about a second on 5–10 s first batches)."""

MIN_MODELLED_S = 0.5
"""Restarts whose state the model costs below this, and that measured within a cold start's
noise of nothing, are too small to learn a scale from."""

SCALE_LIMITS = (0.05, 50.0)
"""A learned scale outside this range is a broken measurement: clamped."""


@dataclass(frozen=True)
class ObservedRestart:
    """One start of the query, as its progress log measured it."""

    batch: int
    """The run's first batch: a restart loads state version ``batch``."""
    run_id: str | None
    first_s: float
    """The first batch's ``triggerExecution``."""
    steady_s: float
    """The median of the run's steady batches of similar input."""
    steady_ids: tuple[int, ...]
    """The batches it was measured against."""
    input_rows: int | None
    state_rows: int | None
    """Rows the state held when the run started (the previous batch's ``numRowsTotal``)."""

    @property
    def steady_batches(self) -> int:
        return len(self.steady_ids)

    @property
    def cost_s(self) -> float:
        """What the start cost the user: its first batch over a steady one."""
        return self.first_s - self.steady_s


@dataclass(frozen=True)
class RestartHistory:
    """The starts a progress log holds."""

    restarts: tuple[ObservedRestart, ...]
    """Every run that started on existing state (a first batch after batch 0)."""
    first_start: ObservedRestart | None
    """The query's first start (from batch 0, an empty checkpoint), when the log has it."""
    skipped: tuple[tuple[int, str], ...] = ()
    """(first batch, why) of runs that could not be measured."""

    @property
    def cold_start_s(self) -> float | None:
        """What a cold first batch costs there without any state (the first start's cost)."""
        return self.first_start.cost_s if self.first_start is not None else None


def _steady(run: Sequence[BatchTiming]) -> tuple[list[BatchTiming], str | None]:
    """The run's batches that a first batch is measured against, or why there are none."""
    if len(run) < 2:
        return [], "the run ran one batch: nothing to measure its first against"
    candidates = list(run[2:]) if len(run) >= 4 else list(run[1:])
    rows = run[0].input_rows
    if rows is None:
        return candidates, None
    similar = [t for t in candidates if t.input_rows is not None
               and rows / SIMILAR_INPUT <= t.input_rows <= max(rows, 1) * SIMILAR_INPUT]
    if not similar:
        others = ", ".join(f"{t.input_rows:,}" for t in candidates[:3]
                           if t.input_rows is not None)
        return [], (f"its first batch read {rows:,} rows, its other batches {others}: no "
                    "batch of similar input to measure it against")
    return similar, None


def observed_restarts(timings: Sequence[BatchTiming]) -> RestartHistory:
    """Every start of the query in the log, measured (see the module docstring)."""
    by_batch = {t.batch_id: t for t in timings}
    restarts, skipped = [], []
    first_start = None
    for run in runs(timings):
        head = run[0]
        if head.run_id is None:
            continue
        steady, why = _steady(run)
        if why is not None:
            skipped.append((head.batch_id, why))
            continue
        previous = by_batch.get(head.batch_id - 1)
        observed = ObservedRestart(head.batch_id, head.run_id, head.trigger_s,
                                   median(t.trigger_s for t in steady),
                                   tuple(t.batch_id for t in steady), head.input_rows,
                                   previous.state_rows if previous is not None else None)
        if head.batch_id == 0:
            first_start = observed
        else:
            restarts.append(observed)
    return RestartHistory(tuple(restarts), first_start, tuple(skipped))


@dataclass(frozen=True)
class LearnedRestart:
    """One past restart beside what the uncalibrated model says for the state it loaded."""

    restart: ObservedRestart
    modelled_s: float
    """The uncalibrated estimate for the state it loaded (beyond an empty checkpoint's
    first batch)."""
    basis: str
    """How that state was costed: from the files of its version, or today's estimate
    scaled by its rows."""
    weight: float

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self.restart)
        data.update(steady_batches=self.restart.steady_batches, cost_s=self.restart.cost_s,
                    modelled_s=self.modelled_s, basis=self.basis, weight=self.weight)
        return data


@dataclass(frozen=True)
class PartitionCheck:
    """A past restart's slowest partition, as Spark's event log timed it, beside the model."""

    batch: int
    stage_order: int
    """Which of the batch's stateful stages (0: the first)."""
    partition: int
    """The partition whose task ran longest over its steady tasks."""
    measured_s: float
    """That task's time over the median of the same partition's tasks in the run's steady
    batches: its load, and what a restarted task pays beyond a warm one."""
    modelled_s: float
    """The uncalibrated model's first-batch cost of that partition's load."""
    model_slowest: int
    """The partition the model names slowest in that stage."""


def partition_checks(tasks: Sequence[StatefulTask], restart: ObservedRestart,
                     modelled: dict[tuple[int, int], float]) -> list[PartitionCheck]:
    """Per stateful stage of ``restart``'s first batch, its slowest partition measured (the
    event log's task times, over the run's steady batches) beside ``modelled``: the model's
    seconds by (stage order, partition) at the version it loaded."""
    steady_ids = set(restart.steady_ids)
    first: dict[tuple[int, int], float] = {}
    steady: dict[tuple[int, int], list[float]] = {}
    for task in tasks:
        if restart.run_id is not None and task.run_id not in (None, restart.run_id):
            continue
        key = (task.stage_order, task.partition)
        if task.batch == restart.batch:
            first[key] = max(first.get(key, 0.0), task.seconds)
        elif task.batch in steady_ids:
            steady.setdefault(key, []).append(task.seconds)
    extra = {key: seconds - median(steady[key]) for key, seconds in first.items()
             if key in steady}
    checks = []
    for order in sorted({order for order, _ in extra}):
        stage = {p: s for (o, p), s in extra.items() if o == order}
        partition = max(stage, key=lambda p: stage[p])
        model_stage = {p: s for (o, p), s in modelled.items() if o == order}
        if (order, partition) not in modelled or not model_stage:
            continue
        checks.append(PartitionCheck(restart.batch, order, partition, stage[partition],
                                     modelled[(order, partition)],
                                     max(model_stage, key=lambda p: model_stage[p])))
    return checks


@dataclass(frozen=True)
class RestartLearning:
    """What the estimate learned from the query's restarts (or why it learned nothing)."""

    scale: float | None
    """The model's state cost × this ... (``None``: uncalibrated)"""
    cold_start_s: float | None
    """A cold first batch's cost without state, there (the query's first start)."""
    used: tuple[LearnedRestart, ...] = ()
    skipped: tuple[tuple[int, str], ...] = ()
    noise_s: float = COLD_NOISE_S
    """How much a cold first batch varies there ..."""
    noise_basis: str = "the benchmark's: a cold first batch varies by about a second"
    """... and where that figure comes from."""
    why_uncalibrated: str | None = None
    notes: tuple[str, ...] = field(default=())
    partitions: tuple[PartitionCheck, ...] = ()
    """Each restart's slowest partition, where Spark's event log timed its tasks."""
    fixed_s: float = 0.0
    """... plus this, what a restart costs there beyond the model whatever its state (either
    sign): the fit's fixed part."""
    scale_fitted: bool = False
    """Whether the restarts' states differed enough to fit the scale (else it is kept at 1:
    the model's own growth from their state to today's)."""
    slowest_today: tuple[int, int, float] | None = None
    """Today's slowest partition: (stateful stage order, partition, the uncalibrated
    model's first-batch cost of its load)."""

    @property
    def slowest_today_s(self) -> float | None:
        """Today's slowest partition's cost: the model × what the event log measured of the
        slowest partitions (else × the learned scale)."""
        if self.slowest_today is None:
            return None
        return self.slowest_today[2] * (self.partition_scale or self.scale or 1.0)

    @property
    def partition_scale(self) -> float | None:
        """The slowest partitions' measured ÷ modelled seconds (``None``: no event log, or
        nothing it timed stood out of the noise)."""
        modelled = sum(c.modelled_s for c in self.partitions)
        measured = sum(c.measured_s for c in self.partitions)
        if not self.partitions or modelled <= 0 or measured <= 0:
            return None
        if all(c.modelled_s < MIN_MODELLED_S and c.measured_s < COLD_NOISE_S
               for c in self.partitions):
            return None  # a restarted task's own cold start, not its load
        low, high = SCALE_LIMITS
        return min(high, max(low, measured / modelled))

    def first_batch_s(self, estimate_s: float) -> float:
        """The restart's whole first batch over a steady batch (what the log would show):
        the estimate plus the cold start."""
        return estimate_s + (self.cold_start_s or 0.0)

    def state_s(self, modelled_s: float) -> float:
        """What the learned fit says a restart whose state the model costs ``modelled_s``
        costs (beyond an empty checkpoint's first batch)."""
        return (self.scale or 1.0) * modelled_s + self.fixed_s

    def error(self, learned: LearnedRestart) -> float:
        """How far the uncalibrated model was from a restart (its state's part)."""
        measured = learned.restart.cost_s - (self.cold_start_s or 0.0)
        return (learned.modelled_s - measured) / max(abs(measured), 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "fixed_s": self.fixed_s,
                "scale_fitted": self.scale_fitted, "cold_start_s": self.cold_start_s,
                "used": [{**u.to_dict(), "uncalibrated_error": self.error(u)}
                         for u in self.used],
                "skipped": [{"batch": b, "why": why} for b, why in self.skipped],
                "noise_s": self.noise_s, "noise_basis": self.noise_basis,
                "why_uncalibrated": self.why_uncalibrated, "notes": list(self.notes),
                "partitions": [asdict(c) for c in self.partitions],
                "partition_scale": self.partition_scale,
                "slowest_today": list(self.slowest_today) if self.slowest_today else None,
                "slowest_today_s": self.slowest_today_s}


HOW_TO_CALIBRATE = ("give --progress-log LOG of this query once it has restarted (each "
                    "restart in it is a measurement), or --measure to time Spark's own "
                    "state load")

NEXT_RESTART = ("its next restart, logged, will calibrate it; --measure times Spark's own "
                "state load now")

MORE_STATE = "--measure times Spark's own state load of the largest partitions"


def _similarity(modelled_s: float, today_s: float) -> float:
    """1 for a restart whose state costs what today's does, falling with the log-ratio."""
    if modelled_s <= 0 or today_s <= 0:
        return 0.1
    return 1.0 / (1.0 + math.log(modelled_s / today_s) ** 2)


def learn(history: RestartHistory, modelled: Callable[[ObservedRestart], float | None],
          today_s: float, today_rows: float | None,
          partitions: Callable[[ObservedRestart], list[PartitionCheck]] | None = None
          ) -> RestartLearning:
    """The model fitted to the log's restarts: state cost = scale × modelled + fixed part.

    ``modelled``: the uncalibrated estimate for the state a restart loaded, from the files
    of its version (``None`` when they are gone: then today's estimate ``today_s`` scaled by
    the rows it held against ``today_rows``, at half the weight). Each restart's state cost
    is its measured cost less the cold start (the query's first start, when the log has it:
    else the cold start is counted in the fixed part). The restarts weigh by how close their
    modelled cost is to today's. When their modelled costs differ enough to tell a scale
    from a fixed part (:data:`SCALE_SPREAD`), both are fitted by weighted least squares; else
    the scale stays 1 — from the restarts' state to today's the cost grows as the model
    says — and the fixed part is their weighted mean difference from the model. Why not a
    scale alone: what a cluster adds is often fixed per restart (an object store's latency
    on a similar number of files, planning), and a scale fitted to it grows with the state
    that it does not grow with (``bench_recovery_history.py``). ``partitions``: each
    restart's slowest partition checked against Spark's event log, where one is given.
    """
    cold = history.cold_start_s
    skipped = list(history.skipped)
    used = []
    for restart in history.restarts:
        value = modelled(restart)
        basis = f"the files of version {restart.batch}"
        weight = 1.0
        if value is None:
            if restart.state_rows is None or not today_rows:
                skipped.append((restart.batch, "its version's files are gone and the log "
                                               "has no row count to scale today's by"))
                continue
            value = today_s * restart.state_rows / today_rows
            basis = (f"today's estimate × its rows ({restart.state_rows:,} of "
                     f"{today_rows:,.0f}): its version's files are gone")
            weight = 0.5
        used.append(LearnedRestart(restart, value, basis,
                                   weight * _similarity(value, today_s)))
    notes = []
    if cold is None and used:
        notes.append("the log does not hold the query's first start (batch 0): the cold "
                     "start is not told apart from the state's cost, both are in the fixed "
                     "part")
    if not used:
        why = (f"the progress log holds no restart of the query (a new runId after batch "
               f"0); {NEXT_RESTART}" if not history.restarts else
               f"no restart in the progress log could be costed; {NEXT_RESTART}")
        return RestartLearning(None, cold, (), tuple(skipped), why_uncalibrated=why,
                               notes=tuple(notes))
    small = all(u.modelled_s < MIN_MODELLED_S
                and abs(u.restart.cost_s - (cold or 0.0)) < COLD_NOISE_S for u in used)
    checks = tuple(c for u in used for c in (partitions(u.restart) if partitions else []))
    if small:
        noise_s, noise_basis = _noise(used, cold, 1.0, 0.0)
        return RestartLearning(
            None, cold, tuple(used), tuple(skipped), noise_s, noise_basis,
            "the restarts in the log loaded too little state to tell its cost from a cold "
            f"start's noise; {MORE_STATE}", tuple(notes), checks)
    scale, fixed, fitted = fit_restarts([(u.modelled_s, u.restart.cost_s - (cold or 0.0),
                                          u.weight) for u in used])
    noise_s, noise_basis = _noise(used, cold, scale, fixed)
    return RestartLearning(scale, cold, tuple(used), tuple(skipped), noise_s, noise_basis,
                           None, tuple(notes), checks, fixed, fitted)


SCALE_SPREAD = (2.0, 3.0)
"""A scale is fitted only when the restarts' modelled costs span at least this ratio and
this many cold-start noises (seconds): with less, two restarts' slope is the noise's."""


def fit_restarts(points: Sequence[tuple[float, float, float]]) -> tuple[float, float, bool]:
    """(scale, fixed part, whether the scale was fitted) of state cost = scale × modelled +
    fixed over ``points`` of (modelled, measured state cost, weight)."""
    total = sum(w for _, _, w in points)
    modelled = [m for m, _, _ in points if m > 0]
    spread = len(modelled) >= 2 and min(modelled) > 0 and \
        max(modelled) / min(modelled) >= SCALE_SPREAD[0] and \
        max(modelled) - min(modelled) >= SCALE_SPREAD[1] * COLD_NOISE_S
    if spread and total > 0:
        mean_m = sum(w * m for m, _, w in points) / total
        mean_y = sum(w * y for _, y, w in points) / total
        var = sum(w * (m - mean_m) ** 2 for m, _, w in points)
        if var > 0:
            low, high = SCALE_LIMITS
            scale = sum(w * (m - mean_m) * (y - mean_y) for m, y, w in points) / var
            scale = min(high, max(low, scale))
            return scale, mean_y - scale * mean_m, True
    fixed = sum(w * (y - m) for m, y, w in points) / total if total > 0 else 0.0
    return 1.0, fixed, False


def _noise(used: Sequence[LearnedRestart], cold: float | None, scale: float, fixed: float
           ) -> tuple[float, str]:
    """How much a cold first batch varies, from three or more restarts' spread around what
    the learned fit says for them; else the benchmark's figure."""
    if len(used) < 3:
        return COLD_NOISE_S, RestartLearning.noise_basis
    residuals = [u.restart.cost_s - (cold or 0.0) - scale * u.modelled_s - fixed
                 for u in used]
    return (1.4826 * median(abs(r) for r in residuals),
            f"measured: the spread of {len(residuals)} restarts of this query")
