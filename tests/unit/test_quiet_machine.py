"""The run-wide pause a timed test takes: real processes, real file locks."""

from __future__ import annotations

import fcntl
import multiprocessing
import tempfile
import time
from pathlib import Path

from tests.support.quiet_machine import quiet_machine, shared_machine


def _hold(kind: str, name: str, log: str, seconds: float, until: str = "") -> None:
    """Take the lock, log in, hold it ``seconds`` (or until ``until`` is logged), log out."""
    lock = quiet_machine if kind == "quiet" else shared_machine
    with lock():
        with open(log, "a") as out:
            out.write(f"{name}-in {time.monotonic()}\n")
        if until:
            _wait_for(Path(log), until)
        time.sleep(seconds)
        with open(log, "a") as out:
            out.write(f"{name}-out {time.monotonic()}\n")


def _events(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for(log: Path, event: str) -> None:
    deadline = time.monotonic() + 10
    while event not in _events(log):
        assert time.monotonic() < deadline, _events(log)
        time.sleep(0.02)


def _wait_for_turnstile(path: Path) -> None:
    """Until another process holds the turnstile (the timed test, waiting for the machine)."""
    deadline = time.monotonic() + 10
    while True:
        assert time.monotonic() < deadline, "the timed test never took the turnstile"
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            fcntl.flock(handle, fcntl.LOCK_UN)
        time.sleep(0.02)


def _a_run_of_its_own(tmp_path, monkeypatch) -> None:
    """Locks of a run of their own, in the test's folder (the forked workers inherit both)."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "unit")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_a_timed_test_waits_for_the_running_test_and_pauses_the_next(tmp_path, monkeypatch):
    _a_run_of_its_own(tmp_path, monkeypatch)
    log = tmp_path / "events"
    fork = multiprocessing.get_context("fork")
    running = fork.Process(target=_hold, args=("shared", "running", str(log), 0.8))
    running.start()
    _wait_for(log, "running-in")
    timed = fork.Process(target=_hold, args=("quiet", "timed", str(log), 0.5))
    timed.start()
    _wait_for_turnstile(tmp_path / "statekit-tests-unit" / "turnstile")
    following = fork.Process(target=_hold, args=("shared", "following", str(log), 0.1))
    following.start()
    for process in (running, timed, following):
        process.join(20)
        assert process.exitcode == 0
    # the following test did not slip in while the timed one waited for the running one
    assert _events(log) == ["running-in", "running-out", "timed-in", "timed-out",
                            "following-in", "following-out"]


def test_untimed_tests_share_the_machine(tmp_path, monkeypatch):
    _a_run_of_its_own(tmp_path, monkeypatch)
    log = tmp_path / "events"
    fork = multiprocessing.get_context("fork")
    first = fork.Process(target=_hold, args=("shared", "first", str(log), 0, "second-out"))
    first.start()
    _wait_for(log, "first-in")
    second = fork.Process(target=_hold, args=("shared", "second", str(log), 0.1))
    second.start()
    for process in (first, second):
        process.join(20)
        assert process.exitcode == 0
    assert _events(log) == ["first-in", "second-in", "second-out", "first-out"]


def test_without_workers_nothing_is_locked(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    with shared_machine(), quiet_machine():  # one process: the two never wait on each other
        pass
