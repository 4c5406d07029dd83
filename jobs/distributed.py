"""Whole-state passes on a Spark cluster: the same pure-Python replay, one task per instance.

``statekit growth`` and ``report --decode`` decode every retained state file. On one machine
that is bounded by its cores (and, at tens of millions of keys, by hours). A team whose state
outgrew one machine already has a cluster — Spark — so rather than a scheduler of our own,
this runner hands each group of :func:`statekit.state.workers.map_groups` (one store
instance each) to Spark as a task of one job:

* the task runs the very same picklable work the local worker processes run, on a
  :class:`~statekit.state.workers.CheckpointSource` (location with its filesystem
  options, root entries and pinned confs: the task re-opens the checkpoint without a
  request), and reads the instance's files straight from the checkpoint's filesystem;
* only the small per-group results come back to the driver — per-version histograms and
  counts, never keys — so the driver's memory does not grow with the state, and an
  executor holds one store instance's live-key digests at a time.

Executors need statekit importable (the same environment as the driver: ``local[*]``, or
statekit installed on the cluster's Python) and must reach the checkpoint's location with
the same path or URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from statekit.jobs.connect import is_connect, one_row_per_task
from statekit.jobs.state_analysis import run_with_progress
from statekit.state.workers import CheckpointSource, Progress, Work, run_group

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class _Raised:
    """An exception a task's work raised, carried back as its result: the driver raises it
    as the local path would (a retry cannot fix a damaged file, and Spark would wrap it in a
    ``PythonException`` with the worker's traceback)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _task(source: CheckpointSource, work: Work[Any, Any]
          ) -> Callable[[tuple[int, list[Any]]], tuple[int, Any]]:
    def run(indexed: tuple[int, list[Any]]) -> tuple[int, Any]:
        index, items = indexed
        try:
            return index, run_group(source, work, items)
        except Exception as error:  # re-raised on the driver
            return index, _Raised(error)

    return run


class SparkGroupRunner:
    """Runs :func:`~statekit.state.workers.map_groups`' groups as tasks of one Spark job
    (implements :class:`~statekit.state.workers.GroupRunner`)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.tasks = 0
        """Tasks run so far (for reports and tests)."""

    def run_groups(self, source: CheckpointSource, groups: list[list[Any]],
                   work: Work[Any, Any], progress: Progress | None) -> list[Any]:
        indexed = list(enumerate(groups))
        self.tasks += len(indexed)

        def on_progress(done: int, total: int) -> None:
            if progress is not None:
                progress(f"{done}/{total} Spark tasks")

        def action() -> list[tuple[int, Any]]:
            if is_connect(self.spark):
                return _run_over_connect(self.spark, _task(source, work), groups)
            rdd = self.spark.sparkContext.parallelize(indexed, max(1, len(indexed)))
            collected: list[tuple[int, Any]] = rdd.map(_task(source, work)).collect()
            return collected

        found = dict(run_with_progress(self.spark, action, on_progress))
        for result in found.values():
            if isinstance(result, _Raised):
                raise result.error
        return [found[index] for index in range(len(groups))]


def _run_over_connect(spark: SparkSession, task: Callable[[tuple[int, list[Any]]],
                                                          tuple[int, Any]],
                      groups: list[list[Any]]) -> list[tuple[int, Any]]:
    """The same tasks through Spark Connect, which has no RDDs: one row per group over as many
    partitions (``range``: exactly one row each), each run by ``mapInPandas`` on the server's
    Python workers; the results come back pickled in a binary column."""
    import pickle

    from pyspark import cloudpickle

    def run(frames: Any) -> Any:
        import pandas as pd

        for frame in frames:
            for index in frame["id"]:
                done = task((int(index), groups[int(index)]))
                yield pd.DataFrame({"index": [done[0]], "result": [cloudpickle.dumps(done[1])]})

    rows = one_row_per_task(spark, len(groups)).mapInPandas(
        run, "index long, result binary").collect()
    return [(int(row["index"]), pickle.loads(row["result"])) for row in rows]
