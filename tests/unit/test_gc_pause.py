"""The collector pause: nothing collected inside, cycles collected after it in a
long-running process, none of that scan in a one-shot one, and the collector back on."""

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


@pytest.mark.parametrize("one_shot", [False, True])
def test_the_pause_collects_nothing_inside_and_scans_after_only_when_long_running(
        collections, one_shot):
    (gc_pause.one_shot_process if one_shot else gc_pause.long_running_process)()
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with gc_pause.gc_paused():
        _cycles(50_000)  # far past the threshold that would start a collection
        assert not gc.isenabled()
        assert collections == []
    assert gc.isenabled()
    assert collections == ([] if one_shot else [0])
    assert gc.get_freeze_count() > frozen  # what survived is out of later scans


def test_nested_pauses_enable_the_collector_once_at_the_outermost(collections):
    with gc_pause.gc_paused():
        with gc_pause.gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
