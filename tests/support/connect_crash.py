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
    from statekit.checkpoint.location import resolve
    from statekit.jobs.repartition import run_repartition
    from statekit.jobs.session import build_session
    from statekit.jobs.state_reader import reader_confs, session_confs
    from statekit.writes.repartition_plan import plan_repartition
    from statekit.writes.staging import Staging

    spark = build_session("statekit-connect-crash", remote=url)
    ckpt = open_checkpoint(checkpoint)

    def attempt(name: str, fail: str | None):
        target = resolve(str(Path(tmp) / name))
        plan = plan_repartition(ckpt, target, 2, force=True)
        with session_confs(spark, reader_confs(ckpt)):
            return run_repartition(spark, ckpt, plan, Staging(target, ckpt.location.url),
                                   storage_options={}, check=True,
                                   fail_on=fail and fail.format(version=plan.state_version))

    report: dict = {"failed": False, "error": ""}
    try:
        attempt("crashed", "write state/0/1/{version}.snapshot")
    except Exception as error:  # the one-line failure statekit raises
        report.update(failed=True, error=str(error))
    report["rerun_ok"] = attempt("again", None).verification.ok
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:4])
