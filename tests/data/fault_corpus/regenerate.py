#!/usr/bin/env python3
"""Regenerate ``tests/data/fault_corpus/``: the checkpoints the fault corpus damages.

tests/unit/test_fault_corpus.py runs every fault of tests/faults.py through every JVM-free
command on copies of three checkpoints the reference pipeline really wrote. They used to be
written by Spark at test time (the ``reference_checkpoints`` fixture of tests/conftest.py); they
are kept here instead, frozen, so those cases run without a JVM. This script writes them the
way that fixture does, and nothing else:

* the session of the ``spark`` fixture: ``build_session("statekit-tests")`` with
  ``SESSION_CONF`` (shuffle partitions ``TEST_PARTITIONS``, default parallelism 2, state-store
  maintenance every 200 ms) and build_session's defaults (``local[*]``, UTC, …);
* the fixture's own code: ``ReferenceCheckpoints`` (imported from tests/conftest.py) generates
  the landing with ``TEST_GENERATOR`` for ``TEST_BATCHES`` batches, runs the pipeline with
  ``TEST_PARTITIONS`` partitions and minDeltasForSnapshot ``TEST_MIN_DELTAS``, then
  calls ``quiesce`` (unloads the state stores, waits until the folder is still);
* the three runs the fault corpus copies, in its order, with its post-processing:

  ``hdfs``       ``get("hdfs")``, as written;
  ``changelog``  ``get("rocksdb", changelog=True)`` without its zips, their checksum files
                 and the ``SSTs`` folders (as before maintenance ever uploaded a zip: a
                 restart replays the changelogs from version 1);
  ``zips``       ``get("rocksdb")`` (a zip per version), as written.

Each lands in ``tests/data/fault_corpus/<name>/`` (the folder is the checkpoint; the earlier
copies are replaced only once all three runs passed the checks below), and ``manifest.json``
beside them says what made them. The landing folder and the sinks' output are not kept: the
checkpoints' ``sources/0/*`` name the landing files under ``/tmp/statekit-fault-corpus/`` (a
fixed path, so a regeneration changes no path), but no JVM-free command opens them; the build
folder is deleted at the end (kept when a check fails, to look at).

The output is not byte-identical from one run to the next (query ids, batch timestamps, SST
names, the snapshots maintenance wrote); the script checks that each checkpoint has what the
faults need on partition 1's restart path (a snapshot followed by deltas; changelogs only; a
zip listing SSTs) and refuses to keep a run that does not.

Run it from the repository root with the project's virtualenv (Java 17 as ``java``), then run
the JVM-free module::

    .venv/bin/python tests/data/fault_corpus/regenerate.py
    .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 tests/unit/test_fault_corpus.py

``tests/spark/test_fault_corpus.py::test_the_frozen_corpus_is_what_this_spark_writes``
compares the layout and formats with what the installed Spark writes; when it fails (a new
Spark version), regenerate.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BUILD_ROOT = Path("/tmp/statekit-fault-corpus")
"""Where the landing and the runs are built (fixed: the checkpoints' source logs name it)."""

if str(REPO) not in sys.path:  # run as a script: make ``tests`` importable
    sys.path.insert(0, str(REPO))

from tests.conftest import (  # noqa: E402
    TEST_BATCHES,
    TEST_GENERATOR,
    TEST_MIN_DELTAS,
    TEST_PARTITIONS,
    ReferenceCheckpoints,
)
from tests.faults import strip_zips  # noqa: E402

APP_NAME = "statekit-tests"
SESSION_CONF = {
    "spark.sql.shuffle.partitions": str(TEST_PARTITIONS),
    "spark.default.parallelism": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
}
"""The ``spark`` fixture's conf (tests/conftest.py); the Spark test of the frozen corpus checks
that the fixture's session still has these values."""

CHECKPOINTS: dict[str, dict] = {
    "hdfs": {"provider": "hdfs"},
    "changelog": {"provider": "rocksdb", "changelog": True},
    "zips": {"provider": "rocksdb"},
}
"""name -> the ``reference_checkpoints.get`` arguments of the run it copies."""

POST_PROCESSING = {
    "hdfs": "none",
    "changelog": "every *.zip, .*.zip.crc and SSTs/ folder removed (as before maintenance "
                 "ever uploaded a zip: the restart replays the changelogs from version 1)",
    "zips": "none",
}


def check_restart_path(name: str, facts) -> None:
    """What the faults need on partition 1's restart path (tests/faults.py ``requires``,
    ``_newest`` and the ``change-file-*`` faults, which damage its last file)."""
    kinds = [f.rsplit(".", 1)[-1] for f in facts.restart_files]
    if name == "hdfs":
        ok = "snapshot" in kinds and kinds[-1] == "delta"
    elif name == "changelog":
        ok = set(kinds) == {"changelog"}
    else:
        ok = "zip" in kinds and bool(facts.restart_ssts)
    if not ok:
        raise SystemExit(f"{name}: partition 1's restart path {list(facts.restart_files)} "
                         "does not have what the faults need (maintenance timing?); run again")


def empty_folders(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_dir() and not any(p.iterdir()))


def main() -> int:
    os.environ.setdefault("TZ", "UTC")
    import pyspark

    from statekit.jobs.session import build_session, session_conf
    from statekit.reference_pipeline.pipeline import RunOptions
    from tests.faults import facts_of

    shutil.rmtree(BUILD_ROOT, ignore_errors=True)
    BUILD_ROOT.mkdir(parents=True)
    spark = build_session(APP_NAME, conf=SESSION_CONF)
    try:
        runs = ReferenceCheckpoints(spark, BUILD_ROOT)
        built = {}
        for name, args in CHECKPOINTS.items():
            print(f"{name}: reference_checkpoints.get({args}) ...", flush=True)
            built[name] = runs.get(**args)
        java = str(spark._jvm.java.lang.System.getProperty("java.version"))
        master, parallelism = spark.sparkContext.master, spark.sparkContext.defaultParallelism
    finally:
        spark.stop()

    entries = {}
    staged = BUILD_ROOT / "frozen"
    for name, ref in built.items():
        target = staged / name
        shutil.copytree(ref.checkpoint, target, symlinks=True)
        if name == "changelog":
            strip_zips(target)
        empty = empty_folders(target)
        if empty:  # git keeps no empty folder: a clone would differ from what was tested
            raise SystemExit(f"{name}: empty folders {empty}; git would not keep them")
        facts = facts_of(target)
        check_restart_path(name, facts)
        files = [p for p in target.rglob("*") if p.is_file()]
        options = RunOptions(landing=runs.landing, checkpoint="", output="",
                             partitions=TEST_PARTITIONS, min_deltas_for_snapshot=TEST_MIN_DELTAS,
                             provider=CHECKPOINTS[name]["provider"],
                             changelog=CHECKPOINTS[name].get("changelog", False))
        entries[name] = {
            "reference_checkpoints_get": CHECKPOINTS[name],
            "sql_confs": options.sql_confs(),
            "post_processing": POST_PROCESSING[name],
            "batches_run": ref.result.batches,
            "last_committed_batch": facts.last,
            "partitions": facts.partitions,
            "restart_files_partition_1": list(facts.restart_files),
            "restart_ssts_partition_1": list(facts.restart_ssts),
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
        }
        print(f"  {name}: {len(files)} files, "
              f"{entries[name]['bytes']:,} bytes, last batch {facts.last}, restart path "
              f"{[f.rsplit('/', 1)[-1] for f in facts.restart_files]}", flush=True)

    defaults = {k: v for k, v in session_conf(APP_NAME, conf=SESSION_CONF).items()
                if "/" not in v}  # (the interpreter and log4j paths are this machine's)
    manifest = {
        "made_by": "tests/data/fault_corpus/regenerate.py",
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spark_version": pyspark.__version__,
        "java_version": java,
        "python_version": platform.python_version(),
        "session": {"app_name": APP_NAME, "conf": SESSION_CONF, "master": master,
                    "default_parallelism": parallelism, "all_confs_set": defaults},
        "generator": dataclasses.asdict(TEST_GENERATOR),
        "batches": TEST_BATCHES,
        "partitions": TEST_PARTITIONS,
        "min_deltas_for_snapshot": TEST_MIN_DELTAS,
        "landing": str(runs.landing),
        "landing_note": "named by sources/0/* of each checkpoint; not kept (no JVM-free "
                        "command opens it), nor the sinks' output or progress logs",
        "checkpoints": entries,
    }
    for name in entries:  # every run passed its checks: replace the kept copies
        shutil.rmtree(HERE / name, ignore_errors=True)
        shutil.move(staged / name, HERE / name)
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(BUILD_ROOT, ignore_errors=True)
    print(f"wrote {HERE.relative_to(REPO)}/manifest.json; removed {BUILD_ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
