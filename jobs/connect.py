"""Spark over Spark Connect: a session on a remote server, and what such a session cannot do.

Why: many teams reach Spark only through Spark Connect (Spark 4's client/server protocol;
Databricks Connect speaks it too), often from a laptop without Java. A Connect session is a
thin gRPC client: DataFrame and SQL work (the state data sources included), but nothing that
reaches into a JVM in this process does — ``spark._jvm``, ``spark.sparkContext``, RDDs,
py4j callbacks. So statekit's Spark-side commands take ``--remote sc://…`` (or the standard
``SPARK_REMOTE`` variable) and:

* build the session here, with no Java check and only the settings a running server accepts
  (runtime SQL confs; a master, the UI or JVM options belong to the server);
* ship statekit's own code to the server's Python workers with ``addArtifacts`` (the
  executors import it as on a cluster, :mod:`statekit.jobs.shipping`);
* refuse what has no Connect path in one line naming what to use instead, before any work
  (:func:`statekit.cli.options.refuse_remote`, exit 7).

The checkpoint path is the *server's*: the server's executors read and write it, so a path
given to a ``--remote`` command must be one the server reaches (a shared filesystem or an
object store), whatever this machine sees.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from statekit.jobs.errors import first_line
from statekit.support.errors import BadInput, EnvironmentProblem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REMOTE_ENV = "SPARK_REMOTE"
"""pyspark's own variable for a Connect URL (``sc://host:port``)."""

CONNECT_MODULES = ("grpc", "grpc_status", "google.rpc", "zstandard")
"""What pyspark's Connect client imports beyond statekit's own dependencies."""

SERVER_SIDE_CONFS = ("spark.master", "spark.ui.", "spark.driver.", "spark.executor.",
                     "spark.executorEnv.",
                     "spark.pyspark.", "spark.archives", "spark.submit.", "spark.jars",
                     "spark.app.name")
"""Settings only a server's start-up decides (static confs): never sent over Connect."""


class NotOverConnect(EnvironmentProblem):
    """What a command needs cannot be done through Spark Connect (exit 7)."""


def remote_url(value: str, source: str = "--remote") -> str:
    """``value`` checked as a Spark Connect URL; ``source`` names where it came from in the
    one-line error (exit 3)."""
    url = value.strip()
    if not url.startswith("sc://") or len(url) <= len("sc://"):
        raise BadInput(f"{source}: {url!r} is not a Spark Connect URL (sc://host:port)")
    return url


def connect_problem() -> str | None:
    """A one-line reason the Connect client cannot run here, or ``None``."""
    import importlib.util

    missing = [m for m in CONNECT_MODULES if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        return (f"Spark Connect needs {', '.join(missing)} in this Python: "
                "pip install 'statekit[connect]'")
    return None


def runtime_settings(settings: Mapping[str, str] | None) -> dict[str, str]:
    """The part of a session's settings (:func:`statekit.jobs.session.session_conf`: statekit's
    defaults and ``--conf`` pairs) that a running Connect server accepts: without the ones
    only a server's start-up decides."""
    return {k: v for k, v in (settings or {}).items() if not k.startswith(SERVER_SIDE_CONFS)}


def build_connect_session(url: str, settings: Mapping[str, str] | None = None
                          ) -> SparkSession:
    """A Spark Connect session on ``url`` with the runtime part of ``settings``, and
    statekit's code added for the server's Python workers. One line (exit 7) when the client
    cannot run or the server does not answer."""
    problem = connect_problem()
    if problem:
        raise EnvironmentProblem(problem)
    _check_listening(url)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(url)
    for key, value in runtime_settings(settings).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
        spark.range(1).collect()  # the builder is lazy: reach the server now
    except Exception as exc:  # grpc and server errors: one line, not a traceback
        raise EnvironmentProblem(f"could not reach Spark Connect at {url}: "
                                 f"{first_line(exc)}") from exc
    ship_statekit(spark)
    return spark


DEFAULT_PORT = 15002
"""Spark Connect's port when the URL names none."""

REACH_TIMEOUT_S = 10.0


def server_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of ``sc://host[:port][/;param=value…]``."""
    authority = url[len("sc://"):].split("/", 1)[0].split(";", 1)[0]
    host, colon, port = authority.rpartition(":")
    if not colon or authority.endswith("]"):  # no port, or a bare IPv6 address
        host, port = authority, ""
    try:
        return host.strip("[]"), int(port) if port else DEFAULT_PORT
    except ValueError:
        raise BadInput(f"--remote: {url!r} has no valid port") from None


def _check_listening(url: str) -> None:
    """One line at once when nothing listens there: pyspark's client retries an unreachable
    server with back-off for minutes before it gives up."""
    import socket

    host, port = server_address(url)
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            return
    except OSError as exc:
        raise EnvironmentProblem(f"could not reach Spark Connect at {url}: "
                                 f"{exc.strerror or exc}") from exc


def ship_statekit(spark: SparkSession) -> None:
    """Add statekit's package zip as a Python artifact of this session: the server's Python
    workers import the client's statekit (``STATEKIT_SHIP=0``: they have their own)."""
    from statekit.jobs.shipping import SHIP_ENV, package_zip

    if os.environ.get(SHIP_ENV) == "0":
        return
    try:
        spark.addArtifacts(str(package_zip()), pyfile=True)
    except Exception as exc:
        if "already exists" in str(exc):  # the same zip, added by an earlier command
            return
        raise EnvironmentProblem(f"could not add statekit's code to the Spark Connect "
                                 f"session: {first_line(exc)}") from exc


def one_row_per_task(spark: SparkSession, count: int) -> Any:
    """``id`` 0 … count − 1, one row in each of ``count`` partitions: the input of a job
    whose every task runs the executor function on one item of a list the function carries.
    ``range`` rather than an RDD's ``parallelize``, so the job is the same over Spark
    Connect, which has no RDDs."""
    return spark.range(0, count, 1, max(1, count))


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no JVM in this process)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:
        return False
    return isinstance(spark, ConnectSession)
