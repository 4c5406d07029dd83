"""The one place where statekit builds a SparkSession.

Every command that needs Spark (state reads, exports, the reference pipeline, repartition
jobs) gets its session here, so the defaults that matter operationally are set once:

* ``local[*]`` unless a master URL is given (``--master`` on the CLI, for clusters) or the
  process was launched by ``spark-submit``, whose ``--master`` then stands;
* no Spark UI, no console progress bars, and error-only logs (``log4j2.properties`` beside
  this file) so terminal output stays readable;
* on a local master, ``spark.pyspark.python`` pinned to the running interpreter: otherwise
  Python workers run whatever ``python3`` is first on PATH, often without pandas/pyarrow, and
  die (on a cluster the executors' interpreter is the cluster's business);
* session time zone UTC, so event times in files and in state mean the same thing everywhere;
* Java is checked first, so a missing JVM is a one-line error, not a py4j traceback.

Extra ``k=v`` settings (``--conf`` on the CLI) are applied last and win.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from statekit.jobs.connect import REMOTE_ENV
from statekit.jobs.java_check import java_problem
from statekit.jobs.shipping import prepare_executors
from statekit.support.errors import BadInput, EnvironmentProblem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def parse_conf_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """Turn ``["k=v", …]`` (from ``--conf``) into a dict; a malformed pair is bad input."""
    confs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--conf expects KEY=VALUE, got {pair!r}")
        confs[key.strip()] = value.strip()
    return confs


def launched_by_spark_submit() -> bool:
    """True inside a driver that spark-submit started (its JVM is already running)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session_conf(
    app_name: str = "statekit",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The full configuration ``build_session`` applies, as a plain dict (testable, no JVM)."""
    java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    settings = {"spark.app.name": app_name}
    if master or not launched_by_spark_submit():
        settings["spark.master"] = master or DEFAULT_MASTER
    if settings.get("spark.master", "").startswith("local"):
        settings["spark.pyspark.python"] = sys.executable
        settings["spark.pyspark.driver.python"] = sys.executable
    settings.update({
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        # Keep every progress update of a run (the pipeline reports per-batch state sizes).
        "spark.sql.streaming.numRecentProgressUpdates": "10000",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # pyspark 4.3's applyInPandasWithState worker concatenates empty frames and pandas 2.x
        # warns about it on every batch: noise for users, nothing they can act on.
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
    })
    settings.update(conf or {})
    return settings


JVM_NOISE = (
    "WARNING: Using incubator modules",
)
"""Start-up lines the JVM prints on every start that tell a user nothing (Spark 4.x adds
``--add-modules jdk.incubator.vector``): dropped, so a failing command's stderr stays the one
``statekit: error:`` line. Everything else the JVM prints still reaches stderr."""


def _forward_filtered(stream: IO[bytes]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if not line.startswith(JVM_NOISE):
            sys.stderr.write(line)
            sys.stderr.flush()


def _launch_filtered_gateway(settings: Mapping[str, str]) -> None:
    """Start the JVM with its stderr piped through :func:`_forward_filtered` (pyspark would
    let it inherit ours). Not under spark-submit (its JVM already runs), and not when a
    gateway exists in this process (a session is being reused)."""

    if launched_by_spark_submit() or SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    except Exception as exc:  # the same one-line failure as getOrCreate's below
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EnvironmentProblem(f"could not start Spark: {first}") from exc
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        threading.Thread(target=_forward_filtered, args=(proc.stderr,), daemon=True,
                         name="statekit-jvm-stderr").start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def build_session(
    app_name: str = "statekit",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Start (or reuse) the SparkSession statekit runs on.

    Parameters
    ----------
    app_name
        Shown in the cluster manager's UI.
    master
        A Spark master URL; ``None`` means ``local[*]`` on this machine.
    conf
        Extra settings (``--conf k=v``); they override statekit's defaults.
    remote
        A Spark Connect URL (``sc://host:port``): a session on that server instead of a JVM
        here (:mod:`statekit.jobs.connect`; no Java needed).
    """
    if remote:
        from statekit.jobs.connect import build_connect_session

        return build_connect_session(remote, session_conf(app_name, None, conf))
    # pyspark turns any session into a Connect client while $SPARK_REMOTE is set: a command
    # that was not given --remote (or was given --master beside the variable) wants a JVM
    os.environ.pop(REMOTE_ENV, None)
    problem = java_problem()
    if problem:
        raise EnvironmentProblem(problem)
    settings = session_conf(app_name, master, conf)
    # PySpark sends executors the interpreter named by PYSPARK_PYTHON in *this* process and
    # ignores spark.pyspark.python when it starts the JVM itself: an explicit --conf must win
    # over an inherited variable (else a cluster's executors get the driver's path), while
    # statekit's own local default leaves a user's variable alone.
    explicit = dict(conf or {})
    for key, variable in (("spark.pyspark.python", "PYSPARK_PYTHON"),
                          ("spark.pyspark.driver.python", "PYSPARK_DRIVER_PYTHON")):
        if key in explicit:
            os.environ[variable] = explicit[key]
    if "spark.pyspark.python" in settings:
        os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", settings["spark.pyspark.python"])

    _launch_filtered_gateway(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j/JVM start failures: one line, not a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EnvironmentProblem(f"could not start Spark: {first}") from exc
    # statekit reports Spark's failures itself, as one line; executor error logs with stack
    # traces would only bury it. STATEKIT_DEBUG=1 keeps them.
    spark.sparkContext.setLogLevel("ERROR" if os.environ.get("STATEKIT_DEBUG") else "OFF")
    # pyspark logs every SQL analysis error as a JSON line on stderr before raising it; the
    # CLI reports the same error as one line, so silence the duplicate.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    # a cluster's executors run the cluster's Python: statekit ships itself and checks it
    prepare_executors(spark)
    return spark
