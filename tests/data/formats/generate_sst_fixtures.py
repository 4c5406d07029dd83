"""Regenerate tests/data/formats/rocksdb_sst (RocksDB SST files: pyspark 4.3, rocksdbjni 9.8.4).

Not a test: run by hand (needs Java and pyspark),
``python tests/data/formats/generate_sst_fixtures.py OUT [names…]``, then copy
``OUT/rocksdb_sst/<name>/`` for the committed sets listed in README.md. ``large`` (about 230k
keys, for measuring decode speed) lands in ``OUT/rocksdb_sst/large/`` too but is never
committed.

Each Spark set is one query over its own deterministic JSON input (``OUT/<name>/landing``: one
file per micro-batch, ``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``, one shuffle
partition, RocksDB provider without changelog checkpointing, so every version is a ``<v>.zip``
plus shared ``SSTs/``). Keys get deleted: a watermarked aggregation in append mode evicts
closed windows, deduplication evicts keys behind the watermark. The ground truth is Spark's own
state reader (``format("statestore")``, one read per batch), kept in ``expected.json`` per
version as the key count and a SHA-256 over the sorted canonical JSON lines ``[key, value]``
of the rows (``to_json``; timestamps as ``yyyy-MM-ddTHH:mm:ss.ffffffZ``, UTC); the unit tests
decode the SSTs with statekit, render rows the same way and compare digests.

``variants`` holds SSTs rocksdbjni wrote directly (through the session's JVM) with options
Spark never sets (``SstFileWriter``: other format versions, checksums, codecs and index
layouts, all holding :func:`variant_entries`) and the SSTs of small databases flushed after
single deletes under a snapshot, merges and a range deletion, with what a RocksDB iterator
returned as the live state.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import shutil
import sys
import zipfile
from pathlib import Path

from pyspark.sql import functions as F

from statekit.jobs.session import build_session

ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
COMPRESSION = "spark.sql.streaming.stateStore.rocksdb.compression"
FORMAT_VERSION = "spark.sql.streaming.stateStore.rocksdb.formatVersion"
EVENTS = "k string, t timestamp, v long"
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"


def write_landing(folder: Path, *, batches: int, keys: int, events: int, seed: int) -> None:
    """``batches`` JSON files; batch i holds ``events`` events in minute i over ``keys`` keys."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(batches):
        lines = []
        for _ in range(events):
            j = rng.randrange(keys)
            t = START + dt.timedelta(minutes=i, seconds=rng.randrange(60))
            event = {"k": f"k{j:06d}", "t": t.isoformat(), "v": rng.randrange(100)}
            lines.append(json.dumps(event))
        (folder / f"part-{i:03d}.json").write_text("\n".join(lines) + "\n")


def row_digest(rows: list[list[object]]) -> str:
    """SHA-256 of the sorted canonical JSON lines of ``[key, value]`` pairs (see the tests)."""
    lines = sorted(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


SETS = {
    # name: (input, query kind, confs)
    "window_lz4": (dict(batches=6, keys=500, events=250, seed=1), "window", {}),
    "window_zstd": (dict(batches=4, keys=400, events=200, seed=2), "window",
                    {COMPRESSION: "zstd"}),
    "window_none": (dict(batches=3, keys=250, events=120, seed=3), "window",
                    {COMPRESSION: "none"}),
    "window_fv6": (dict(batches=5, keys=250, events=120, seed=7), "window",
                   {FORMAT_VERSION: "6"}),
    "window_zlib": (dict(batches=2, keys=150, events=80, seed=8), "window",
                    {COMPRESSION: "z"}),
    "dedup_lz4": (dict(batches=4, keys=200, events=100, seed=4), "dedup", {}),
    "snappy": (dict(batches=1, keys=20, events=20, seed=5), "count", {COMPRESSION: "snappy"}),
    "large": (dict(batches=1, keys=10_000_000, events=230_000, seed=6), "count", {}),
}


def variant_entries(n: int = 80) -> list[tuple[bytes, str, bytes | None]]:
    """What every ``variants/sst_*.sst`` holds, in key order (the unit tests repeat this)."""
    out: list[tuple[bytes, str, bytes | None]] = []
    for i in range(n):
        key = b"key%05d" % i
        if i % 7 == 3:
            out.append((key, "delete", None))
        elif i % 11 == 5:
            out.append((key, "merge", b"m%d" % i))
        else:
            out.append((key, "put", (b"value-%d;" % i) * (1 + i % 5)))
    return out


# name: (format_version, checksum, compression, index type, data block index, index restarts)
SST_WRITER_VARIANTS = {
    "fv2_xxh3_lz4": (2, "kXXH3", "LZ4_COMPRESSION", "kBinarySearch", "kDataBlockBinarySearch", 1),
    "fv3_xxhash_none": (3, "kxxHash", "NO_COMPRESSION", "kBinarySearch",
                        "kDataBlockBinarySearch", 1),
    "fv4_xxhash64_zstd": (4, "kxxHash64", "ZSTD_COMPRESSION", "kBinarySearch",
                          "kDataBlockBinarySearch", 1),
    "fv5_crc32c_lz4": (5, "kCRC32c", "LZ4_COMPRESSION", "kBinarySearch",
                       "kDataBlockBinarySearch", 1),
    "fv5_index_restart16": (5, "kXXH3", "LZ4_COMPRESSION", "kBinarySearch",
                            "kDataBlockBinarySearch", 16),
    "fv5_first_key_index": (5, "kXXH3", "NO_COMPRESSION", "kBinarySearchWithFirstKey",
                            "kDataBlockBinarySearch", 4),
    "fv5_hash_data_index": (5, "kXXH3", "LZ4_COMPRESSION", "kBinarySearch",
                            "kDataBlockBinaryAndHash", 1),
    "fv5_partitioned_index": (5, "kXXH3", "LZ4_COMPRESSION", "kTwoLevelIndexSearch",
                              "kDataBlockBinarySearch", 1),
    "fv6_lz4hc": (6, "kXXH3", "LZ4HC_COMPRESSION", "kBinarySearch", "kDataBlockBinarySearch", 1),
    "fv6_bzip2_xxhash64": (6, "kxxHash64", "BZLIB2_COMPRESSION", "kBinarySearch",
                           "kDataBlockBinarySearch", 1),
    "fv6_crc32c_snappy": (6, "kCRC32c", "SNAPPY_COMPRESSION", "kBinarySearch",
                          "kDataBlockBinarySearch", 1),
}


def write_variants(spark, dest: Path) -> None:
    """SSTs written by rocksdbjni itself (Spark's RocksDB) with options Spark does not use, and
    small databases with single deletes, snapshots, merges and range deletions."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    r = spark._jvm.org.rocksdb
    r.RocksDB.loadLibrary()
    expected: dict[str, object] = {"sst_writer": {}, "db": {}}
    entries = variant_entries()
    for name, (fv, checksum, comp, index, data_index, restarts) in SST_WRITER_VARIANTS.items():
        table = (r.BlockBasedTableConfig().setFormatVersion(fv)
                 .setChecksumType(getattr(r.ChecksumType, checksum))
                 .setIndexType(getattr(r.IndexType, index))
                 .setDataBlockIndexType(getattr(r.DataBlockIndexType, data_index))
                 .setIndexBlockRestartInterval(restarts).setBlockSize(256))
        options = (r.Options().setTableFormatConfig(table)
                   .setCompressionType(getattr(r.CompressionType, comp))
                   .setMergeOperator(r.StringAppendOperator()))
        writer = r.SstFileWriter(r.EnvOptions(), options)
        writer.open(str(dest / f"sst_{name}.sst"))
        for key, kind, value in entries:
            if kind == "put":
                writer.put(key, value)
            elif kind == "merge":
                writer.merge(key, value)
            else:
                writer.delete(key)
        writer.finish()
        writer.close()
        expected["sst_writer"][name] = {"format_version": fv, "checksum": checksum,
                                        "compression": comp, "index": index,
                                        "data_block_index": data_index,
                                        "index_restart_interval": restarts}
    expected["entries_sha256"] = hashlib.sha256(repr(entries).encode()).hexdigest()

    def db(name: str, steps) -> None:
        folder = dest.parent.parent / "variant_dbs" / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        table = r.BlockBasedTableConfig().setFormatVersion(5).setBlockSize(512)
        options = (r.Options().setCreateIfMissing(True).setDisableAutoCompactions(True)
                   .setTableFormatConfig(table).setCompressionType(r.CompressionType.LZ4_COMPRESSION)
                   .setMergeOperator(r.StringAppendOperator()))
        rdb = r.RocksDB.open(options, str(folder))
        flush = r.FlushOptions().setWaitForFlush(True)
        files: list[str] = []
        for step in steps:
            step(rdb)
            rdb.flush(flush)
            new = sorted(p.name for p in folder.glob("*.sst") if p.name not in files)
            files += new
        live = {}
        it = rdb.newIterator()
        it.seekToFirst()
        while it.isValid():
            live[bytes(it.key()).hex()] = bytes(it.value()).hex()
            it.next()
        it.close()
        rdb.close()
        for i, f in enumerate(files):
            shutil.copy(folder / f, dest / f"db_{name}_{i + 1}.sst")
        expected["db"][name] = {"files": [f"db_{name}_{i + 1}.sst" for i in range(len(files))],
                                "live": live}

    def k(i: int) -> bytes:
        return b"\x00" + b"row%04d" % i

    def versions_1(rdb) -> None:
        for i in range(80):
            rdb.put(k(i), b"first-%d" % i * 3)
        rdb.getSnapshot()  # kept open: the flush keeps every version below
        for i in range(0, 80, 3):
            rdb.put(k(i), b"second-%d" % i)
        for i in range(1, 80, 5):
            rdb.delete(k(i))
        for i in range(2, 80, 10):
            rdb.singleDelete(k(i))

    def versions_2(rdb) -> None:
        for i in range(60, 100):
            rdb.put(k(i), b"third-%d" % i)
        for i in range(0, 40, 4):
            rdb.delete(k(i))

    db("versions", [versions_1, versions_2])

    def merges(rdb) -> None:
        for i in range(30):
            rdb.put(k(i), b"base-%d" % i)
        rdb.getSnapshot()  # kept open: the flush keeps the operands apart from their bases
        for i in range(0, 30, 3):
            rdb.merge(k(i), b"more-%d" % i)
        for i in range(30, 35):
            rdb.merge(k(i), b"alone-%d" % i)

    db("merge", [merges])

    def ranges_1(rdb) -> None:
        for i in range(40):
            rdb.put(k(i), b"v%d" % i)

    def ranges_2(rdb) -> None:
        rdb.deleteRange(k(10), k(20))
        rdb.put(k(50), b"after")

    db("range_del", [ranges_1, ranges_2])
    (dest / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print("variants", sum(p.stat().st_size for p in dest.iterdir()), "bytes")


def main(out: str, names: list[str]) -> None:
    root = Path(out).resolve()
    spark = build_session("sst-fixtures", conf={
        "spark.sql.shuffle.partitions": "1",
        "spark.default.parallelism": "1",
        PROVIDER: ROCKS,
        CHANGELOG: "false",
    })
    if not names or "variants" in names:
        write_variants(spark, root / "rocksdb_sst" / "variants")
    for name, (inp, kind, conf) in SETS.items():
        if names and name not in names:
            continue
        base = root / name
        shutil.rmtree(base, ignore_errors=True)
        write_landing(base / "landing", **inp)
        src = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
               .json(str(base / "landing")))
        if kind == "window":
            df = (src.withWatermark("t", "0 seconds")
                  .groupBy(F.window("t", "3 minutes"), "k").agg(F.count("*"), F.sum("v")))
            mode = "append"
        elif kind == "dedup":
            df = src.withWatermark("t", "90 seconds").dropDuplicates(["k", "t"])
            mode = "append"
        else:
            df = src.groupBy("k").count()
            mode = "update"
        for k, v in conf.items():
            spark.conf.set(k, v)
        checkpoint = base / "checkpoint"
        try:
            (df.writeStream.format("noop").outputMode(mode)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
             .awaitTermination())
        finally:
            for k in conf:
                spark.conf.unset(k)
        collect(spark, name, checkpoint, root / "rocksdb_sst" / name, kind, inp, conf)
    spark.stop()


def collect(spark, name: str, checkpoint: Path, dest: Path, kind: str, inp: dict,
            conf: dict) -> None:
    store = checkpoint / "state" / "0" / "0"
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "SSTs").mkdir(parents=True)
    shutil.copy(store / "_metadata" / "schema", dest / "schema")
    versions = sorted(int(p.stem) for p in store.glob("*.zip"))
    expected: dict[str, object] = {"query": kind, "input": inp, "confs": conf, "versions": {}}
    for v in versions:
        shutil.copy(store / f"{v}.zip", dest / f"{v}.zip")
        with zipfile.ZipFile(store / f"{v}.zip") as zf:
            meta = json.loads(zf.read("metadata").decode().partition("\n")[2])
        for sst in meta["sstFiles"]:
            shutil.copy(store / "SSTs" / sst["dfsSstFileName"], dest / "SSTs")
        opts = {"timestampFormat": TS_FORMAT}
        rows = [[json.loads(r.k), json.loads(r.v)] for r in (
            spark.read.format("statestore").option("batchId", v - 1).load(str(checkpoint))
            .where("partition_id = 0")
            .select(F.to_json("key", opts).alias("k"), F.to_json("value", opts).alias("v"))
            .collect())]
        expected["versions"][str(v)] = {"numKeys": meta["numKeys"], "rows": len(rows),
                                        "sha256": row_digest(rows)}
    (dest / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(name, {v: e["rows"] for v, e in expected["versions"].items()},
          sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()), "bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
