"""A real Spark standalone cluster on 127.0.0.1: a Master and two Workers, separate processes.

Started with pyspark's own ``bin/spark-class`` (no other Spark install), stopped by process
group. Each worker offers one core, so a command's two executors are two JVMs with two
Python daemons (what a driver/executor mix-up of paths or temp folders would trip on). Its
executors run a Python that *cannot import statekit* — the normal case on a shared
cluster where only the edge node has it: a venv of the same base interpreter whose
site-packages reaches the test venv's packages (pandas, pyarrow, lz4, …) through a plain path
line in a ``.pth`` file; the test venv's own ``.pth`` files — statekit's editable-install
hook among them — are not run that way, so ``import statekit`` fails there.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.support.ports import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"


def executor_python(root: Path) -> Path:
    """A Python without statekit but with everything else the test venv has."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    Path(site.stdout.strip(), "test-venv-packages.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    return python


@dataclass
class Cluster:
    master_url: str
    executor_python: Path
    logs: Path
    work: Path
    """The workers' folders: ``<worker>/app-…/<executor>/`` is each executor's working
    folder (where ``spark.archives`` are unpacked)."""
    processes: list[subprocess.Popen] = field(default_factory=list)

    def confs(self, python: bool = True) -> list[str]:
        """The ``--conf`` pairs a statekit command needs for this cluster (``python``: run
        the executors on the Python without statekit)."""
        resources = ["--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2"]
        if not python:
            return resources
        return ["--conf", f"spark.pyspark.python={self.executor_python}", *resources]

    def env(self) -> dict[str, str]:
        """A command's environment: nothing of the repository on the path."""
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        return env

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)


def _wait_for(what: str, ready, log: Path, process: subprocess.Popen,
              timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}): {log.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s: {log.read_text()[-2000:]}")


def start_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1536m"
                  ) -> Cluster:
    root.mkdir(parents=True, exist_ok=True)
    python = executor_python(root / "executor-venv")
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOG_DIR=str(root / "logs"),
               SPARK_WORKER_DIR=str(root / "work"), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=str(python))
    env.pop("PYTHONPATH", None)
    port = free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", python, root / "logs", root / "work")
    cluster.logs.mkdir(exist_ok=True)

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = cluster.logs / f"{name}.log"
        process = subprocess.Popen([str(SPARK_CLASS), *args], stdout=log.open("wb"),
                                   stderr=subprocess.STDOUT, env=env, cwd=root,
                                   start_new_session=True)
        cluster.processes.append(process)
        return process, log

    try:
        master, master_log = start("master", "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(port),
                                   "--webui-port", str(free_port()))

        def accepting() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        _wait_for("the Spark master", accepting, master_log, master)
        for number in range(workers):
            work = cluster.work / f"worker-{number}"
            worker, worker_log = start(f"worker-{number}",
                                       "org.apache.spark.deploy.worker.Worker",
                                       cluster.master_url, "--host", "127.0.0.1",
                                       "--cores", str(cores), "--memory", memory,
                                       "--webui-port", str(free_port()),
                                       "--work-dir", str(work))
            _wait_for(f"Spark worker {number}",
                      lambda log=worker_log: "Successfully registered with master"
                      in log.read_text(), worker_log, worker)
    except BaseException:
        cluster.stop()
        raise
    return cluster
