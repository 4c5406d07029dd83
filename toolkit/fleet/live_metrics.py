"""Each checkpoint's metric families, kept fresh apart from every other checkpoint's.

``statekit metrics --serve`` runs for weeks over dozens of checkpoints, some broken, some
behind an object store that is down or hangs. Reading them all inside a scrape made one
checkpoint everyone's problem: a hanging endpoint held the scrape past Prometheus' timeout
(every series gone), an unexpected exception answered 500. Here each checkpoint is read on
its own, with its own deadline (:mod:`statekit.support.deadlines`), and keeps its own last
result:

* a scrape never reads: it renders what each checkpoint's last reading found, and asks for
  a new reading of the ones older than ``refresh_s`` (so checkpoints are read at most that
  often, and only while someone scrapes);
* a reading that fails, or outlives ``timeout_s``, makes that checkpoint
  ``statekit_checkpoint_up 0`` with a one-word ``reason``; every other checkpoint keeps its
  values;
* a reading abandoned at its deadline is not started again until it has ended (one thread
  per hanging checkpoint, however many scrapes come);
* the first scrape waits for the first round a little (``first_wait_s``), so that a fresh
  exporter's first answer has every checkpoint that reads quickly;
* one line per failure *transition* goes to ``log`` (down with its reason, up again), never
  a traceback, never a line per scrape.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from statekit.checkpoint.storage_errors import deadline_error, reason_of
from statekit.fleet.metrics import Family, as_user_error, checkpoint_metrics, failed_metrics, merge
from statekit.state.memory import ONE_EXECUTOR, ExecutorSizing
from statekit.support.deadlines import Finished, Readings
from statekit.support.errors import StatekitError
from statekit.support.presentation import printable


@dataclass(frozen=True)
class _Latest:
    families: list[Family]
    reason: str | None
    """``None`` when the reading succeeded."""
    message: str
    at: float
    """Monotonic time the reading ended (or its deadline passed)."""


class LiveMetrics:
    """The families of ``urls``, each refreshed on its own; see the module's notes."""

    def __init__(self, urls: Sequence[str], open_checkpoint: Callable[[str], Any], *,
                 cores: int, sizing: ExecutorSizing | None = None,
                 per_partition: bool = False, decode: bool = True,
                 rto_s: float | None = None, timeout_s: float = 60.0,
                 refresh_s: float = 60.0, slots: int = 4, first_wait_s: float = 8.0,
                 log: Callable[[str], None] | None = None,
                 now: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.urls = list(dict.fromkeys(urls))
        self._open = open_checkpoint
        self.cores, self.per_partition, self.decode, self.rto_s = (cores, per_partition,
                                                                   decode, rto_s)
        self.sizing = sizing or ONE_EXECUTOR
        self.timeout_s, self.refresh_s = timeout_s, refresh_s
        self.first_wait_s = first_wait_s
        self._log = log or (lambda line: None)
        self._now, self._clock = now, clock
        self._readings = Readings(min(slots, max(1, len(self.urls))),
                                  name="statekit-metrics")
        self._lock = threading.Condition()
        self._latest: dict[str, _Latest] = {}
        self._asked: dict[str, float] = {}
        """When each checkpoint's pending reading was asked for."""
        self._started_at: float | None = None

    # ------------------------------------------------------------------ readings
    def _key(self, url: str) -> tuple[str, str, int]:
        return ("metrics", url, id(self))

    def refresh_due(self) -> None:
        """Ask for a new reading of every checkpoint whose last one is older than
        ``refresh_s`` (and not still running)."""
        now = self._clock()
        with self._lock:
            if self._started_at is None:
                self._started_at = now
            due = [url for url in self.urls
                   if url not in self._asked and (
                       url not in self._latest or now - self._latest[url].at >= self.refresh_s)]
            for url in due:
                self._asked[url] = now
        for url in due:
            self._readings.submit(self._key(url), self._reader(url), self._finished(url),
                                  timeout=self.timeout_s)

    def _reader(self, url: str) -> Callable[[], tuple[list[Family], StatekitError | None]]:
        def read() -> tuple[list[Family], StatekitError | None]:
            errors: list[StatekitError] = []
            families = checkpoint_metrics(
                url, self._open, cores=self.cores, sizing=self.sizing,
                per_partition=self.per_partition,
                decode=self.decode, rto_s=self.rto_s, now=self._now, on_error=errors.append)
            return families, (errors[0] if errors else None)
        return read

    def _finished(self, url: str) -> Callable[[Finished], None]:
        def done(finished: Finished) -> None:
            if finished.ok:
                families, error = finished.value
                latest = _Latest(families, None if error is None else reason_of(error),
                                 "" if error is None else str(error), self._clock())
            else:
                if finished.timed_out or finished.busy:
                    error = deadline_error(url, self.timeout_s, still_running=finished.busy)
                else:
                    assert finished.error is not None
                    error = as_user_error(finished.error, url)
                families = failed_metrics(url, error, finished.seconds, read_at=self._now())
                latest = _Latest(families, reason_of(error), str(error), self._clock())
            with self._lock:
                before = self._latest.get(url)
                self._latest[url] = latest
                self._asked.pop(url, None)
                self._lock.notify_all()
            self._transition(url, before, latest)
        return done

    def _transition(self, url: str, before: _Latest | None, now: _Latest) -> None:
        was = None if before is None else before.reason
        if now.reason == was:
            return
        shown = printable(url)
        if now.reason is None:
            if before is not None:
                self._log(f"{shown}: up again (was {was})")
            return
        self._log(f"down ({now.reason}): {now.message}")

    # ------------------------------------------------------------------ scrapes
    def families(self) -> list[Family]:
        """Every checkpoint's families from its last reading; asks for the due readings
        first, and on the first scrape waits up to ``first_wait_s`` for the first round."""
        self.refresh_due()
        with self._lock:
            assert self._started_at is not None
            end = self._started_at + self.first_wait_s
            while len(self._latest) < len(self.urls) and self._clock() < end:
                self._lock.wait(max(0.01, end - self._clock()))
            latest = [self._latest[url].families for url in self.urls if url in self._latest]
        return merge(latest)

    def read_all(self) -> list[Family]:
        """Every checkpoint read once (each within ``timeout_s``): the one-shot exposition."""
        self.refresh_due()
        with self._lock:
            while len(self._latest) < len(self.urls):
                self._lock.wait(1.0)
            return merge(self._latest[url].families for url in self.urls)

    def close(self) -> None:
        self._readings.close()

