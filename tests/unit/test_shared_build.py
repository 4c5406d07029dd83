"""``build_once``: session fixtures shared by the xdist workers are built by exactly one."""

from __future__ import annotations

import functools
import multiprocessing
from pathlib import Path

from tests.support.shared_build import build_once

WORKERS = 3
HANG_S = 120
"""Generous bounds that only catch a hang."""


def _build(folder: Path, asked=None) -> str:
    folder.mkdir(parents=True)
    (folder / "built-by").write_text(str(multiprocessing.current_process().pid))
    with open(folder.parent / "builds.log", "a") as log:
        log.write("build\n")
    if asked is not None:  # the build ends only once every worker has asked for the value
        for _ in range(WORKERS):
            assert asked.acquire(timeout=HANG_S), "a worker never asked"
    return (folder / "built-by").read_text()


def _ask(root: str, answers, asked) -> None:
    asked.release()
    answers.put(build_once(Path(root), "thing", functools.partial(_build, asked=asked)))


def test_concurrent_workers_build_once_and_share_the_value(tmp_path):
    context = multiprocessing.get_context("spawn")
    answers, asked = context.Queue(), context.Semaphore(0)
    workers = [context.Process(target=_ask, args=(str(tmp_path), answers, asked))
               for _ in range(WORKERS)]
    for worker in workers:
        worker.start()
    values = [answers.get(timeout=HANG_S) for _ in workers]
    for worker in workers:
        worker.join(HANG_S)
    assert [worker.exitcode for worker in workers] == [0] * WORKERS
    assert (tmp_path / "builds.log").read_text() == "build\n"
    assert len(set(values)) == 1 and values[0] == (tmp_path / "thing" / "built-by").read_text()


def test_a_half_built_folder_is_built_again(tmp_path):
    (tmp_path / "thing").mkdir()
    (tmp_path / "thing" / "leftover").write_text("a worker crashed here")
    value = build_once(tmp_path, "thing", _build)
    assert not (tmp_path / "thing" / "leftover").exists()
    assert value == (tmp_path / "thing" / "built-by").read_text()
    assert build_once(tmp_path, "thing", lambda _: "never called") == value
