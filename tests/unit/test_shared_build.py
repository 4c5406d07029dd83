"""``build_once``: session fixtures shared by the xdist workers are built by exactly one."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from tests.support.shared_build import build_once


def _slow_build(folder: Path) -> str:
    folder.mkdir(parents=True)
    (folder / "built-by").write_text(str(multiprocessing.current_process().pid))
    with open(folder.parent / "builds.log", "a") as log:
        log.write("build\n")
    time.sleep(0.5)  # long enough for the other processes to be waiting on the lock
    return (folder / "built-by").read_text()


def _ask(root: str, answers) -> None:
    answers.put(build_once(Path(root), "thing", _slow_build))


def test_concurrent_workers_build_once_and_share_the_value(tmp_path):
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    workers = [context.Process(target=_ask, args=(str(tmp_path), answers)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    values = [answers.get(timeout=5) for _ in workers]
    assert (tmp_path / "builds.log").read_text() == "build\n"
    assert len(set(values)) == 1 and values[0] == (tmp_path / "thing" / "built-by").read_text()


def test_a_half_built_folder_is_built_again(tmp_path):
    (tmp_path / "thing").mkdir()
    (tmp_path / "thing" / "leftover").write_text("a worker crashed here")
    value = build_once(tmp_path, "thing", _slow_build)
    assert not (tmp_path / "thing" / "leftover").exists()
    assert value == (tmp_path / "thing" / "built-by").read_text()
    assert build_once(tmp_path, "thing", lambda _: "never called") == value
