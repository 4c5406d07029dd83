"""Build small checkpoint *layouts* on any fsspec filesystem, without a JVM.

The model's listing and log logic only looks at names, sizes and the small text logs, so a
layout with the real log formats and placeholder state files is a faithful input for it. The
log texts follow what pyspark 4.3 wrote in our real checkpoints. Tests that
decode state bytes use real files instead (tests/data/formats).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

#: A schema file pyspark 4.3 wrote for the reference pipeline (applyInPandasWithState).
REAL_SCHEMA_FILE = Path(__file__).parent.parent / "data" / "formats" / "aipws_hdfs" / "schema"
#: A RocksDB checkpoint zip pyspark 4.3 wrote (65 keys), and the SST files it references.
REAL_ZIP_FILE = REAL_SCHEMA_FILE.parent.parent / "aipws_rocksdb" / "9.zip"
REAL_ZIP_SSTS = {"000018-b7b303d6-07a0-44d1-a790-d2870d008f9b.sst": 1438,
                 "000017-43062a3e-87dd-4425-8173-8c245328559f.sst": 9774}

PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


def offsets_text(batch: int, partitions: int = 4, provider: str = "hdfs",
                 watermark: int = 0, timestamp: int | None = None, version: int = 1,
                 codec: str = "lz4") -> str:
    conf = {"spark.sql.streaming.stateStore.providerClass": PROVIDERS[provider],
            "spark.sql.shuffle.partitions": str(partitions),
            "spark.sql.streaming.stateStore.compression.codec": codec,
            "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2"}
    meta = {"batchWatermarkMs": watermark,
            "batchTimestampMs": timestamp if timestamp is not None else 1_700_000_000_000
            + batch * 10_000, "conf": conf}
    source = json.dumps({"logOffset": batch})
    line = source if version == 1 else f"0:{source}"
    return f"v{version}\n{json.dumps(meta)}\n{line}"


def commit_text(watermark: int = 0) -> str:
    return "v1\n" + json.dumps({"nextBatchWatermarkMs": watermark})


def operator_metadata_text(op: int = 0, name: str = "applyInPandasWithState",
                           partitions: int = 4, stores: Iterable[str] = ("default",)) -> str:
    return "v1\n" + json.dumps({
        "operatorInfo": {"operatorId": op, "operatorName": name},
        "stateStoreInfo": [{"storeName": s, "numColsPrefixKey": 0, "numPartitions": partitions}
                           for s in stores]})


class _Writer:
    """``fs.pipe`` that creates parent folders (the local filesystem needs them)."""

    def __init__(self, fs) -> None:
        self.fs = fs

    def pipe(self, path: str, data: bytes) -> None:
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe(path, data)


def write_checkpoint(fs, root: str, *, planned: int, committed: int, partitions: int = 4,
                     provider: str = "hdfs", snapshots: Iterable[int] = (),
                     first_batch: int = 0, skip_partitions: Iterable[int] = (),
                     extra_versions: Iterable[int] = (), repartition_to: int | None = None,
                     crc: bool = True, snapshot_bytes: int = 1000, codec: str = "lz4") -> None:
    """A checkpoint whose batches ``first_batch..planned-1`` are planned and
    ``first_batch..committed-1`` committed, with one delta (HDFS) or zip (RocksDB) per
    partition and committed version, snapshots at ``snapshots``, and state files for
    ``extra_versions`` too (e.g. written by an uncommitted batch or left from purged ones)."""
    fs.makedirs(root, exist_ok=True)
    fs = _Writer(fs)
    fs.pipe(f"{root}/metadata", b'{"id":"11111111-2222-3333-4444-555555555555"}')
    for batch in range(first_batch, planned):
        parts = repartition_to if (repartition_to and batch >= committed) else partitions
        fs.pipe(f"{root}/offsets/{batch}",
                offsets_text(batch, parts, provider, codec=codec).encode())
    for batch in range(first_batch, committed):
        fs.pipe(f"{root}/commits/{batch}", commit_text().encode())
    for batch in range(first_batch, planned):  # the file source's own log, one file a batch
        entry = {"path": f"file:///in/part-{batch:03d}.json", "timestamp": 1_700_000_000_000,
                 "batchId": batch}
        fs.pipe(f"{root}/sources/0/{batch}", f"v1\n{json.dumps(entry)}".encode())
    fs.pipe(f"{root}/state/0/_metadata/metadata",
            operator_metadata_text(partitions=partitions).encode())
    versions = sorted(set(range(first_batch + 1, committed + 1)) | set(extra_versions))
    skipped = set(skip_partitions)
    for part in range(partitions):
        if part in skipped:
            continue
        folder = f"{root}/state/0/{part}"
        if part == 0:
            fs.pipe(f"{folder}/_metadata/schema", REAL_SCHEMA_FILE.read_bytes())
        for version in versions:
            if provider == "hdfs":
                fs.pipe(f"{folder}/{version}.delta", b"d" * (100 + part))
                if crc:
                    fs.pipe(f"{folder}/.{version}.delta.crc", b"c" * 12)
                if version in snapshots:
                    fs.pipe(f"{folder}/{version}.snapshot", b"s" * snapshot_bytes)
            else:
                fs.pipe(f"{folder}/{version}.zip", REAL_ZIP_FILE.read_bytes())
        if provider == "rocksdb":  # placeholder contents: the model never reads SSTs
            for name, size in REAL_ZIP_SSTS.items():
                fs.pipe(f"{folder}/SSTs/{name}", b"t" * size)
