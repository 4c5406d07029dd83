"""Regenerate the pyspark-written fixtures of tests/data/formats (needs Java and pyspark).

Not a test: run by hand, ``python tests/data/formats/generate_fixtures.py OUT [names…]``, then
copy the files listed in README.md. The input is the reference pipeline's first four landing
batches (``statekit pipeline generate``) placed in ``OUT/landing``.
"""

from __future__ import annotations

import shutil
import sys

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor

from statekit.jobs.session import build_session

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
CODEC = "spark.sql.streaming.stateStore.compression.codec"
EVENTS = ("event_id string, event_type string, user_id string, card_id string, amount double, "
          "currency string, merchant_category string, country string, event_time timestamp")


class Counters(StatefulProcessor):
    """transformWithStateInPandas with a value, a list and a map state variable."""

    def init(self, handle):
        self.count = handle.getValueState("count", "n long")
        self.amounts = handle.getListState("amounts", "a double")
        self.countries = handle.getMapState("countries", "c string", "k long")

    def handleInputRows(self, key, rows, timerValues):
        n = self.count.get()[0] if self.count.exists() else 0
        for pdf in rows:
            n += len(pdf)
            self.amounts.appendList([(float(a),) for a in pdf["amount"]])
            for c in pdf["country"]:
                seen = self.countries.containsKey((c,))
                old = self.countries.getValue((c,))[0] if seen else 0
                self.countries.updateValue((c,), (old + 1,))
        self.count.update((n,))
        yield pd.DataFrame({"user_id": [key[0]], "n": [n]})

    def close(self):
        pass


def main(out: str, names: list[str]) -> None:
    spark = build_session("fixtures", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    })

    def src():
        return (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
                .json(f"{out}/landing"))

    def run(name, df, conf, mode="update"):
        if names and name not in names:
            return
        shutil.rmtree(f"{out}/{name}", ignore_errors=True)
        for k, v in conf.items():
            spark.conf.set(k, v)
        (df.writeStream.format("noop").outputMode(mode)
         .option("checkpointLocation", f"{out}/{name}").trigger(availableNow=True).start()
         .awaitTermination())
        for k in conf:
            spark.conf.unset(k)

    counts = src().groupBy("user_id").count()
    hdfs = {PROVIDER: HDFS}
    run("agg_zstd", counts, {**hdfs, CODEC: "zstd"})
    run("agg_types", src().groupBy(F.window("event_time", "1 hour"), "user_id", "country").agg(
        F.count("*"), F.sum(F.col("amount").cast("decimal(10,2)")),
        F.sum(F.col("amount").cast("decimal(30,4)")), F.max("event_time"),
        F.max(F.to_timestamp_ntz(F.date_format("event_time", "yyyy-MM-dd HH:mm:ss"))),
        F.min(F.to_date("event_time")), F.avg("amount"), F.max(F.col("amount").cast("float")),
        F.max(F.lit(7).cast("byte")), F.max(F.lit(300).cast("short")),
        F.max(F.lit(70000).cast("int")), F.max(F.col("amount") > 100),
        F.max(F.encode("currency", "utf-8")), F.collect_list("merchant_category"),
    ), hdfs)
    run("dedup", src().dropDuplicates(["event_id"]), hdfs, mode="append")
    run("rockscl1", counts, {PROVIDER: ROCKS, CHANGELOG: "true"})
    run("rockscl1z", counts, {PROVIDER: ROCKS, CHANGELOG: "true", CODEC: "zstd"})
    tws = src().groupBy("user_id").transformWithStateInPandas(
        statefulProcessor=Counters(), outputStructType="user_id string, n long",
        outputMode="Update", timeMode="None")
    run("tws", tws, {PROVIDER: ROCKS, CHANGELOG: "true"})
    run("tws2", tws, {PROVIDER: ROCKS, CHANGELOG: "true",
                      "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"})
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
