"""Names for the real checkpoints the model is tested on, and how to get each one.

Reference-pipeline runs (applyInPandasWithState) in every provider/format variant, plus small
aggregation / dropDuplicates / join queries, all written by real Spark in this test session.
"""

from __future__ import annotations

from pathlib import Path

REFERENCE = {
    "hdfs": dict(provider="hdfs"),
    "hdfs-no-snapshot": dict(provider="hdfs", variant="no-snapshot"),
    "hdfs-purged": dict(provider="hdfs", variant="purged"),
    "rocksdb": dict(provider="rocksdb"),
    "rocksdb-changelog": dict(provider="rocksdb", changelog=True),
    "rocksdb-changelog-v2": dict(provider="rocksdb", changelog=True, variant="format-v2"),
}
SMALL = {
    "aggregation": ("aggregation", "hdfs", "lz4"),
    "aggregation-zstd": ("aggregation", "hdfs", "zstd"),
    "aggregation-rocksdb": ("aggregation", "rocksdb", "lz4"),
    "dedup": ("dedup", "hdfs", "lz4"),
    "join": ("join", "hdfs", "lz4"),
    "session-window": ("session-window", "hdfs", "lz4"),
    "dedup-within-watermark": ("dedup-within-watermark", "hdfs", "lz4"),
    "tws": ("tws", "rocksdb", "lz4"),
}
ALL = [*REFERENCE, *SMALL]


def checkpoint_for(name: str, reference_checkpoints, small_queries) -> Path:
    if name in REFERENCE:
        return reference_checkpoints.get(**REFERENCE[name]).checkpoint
    return small_queries.get(*SMALL[name]).checkpoint
