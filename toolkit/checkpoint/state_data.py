"""State contents through the checkpoint model: schemas, decoded records, replayed versions.

The byte-level readers (:mod:`statekit.formats`) know file formats; this module knows which
schema, codec and key prefixes apply to which file of a checkpoint, so callers ask for "the
records of this file" or "the state of partition 3 at version 12" and get rows a person can
read. State is rebuilt like Spark does: the newest snapshot (HDFS ``.snapshot``, or a RocksDB
``.zip`` whose SST files are read in pure Python), then the deltas / changelogs after it.
"""

from __future__ import annotations

import io
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance, schemas_to_read
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.logs import CONF_CODEC
from statekit.formats.compression import CODECS_SUPPORTED, normalize_codec, sniff_codec
from statekit.formats.opening import open_binary
from statekit.formats.records import StateRecord, read_state_file, records_from_bytes
from statekit.formats.rocksdb_keys import strip_rocksdb_prefixes
from statekit.formats.rocksdb_sst import live_state
from statekit.formats.rocksdb_zip import RocksDBCheckpointMetadata, metadata_from_zip
from statekit.formats.schema import StructType
from statekit.formats.schema_file import StateSchemaFile, parse_schema_bytes
from statekit.formats.unsafe_row import make_decoder
from statekit.support.errors import CorruptFile, UnsupportedFormat


@dataclass(frozen=True)
class StoreSchema:
    """Key and value schema of one operator/store, and the file they came from."""

    operator_id: int
    store: str
    key: StructType | None
    value: StructType | None
    file: StateSchemaFile
    path: str

    @property
    def has_column_families(self) -> bool:
        return self.file.version >= 3


def store_schemas(ckpt: Checkpoint) -> dict[tuple[int, str], StoreSchema]:
    """Every schema file the state listing found: v1/v2 (partition 0, per store) and the
    newest v3 file per operator/store (transformWithState)."""
    chosen = schemas_to_read(ckpt.inventory.meta_files)
    data = ckpt.read_many(chosen.values())
    schemas = {}
    for (op, store), path in sorted(chosen.items()):
        parsed = parse_schema_bytes(data[path], path=ckpt.display(path))
        schemas[(op, store)] = StoreSchema(op, store, parsed.key_schema, parsed.value_schema,
                                           parsed, path)
    return schemas


def file_codec(ckpt: Checkpoint, head: bytes = b"", shown: str = "") -> str:
    """The codec Spark decodes a state file with: the one the query pinned.

    Spark never guesses: a restart opens every state file with the pinned
    ``spark.sql.streaming.stateStore.compression.codec``, and a file in another codec fails
    it ("Stream is corrupted"). So a file whose first bytes say otherwise is corrupt, not
    something to decode anyway; an unsupported pinned codec is refused. Only a checkpoint
    that pins nothing (older Spark) has its codec read from the bytes.
    """
    pinned = ckpt.conf.get(CONF_CODEC)
    sniffed = sniff_codec(head)
    if pinned is None:
        return sniffed or "lz4"
    codec = normalize_codec(pinned)
    if codec not in CODECS_SUPPORTED:
        raise UnsupportedFormat(
            f"the query pins state store codec {pinned!r} ({CONF_CODEC}); statekit decodes "
            f"{', '.join(CODECS_SUPPORTED)}", path=shown or ckpt.location.url)
    if sniffed is not None and sniffed != codec:
        raise CorruptFile(
            f"compressed with {sniffed} but the query pins {codec}; Spark fails reading it "
            "(Stream is corrupted) — copied in from another checkpoint?", path=shown or None)
    return codec


def file_records(ckpt: Checkpoint, file: StateFile, data: bytes | None = None, *,
                 check_end: bool = True) -> Iterator[StateRecord]:
    """Raw records of a ``.delta``/``.snapshot``/``.changelog`` file, RocksDB prefixes removed
    (keys and values are plain UnsafeRow bytes). Streams with constant memory; ``data`` is the
    file's content when the caller already fetched it (batched reads on object stores).
    ``check_end=False``: stop at the end marker, as Spark does (damage after it is not an
    error: what a replay wants)."""
    if file.kind == "zip":
        return _without_prefixes(_zip_puts(ckpt, file, data), ckpt.display(file.path))
    if file.kind not in ("delta", "snapshot", "changelog"):
        raise UnsupportedFormat(f"{file.kind} files hold no record stream statekit decodes",
                                path=ckpt.display(file.path))
    shown = ckpt.display(file.path)
    if data is not None:
        codec = file_codec(ckpt, data[:8], shown)
        records = records_from_bytes(data, codec, file.kind, shown=shown,
                                     check_end=check_end)
    else:
        with open_binary(ckpt.fs, file.path, "state file", shown=shown) as handle:
            head = handle.read(8)
        codec = file_codec(ckpt, head, shown)
        records = read_state_file(ckpt.fs, file.path, codec, file.kind, shown=shown,
                                  check_end=check_end)
    if file.kind != "changelog":
        return records
    return _without_prefixes(records, shown)


def zip_sst_paths(ckpt: Checkpoint, file: StateFile, metadata: RocksDBCheckpointMetadata
                  ) -> list[str]:
    """The SST files a RocksDB checkpoint zip references, under its folder's ``SSTs/``."""
    folder = posixpath.dirname(file.path)
    return [posixpath.join(folder, "SSTs", sst.dfs_name) for sst in metadata.sst_files]


def _zip_puts(ckpt: Checkpoint, file: StateFile, data: bytes | None) -> Iterator[StateRecord]:
    """A RocksDB version's whole state, as puts: the live entries of the SSTs its zip lists
    (read in pure Python, see :mod:`statekit.formats.rocksdb_sst`)."""
    shown = ckpt.display(file.path)
    if data is None:
        data = ckpt.read_bytes(file.path)
    metadata = metadata_from_zip(io.BytesIO(data), path=shown)
    paths = zip_sst_paths(ckpt, file, metadata)
    live = live_state(ckpt.fs, paths, shown=[ckpt.display(p) for p in paths])
    for key in sorted(live):
        yield StateRecord("put", key, live[key])


def _without_prefixes(records: Iterator[StateRecord], shown: str) -> Iterator[StateRecord]:
    for record in records:
        _, key = strip_rocksdb_prefixes(record.key, column_families=False, path=shown)
        value = record.value
        if value is not None:
            _, value = strip_rocksdb_prefixes(value, column_families=False, what="value",
                                              path=shown)
        yield StateRecord(record.op, key, value)


def replay(ckpt: Checkpoint, instance: StoreInstance, version: int) -> dict[bytes, bytes]:
    """The state of one store instance at ``version`` as ``{key bytes: value bytes}``.

    Rebuilt like Spark: the newest snapshot ≤ version, then every change file after it.
    """
    files = instance.files_to_load(version)
    if not files and version > 0 and instance.files:
        raise UnsupportedFormat(
            f"version {version} cannot be rebuilt from the files of operator "
            f"{instance.operator_id} partition {instance.partition} (missing deltas)",
            path=ckpt.location.url)
    return {key: value for key, (value, _) in replay_files(ckpt, files).items()}


def replay_files(ckpt: Checkpoint, files: Iterable[StateFile]
                 ) -> dict[bytes, tuple[bytes, int]]:
    """Apply ``files`` in order (a base, then change files): every live key as ``{key:
    (value, version of the file that last wrote it)}`` — the value and the key's age."""
    state: dict[bytes, tuple[bytes, int]] = {}
    for file in files:
        version = file.version or 0
        for record in file_records(ckpt, file):
            if record.op == "delete":
                state.pop(record.key, None)
            elif record.op == "put":
                if record.value is not None:  # always: a put carries its value
                    state[record.key] = (record.value, version)
            else:
                raise UnsupportedFormat(f"{record.op} records (list state) are not replayed",
                                        path=ckpt.display(file.path))
    return state


@dataclass(frozen=True)
class DecodedRecord:
    op: str
    key: dict[str, Any] | None
    value: dict[str, Any] | None
    key_bytes: bytes
    value_bytes: bytes | None


def decode_records(records: Iterator[StateRecord], schema: StoreSchema | None, shown: str
                   ) -> Iterator[DecodedRecord]:
    """Decode keys/values with the store's schema (``None`` fields when no schema is known)."""
    key_decoder = make_decoder(schema.key, path=shown) if schema and schema.key else None
    value_decoder = (make_decoder(schema.value, path=shown)
                     if schema and schema.value and not schema.has_column_families else None)
    for record in records:
        yield DecodedRecord(
            record.op,
            key_decoder(record.key) if key_decoder else None,
            value_decoder(record.value) if value_decoder and record.value is not None
            else None,
            record.key, record.value)


def zip_metadata(ckpt: Checkpoint, files: list[StateFile]
                 ) -> dict[str, RocksDBCheckpointMetadata]:
    """Metadata of many RocksDB zips, fetched in one go (concurrently on object stores)."""
    data = ckpt.read_many(f.path for f in files)
    return {f.path: metadata_from_zip(io.BytesIO(data[f.path]), path=ckpt.display(f.path))
            for f in files}


def readable_zip_metadata(ckpt: Checkpoint, files: list[StateFile]
                          ) -> dict[str, RocksDBCheckpointMetadata]:
    """:func:`zip_metadata` of the zips that read: a damaged one is left out (the listing
    level surfaces go on without it; the doctor and ``--decode`` name it)."""
    from statekit.support.errors import StatekitError

    data, _unreadable = ckpt.read_many_lenient(f.path for f in files)
    found: dict[str, RocksDBCheckpointMetadata] = {}
    for file in files:
        if file.path in data:
            try:
                found[file.path] = metadata_from_zip(io.BytesIO(data[file.path]),
                                                     path=ckpt.display(file.path))
            except StatekitError:
                continue
    return found
