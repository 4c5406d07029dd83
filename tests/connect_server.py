"""A real Spark Connect server on 127.0.0.1, from the pyspark wheel (no other Spark install).

Started the way ``sbin/start-connect-server.sh`` starts it (``spark-submit`` of
``SparkConnectServer``), but in the foreground of its own process group so the suite stops
it; a ``local[2]`` master inside the server. Its Python workers run a Python that *cannot
import statekit* (:func:`tests.cluster.executor_python`): what statekit's code needs there
must arrive through the session's artifacts, as on a real server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import SPARK_HOME, executor_python
from tests.support.ports import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer:
    url: str
    log: Path
    process: subprocess.Popen

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


def start_connect_server(root: Path, timeout: float = 120.0,
                         driver_memory: str = "2g") -> ConnectServer:
    """Start the server; return once its gRPC port accepts connections."""
    python = executor_python(root / "server-python")
    port = free_port()
    log = root / "connect-server.log"
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=str(python),
               SPARK_LOG_DIR=str(root / "logs"), SPARK_PID_DIR=str(root / "pids"))
    for variable in ("PYSPARK_DRIVER_PYTHON", "SPARK_REMOTE", "PYTHONPATH"):
        env.pop(variable, None)
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", SERVER_CLASS,
               "--name", "statekit-test-connect-server", "--master", "local[2]",
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.ui.enabled=false",
               "--conf", "spark.sql.streaming.stateStore.maintenanceInterval=1s",
               "--conf", f"spark.pyspark.python={python}",
               "--driver-memory", driver_memory]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=root, start_new_session=True)
    server = ConnectServer(f"sc://127.0.0.1:{port}", log, process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Spark Connect server exited ({process.returncode}): "
                               f"{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"the Spark Connect server did not listen within {timeout:.0f} s: "
                       f"{log.read_text()[-2000:]}")
