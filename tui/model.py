"""What the TUI shows, loaded from the checkpoint without Textual (so it is testable alone).

Every screen reads the same snapshot: the opened checkpoint, its file-level report and its
batch timeline — one listing of ``state/``, no JVM. The slower analyses (the growth replay,
the recovery estimate) are computed at most once per snapshot, whichever screen asks first:
the Overview's dashboard and the Growth and Recovery tabs share them, so opening a tab while
the Overview is still working waits for the same computation instead of starting another.
A refresh (``r``, or ``--watch``) builds a new snapshot from a freshly opened checkpoint, so
new batches and files appear.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.checkpoint import Checkpoint
from statekit.report.batches import BatchTimeline, batch_timeline
from statekit.report.checkpoint_report import CheckpointReport, build_report
from statekit.state.memory import ONE_EXECUTOR, ExecutorSizing

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment
    from statekit.doctor import Diagnosis
    from statekit.growth.analysis import GrowthReport
    from statekit.recovery.estimate import RecoveryEstimate

#: The clock behind "read in … s" (the snapshot tests hold it still).
clock = time.perf_counter
#: The wall clock behind ages ("last batch 3 min ago"; the snapshot tests hold it still).
wall_clock = time.time

T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot:
    ckpt: Checkpoint
    report: CheckpointReport
    timeline: BatchTimeline
    loaded_at: float
    """Wall-clock time of the reading (ages are measured from it)."""
    seconds: float
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False, compare=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _once(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()`` at most once per snapshot; concurrent callers wait for the first."""
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._memo:
                self._memo[name] = compute()
            result: T = self._memo[name]
            return result

    def growth(self, sizing: ExecutorSizing | None = None) -> GrowthReport:
        """``statekit growth`` on this snapshot's checkpoint, its outlook over ``sizing``'s
        executors (raises StatekitError)."""
        from statekit.growth.analysis import analyse

        size = sizing or ONE_EXECUTOR
        return self._once(f"growth:{size}", lambda: analyse(
            self.ckpt, executors=size.executors, executor_memory=size.memory))

    def health(self) -> Diagnosis:
        """``statekit doctor``'s diagnosis of this snapshot's checkpoint, the restart path
        decoded (through the decode cache) and the fix searched: the one answer every screen
        gives to "will it restart?"."""
        from statekit.doctor import diagnose

        return self._once("health", lambda: diagnose(self.ckpt, decode=True, fix=True))

    def assessment(self, cores: int, rto_s: float | None = None,
                   sizing: ExecutorSizing | None = None) -> Assessment:
        """The :class:`~statekit.assess.assessment.Assessment` every screen renders, built
        from this snapshot's diagnosis and growth analysis (each computed once)."""
        from statekit.assess.assessment import EstimateOptions, assess
        from statekit.support.errors import StatekitError

        def build() -> Assessment:
            try:
                grown, error = self.growth(sizing), None
            except StatekitError as failure:
                grown, error = None, str(failure)
            return assess(self.ckpt, diagnosis=self.health(), growth_report=grown,
                          growth_error=error, estimate=EstimateOptions(
                              cores=cores, executors=size.executors,
                              memory_limit=size.memory),
                          rto_s=rto_s, listed_report=self.report)

        size = sizing or ONE_EXECUTOR
        return self._once(f"assessment:{cores}:{rto_s}:{size}", build)

    def recovery(self, cores: int, rto_s: float | None = None,
                 sizing: ExecutorSizing | None = None) -> RecoveryEstimate:
        """The assessment's restart estimate (raises StatekitError: a checkpoint that will
        not restart has none)."""
        from statekit.support.errors import StatekitError

        assessment = self.assessment(cores, rto_s, sizing)
        if not assessment.estimate_applies:
            health = assessment.diagnosis
            raise StatekitError(f"no restart estimate: the checkpoint will not restart "
                                f"({health.headline.split(': ', 1)[-1]}); statekit doctor "
                                "prints the fix")
        if assessment.estimate is None:
            raise StatekitError(assessment.estimate_error or "no restart estimate")
        return assessment.estimate


def load_snapshot(url: str, storage_options: dict[str, Any] | None = None, *,
                  opened: Checkpoint | None = None) -> Snapshot:
    """Open ``url`` afresh (or take ``opened``, just opened by the caller) and build the
    report and batch timeline (raises StatekitError)."""
    started = clock()
    ckpt = opened if opened is not None else open_checkpoint(
        url, storage_options, allow_missing_metadata=True)
    report = build_report(ckpt)
    timeline = batch_timeline(ckpt)
    return Snapshot(ckpt, report, timeline, wall_clock(), clock() - started)


def snapshot_in_background(url: str, storage_options: dict[str, Any] | None = None, *,
                           opened: Checkpoint | None = None) -> Future[Snapshot]:
    """Start building the first snapshot at once, in a thread, before Textual is even
    imported: on an object store the listing's first levels mostly wait on the network,
    which is when importing and starting the app can run (the app takes the result as its
    first load)."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekit-first-load")
    try:
        return pool.submit(load_snapshot, url, storage_options, opened=opened)
    finally:
        pool.shutdown(wait=False)
