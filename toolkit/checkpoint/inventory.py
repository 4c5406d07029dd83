"""The state file inventory: every store instance and its files, from ONE listing of ``state/``.

On object stores a LIST costs money and latency, and a checkpoint with 200 partitions and 100
retained versions holds tens of thousands of files. So the inventory is built from a single
recursive listing (``fs.find`` — one paginated LIST on S3/GCS/ABFS) and classified by name
(:mod:`statekit.checkpoint.layout`); nothing here opens a file.

The central type is :class:`StoreInstance` — one (operator, store, partition) — with the
version arithmetic every analysis needs: which versions exist, the latest snapshot (HDFS
``.snapshot`` or RocksDB ``.zip``), and which files a given version needs to load.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter

from statekit.checkpoint.layout import DATA_FILE_AT, MetaFile, StateFile, classify
from statekit.formats.checksum_files import (
    HADOOP_BYTES_PER_CHECKSUM,
    ChecksumFile,
    data_name_of,
    hadoop_size_matches,
)

#: File kinds holding the full state at their version, per provider family.
SNAPSHOT_KINDS = ("snapshot", "zip")
#: File kinds holding the changes of their version.
CHANGE_KINDS = ("delta", "changelog")


@dataclass(frozen=True)
class StoreInstance:
    """The files of one state store instance: (operator, store, partition)."""

    operator_id: int
    store: str
    partition: int
    files: tuple[StateFile, ...]
    """Data files sorted by (version, kind, name); SST files last."""

    @property
    def key(self) -> tuple[int, str, int]:
        return (self.operator_id, self.store, self.partition)

    def of_kind(self, *kinds: str) -> list[StateFile]:
        return [f for f in self.files if f.kind in kinds]

    def versions(self, *kinds: str) -> list[int]:
        """Sorted distinct versions among files of ``kinds``."""
        return sorted({f.version for f in self.files if f.kind in kinds and f.version is not None})

    # cached: asked several times per instance by every report, for thousands of instances
    # (the dataclass is frozen; cached_property writes the instance dict directly)
    @cached_property
    def snapshot_versions(self) -> list[int]:
        return self.versions(*SNAPSHOT_KINDS)

    @cached_property
    def change_versions(self) -> list[int]:
        return self.versions(*CHANGE_KINDS)

    @cached_property
    def latest_version(self) -> int | None:
        versions = self.versions("delta", "snapshot", "zip", "changelog")
        return versions[-1] if versions else None

    def latest_snapshot(self, at_most: int | None = None) -> int | None:
        """The newest snapshot (HDFS ``.snapshot`` / RocksDB ``.zip``) version ≤ ``at_most``."""
        candidates = [v for v in self.snapshot_versions if at_most is None or v <= at_most]
        return candidates[-1] if candidates else None

    def files_to_load(self, version: int) -> list[StateFile]:
        """The data files Spark reads to load ``version``: the newest snapshot at or below it,
        then every change file after it, in order (SSTs are resolved through zip metadata).

        Returns an empty list when the version cannot be rebuilt from what exists.
        """
        snapshot = self.latest_snapshot(version)
        return self.chain(snapshot if snapshot is not None else 0, version) or []

    def chain(self, base: int, version: int) -> list[StateFile] | None:
        """The files that rebuild ``version`` from the snapshot/zip at ``base`` (0: from
        empty, no base file): the base files, then every change file after it, in order;
        ``None`` when a change file is missing."""
        base_files = [f for f in self.files if f.kind in SNAPSHOT_KINDS and f.version == base]
        changes = {f.version: f for f in self.of_kind(*CHANGE_KINDS)
                   if f.version is not None and base < f.version <= version}
        if len(changes) != version - base:
            return None
        return base_files + [changes[v] for v in sorted(changes)]

    def older_chains(self, version: int, below: int) -> Iterator[tuple[int, list[StateFile]]]:
        """``(base, files)`` of every complete chain to ``version`` from a snapshot/zip older
        than ``below``, newest first, then from empty (0): what a restart can load instead
        of a damaged base at ``below`` (Spark 4.3's automatic snapshot repair)."""
        for base in [*reversed([v for v in self.snapshot_versions if v < below]), 0]:
            files = self.chain(base, version)
            if files is not None:
                yield base, files

    def ssts_named(self, names: Collection[str] | None) -> list[StateFile]:
        """The instance's SST files whose names a zip's metadata lists (all of them when the
        names are unknown): with :meth:`files_to_load`, everything a RocksDB load reads."""
        return [f for f in self.of_kind("sst")
                if names is None or f.path.rsplit("/", 1)[-1] in names]

    @cached_property
    def kind_totals(self) -> dict[str, tuple[int, int]]:
        """``{kind: (files, bytes)}``, in one pass (every report asks, per instance)."""
        counts: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for file in self.files:
            kind = file.kind
            counts[kind] = counts.get(kind, 0) + 1
            sizes[kind] = sizes.get(kind, 0) + file.size
        return {kind: (count, sizes[kind]) for kind, count in counts.items()}

    @property
    def total_bytes(self) -> int:
        return sum(size for _count, size in self.kind_totals.values())


@dataclass(frozen=True)
class StateInventory:
    """All store instances of a checkpoint, plus the metadata and checksum files beside them."""

    instances: dict[tuple[int, str, int], StoreInstance]
    meta_files: tuple[MetaFile, ...]
    listed_files: int = 0
    unknown_files: tuple[MetaFile, ...] = field(default=())
    checksum_sizes: dict[str, int] = field(default_factory=dict)
    """``{checksum file path: its size}``: Hadoop's hidden ``.<name>.crc`` and Spark 4.1's
    visible ``<name>.crc`` (a data file may have both). Kept flat — half of a listing's
    objects are checksum files — and matched to data files on demand."""
    hadoop_checksums_checked: int = 0
    """Data files that have a Hadoop ``.<name>.crc`` beside them."""
    hadoop_checksum_mismatches: tuple[StateFile, ...] = ()
    """Those whose size is not the one their ``.crc`` records (truncated or extended after
    Spark wrote them), in :meth:`all_files` order. Paired while listing (a checksum sorts
    before its data file in an object store's listing), the rest when built."""

    @property
    def crc_files(self) -> int:
        return len(self.checksum_sizes)

    def checksums_of(self, path: str) -> list[ChecksumFile]:
        """The checksum files of the data file at ``path`` (Hadoop's first)."""
        folder, _, name = path.rpartition("/")
        found = []
        for crc, hadoop in ((f"{folder}/.{name}.crc", True), (f"{path}.crc", False)):
            size = self.checksum_sizes.get(crc)
            if size is not None:
                found.append(ChecksumFile(crc, size, hadoop))
        return found

    @property
    def checksums(self) -> dict[str, list[ChecksumFile]]:
        """``{data file path: its checksum files}``, for every checksum file listed
        (including those whose data file is gone)."""
        mapping: dict[str, list[ChecksumFile]] = defaultdict(list)
        for crc, size in sorted(self.checksum_sizes.items()):
            folder, _, name = crc.rpartition("/")
            data_name, hadoop = data_name_of(name)
            mapping[f"{folder}/{data_name}"].append(ChecksumFile(crc, size, hadoop))
        return {path: sorted(files, key=lambda c: not c.hadoop)
                for path, files in mapping.items()}

    @property
    def operator_ids(self) -> list[int]:
        ids = {key[0] for key in self.instances}
        ids.update(m.operator_id for m in self.meta_files if m.operator_id is not None)
        return sorted(ids)

    def stores(self, operator_id: int) -> list[str]:
        return sorted({key[1] for key in self.instances if key[0] == operator_id})

    def partitions(self, operator_id: int, store: str) -> list[int]:
        return sorted(key[2] for key in self.instances if key[:2] == (operator_id, store))

    def instance(self, operator_id: int, store: str, partition: int) -> StoreInstance | None:
        return self.instances.get((operator_id, store, partition))

    def instances_of(self, operator_id: int, store: str | None = None) -> list[StoreInstance]:
        return [self.instances[k] for k in sorted(self.instances)
                if k[0] == operator_id and (store is None or k[1] == store)]

    def meta(self, kind: str, operator_id: int | None = None) -> list[MetaFile]:
        return [m for m in self.meta_files
                if m.kind == kind and (operator_id is None or m.operator_id == operator_id)]

    def all_files(self) -> Iterator[StateFile]:
        for key in sorted(self.instances):
            yield from self.instances[key].files


class InventoryBuilder:
    """Builds an inventory from listing chunks as they arrive (an object-store listing
    hands over each finished group while the others are still in flight, so classifying
    overlaps the network wait). The result does not depend on the chunks' order."""

    def __init__(self, prefix: str) -> None:
        """``prefix``: what every listed path starts with, up to and including
        ``state/`` (paths that do not are classified as they are)."""
        self._prefix = prefix
        self._grouped: dict[tuple[int, str, int], list[StateFile]] = defaultdict(list)
        self._meta: list[MetaFile] = []
        self._unknown: list[MetaFile] = []
        self._checksums: dict[str, int] = {}
        self._folder_keys: dict[str, tuple[int, str, int] | None] = {}
        self._sst_keys: dict[str, tuple[int, str, int] | None] = {}
        self._listed = 0
        self._crc_checked = 0
        self._crc_mismatches: list[StateFile] = []
        self._crc_unpaired: list[StateFile] = []  # no .crc listed yet: paired when built

    def add(self, listing: list[tuple[str, int]]
            ) -> tuple[set[tuple[int, str, int]], list[MetaFile]]:
        """Classify ``(path, size)`` of files below ``state/`` (directories excluded);
        returns the store instances that got data files, and the metadata files found.
        Runs once per listed object (400k+ on a production checkpoint): the common case
        is inlined."""
        prefix, cut = self._prefix, len(self._prefix)
        grouped, checksums, folder_keys = self._grouped, self._checksums, self._folder_keys
        sst_keys = self._sst_keys
        match = DATA_FILE_AT.match
        touched: set[tuple[int, str, int]] = set()
        metas: list[MetaFile] = []
        mismatches, unpaired = self._crc_mismatches, self._crc_unpaired
        checked = 0
        self._listed += len(listing)
        for path, size in listing:
            if path.endswith(".crc"):  # checksums: kept aside, never mixed into data files
                checksums[path] = size
                continue
            if path[-1] == "/":  # an object store's folder marker (S3A writes them)
                self._listed -= 1
                continue
            folder, _, name = path.rpartition("/")
            key = folder_keys.get(folder, _UNSEEN)
            if key is _UNSEEN:
                key = folder_keys[folder] = _instance_folder(folder, prefix)
            file = None
            if key is not None:  # the common case: <v>.<kind> in a store instance's folder
                stem, _, kind = name.partition(".")
                if kind in _DATA_KINDS and stem.isdecimal():
                    file = StateFile(path, key[0], key[2], key[1], kind, int(stem), size, None)
            if file is None and name.endswith(".sst"):  # <instance folder>/SSTs/<name>.sst
                sst_key = sst_keys.get(folder, _UNSEEN)
                if sst_key is _UNSEEN:
                    sst_key = sst_keys[folder] = _sst_folder(folder, prefix)
                if sst_key is not None:
                    key = sst_key
                    file = StateFile(path, key[0], key[2], key[1], "sst", None, size)
            if file is not None and key is not None:
                grouped[key].append(file)
                touched.add(key)
                hidden = checksums.get(f"{folder}/.{name}.crc") if checksums else None
                if hidden is None:
                    unpaired.append(file)
                else:  # hadoop_size_matches, inlined: this runs for every data file
                    checked += 1
                    if hidden != 8 + 4 * -(-size // HADOOP_BYTES_PER_CHECKSUM):
                        mismatches.append(file)
                continue
            found = match(path, cut) if path.startswith(prefix) else None
            if found is not None:  # <op>/<part>/[<store>/]<v>[_<uuid>].<kind>
                op, part, store, version, uuid, kind = found.groups()
                key = (int(op), store or "default", int(part))
                file = StateFile(path, key[0], key[2], key[1], kind, int(version), size, uuid)
                grouped[key].append(file)
                touched.add(key)
                unpaired.append(file)
                continue
            item = classify(path[cut:] if path.startswith(prefix) else path, size, path)
            if isinstance(item, StateFile):
                key = (item.operator_id, item.store, item.partition)
                grouped[key].append(item)
                touched.add(key)
                unpaired.append(item)
            elif item.kind == "unknown":
                self._unknown.append(item)
            else:
                metas.append(item)
        self._meta.extend(metas)
        self._crc_checked += checked
        return touched, metas

    def files_of(self, key: tuple[int, str, int]) -> list[StateFile]:
        """The data files added so far for one store instance (in no particular order)."""
        return self._grouped.get(key, [])

    def build(self) -> StateInventory:
        instances = {
            key: StoreInstance(*key, files=_in_file_order(files))
            for key, files in sorted(self._grouped.items())
        }
        meta = sorted(self._meta, key=lambda m: m.path)
        # A partition folder holding only a schema file still is a store instance (no data).
        for item in meta:
            if (item.kind == "schema" and item.operator_id is not None
                    and item.partition is not None and item.store is not None):
                key = (item.operator_id, item.store, item.partition)
                instances.setdefault(key, StoreInstance(*key, files=()))
        checked, mismatches = self._pair_checksums()
        return StateInventory(instances=instances, meta_files=tuple(meta),
                              listed_files=self._listed,
                              unknown_files=tuple(sorted(self._unknown, key=lambda m: m.path)),
                              checksum_sizes=self._checksums,
                              hadoop_checksums_checked=checked,
                              hadoop_checksum_mismatches=mismatches)

    def _pair_checksums(self) -> tuple[int, tuple[StateFile, ...]]:
        """Pair the data files listed before their Hadoop ``.crc`` (or outside the common
        case); returns ``(checked, mismatches in all_files order)``."""
        checked, mismatches, sizes = self._crc_checked, list(self._crc_mismatches), \
            self._checksums
        for file in self._crc_unpaired if sizes else ():  # S3A writes no .crc files
            folder, _, name = file.path.rpartition("/")
            hidden = sizes.get(f"{folder}/.{name}.crc")
            if hidden is not None:
                checked += 1
                if not hadoop_size_matches(file.size, hidden):
                    mismatches.append(file)
        mismatches.sort(key=lambda f: ((f.operator_id, f.store, f.partition), _file_order(f)))
        return checked, tuple(mismatches)


_UNSEEN: tuple[int, str, int] = (-1, "(not looked at yet)", -1)  # by identity
_DATA_KINDS = frozenset({"delta", "snapshot", "zip", "changelog"})
#: A store instance's folder below ``state/``: ``<op>/<part>`` or ``<op>/<part>/<store>`` —
#: the folder part of :data:`DATA_FILE_AT`.
_INSTANCE_FOLDER = re.compile(r"(\d+)/(\d+)(?:/([^/]+))?")


def _instance_folder(folder: str, prefix: str) -> tuple[int, str, int] | None:
    """The store instance ``folder`` (a full path) holds the data files of, or ``None``."""
    if not (folder + "/").startswith(prefix):
        return None
    found = _INSTANCE_FOLDER.fullmatch(folder, len(prefix))
    if found is None:
        return None
    op, part, store = found.groups()
    return (int(op), store or "default", int(part))


def _sst_folder(folder: str, prefix: str) -> tuple[int, str, int] | None:
    """The store instance whose shared SST files ``folder`` (a full path) holds, or ``None``:
    ``<instance folder>/SSTs``."""
    if not folder.endswith("/SSTs"):
        return None
    return _instance_folder(folder[:-len("/SSTs")], prefix)


def _file_order(file: StateFile) -> tuple[bool, int, str, str]:
    return (file.version is None, file.version or 0, file.kind, file.path)


_BY_VERSION = attrgetter("version", "kind", "path")
_BY_KIND = attrgetter("kind", "path")


def _in_file_order(files: list[StateFile]) -> tuple[StateFile, ...]:
    """``files`` sorted by :func:`_file_order`, with keys that run in C (this sorts every
    listed data file): versioned files by (version, kind, path), then SSTs by (kind, path)."""
    versioned = [f for f in files if f.version is not None]
    if len(versioned) == len(files):
        return tuple(sorted(files, key=_BY_VERSION))
    return (*sorted(versioned, key=_BY_VERSION),
            *sorted((f for f in files if f.version is None), key=_BY_KIND))


def newest_zip(files: Iterable[StateFile], at_most: int) -> StateFile | None:
    """The RocksDB zip holding a store instance's newest full state at or below version
    ``at_most`` (``None`` when that newest full state is not a zip, or there is none): the
    one file whose metadata gives the instance's key count."""
    full = [f for f in files if f.kind in SNAPSHOT_KINDS and f.version is not None
            and f.version <= at_most]
    if not full:
        return None
    newest = max(f.version for f in full if f.version is not None)
    zips = sorted((f for f in full if f.version == newest and f.kind == "zip"),
                  key=_file_order)
    return zips[-1] if zips else None


def operator_metadata_to_read(metas: Iterable[MetaFile]) -> dict[int, tuple[str, int | None]]:
    """``{operator id: (path, batch id or None)}`` of the operator metadata file Spark goes
    by: the newest v2 file, else v1 (``_metadata/metadata``)."""
    chosen: dict[int, tuple[str, int | None]] = {}
    newest_v2: dict[int, tuple[int, str]] = {}
    for meta in sorted(metas, key=lambda m: m.path):
        if meta.operator_id is None:  # never: layout.classify gives these an operator id
            continue
        if meta.kind == "operator-metadata":
            chosen.setdefault(meta.operator_id, (meta.path, None))
        elif meta.kind == "operator-metadata-v2" and meta.batch_id is not None:
            current = newest_v2.get(meta.operator_id)
            if current is None or meta.batch_id > current[0]:
                newest_v2[meta.operator_id] = (meta.batch_id, meta.path)
    chosen.update({op: (path, batch) for op, (batch, path) in newest_v2.items()})
    return dict(sorted(chosen.items()))


def schemas_to_read(metas: Iterable[MetaFile]) -> dict[tuple[int, str], str]:
    """``{(operator id, store): path}`` of each store's schema file: v1/v2 of partition 0,
    or the newest v3 file (transformWithState), which wins."""
    chosen: dict[tuple[int, str], str] = {}
    newest_v3: dict[tuple[int, str], tuple[int, str]] = {}
    for meta in metas:
        if meta.operator_id is None:  # never: layout.classify gives these an operator id
            continue
        if meta.kind == "schema" and meta.partition == 0 and meta.store is not None:
            chosen[(meta.operator_id, meta.store)] = meta.path
        elif meta.kind == "schema-v3":
            key = (meta.operator_id, meta.store or "default")
            rank = (meta.batch_id or -1, meta.path)
            if key not in newest_v3 or rank > newest_v3[key]:
                newest_v3[key] = rank
    chosen.update({key: path for key, (_, path) in newest_v3.items()})
    return chosen
