"""A failed write over Spark Connect: the client cannot see its executors' tasks, so the
staging folder is removed until it stays gone — a writer task killed late may recreate it
after the first removal."""

from __future__ import annotations

import threading
import time

from statekit.checkpoint.location import resolve
from statekit.writes.staging import Staging


def _late_writer(root, delays):
    def run():
        for delay in delays:
            time.sleep(delay)
            (root / "state" / "0" / "1").mkdir(parents=True, exist_ok=True)
            (root / "state" / "0" / "1" / "38.snapshot").write_bytes(b"late")
    return threading.Thread(target=run)


def test_a_folder_recreated_after_the_removal_is_removed_again(tmp_path):
    staging = Staging(resolve(str(tmp_path / "dst")), str(tmp_path / "src"))
    staging.prepare()
    root = tmp_path / ".dst.statekit-staging"
    assert root.exists()
    writer = _late_writer(root, [0.3, 0.3])
    writer.start()
    assert staging.abort_settled(quiet_s=1.0, poll_s=0.02)
    assert not writer.is_alive()  # it settled only after both late writes
    writer.join()
    assert not root.exists() and not (tmp_path / "dst").exists()


def test_a_folder_that_keeps_coming_back_is_reported_not_settled(tmp_path):
    staging = Staging(resolve(str(tmp_path / "dst")), str(tmp_path / "src"))
    staging.prepare()
    root = tmp_path / ".dst.statekit-staging"
    stop = threading.Event()

    def stubborn():
        while not stop.is_set():
            (root / "x").mkdir(parents=True, exist_ok=True)
            time.sleep(0.01)

    thread = threading.Thread(target=stubborn)
    thread.start()
    try:
        assert not staging.abort_settled(quiet_s=0.5, timeout_s=1.0, poll_s=0.02)
    finally:
        stop.set()
        thread.join()
    staging.abort()
    assert not root.exists()
