"""What ``statekit ls`` and ``statekit dump`` show: one store instance's files, one file's rows.

The report summarises; these two answer the follow-up question on call — "which files does
partition 3 have, which does a restart read, which are left over?" and "what is actually in
this delta?". Both are pure functions over the checkpoint model, so the TUI's drill-down shows
the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.checkpoint import Checkpoint, open_checkpoint
from statekit.checkpoint.facts import instance_facts
from statekit.checkpoint.layout import StateFile, classify
from statekit.checkpoint.location import Location
from statekit.checkpoint.state_data import (
    DecodedRecord,
    StoreSchema,
    decode_records,
    file_records,
    store_schemas,
    zip_metadata,
)
from statekit.formats.compression import sniff_codec
from statekit.formats.opening import open_binary
from statekit.formats.records import read_state_file
from statekit.formats.values import hex_preview, render_value
from statekit.support.errors import BadInput, NotACheckpoint, UnsupportedFormat

if TYPE_CHECKING:
    from fsspec.spec import AbstractFileSystem


@dataclass(frozen=True)
class FileRow:
    name: str
    kind: str
    version: int | None
    size: int
    unique_id: str | None
    role: str
    """``load`` (read to restore the committed version), ``retained``, or an orphan reason."""
    num_keys: int | None = None
    """RocksDB zips: the key count their metadata records."""
    referenced_by: int | None = None
    """SST files: how many of this instance's zips reference it (0 = unreferenced)."""


@dataclass(frozen=True)
class InstanceListing:
    operator_id: int
    store: str
    partition: int
    committed_version: int | None
    rows: tuple[FileRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_instance(ckpt: Checkpoint, operator_id: int, partition: int,
                  store: str | None = None) -> InstanceListing:
    """The files of one store instance, each with its role for the committed version."""
    inventory = ckpt.inventory
    stores = inventory.stores(operator_id)
    if not stores:
        raise BadInput(f"no state for operator {operator_id} (operators: "
                       f"{inventory.operator_ids})", path=ckpt.location.url)
    if store is None:
        if len(stores) > 1:
            raise BadInput(f"operator {operator_id} has stores {stores}: choose one with "
                           "--store", path=ckpt.location.url)
        store = stores[0]
    instance = inventory.instance(operator_id, store, partition)
    if instance is None:
        raise BadInput(f"no files for operator {operator_id} store {store} partition "
                       f"{partition} (partitions: {inventory.partitions(operator_id, store)})",
                       path=ckpt.location.url)
    committed = ckpt.committed_batches
    facts = instance_facts(instance, committed[0] if committed else None,
                           ckpt.last_committed_batch)
    load = {f.path for f in facts.files_to_load}
    orphan = {o.file.path: o.reason for o in facts.orphans}
    zips = instance.of_kind("zip")
    metadata = zip_metadata(ckpt, zips) if zips else {}
    references: dict[str, int] = {}
    for meta in metadata.values():
        for sst in meta.sst_files:
            references[sst.dfs_name] = references.get(sst.dfs_name, 0) + 1
    rows = []
    for file in instance.files:
        role = orphan.get(file.path) or ("load" if file.path in load else "retained")
        num_keys = metadata[file.path].num_keys if file.path in metadata else None
        referenced = references.get(file.name, 0) if file.kind == "sst" else None
        if file.kind == "sst" and referenced == 0 and zips:
            role = "unreferenced"
        rows.append(FileRow(file.name, file.kind, file.version, file.size, file.unique_id,
                            role, num_keys, referenced))
    return InstanceListing(operator_id, store, partition,
                           None if ckpt.last_committed_batch is None
                           else ckpt.last_committed_batch + 1, tuple(rows))


@dataclass(frozen=True)
class OpenedFile:
    """A state file located inside its checkpoint (schema known) or on its own (hex only)."""

    shown: str
    kind: str
    records: Iterator[DecodedRecord]
    schema: StoreSchema | None


def open_file(ckpt: Checkpoint, file: StateFile) -> OpenedFile:
    """Decode one state file of an open checkpoint with its store's schema and codec."""
    shown = ckpt.display(file.path)
    _must_exist(ckpt.fs, file.path, shown)
    schema = store_schemas(ckpt).get((file.operator_id, file.store))
    return OpenedFile(shown, file.kind, decode_records(file_records(ckpt, file), schema, shown),
                      schema)


def open_state_file(location: Location) -> OpenedFile:
    """Open a ``.delta``/``.snapshot``/``.changelog`` file for decoding.

    When the file sits in a checkpoint (``…/state/<op>/<partition>/…``), the checkpoint's
    schema and codec are used; otherwise records are shown as hex and the codec is taken from
    the file's first bytes.
    """
    url = location.url
    marker = location.root.rfind("/state/")
    url_marker = url.rfind("/state/")
    if marker > 0 and url_marker > 0:
        inside = location.root[marker + len("/state/"):]
        root = Location(location.fs, location.root[:marker], url[:url_marker])
        try:
            ckpt = open_checkpoint(root)
        except (NotACheckpoint, BadInput):
            ckpt = None
        if ckpt is not None:
            item = classify(inside, 0, ckpt.location.path("state", inside))
            if isinstance(item, StateFile):
                return open_file(ckpt, item)
    name = location.root.rsplit("/", 1)[-1]
    kind = next((k for k in ("delta", "snapshot", "changelog") if name.endswith("." + k)), None)
    if kind is None:
        raise UnsupportedFormat("not a .delta, .snapshot or .changelog file", path=url)
    _must_exist(location.fs, location.root, url)
    with open_binary(location.fs, location.root, "state file", shown=url) as handle:
        codec = sniff_codec(handle.read(8))
    if codec is None:
        raise UnsupportedFormat("unknown compression (neither lz4 block stream nor zstd)",
                                path=url)
    records = read_state_file(location.fs, location.root, codec, kind, shown=url)
    return OpenedFile(url, kind, decode_records(records, None, url), None)


@dataclass(frozen=True)
class RecordText:
    """A decoded record as a person reads it."""

    op: str
    key: str
    value: str


def first_records(ckpt: Checkpoint, file: StateFile, limit: int,
                  value_len: int | None = 400) -> list[RecordText]:
    """The first ``limit`` records of one of ``ckpt``'s state files, as text (raises
    StatekitError)."""
    from itertools import islice

    opened = open_file(ckpt, file)
    return [RecordText(r.op, *record_text(r, value_len)) for r in islice(opened.records, limit)]


def record_text(record: DecodedRecord, value_len: int | None = 400) -> tuple[str, str]:
    """A record's key and value as a person reads them: decoded with the schema when it is
    known, else hex; the value cut to ``value_len`` characters."""
    key = render_value(record.key) if record.key is not None else hex_preview(record.key_bytes)
    if record.value is not None:
        return key, render_value(record.value, max_len=value_len)
    return key, "" if record.value_bytes is None else hex_preview(record.value_bytes)


def _must_exist(fs: AbstractFileSystem, path: str, shown: str) -> None:
    try:
        if fs.isfile(path):
            return
    except OSError as error:
        raise BadInput(f"cannot read: {error}", path=shown) from error
    raise BadInput("no such file", path=shown)
