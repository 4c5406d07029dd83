"""Checkpoint layouts on disk, without a JVM, that more than one test module builds on.

Lives here rather than in a test module: ``hdfs_checkpoint`` (real HDFS state files copied
into a written layout) serves the state-history and replay-pool tests, ``rollback_source``
(a checkpoint with a file source log, one entry per batch) the rollback and source-offset
tests. The layouts themselves come from ``tests.unit.checkpoint_builder``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fsspec

from tests.unit.checkpoint_builder import REAL_SCHEMA_FILE, write_checkpoint

REAL_HDFS = REAL_SCHEMA_FILE.parent  # 6.snapshot, 7-9.delta, 9.snapshot of one partition


def hdfs_checkpoint(tmp_path: Path, partitions: int = 1) -> Path:
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=9, committed=9,
                     partitions=partitions, crc=False)
    for partition in range(partitions):
        folder = root / "state" / "0" / str(partition)
        for old in folder.glob("*.delta"):
            old.unlink()
        for name in ("6.snapshot", "7.delta", "8.delta", "9.delta", "9.snapshot"):
            shutil.copy(REAL_HDFS / name, folder / name)
    return root


def rollback_source(tmp_path, **kw):
    kw.setdefault("planned", 7)
    kw.setdefault("committed", 6)
    kw.setdefault("snapshots", [4])
    root = tmp_path / "src"
    write_checkpoint(fsspec.filesystem("file"), str(root), **kw)
    for batch in range(7):  # a file source log with one entry per batch
        entry = {"path": f"file:/in/part-{batch}.json", "timestamp": batch, "batchId": batch}
        (root / "sources" / "0").mkdir(parents=True, exist_ok=True)
        (root / "sources" / "0" / str(batch)).write_text("v1\n" + json.dumps(entry))
    return root
