"""Byte-level readers for the files Spark Structured Streaming leaves in a checkpoint.

statekit inspects and repairs state without starting a JVM (a JVM start costs seconds, and a
broken checkpoint is exactly when Spark's own readers fail), so the state files themselves are
parsed here, in pure Python. Everything below reads defensively: damaged input raises
``CorruptFile`` / ``UnsupportedFormat`` / ``BadInput`` naming the file and the byte offset,
never a bare Python exception, and nothing reads a whole file into memory at once.

Modules (imported on demand; this package imports nothing):

``compression``
    The codec layer: lz4-java block streams (checksums verified) and zstd, as streams.
``records``
    Key/value records of HDFS ``.delta``/``.snapshot`` files and RocksDB changelogs v1-v4.
``rocksdb_keys``
    The prefixes RocksDB adds to keys and values (version byte, column family id,
    prefix-scan keys, list-state values), peeled off to reach the UnsafeRow.
``rocksdb_zip``
    The ``metadata`` member of RocksDB checkpoint zips: SST files and key counts.
``schema``
    A small model of Spark SQL types parsed from schema JSON, rendered as Spark does.
``schema_file``
    State schema files v1/v2/v3 (the key and value types of each store / column family).
``modified_utf8``
    Java's ``writeUTF`` string encoding, used by schema files and changelog headers.
``unsafe_row``
    Compiled, fast decoders from UnsafeRow bytes to Python values.
``values``
    How decoded values are shown to a person, and ``RawValue`` for what is left undecoded.
"""
