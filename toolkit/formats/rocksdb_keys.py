"""Peel RocksDB state-store encodings off keys and values to reach the UnsafeRow bytes.

The HDFS provider stores bare UnsafeRows; the RocksDB provider (its changelogs and SSTs) wraps
them, and a tool that decodes RocksDB state must undo that first. As verified on checkpoints
written by pyspark 4.3 with the default ``encodingFormat=unsaferow``:

* Without column families (every operator except transformWithState): key and value are
  ``0x00`` (the encoding version byte, ``STATE_ENCODING_VERSION``) + the UnsafeRow.
* With column families (transformWithState; one virtual column family per state variable,
  ids in the checkpoint zip's ``columnFamilyMapping``): the key starts with the 2-byte column
  family id, **little-endian** (``Platform.putShort``, native order), then the version byte,
  then the row. Values carry only the version byte.
* Prefix-scan keys (map state; ``PrefixKeyScanStateEncoderSpec``): after the column family id,
  ``int32 LE prefixLen``, the prefix (version byte + row of the first ``numColsPrefixKey``
  columns), then the rest (version byte + row of the remaining columns).
* List state values (several values per key): a sequence of ``int32 LE len`` + ``len`` bytes
  (version byte + row). With merge operator v2 (pyspark 4.3's default,
  ``spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion=2``) the entries follow each
  other directly; merge operator v1 put a 1-byte delimiter between them.

Range-scan keys (timers, ``RangeKeyScanStateEncoderSpec``) rewrite their ordering columns in a
big-endian sortable form and are not unpacked here; neither is the Avro encoding
(``encodingFormat=avro``) nor row checksums (``rowChecksum.enabled``).
"""

from __future__ import annotations

from statekit.support.errors import CorruptFile, UnsupportedFormat

STATE_ENCODING_VERSION = 0
"""The only encoding version byte Spark writes (UnsafeRow encoding)."""
COLUMN_FAMILY_ID_BYTES = 2


def _version_byte(data: bytes, at: int, what: str, path: str | None) -> None:
    if len(data) <= at:
        raise CorruptFile(f"RocksDB {what} too short ({len(data)} bytes) for its prefix",
                          path=path)
    if data[at] != STATE_ENCODING_VERSION:
        raise UnsupportedFormat(
            f"RocksDB {what} has encoding version byte {data[at]} (only "
            f"{STATE_ENCODING_VERSION}, UnsafeRow, is supported)", path=path)


def strip_rocksdb_prefixes(
    data: bytes,
    *,
    column_families: bool,
    version_byte: bool = True,
    what: str = "key",
    path: str | None = None,
) -> tuple[int | None, bytes]:
    """Split a RocksDB key (or value) into its column family id and UnsafeRow bytes.

    Parameters
    ----------
    data
        The key or value exactly as stored.
    column_families
        True for stores with virtual column families (transformWithState keys). Values never
        carry a column family id: pass False for them.
    version_byte
        Whether a version byte precedes the row (True for everything pyspark 4.3 writes).
    what, path
        For error messages.

    Returns
    -------
    tuple
        ``(column_family_id or None, row_bytes)``.

    Raises
    ------
    CorruptFile
        Too short for its prefixes.
    UnsupportedFormat
        A version byte other than 0.
    """
    cf_id = None
    at = 0
    if column_families:
        if len(data) < COLUMN_FAMILY_ID_BYTES:
            raise CorruptFile(f"RocksDB {what} too short for a column family id", path=path)
        cf_id = int.from_bytes(data[:COLUMN_FAMILY_ID_BYTES], "little", signed=True)
        at = COLUMN_FAMILY_ID_BYTES
    if version_byte:
        _version_byte(data, at, what, path)
        at += 1
    return cf_id, data[at:]


def split_prefix_scan_key(data: bytes, *, path: str | None = None) -> tuple[bytes, bytes]:
    """Split a prefix-scan key (column family id already stripped) into its two rows.

    Take ``rest`` from ``strip_rocksdb_prefixes(key, column_families=True,
    version_byte=False)``: prefix-scan keys have no version byte right after the id.

    Returns
    -------
    tuple
        ``(prefix_row, remaining_row)``: the UnsafeRow of the first ``numColsPrefixKey``
        columns and the UnsafeRow of the others, version bytes removed.
    """
    if len(data) < 4:
        raise CorruptFile("prefix-scan key too short for its prefix length", path=path)
    prefix_len = int.from_bytes(data[:4], "little", signed=True)
    if prefix_len < 1 or 4 + prefix_len >= len(data):
        raise CorruptFile(f"prefix-scan key with bad prefix length {prefix_len} "
                          f"(key is {len(data)} bytes)", path=path)
    prefix = data[4 : 4 + prefix_len]
    rest = data[4 + prefix_len :]
    _version_byte(prefix, 0, "prefix key", path)
    _version_byte(rest, 0, "key remainder", path)
    return prefix[1:], rest[1:]


def split_multi_values(
    data: bytes, *, delimited: bool = False, path: str | None = None
) -> list[bytes]:
    """Split a list-state value into its UnsafeRows (version bytes removed).

    Parameters
    ----------
    data
        The value as stored (a put of the whole list or a merge of appended elements).
    delimited
        True for merge operator v1 (one delimiter byte after each entry but the last).
    """
    rows = []
    pos, end = 0, len(data)
    while pos < end:
        if pos + 4 > end:
            raise CorruptFile(f"list-state value truncated at byte {pos} of {end}", path=path)
        size = int.from_bytes(data[pos : pos + 4], "little", signed=True)
        pos += 4
        if size < 1 or pos + size > end:
            raise CorruptFile(f"list-state entry with bad length {size} at byte {pos - 4}",
                              path=path)
        entry = data[pos : pos + size]
        _version_byte(entry, 0, "list-state entry", path)
        rows.append(entry[1:])
        pos += size + (1 if delimited else 0)
    return rows
