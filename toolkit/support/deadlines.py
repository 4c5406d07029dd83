"""Readings that cannot hold anyone else up: each with its own deadline, one in flight per key.

The services an SRE leaves running (``metrics --serve``, the fleet list, ``--watch``) read
dozens of checkpoints, some behind an object store that accepts a connection and never
answers. Python cannot stop a thread blocked in a socket read, so a deadline cannot end the
reading; what it can do is stop *waiting* for it:

* a reading past its deadline is reported as timed out at once (``on_done`` with
  ``timed_out``) and its worker is abandoned — a fresh worker takes its slot, so the other
  checkpoints' readings go on at full width;
* the abandoned thread ends when its socket finally gives up (the object-store clients have
  socket timeouts); until then its key stays *given up*, and no second reading of that key
  starts, in this :class:`Readings` or any other — so a checkpoint that hangs for a week
  costs one thread, not one per scrape (readings that are merely running do not block
  their key: the callers do not start one twice);
* workers are daemon threads: a process that is told to stop does not wait for a reading
  that will never end.

Everything here is plain threading, no executor: a ``ThreadPoolExecutor`` cannot give up a
worker, and its exit hook joins every worker — exactly the hang the services must not have.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

_GIVEN_UP: set[Hashable] = set()
"""Keys whose reading was abandoned at its deadline and still runs, in this process."""
_GIVEN_UP_LOCK = threading.Lock()


@dataclass(frozen=True)
class Finished:
    """How one reading ended: its value, its exception, or its deadline."""

    key: Hashable
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    seconds: float = 0.0
    """From the start of the reading until it ended or its deadline passed."""
    busy: bool = False
    """Not started: an earlier reading of the same key, abandoned at its deadline, still
    runs."""

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and not self.busy


@dataclass(eq=False)
class _Job:
    key: Hashable
    run: Callable[[], Any]
    on_done: Callable[[Finished], None]
    timeout: float | None
    started: float | None = None
    delivered: bool = False
    abandoned: bool = False
    worker: threading.Thread | None = field(default=None, repr=False)


def given_up(key: Hashable) -> bool:
    """Does a reading of ``key`` that was abandoned at its deadline still run?"""
    with _GIVEN_UP_LOCK:
        return key in _GIVEN_UP


class Readings:
    """Up to ``slots`` readings at once, each with its deadline; see the module's notes.

    ``submit`` queues a reading; ``on_done`` is called exactly once per submitted reading,
    from a worker or the watchdog thread: with the value or exception, or ``timed_out``
    when the deadline passed first (a late result is then dropped), or ``busy`` at once when
    the key is still in flight."""

    def __init__(self, slots: int, *, name: str = "statekit-reading",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = max(1, slots)
        self.name = name
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._running: set[_Job] = set()
        self._workers = 0
        """Live workers that have not been abandoned."""
        self._pending = 0
        """Readings submitted whose ``on_done`` has not returned yet."""
        self._closed = False
        self._watchdog: threading.Thread | None = None

    # ------------------------------------------------------------------ submitting
    def submit(self, key: Hashable, run: Callable[[], Any], on_done: Callable[[Finished], None],
               *, timeout: float | None) -> bool:
        """Queue ``run()`` for ``key``; ``False`` (and ``on_done`` with ``busy``) when a
        reading of ``key`` abandoned at its deadline still runs."""
        if given_up(key):
            on_done(Finished(key, busy=True))
            return False
        job = _Job(key, run, on_done, timeout)
        with self._cond:
            if self._closed:
                raise RuntimeError("Readings closed")
            self._queue.append(job)
            self._pending += 1
            if self._workers < self.slots:
                self._start_worker()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                                  name=f"{self.name}-deadline")
                self._watchdog.start()
            self._cond.notify_all()
        return True

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every submitted reading has been delivered and its ``on_done`` has
        returned — including readings an ``on_done`` submitted (or ``timeout``)."""
        end = None if timeout is None else self._clock() + timeout
        with self._cond:
            while self._pending:
                left = None if end is None else end - self._clock()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.25 if left is None else min(0.25, left))
        return True

    def close(self) -> None:
        """Stop the workers (readings still queued are dropped, running ones abandoned)."""
        with self._cond:
            self._closed = True
            dropped = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        with self._cond:
            self._pending -= len(dropped)
            self._cond.notify_all()

    @property
    def threads(self) -> int:
        """Live worker threads that hold a slot (abandoned ones excluded)."""
        with self._cond:
            return self._workers

    # ------------------------------------------------------------------ workers
    def _start_worker(self) -> None:
        """(With the condition held.)"""
        self._workers += 1
        threading.Thread(target=self._work, name=f"{self.name}-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    if not self._cond.wait(30.0) and not self._queue:
                        break  # idle for long: give the thread back
                if self._closed or not self._queue:
                    self._workers -= 1
                    self._cond.notify_all()
                    return
                job = self._queue.popleft()
                job.started = self._clock()
                job.worker = threading.current_thread()
                self._running.add(job)
                self._cond.notify_all()  # the watchdog learns the new deadline
            value: Any = None
            error: BaseException | None = None
            try:
                value = job.run()
            except BaseException as failed:  # handed to on_done, never lost
                error = failed
            with self._cond:
                self._running.discard(job)
                abandoned = job.abandoned
                if abandoned:  # the key may be read again
                    with _GIVEN_UP_LOCK:
                        _GIVEN_UP.discard(job.key)
                else:
                    job.delivered = True
                self._cond.notify_all()
            if abandoned:  # its slot went to a fresh worker at the deadline
                return
            assert job.started is not None
            self._delivered(job, Finished(job.key, value=value, error=error,
                                          seconds=self._clock() - job.started))

    def _watch(self) -> None:
        while True:
            overdue: list[_Job] = []
            with self._cond:
                if not self._running and not self._queue:
                    self._cond.wait(5.0)
                    if not self._running and not self._queue:
                        self._watchdog = None  # idle: the next submit starts another
                        return
                now = self._clock()
                nearest: float | None = None
                for job in self._running:
                    if job.timeout is None or job.abandoned or job.started is None:
                        continue
                    due = job.started + job.timeout
                    if due <= now:
                        overdue.append(job)
                    else:
                        nearest = due if nearest is None else min(nearest, due)
                for job in overdue:
                    job.abandoned = True
                    job.delivered = True
                    with _GIVEN_UP_LOCK:
                        _GIVEN_UP.add(job.key)
                    self._running.discard(job)
                    self._workers -= 1
                    if self._queue and not self._closed:
                        self._start_worker()
                if not overdue:
                    self._cond.wait(5.0 if nearest is None else max(0.01, nearest - now))
            for job in overdue:
                self._delivered(job, Finished(job.key, timed_out=True,
                                              seconds=float(job.timeout or 0.0)))

    def _delivered(self, job: _Job, finished: Finished) -> None:
        _deliver(job, finished)
        with self._cond:
            self._pending -= 1
            self._cond.notify_all()


def _deliver(job: _Job, finished: Finished) -> None:
    try:
        job.on_done(finished)
    except Exception:  # a listener's bug must not kill the worker
        import logging

        logging.getLogger("statekit").exception("a reading's listener failed")
