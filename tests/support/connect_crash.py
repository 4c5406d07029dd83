"""Run by tests/spark/test_connect.py in a process of its own (a Connect session changes
pyspark's mode for the whole process): an HDFS repartition over Spark Connect whose writer
task for new partition 1 fails on the server, then a rerun; prints a JSON report.

    python -m tests.support.connect_crash sc://HOST:PORT CKPT TMP
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(url: str, checkpoint: str, tmp: str) -> None:
    from statekit.checkpoint import open_checkpoint
    from statekit.jobs.session import build_session
    from tests.support.restarts import crash_runner

    spark = build_session("statekit-connect-crash", remote=url)
    ckpt = open_checkpoint(checkpoint)
    attempt = crash_runner(spark, ckpt, Path(tmp), 2)
    version = ckpt.last_committed_batch + 2  # the state version every new partition gets
    report: dict = {"failed": False, "error": ""}
    try:
        attempt("crashed", f"write state/0/1/{version}.snapshot")
    except Exception as error:  # the one-line failure statekit raises
        report.update(failed=True, error=str(error))
    report["rerun_ok"] = attempt("again", None)[2].verification.ok
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:4])
