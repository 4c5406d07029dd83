"""The TUI's Spark sessions: started on first use, in the worker that needs one.

Only the tabs that read state through Spark (State, Repartition, Fix) ever start a JVM, and
only when the user asks them for something; every other tab stays JVM-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.tui.work import Progress


def spark_session() -> SparkSession:
    """A Spark session of the TUI's own.

    Each screen gets a new session over the one SparkContext: its SQL confs are its own, so
    what one screen sets for a read never reaches another screen (or a notebook sharing the
    JVM); and each read sets the confs it needs only while it runs (``session_confs``).
    """
    from statekit.jobs.session import build_session

    return build_session("statekit-tui").newSession()


class LazySession:
    """One pane's session, made the first time :meth:`get` is called (from a worker)."""

    def __init__(self) -> None:
        self.spark: SparkSession | None = None

    def get(self, say: Progress | None = None, job_group: str | None = None) -> SparkSession:
        """The session (started now if needed); ``job_group``: the calling thread's jobs
        join it, so that :meth:`cancel` can interrupt them."""
        if self.spark is None:
            if say is not None:
                say("starting Spark (the JVM takes a few seconds)…")
            self.spark = spark_session()
        if job_group is not None:
            self.spark.sparkContext.setJobGroup(job_group, job_group, interruptOnCancel=True)
        return self.spark

    def cancel(self, job_group: str) -> None:
        """Interrupt the running jobs of ``job_group`` (nothing when Spark never started)."""
        if self.spark is not None:
            self.spark.sparkContext.cancelJobGroup(job_group)
