"""Reading a checkpoint while the reference pipeline writes it (a real running query).

An SRE runs statekit on live queries. Every read must be either consistent — the report of a
moment of the checkpoint, with no error a stopped copy would not have, and growth key counts
equal to what the finished checkpoint says for the same versions — or a one-line
"changed while reading" error. Never a wrong count.
"""

from __future__ import annotations

import threading
import time

import pytest

from statekit.reference_pipeline.generator import generate
from tests.conftest import TEST_GENERATOR, quiesce
from tests.support.cli import run, strict_json

pytestmark = pytest.mark.spark

LIVE_BATCHES = 16


def _keys_by_version(growth: dict) -> dict[tuple[str, int], int]:
    return {(s["label"], v["version"]): v["keys"]
            for s in growth["stores"] for v in s["history"]["versions"]}


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_reads_during_a_running_query_are_consistent_or_one_line(provider, spark, tmp_path):
    from statekit.reference_pipeline.pipeline import RunOptions
    from statekit.reference_pipeline.pipeline import run as run_pipeline

    landing = tmp_path / "landing"
    generate(landing, TEST_GENERATOR, LIVE_BATCHES)
    checkpoint = tmp_path / "checkpoint"
    opts = RunOptions(landing=landing, checkpoint=str(checkpoint), output=str(tmp_path / "out"),
                      provider=provider, partitions=4, min_deltas_for_snapshot=2,
                      maintenance_interval="200ms", changelog=provider == "rocksdb",
                      trigger="processing-time", interval="200 milliseconds",
                      timeout_s=45)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            run_pipeline(spark, opts)
        except BaseException as error:  # reported by the main thread
            failure.append(error)

    writer = threading.Thread(target=write, name="live-query")
    writer.start()
    reads = errors = 0
    live_counts: dict[tuple[str, int], int] = {}
    try:
        deadline = time.monotonic() + 60
        while not (checkpoint / "commits" / "0").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        while writer.is_alive():
            for args in (["report", checkpoint, "--json"], ["growth", checkpoint, "--json"],
                         ["batches", checkpoint, "--json"], ["recovery", checkpoint, "--json"]):
                code, out, err = run(args)
                reads += 1
                if code:
                    errors += 1
                    assert err.count("\n") == 1 and "changed while reading" in err, err
                    continue
                data = strict_json(out)
                if args[0] == "report":  # nothing a stopped checkpoint would not show
                    assert [f for f in data["findings"] if f["severity"] == "error"] == [], \
                        data["findings"]
                if args[0] == "growth":
                    for key, keys in _keys_by_version(data).items():
                        assert live_counts.setdefault(key, keys) == keys, key
    finally:
        writer.join()
    assert not failure, failure
    quiesce(spark, checkpoint)
    final = _keys_by_version(strict_json(run(["growth", checkpoint, "--json"])[1]))
    compared = [key for key in live_counts if key in final]
    assert len(compared) >= 5, (live_counts, final)  # the query really ran while we read
    for key in compared:
        assert live_counts[key] == final[key], key
    assert reads >= 8 and errors < reads / 2, (reads, errors)
