"""A run-wide pause of the other test workers while a test measures wall time.

``make test`` runs two pytest-xdist workers on a two-core machine. A test that times a real
restart against the recovery estimate measured, in a CI run, the other worker's Spark job as
much as its own: restarts 1.5× slower than the same test alone, while the single-threaded
speed probe beside them, taking the fastest of its samples, caught the moments the other
worker idled. Nothing about the estimate was wrong; the machine was shared.

Every test therefore runs holding a shared lock, and a timed test takes it exclusively for
its measurement (not for its fixtures, which need no quiet): the other worker finishes the
test it is in, then waits. A turnstile lock in front keeps the exclusive request from being
starved by a worker that releases and re-takes the shared lock between its tests: while a
timed test waits for or holds the turnstile, no other test starts.

Without xdist there is one process and nothing to pause: both locks are no-ops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _lock_folder() -> Path | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    folder = Path(tempfile.gettempdir()) / f"statekit-tests-{run}"
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def _machine(mode: int) -> Iterator[None]:
    """The machine lock in ``mode``, taken through the turnstile; an exclusive holder keeps
    the turnstile until it is done, a shared one only until it is in."""
    folder = _lock_folder()
    if folder is None:
        yield
        return
    with open(folder / "turnstile", "a") as turnstile, open(folder / "machine", "a") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, mode)
        finally:
            if mode == fcntl.LOCK_SH:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


def shared_machine() -> contextlib.AbstractContextManager[None]:
    """Held around every untimed test: many at once, none while a timed test measures."""
    return _machine(fcntl.LOCK_SH)


def quiet_machine() -> contextlib.AbstractContextManager[None]:
    """Held by a timed test around what it measures: every other worker paused."""
    return _machine(fcntl.LOCK_EX)
