"""Reading a checkpoint while the reference pipeline writes it (a real running query).

An SRE runs statekit on live queries. Every read must be either consistent — the report of a
moment of the checkpoint, with no error a stopped copy would not have, and growth key counts
equal to what the finished checkpoint says for the same versions — or a one-line
"changed while reading" error. Never a wrong count.

No clock decides anything here: the test reads in rounds while the query runs and stops the
query itself, once it has read ``READ_ROUNDS`` rounds, compared at least one consistent growth
read and seen every landing file committed. The pipeline's own timeout only catches a hang.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from statekit.reference_pipeline.generator import EVENTS_DIR, generate
from tests.conftest import TEST_GENERATOR, quiesce
from tests.support.cli import run, strict_json

pytestmark = pytest.mark.spark

LIVE_BATCHES = 8
"""Landing files: the query commits them all before the test stops it."""
READ_ROUNDS = 3
"""Rounds of report, growth, batches and recovery read while the query runs."""
HANG_S = 300
"""The pipeline stops itself after this long: only a hang gets there (the test fails)."""
QUERY_NAME = "reference_fraud_sessions"


def _keys_by_version(growth: dict) -> dict[tuple[str, int], int]:
    return {(s["label"], v["version"]): v["keys"]
            for s in growth["stores"] for v in s["history"]["versions"]}


def _committed_every_file(checkpoint: Path, landing: Path) -> bool:
    """Every landing file is in a batch of the file source's log (``sources/0/N``, compacted
    ones included), and the newest such batch is committed (``commits/N``)."""
    wanted = {p.name for p in (landing / EVENTS_DIR).iterdir()}
    batch_of: dict[str, int] = {}
    log = checkpoint / "sources" / "0"
    try:
        for entry in log.iterdir() if log.is_dir() else []:
            if entry.name.startswith("."):  # Spark's temporary files, renamed when written
                continue
            for line in entry.read_text().splitlines()[1:]:  # after the "v1" line
                if line.strip():
                    record = json.loads(line)
                    batch_of[Path(record["path"]).name] = int(record["batchId"])
    except (FileNotFoundError, ValueError):  # compacted away or being written: not yet
        return False
    if not wanted <= batch_of.keys():
        return False
    return (checkpoint / "commits" / str(max(batch_of[name] for name in wanted))).exists()


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
                      timeout_s=HANG_S)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            run_pipeline(spark, opts)
        except BaseException as error:  # reported by the main thread
            failure.append(error)

    writer = threading.Thread(target=write, name="live-query")
    writer.start()
    rounds = reads = 0
    stopped = False
    live_counts: dict[tuple[str, int], int] = {}
    try:
        while writer.is_alive() and not (checkpoint / "commits" / "0").exists():
            time.sleep(0.2)
        while writer.is_alive():
            if rounds >= READ_ROUNDS and live_counts \
                    and _committed_every_file(checkpoint, landing):
                # The query ran through every read so far: stop it (run() then returns as
                # after its timeout, not as a failure).
                for query in spark.streams.active:
                    if query.name == QUERY_NAME:
                        query.stop()
                stopped = True
                break
            for args in (["report", checkpoint, "--json"], ["growth", checkpoint, "--json"],
                         ["batches", checkpoint, "--json"], ["recovery", checkpoint, "--json"]):
                code, out, err = run(args)
                reads += 1
                if code:
                    assert err.count("\n") == 1 and "changed while reading" in err, err
                    continue
                data = strict_json(out)
                if args[0] == "report":  # nothing a stopped checkpoint would not show
                    assert [f for f in data["findings"] if f["severity"] == "error"] == [], \
                        data["findings"]
                if args[0] == "growth":
                    for key, keys in _keys_by_version(data).items():
                        assert live_counts.setdefault(key, keys) == keys, key
            rounds += 1
    finally:
        if not stopped:  # an assertion above failed: do not leave the query running
            for query in spark.streams.active:
                if query.name == QUERY_NAME:
                    query.stop()
        writer.join()
    assert not failure, failure
    assert stopped, f"the query ended before the test stopped it ({HANG_S} s: a hang?)"
    assert rounds >= READ_ROUNDS and reads == 4 * rounds  # all while the query ran
    quiesce(spark, checkpoint)
    final = _keys_by_version(strict_json(run(["growth", checkpoint, "--json"])[1]))
    compared = [key for key in live_counts if key in final]
    assert compared, (live_counts, final)  # at least one consistent live growth read
    for key in compared:
        assert live_counts[key] == final[key], key
