"""Record the frozen restart fixtures: a real query's checkpoint and its progress log with
restarts (each run a fresh process, a cold JVM, with a new runId), for the tests of
``statekit.recovery.history`` and ``statekit recovery --progress-log``.

Spark's event log of every run is kept beside (``eventlog/``, Spark 4's default zstd).
The query is the benchmark's aggregation (``groupBy(key).agg(max(payload), count)``, update
mode, a noop sink) over small parquet files, four shuffle partitions. Run 0 starts the query
on an empty checkpoint (batch 0 onwards); runs 1–3 restart it, each over five files of
similar size with half new keys. Re-record (overwrites):
``.venv/bin/python tests/data/restarts/record.py [hdfs|rocksdb]``
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
RUNS = 4
FILES_PER_RUN = 5
ROWS = 1_000


def child(provider: str, landing: str, checkpoint: str, log: str, events: str) -> None:
    sys.path.insert(0, str(ROOT))
    from pyspark.sql import functions as F

    from statekit.jobs.session import build_session

    prefix = "spark.sql.streaming.stateStore."
    conf = {"spark.sql.shuffle.partitions": "4", f"{prefix}maintenanceInterval": "1s",
            f"{prefix}minDeltasForSnapshot": "4", "spark.sql.adaptive.enabled": "false",
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": events}
    if provider == "rocksdb":
        conf[f"{prefix}providerClass"] = (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        conf[f"{prefix}rocksdb.changelogCheckpointing.enabled"] = "true"
    spark = build_session("statekit-restart-fixture", "local[2]", conf)
    query = (spark.readStream.schema("key long, payload string")
             .option("maxFilesPerTrigger", 1).parquet(landing)
             .groupBy("key").agg(F.max("payload").alias("payload"), F.count("*").alias("n"))
             .writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    with open(log, "a", encoding="utf-8") as out:
        for progress in query.recentProgress:
            out.write(json.dumps(json.loads(progress.json)) + "\n")
    spark.stop()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:7])
        return
    provider = sys.argv[1] if len(sys.argv) > 1 else "hdfs"
    sys.path.insert(0, str(ROOT))
    from statekit.jobs.session import build_session

    target = HERE / provider
    work = Path("/tmp") / f"statekit-restart-fixture-{provider}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    data, landing = work / "data", work / "landing"
    landing.mkdir(parents=True)
    spark = build_session("statekit-restart-fixture-data", "local[2]", {})
    top = 0
    for run in range(RUNS):
        for n in range(FILES_PER_RUN):
            new = spark.range(top, top + ROWS // 2).selectExpr("id as key")
            old = spark.range(ROWS // 2).selectExpr(f"pmod(xxhash64(id, {run * 10 + n}), "
                                                    f"{max(top, 1)}) as key")
            rows = new.union(old).selectExpr(
                "key", "substr(sha2(cast(key as string), 256), 1, 16) as payload")
            rows.coalesce(1).write.parquet(str(data / f"r{run}-{n}"))
            top += ROWS // 2
    spark.stop()
    target.mkdir(parents=True)
    log = target / "progress.jsonl"
    events = target / "eventlog"
    events.mkdir()
    for run in range(RUNS):
        for n in range(FILES_PER_RUN):
            part = next((data / f"r{run}-{n}").glob("part-*.parquet"))
            shutil.copy(part, landing / f"r{run}-{n}.parquet")
        subprocess.run([sys.executable, __file__, "--child", provider, str(landing),
                        str(target / "checkpoint"), str(log), str(events)], check=True,
                       cwd=ROOT)
    for crc in [*(target / "checkpoint").rglob("*.crc"), *events.rglob(".*.crc")]:
        crc.unlink()  # Hadoop's checksums: statekit and Spark read the files without them
    print(f"recorded {target}")


if __name__ == "__main__":
    main()
