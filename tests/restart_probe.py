"""A measured restart for the recovery test: a streaming aggregation over Parquet files,
restarted in a fresh process on a checkpoint as a warm pair — throw-away first batches on
empty checkpoints (the JVM's cold start), then the same batch on another empty checkpoint (the
reference) and the restart, in one JVM. The restart minus the reference is what the state
costs the first batch, without the cold start's run-to-run noise (about a second). Also
Spark's own per-partition state-load times of the restart: the HDFS provider logs ``Loading
state for <v> takes <ms> ms`` at DEBUG under a logger named after the store
(``…StateStoreProviderId[… partitionId=<p> …]``), which a log4j configuration sends to a file
here, logger name first.

``write_state`` builds the checkpoint: ``keys`` keys over ``batches`` micro-batches
(``keys / batches`` new keys and ``keys / (2 × batches)`` random updates each), ~50-byte hex
values, HDFS-backed, no snapshot — every delta is replayed.

Run: ``python -m tests.restart_probe '{"checkpoint": …, "landing": …, "fresh": …,
"partitions": 4}'`` (``"driver_memory": "8g"`` for a larger heap); ``{"mode": "write",
"root": …, "keys": …, "batches": …, "partitions": …, "driver_memory": …}`` writes the state in
its own JVM.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

SCHEMA = "key long, payload string"
NEW_KEYS = 2000


def payload(salt: str) -> str:
    return f"substr(sha2(concat(cast(key as string), '{salt}'), 256), 1, 50)"


def _write_parquet(df, target: Path) -> None:
    tmp = target.parent / f"_{target.name}"
    df.coalesce(1).write.parquet(str(tmp))
    next(tmp.glob("part-*.parquet")).rename(target)
    for leftover in tmp.iterdir():
        leftover.unlink()
    tmp.rmdir()


def stream(spark, landing: Path, glob: str = "*.parquet"):
    from pyspark.sql import functions as F

    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
            .option("pathGlobFilter", glob).parquet(str(landing))
            .groupBy("key").agg(F.max("payload").alias("payload"), F.count("*").alias("n")))


def confs(partitions: int) -> dict[str, str]:
    prefix = "spark.sql.streaming.stateStore."
    return {"spark.sql.shuffle.partitions": str(partitions),
            f"{prefix}providerClass":
                "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
            f"{prefix}minDeltasForSnapshot": "1000", f"{prefix}compression.codec": "lz4"}


def write_state(spark, root: Path, keys: int, batches: int, partitions: int) -> dict[str, Path]:
    """The checkpoint, its landing folder (with one more file for the restart) and a landing
    folder holding only that file (for the empty-checkpoint baseline)."""
    from tests.small_queries import run_query

    landing, fresh = root / "landing", root / "fresh"
    landing.mkdir(parents=True)
    fresh.mkdir()
    per = keys // batches
    for b in range(batches):
        rows = spark.range(b * per, (b + 1) * per).selectExpr("id as key")
        if b:
            rows = rows.union(spark.range(keys // (2 * batches)).selectExpr(
                f"pmod(xxhash64(id, {b}), {b * per}) as key"))
        _write_parquet(rows.selectExpr("key", f"{payload(str(b))} as payload"),
                       landing / f"batch-{b:03d}.parquet")
    checkpoint = root / "checkpoint"
    run_query(spark, stream(spark, landing, "batch-*.parquet"), checkpoint, confs(partitions),
              "update")
    _write_parquet(spark.range(NEW_KEYS).selectExpr("id as key", f"{payload('new')} as payload"),
                   fresh / "new.parquet")
    (landing / "new.parquet").write_bytes((fresh / "new.parquet").read_bytes())
    return {"checkpoint": checkpoint, "landing": landing, "fresh": fresh}


LOAD_LINE = re.compile(r"partitionId=(\d+)\b.*: Loading state for \d+ takes (\d+) ms")
LOG4J = """rootLogger.level = error
rootLogger.appenderRef.file.ref = loads
appender.loads.type = File
appender.loads.name = loads
appender.loads.fileName = {log}
appender.loads.layout.type = PatternLayout
appender.loads.layout.pattern = %c: %m%n
logger.state.name = org.apache.spark.sql.execution.streaming.state
logger.state.level = debug
logger.state.additivity = false
logger.state.appenderRef.file.ref = loads
"""


WARMUPS = 4
"""Throw-away first batches before the pair, as in ``benchmarks/bench_recovery_grid.py``:
after a single one the JVM still warms by up to a second over the next few batches, which
the reference (run first) would pay and the restart would not."""


def pair(spec: dict) -> dict:
    """The warm pair, in one fresh process: ``WARMUPS`` throw-away first batches on empty
    checkpoints (the JVM's cold start: class loading, code generation, the provider's first
    store), then the reference — the same batch on another empty
    checkpoint — and the restart on ``spec["checkpoint"]``, every store unloaded between
    them. The two differ by the state alone; a cold start (seconds, varying by a second from
    run to run) hits neither."""
    folder = Path(tempfile.mkdtemp(prefix="restart-pair-"))
    try:
        return _pair(spec, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pair(spec: dict, folder: Path) -> dict:
    from statekit.jobs.session import build_session

    log = folder / "state.log"
    (folder / "log4j2.properties").write_text(LOG4J.format(log=log))
    memory = {"spark.driver.memory": spec["driver_memory"]} if spec.get("driver_memory") \
        else {}
    spark = build_session("statekit-restart-pair", conf={
        **confs(spec["partitions"]), "spark.sql.adaptive.enabled": "false", **memory,
        "spark.driver.extraJavaOptions":
            f"-Dlog4j2.configurationFile=file:{folder / 'log4j2.properties'}"})
    stores = getattr(spark._jvm, "org.apache.spark.sql.execution.streaming.state.StateStore")

    def first_batch(landing: str, checkpoint: str) -> float:
        query = (stream(spark, Path(landing)).writeStream.outputMode("update")
                 .format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(600)
        batches = [json.loads(p.json) for p in query.recentProgress]
        query.stop()
        stores.stop()
        first = next(p for p in batches if p.get("numInputRows", 0) > 0)
        return first["durationMs"]["triggerExecution"] / 1000

    try:
        for n in range(WARMUPS):
            first_batch(spec["fresh"], str(folder / f"warm-up-{n}"))
        reference = first_batch(spec["fresh"], str(folder / "reference"))
        before = log.stat().st_size if log.exists() else 0
        restart = first_batch(spec["landing"], spec["checkpoint"])
    finally:
        spark.stop()
    loads: dict[int, int] = {}
    with open(log, "rb") as handle:
        handle.seek(before)
        for line in handle.read().decode(errors="replace").splitlines():
            if match := LOAD_LINE.search(line):
                part = int(match.group(1))
                loads[part] = loads.get(part, 0) + int(match.group(2))
    return {"restart_s": restart, "reference_s": reference,
            "load_ms": {str(k): v for k, v in sorted(loads.items())}}


def write_in_own_jvm(spec: dict) -> dict:
    """``write_state`` in this process's own session, with ``spec["driver_memory"]`` of heap
    (millions of HDFS rows do not fit in the test session's default 1 GiB)."""
    from statekit.jobs.session import build_session

    spark = build_session("statekit-restart-write", conf={
        "spark.driver.memory": spec["driver_memory"], "spark.sql.adaptive.enabled": "false"})
    try:
        paths = write_state(spark, Path(spec["root"]), spec["keys"], spec["batches"],
                            spec["partitions"])
    finally:
        spark.stop()
    return {name: str(path) for name, path in paths.items()}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    if request.get("mode") == "write":
        print(json.dumps(write_in_own_jvm(request)))
    else:
        print(json.dumps(pair(request)))
