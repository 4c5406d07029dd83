"""Plumbing the benchmarks share.

* Waiting until a stopped query's checkpoint stops changing: a query's state stores stay
  loaded after it stops, and their maintenance keeps writing snapshots (RocksDB uploads zips)
  for a while; a benchmark that copies or measures a checkpoint must wait for that to end.
* Measuring restarts (``bench_recovery.py``, ``bench_recovery_grid.py``): a log4j
  configuration that writes the state-store classes at DEBUG into a file, the parser of
  Spark's per-partition load times in it, a compact form of StreamingQueryProgress, the
  critical path of per-partition times over the cores, and how busy the machine was.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime
from pathlib import Path

CORES = os.cpu_count() or 1


def listing(folder: Path) -> list[tuple[str, int]]:
    """Every file below ``folder`` with its size, sorted."""
    return sorted((str(p), p.stat().st_size) for p in folder.rglob("*") if p.is_file()) \
        if folder.exists() else []


def wait_static(folder: Path, timeout: float = 30.0) -> float:
    """Wait until the folder's listing (names and sizes) stops changing; seconds waited."""
    started = time.monotonic()
    previous = None
    while time.monotonic() - started < timeout:
        current = listing(folder)
        if current == previous:
            break
        previous = current
        time.sleep(0.5)
    return time.monotonic() - started


STATE_PACKAGE = "org.apache.spark.sql.execution.streaming.state"
LOG4J = f"""# bench_recovery: statekit's quiet console, plus the state-store classes into a file.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
appender.state.type = File
appender.state.name = state
appender.state.fileName = ${{sys:statekit.bench.statelog}}
appender.state.layout.type = PatternLayout
appender.state.layout.pattern = %d{{UNIX_MILLIS}} [%t] %p %c: %m%n
# DEBUG on the package: the providers log under "<class> StateStoreProviderId[...]" (the store
# id is part of the logger name), whose log4j parent is the package, not the class.
logger.state.name = {STATE_PACKAGE}
logger.state.level = debug
logger.state.additivity = false
logger.state.appenderRef.state.ref = state
logger.shutdownhook.name = org.apache.spark.util.ShutdownHookManager
logger.shutdownhook.level = off
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = off
logger.hadoopfs.name = org.apache.hadoop.fs
logger.hadoopfs.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
"""
HDFS_LOAD = re.compile(r"partitionId=(\d+)\b.*Loading state for (\d+) takes (\d+) ms")
ROCKS_LOAD = re.compile(r"^(\d+) \[([^\]]*)\] \w+ \S+\.RocksDB .*?operatorId=(\d+), "
                        r"partitionId=(\d+)\b.*\]: (Loading|Loaded) (\d+)( with|$)")
OPERATOR = re.compile(r"operatorId=(\d+), partitionId=(\d+)")


def slim_progress(p: dict) -> dict:
    ops = p.get("stateOperators") or [{}]
    op = ops[0]
    return {"batchId": p["batchId"], "rows": p.get("numInputRows", 0),
            "epoch": epoch(p["timestamp"]), "durationMs": p.get("durationMs", {}),
            "numRowsTotal": op.get("numRowsTotal"), "allUpdatesTimeMs": op.get("allUpdatesTimeMs"),
            "commitTimeMs": op.get("commitTimeMs"), "customMetrics": op.get("customMetrics", {}),
            "memoryUsedBytes": sum(o.get("memoryUsedBytes") or 0 for o in ops)}


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def parse_state_log(path: Path) -> list[list[int]]:
    """``[operator, partition, version, ms]`` for every state load the log shows."""
    loads: list[list[int]] = []
    if not path.exists():
        return loads
    opened: dict[tuple[str, int, int, int], int] = {}
    with open(path, errors="replace") as handle:
        for line in handle:
            if "Loading state for" in line:
                m = HDFS_LOAD.search(line)
                op = OPERATOR.search(line)
                if m and op:
                    loads.append([int(op.group(1)), int(m.group(1)), int(m.group(2)),
                                  int(m.group(3))])
                continue
            m = ROCKS_LOAD.match(line.rstrip("\n"))
            if not m:
                continue
            ms, thread, op, part, what, version = (int(m.group(1)), m.group(2), int(m.group(3)),
                                                   int(m.group(4)), m.group(5), int(m.group(6)))
            key = (thread, op, part, version)
            if what == "Loading":
                opened[key] = ms
            elif key in opened:
                loads.append([op, part, version, ms - opened.pop(key)])
    return loads


def cpu_busy(seconds: float = 1.0) -> float:
    """Share of the machine's CPU busy over ``seconds`` (from /proc/stat; -1 if unknown)."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle
    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return -1.0
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def critical_path(values: list[float], cores: int = CORES) -> float:
    """ceil(P/C) waves of the slowest partitions: sort descending, sum the first of each
    group of ``cores``."""
    ordered = sorted(values, reverse=True)
    return float(sum(ordered[i] for i in range(0, len(ordered), cores)))


def session(app: str, confs: dict[str, str], driver_memory: str = "8g"):
    """A local Spark session for a benchmark's child process (adaptive execution off, so
    the shuffle-partition count is the configured one)."""
    from statekit.jobs.session import build_session

    return build_session(app, conf={"spark.driver.memory": driver_memory,
                                    "spark.sql.adaptive.enabled": "false", **confs})
