"""The estimate learns from a real query's restarts, both providers: a streaming aggregation
started three times on one checkpoint (each start a new runId), its progress events logged
as a listener would. The restarts here share one JVM, so their seconds say nothing about a
cold restart (the benchmark, ``bench_recovery_history.py``, measures those); what is checked
is that every restart is found, costed from the files of the version it loaded, and that
the fit is the one the module documents."""

from __future__ import annotations

import json

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.progress_log import parse_timings
from statekit.recovery.cost_model import local_model
from statekit.recovery.estimate import estimate_recovery, load_work, restart_at

pytestmark = [pytest.mark.spark]

PROVIDERS = {"hdfs": {}, "rocksdb": {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_real_querys_restarts_are_learned_from(provider, spark, tmp_path):
    from pyspark.sql import functions as F

    landing, checkpoint, log = tmp_path / "in", tmp_path / "ckpt", tmp_path / "progress.jsonl"
    confs = {"spark.sql.shuffle.partitions": "4", **PROVIDERS[provider]}
    saved = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        top = 0
        for run in range(3):
            for n in range(4):
                spark.range(top, top + 500).union(spark.range(0, max(top, 1) // 4)) \
                    .selectExpr("id as key", f"concat('v', id, '-{run}-{n}') as payload") \
                    .coalesce(1).write.mode("append").parquet(str(landing))
                top += 500
            query = (spark.readStream.schema("key long, payload string")
                     .option("maxFilesPerTrigger", 1).parquet(str(landing))
                     .groupBy("key").agg(F.max("payload").alias("payload"))
                     .writeStream.outputMode("update").format("noop")
                     .option("checkpointLocation", str(checkpoint))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            with log.open("a") as out:
                for progress in query.recentProgress:
                    out.write(json.dumps(json.loads(progress.json)) + "\n")
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    timings = parse_timings(log.read_text(), shown=str(log))[0]
    starts = sorted({t.batch_id for t in timings if t.batch_id > 0} & {
        t.batch_id for i, t in enumerate(timings) if i and timings[i - 1].run_id != t.run_id})
    assert starts == [4, 8]
    ckpt = open_checkpoint(str(checkpoint))
    model = local_model(ckpt)
    estimate = estimate_recovery(ckpt, cores=2, model=model, timings=timings)
    learning = estimate.learning
    assert learning is not None and learning.cold_start_s is not None
    assert [u.restart.batch for u in learning.used] == starts
    for used in learning.used:
        assert used.basis == f"the files of version {used.restart.batch}"
        works = load_work(ckpt, used.restart.batch, model)[1]
        assert used.modelled_s == pytest.approx(restart_at(works, model, 2, 1))
        assert used.restart.state_rows == next(
            t.state_rows for t in timings if t.batch_id == used.restart.batch - 1)
    if learning.scale is None:  # a restart of this size may sit in a cold start's noise
        assert "too little state" in (learning.why_uncalibrated or "")
    elif not learning.scale_fitted:  # states this close: the fixed part beside the model
        weights = [u.weight for u in learning.used]
        assert learning.scale == 1.0
        assert learning.fixed_s == pytest.approx(
            sum(w * (u.restart.cost_s - learning.cold_start_s - u.modelled_s)
                for w, u in zip(weights, learning.used, strict=True)) / sum(weights))
