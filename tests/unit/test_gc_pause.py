"""The collector pause: in a one-shot process nothing collected inside and what the block
made frozen after it, the collector back on; in a long-running one no pause and no freeze
(both are process-wide: they would reach every other thread's garbage)."""

from __future__ import annotations

import gc

import pytest

from statekit.support import gc_pause


@pytest.fixture
def collections():
    seen: list[int] = []

    def record(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)
    gc_pause.long_running_process()
    gc.unfreeze()


def _cycles(count: int) -> None:
    for _ in range(count):
        node: list[object] = []
        node.append(node)


def test_a_one_shot_process_pauses_the_collector_and_freezes_what_the_block_made(
        collections):
    gc_pause.one_shot_process()
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with gc_pause.gc_paused():
        _cycles(50_000)  # far past the threshold that would start a collection
        assert not gc.isenabled()
        assert collections == []
    assert gc.isenabled()
    assert collections == []  # no scan on the way out either
    assert gc.get_freeze_count() > frozen  # what survived is out of later scans


def test_a_long_running_process_never_pauses_nor_freezes_anyones_garbage(collections):
    """A freeze belongs to the whole process: in a service it would move every thread's
    garbage cycles out of the collector's reach for good."""
    gc_pause.long_running_process()
    gc.collect()
    frozen = gc.get_freeze_count()
    with gc_pause.gc_paused():
        assert gc.isenabled()
        _cycles(50_000)
    assert collections  # the collector ran as usual, inside the block too
    assert gc.get_freeze_count() == frozen
    gc.collect()
    assert gc.garbage == []


def test_nested_pauses_enable_the_collector_once_at_the_outermost(collections):
    gc_pause.one_shot_process()
    with gc_pause.gc_paused():
        with gc_pause.gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
