"""Moved source offsets, proved by restarting Spark on the new checkpoint.

Two real sources whose input is deterministic: ``rate-micro-batch`` (row i has value i; its
offset ``{"offset":N,…}`` counts rows) on the HDFS provider, and the file source
(``{"logOffset":N}``, an index into its own log) on RocksDB. The query keeps a count and a
max per ``value % 3`` in state, so what the restarted batch read shows in its result:
replayed rows are counted twice, skipped ones never. Kafka cannot run here; its offsets
are edited by the same code (tests/unit/test_source_offsets.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.small_queries import provider_confs
from tests.support.cli import statekit_json
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]

ROWS_PER_BATCH = 10


def expected(values: list[int]) -> dict[int, tuple[int, int]]:
    """``{k: (count, max value)}`` over every row the state has seen."""
    counts = Counter(v % 3 for v in values)
    return {k: (counts[k], max(v for v in values if v % 3 == k)) for k in counts}


def _aggregate(df):
    from pyspark.sql import functions as F

    return df.groupBy((F.col("value") % 3).alias("k")).agg(
        F.count("*").alias("n"), F.max("value").alias("top"))


def run_once(spark, df, checkpoint: Path, confs: dict[str, str]) -> dict[int, tuple[int, int]]:
    """One batch (``trigger(once)``) into a memory table; the aggregate it shows."""
    from statekit.jobs.state_reader import session_confs
    from tests.conftest import quiesce

    name = f"offsets_{abs(hash((str(checkpoint), len(list(checkpoint.glob('commits/*'))))))}"
    with session_confs(spark, confs):
        query = (_aggregate(df).writeStream.format("memory").queryName(name)
                 .outputMode("complete").option("checkpointLocation", str(checkpoint))
                 .trigger(once=True).start())
        query.awaitTermination()
    quiesce(spark, checkpoint)
    return {r.k: (r.n, r.top) for r in spark.table(name).collect()}


def rate(spark):
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS_PER_BATCH)
            .option("numPartitions", 1).option("startTimestamp", 0).load())


@pytest.fixture(scope="module")
def rate_checkpoint(spark, tmp_path_factory):
    """Three batches of rate-micro-batch: rows 0…29."""
    root = tmp_path_factory.mktemp("rate-offsets") / "ckpt"
    confs = provider_confs("hdfs", "lz4")
    for _ in range(3):
        result = run_once(spark, rate(spark), root, confs)
    assert result == expected(list(range(30)))
    return root, confs


@pytest.mark.parametrize(("to_batch", "edit", "read"), [
    (2, ("--shift-by", "offset=-10"), range(20, 30)),   # replay the last batch's rows
    (2, ("--set-offset", "offset=60"), range(60, 70)),  # skip rows 30…59
    (1, ("--shift-by", "offset=-10"), range(10, 20)),   # roll back and replay
])
def test_rate_source_resumes_where_the_offsets_say(spark, rate_checkpoint, tmp_path, to_batch,
                                                   edit, read):
    root, confs = rate_checkpoint
    before = tree_hash(root)
    out = statekit_json("rollback", str(root), "--to-batch", str(to_batch),
                        "--out", str(tmp_path / "dst"), *edit)
    assert out["verification"]["ok"]
    [change] = out["plan"]["offset_changes"]
    assert (change["key"], change["after"]) == ("offset", read.start)
    state_rows = list(range((to_batch + 1) * ROWS_PER_BATCH))
    assert run_once(spark, rate(spark), tmp_path / "dst", confs) == \
        expected(state_rows + list(read))
    assert tree_hash(root) == before


def _write_file(folder: Path, index: int) -> None:
    rows = range(index * ROWS_PER_BATCH, (index + 1) * ROWS_PER_BATCH)
    (folder / f"part-{index}.json").write_text("".join(json.dumps({"value": v}) + "\n"
                                                       for v in rows))


def test_file_source_rereads_the_files_of_earlier_log_entries(spark, tmp_path):
    """Three files, one per batch; a fourth arrives while the query is down. Shifting
    ``logOffset`` back by two makes the first batch after the restart read the last two
    files again, with the new one."""
    confs = provider_confs("rocksdb", "lz4")
    inputs, root = tmp_path / "input", tmp_path / "ckpt"
    inputs.mkdir()

    def files(spark):
        return (spark.readStream.schema("value LONG").option("maxFilesPerTrigger", 1)
                .json(str(inputs)))

    for index in range(3):
        _write_file(inputs, index)
        run_once(spark, files(spark), root, confs)
    _write_file(inputs, 3)
    before = tree_hash(root)
    dry = statekit_json("rollback", str(root), "--out", str(tmp_path / "dst"),
                        "--shift-by", "logOffset=-2", "--dry-run")
    [change] = dry["plan"]["offset_changes"]
    assert (change["kind"], change["before"], change["after"]) == ("file", 2, 0)
    assert change["effect"] == "re-reads the files of log entries 1…2 (2 files)"
    # Spark calls getBatch(offsets/1, offsets/2) on restart and the file source asserts
    # start <= end: offsets/1 is lowered too (without it: "assertion failed", measured)
    assert [(c["before"], c["after"]) for c in dry["plan"]["offsets_lowered"]] == [(1, 0)]
    assert not (tmp_path / "dst").exists()
    out = statekit_json("rollback", str(root), "--out", str(tmp_path / "dst"),
                        "--shift-by", "logOffset=-2")
    assert out["verification"]["ok"] and out["plan"]["batch"] == 2
    assert run_once(spark, files(spark), tmp_path / "dst", confs) == \
        expected(list(range(30)) + list(range(10, 40)))
    assert tree_hash(root) == before


def test_offsets_of_a_repartitioned_checkpoint(spark, rate_checkpoint, tmp_path):
    """Repartition, then move the offsets of its repartition batch: a rollback to the last
    batch only rewrites offsets. The restart runs with the new partition count and replays
    the rows asked for."""
    root, confs = rate_checkpoint
    statekit_json("repartition", str(root), "--partitions", "3", "--out",
                  str(tmp_path / "three"))
    out = statekit_json("rollback", str(tmp_path / "three"), "--out", str(tmp_path / "dst"),
                        "--shift-by", "offset=-20")
    assert out["plan"]["batch"] == 3 and out["verification"]["ok"]  # the repartition batch
    assert [(c["before"], c["after"]) for c in out["plan"]["offset_changes"]] == [(30, 10)]
    assert run_once(spark, rate(spark), tmp_path / "dst", confs) == \
        expected(list(range(30)) + list(range(10, 20)))
    assert len(list((tmp_path / "dst" / "state" / "0").glob("[0-9]*"))) == 3
