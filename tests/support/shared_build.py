"""Session fixtures built once per test run, not once per xdist worker.

``make test`` runs two pytest-xdist workers, each with its own JVM and its own session
fixtures. A real checkpoint that test modules on both workers need (the reference pipeline's
runs, the small sources every write command is proved on) was therefore written twice, each
time by a real query taking tens of seconds. Built here under a lock in the folder every
worker of the run shares, the first worker to ask builds it and the others wait for it and
load what it left: the folder and a pickle of the fixture's value. A worker that crashed
half-way left no pickle, so the next one starts the folder again.

The built checkpoints are read-only for the tests, as they already were within one worker
(the write commands' tests assert the source's tree hash is unchanged).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def shared_root(tmp_path_factory, name: str) -> Path:
    """A folder every worker of this pytest run sees (the run's base temp folder under
    xdist, the session's own otherwise)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / f"shared-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def build_once(root: Path, name: str, build: Callable[[Path], T]) -> T:
    """``build(root / name)`` the first time any worker asks for ``name``; its value,
    loaded from the pickle that build left, every other time."""
    folder, done = root / name, root / f"{name}.pickle"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if done.exists():
                return pickle.loads(done.read_bytes())
            shutil.rmtree(folder, ignore_errors=True)
            value = build(folder)
            partial = done.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(value))
            partial.replace(done)
            return value
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
