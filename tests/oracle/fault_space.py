"""The fault space of a checkpoint: every file and folder a restart reads or writes next, times
every way such a file gets damaged — enumerated, not hand-picked.

Targets (relative to the checkpoint):

* the query-id file ``metadata``; ``offsets/L`` and ``offsets/L-1`` (read on restart) and
  ``offsets/L-2`` (history); ``commits/L`` (read) and ``commits/L-1`` (history); every
  source-log entry the file source reads on restart (its newest compact file and every
  entry after it) and the entry before that compact file (history);
* operator metadata (v1 ``_metadata/metadata``, v2 ``_metadata/v2/<b>``) and schema files
  (``<p>/[<store>/]_metadata/schema``, ``_stateSchema/…``);
* every state file on each partition's load path — the snapshot/zip a restart starts from
  (with, for RocksDB, every SST the zip names) and each change file after it — and, per
  store, the newest state file *not* on the path (a neighbour: Spark should not read it);
* the Hadoop ``.crc`` and Spark JSON ``.crc`` files of all of those;
* the partition, store, operator and log folders;
* the confs the newest offsets entry pins (partitions, provider, codec, every state or
  checkpoint format version), and the operator metadata's partition count and store names;
* a file sink's log beside the checkpoint (``<work>/sink/_spark_metadata``): its newest
  entry, the one before, the folder.

Families per file: ``delete`` (the file and its hidden Hadoop checksum, as Hadoop deletes),
``delete-keep-crc`` (``rm`` of the file alone), ``truncate-0``, ``truncate-half`` and
``flip-bit`` with the checksum left as it was (bit rot, a partial overwrite), the same two
with the checksum gone (``…-no-crc``, as on object stores that have none), ``replace-other``
(another valid file of the same kind: an older batch's, another query's) and
``replace-newer`` (the next newer file of the same kind: the store's own, else the one the
query's next run writes — a file of a batch not committed here; only of the kinds every
batch writes, so the space does not depend on when maintenance ran). A replacement carries
the donor's checksum files with it (Hadoop's and checkpoint format v2's JSON ``.crc``), so
the pair stays consistent and only the content is wrong. The partitions after the first get
deletion and a flipped bit only (their files play the roles the first partition's already
cover). Checksum files (of what a restart reads): delete, flip, and for v2's JSON ``.crc``
another version's. Folders: delete, empty. The byte a flip hits is drawn from a seed made of
the fault's id, so the space is the same on every run.

The families that target a restart's *outcome* rather than whether it runs — damage that
leaves every file valid but says something else:

* ``flip-data-block`` (``-no-crc``): a bit flipped in the middle of the first data block of an
  SST on the restart path (RocksDB opens the file without reading it);
* ``source-extra-file`` / ``source-fewer-files``: a file source log entry read on restart
  rewritten to list one more file (the input file the restart has not read yet) or one fewer
  (its last);
* ``offsets-earlier`` / ``offsets-later``: the file source's ``logOffset`` in the newest
  offsets entry set to the newest earlier entry's lower value, or to one more than its own;
  ``replace-previous``: the newest offsets entry replaced by the one before it, whole;
* the file sink's log damaged (delete, truncate, flip, another entry's content, the folder).

The rewritten source-log and offsets entries lose their hidden checksum, as after a hand edit
(``replace-previous`` brings the previous entry's with it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    from statekit.checkpoint.inventory import StoreInstance
    from statekit.checkpoint.layout import StateFile

FILE_FAMILIES = ("delete", "delete-keep-crc", "truncate-0", "truncate-half",
                 "truncate-half-no-crc", "flip-bit", "flip-bit-no-crc", "replace-other")
REPLACE_NEWER = "replace-newer"
CHECKSUM_FAMILIES = ("delete", "flip-bit")
SPARK_CRC_FAMILIES = (*CHECKSUM_FAMILIES, "replace-other")
FOLDER_FAMILIES = ("delete-folder", "empty-folder")
CONF_FAMILY = "conf-edit"
OPERATOR_FAMILY = "operator-edit"
DATA_BLOCK_FAMILIES = ("flip-data-block", "flip-data-block-no-crc")
SOURCE_ENTRY_FAMILIES = ("source-extra-file", "source-fewer-files")
OFFSETS_FAMILIES = ("offsets-earlier", "offsets-later", "replace-previous")
SINK_LOG_FAMILIES = ("delete", "delete-keep-crc", "truncate-0", "truncate-half", "flip-bit",
                     "replace-other")
FAMILIES = (*FILE_FAMILIES, REPLACE_NEWER, *FOLDER_FAMILIES, CONF_FAMILY, OPERATOR_FAMILY,
            *DATA_BLOCK_FAMILIES, *SOURCE_ENTRY_FAMILIES, *OFFSETS_FAMILIES)


@dataclass(frozen=True)
class Fault:
    kind: str
    family: str
    target: str
    """The damaged path relative to the checkpoint (or ``conf:<key>=<value>``)."""
    role: str
    """What the target is to a restart (``offsets-newest``, ``delta``, ``sst``, …)."""
    apply: Callable[[Path], None] = field(compare=False, repr=False)
    """Damages the checkpoint at the given path."""

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.family}:{self.target}"

    @property
    def seed(self) -> int:
        return int.from_bytes(hashlib.sha256(self.id.encode()).digest()[:8], "big")


# ------------------------------------------------------------------------------ damage
def hidden_crc(path: Path) -> Path:
    return path.parent / f".{path.name}.crc"


def _delete(path: Path, keep_crc: bool) -> None:
    path.unlink()
    if not keep_crc:
        hidden_crc(path).unlink(missing_ok=True)


def _truncate(path: Path, keep: float, drop_crc: bool) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])
    if drop_crc:
        hidden_crc(path).unlink(missing_ok=True)


def _flip(path: Path, seed: int, drop_crc: bool) -> None:
    data = bytearray(path.read_bytes())
    if data:
        data[random.Random(seed).randrange(len(data))] ^= 0x01
    path.write_bytes(bytes(data))
    if drop_crc:
        hidden_crc(path).unlink(missing_ok=True)


def spark_crc(path: Path) -> Path:
    """Checkpoint format v2's JSON checksum file beside a state file."""
    return path.parent / f"{path.name}.crc"


def _replace(path: Path, donor: Path) -> None:
    """``donor``'s bytes and its checksum files (Hadoop's hidden one; v2's JSON one when
    both files have one), so the replacement is consistent and only its content is wrong."""
    path.write_bytes(donor.read_bytes())
    crc = hidden_crc(path)
    if hidden_crc(donor).exists():
        crc.write_bytes(hidden_crc(donor).read_bytes())
    else:
        crc.unlink(missing_ok=True)
    if spark_crc(path).is_file() and spark_crc(donor).is_file() and \
            not path.name.endswith(".crc"):
        _replace(spark_crc(path), spark_crc(donor))
    if path.suffix == ".zip" and (donor.parent / "SSTs").is_dir():
        # a zip names SST files beside it: the ones a newer (or another) version uploaded
        # come with it, as they would have been uploaded with it (orphans harm nothing)
        ssts = path.parent / "SSTs"
        ssts.mkdir(exist_ok=True)
        for sst in (donor.parent / "SSTs").iterdir():
            if not (ssts / sst.name).exists():
                shutil.copyfile(sst, ssts / sst.name)


def file_damage(family: str, rel: str, seed: int, donor: Path | None = None
                ) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        if family in ("delete", "delete-keep-crc"):
            _delete(path, keep_crc=family == "delete-keep-crc")
        elif family == "truncate-0":
            _truncate(path, 0.0, drop_crc=False)
        elif family.startswith("truncate-half"):
            _truncate(path, 0.5, drop_crc=family.endswith("no-crc"))
        elif family.startswith("flip-bit"):
            _flip(path, seed, drop_crc=family.endswith("no-crc"))
        elif family in ("replace-other", REPLACE_NEWER, "replace-previous"):
            assert donor is not None
            _replace(path, donor)
        else:
            raise ValueError(family)
    return apply


def flip_in_block(rel: str, offset: int) -> Callable[[Path], None]:
    """Flip the low bit of the byte at ``offset`` (inside an SST data block), the checksum
    left as it was (:func:`without_crc` drops it)."""
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        data = bytearray(path.read_bytes())
        data[offset] ^= 0x01
        path.write_bytes(bytes(data))
    return apply


def without_crc(rel: str, damage: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        damage(ckpt)
        hidden_crc(ckpt / rel).unlink(missing_ok=True)
    return apply


def data_block_offset(sst: Path) -> int | None:
    """The middle byte of the SST's first data block (``None``: no data block known)."""
    from statekit.formats.rocksdb_sst import _Table

    try:
        with open(sst, "rb") as handle:
            blocks = _Table(handle, str(sst)).data_handles()
    except Exception:  # an SST statekit cannot walk gets no data-block fault
        return None
    return blocks[0].offset + blocks[0].size // 2 if blocks else None


def _log_lines(path: Path) -> tuple[str, list[dict]]:
    version, *lines = path.read_text().split("\n")
    return version, [json.loads(line) for line in lines if line.strip()]


def _write_log(path: Path, version: str, entries: list[dict]) -> None:
    path.write_text("\n".join([version, *(json.dumps(e, separators=(",", ":"))
                                          for e in entries)]))
    hidden_crc(path).unlink(missing_ok=True)


def unread_input_files(source_log: Path) -> list[Path]:
    """The input files beside the ones a file source's log lists that no entry of the log
    lists (the restart's new file): newest modification time last."""
    listed: set[str] = set()
    folders: set[Path] = set()
    for entry in source_log.iterdir():
        if not entry.name.removesuffix(".compact").isdigit():
            continue
        for line in _log_lines(entry)[1]:
            listed.add(line["path"])
            folders.add(Path(urlparse(line["path"]).path).parent)
    found = [p for folder in folders if folder.is_dir() for p in folder.iterdir()
             if p.is_file() and not p.name.startswith((".", "_"))
             and p.as_uri() not in listed and f"file:{p}" not in listed]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


def edit_source_entry(rel: str, family: str) -> Callable[[Path], None]:
    """Rewrite a file source log entry: list one more file (``source-extra-file``: the
    first input file no entry lists, with this entry's batch id) or one fewer (the last)."""
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        version, entries = _log_lines(path)
        if family == "source-fewer-files":
            entries = entries[:-1]
        else:
            extra = unread_input_files(path.parent)[0]
            batch = int(path.name.removesuffix(".compact"))
            entries.append({"path": extra.as_uri(),
                            "timestamp": int(extra.stat().st_mtime * 1000), "batchId": batch})
        _write_log(path, version, entries)
    return apply


def file_source_offsets(path: Path) -> dict[int, int]:
    """``{line index: logOffset}`` of the file sources in an offsets entry."""
    lines = path.read_text().split("\n")
    found = {}
    for index, line in enumerate(lines[2:], 2):
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if isinstance(offset, dict) and isinstance(offset.get("logOffset"), int):
            found[index] = offset["logOffset"]
    return found


def set_log_offsets(rel: str, values: dict[int, int]) -> Callable[[Path], None]:
    """Set the file sources' ``logOffset`` in an offsets entry (line index → value)."""
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        lines = path.read_text().split("\n")
        for index, value in values.items():
            offset = json.loads(lines[index])
            offset["logOffset"] = value
            lines[index] = json.dumps(offset, separators=(",", ":"))
        path.write_text("\n".join(lines))
        hidden_crc(path).unlink(missing_ok=True)
    return apply


def folder_damage(family: str, rel: str) -> Callable[[Path], None]:
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        if family == "delete-folder":
            shutil.rmtree(path)
        else:  # empty-folder: every file below it, the folders stay
            for folder, _dirs, names in os.walk(path):
                for name in names:
                    os.unlink(os.path.join(folder, name))
    return apply


def edit_offsets_conf(rel: str, key: str, value: str | None) -> Callable[[Path], None]:
    """Set (``None``: remove) one pinned conf in an offsets entry; the entry's hidden
    checksum goes (as after a hand edit with a tool that does not know it)."""
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        lines = path.read_text().split("\n")
        meta = json.loads(lines[1])
        if value is None:
            meta["conf"].pop(key, None)
        else:
            meta["conf"][key] = value
        lines[1] = json.dumps(meta, separators=(",", ":"))
        path.write_text("\n".join(lines))
        hidden_crc(path).unlink(missing_ok=True)
    return apply


def edit_operator_metadata(rel: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    """Edit the JSON of an operator metadata file (v1 or v2)."""
    def apply(ckpt: Path) -> None:
        path = ckpt / rel
        version, text = path.read_text().split("\n", 1)
        meta = json.loads(text)
        edit(meta)
        path.write_text(version + "\n" + json.dumps(meta, separators=(",", ":")))
        hidden_crc(path).unlink(missing_ok=True)
    return apply


# ------------------------------------------------------------------------------ targets
@dataclass(frozen=True)
class Target:
    rel: str
    role: str
    donor: str | None = None
    """A file of the same kind to replace it with (relative to the checkpoint, or
    ``<other-query>/…`` for another query's checkpoint); ``None``: no replace-other."""
    families: tuple[str, ...] = FILE_FAMILIES
    """The families applied: every one, or — for the partitions after the first, whose
    files play the same roles — deletion and a flipped bit only."""
    newer: str | None = None
    """The next newer file of the same kind (``replace-newer``; ``<next-run>/…``: of the
    query's next run); ``None``: none."""

    @property
    def read_on_restart(self) -> bool:
        return not self.role.startswith(("neighbour", "offsets-history", "commits-history",
                                         "source-history"))


def _batches(folder: Path) -> list[int]:
    return sorted(int(p.name.removesuffix(".compact")) for p in folder.iterdir()
                  if p.name.removesuffix(".compact").isdigit()) if folder.is_dir() else []


def _entry(folder: Path, batch: int) -> Path:
    plain = folder / str(batch)
    return plain if plain.exists() else folder / f"{batch}.compact"


def log_targets(ckpt: Path) -> list[Target]:
    offsets, commits = _batches(ckpt / "offsets"), _batches(ckpt / "commits")
    found = [Target("metadata", "metadata", donor="<other-query>/metadata")]
    last = offsets[-1]
    roles = {last: "offsets-newest", last - 1: "offsets-previous", last - 2: "offsets-history"}
    for batch, role in roles.items():
        if batch in offsets:
            other = batch - 2 if batch - 2 in offsets else batch + 1
            found.append(Target(f"offsets/{batch}", role, donor=f"offsets/{other}"))
    newest_commit = commits[-1]
    for batch, role in ((newest_commit, "commits-newest"),
                        (newest_commit - 1, "commits-history")):
        if batch in commits:
            found.append(Target(f"commits/{batch}", role, donor=f"commits/{batch - 1}"))
    for source in sorted((ckpt / "sources").iterdir()) if (ckpt / "sources").is_dir() else []:
        entries = _batches(source)
        compacts = [b for b in entries if (source / f"{b}.compact").exists()]
        start = compacts[-1] if compacts else entries[0]
        for batch in entries:
            if batch < start - 1:
                continue
            role = ("source-history" if batch < start else
                    "source-compact" if batch in compacts else "source-entry")
            donor = _entry(source, batch - 1) if batch - 1 in entries else None
            rel = os.path.relpath(_entry(source, batch), ckpt)
            found.append(Target(rel, role, donor=os.path.relpath(donor, ckpt)
                                if donor is not None else None))
    return found


def state_targets(ckpt: Path, next_run: Path | None = None) -> list[Target]:
    """Operator metadata, schema files and the state files of each load path (``next_run``:
    the checkpoint after the query ran one more batch, donor of newer files)."""
    from statekit.checkpoint import open_checkpoint
    from statekit.checkpoint.state_data import zip_metadata, zip_sst_paths

    model = open_checkpoint(str(ckpt))
    later = open_checkpoint(str(next_run)).inventory.instances if next_run else {}
    version = model.last_committed_batch + 1
    rel = lambda p: os.path.relpath(p, ckpt)  # noqa: E731
    found: list[Target] = []
    metas = [m for m in model.inventory.meta_files
             if m.kind in ("operator-metadata", "operator-metadata-v2", "schema", "schema-v3")]
    for meta in metas:
        # another batch's, store's or operator's file of the same kind, if the checkpoint
        # has one (the checkpoint is all the doctor sees; another query's file would be a
        # question about the query's code)
        others = [m for m in metas if m.kind == meta.kind and m.path != meta.path]
        found.append(Target(rel(meta.path), meta.kind,
                            donor=rel(others[0].path) if others else None))
    for key, instance in sorted(model.inventory.instances.items()):
        path = instance.files_to_load(version)
        on_path = {f.path for f in path}
        families = FILE_FAMILIES if key[2] == 0 else ("delete", "flip-bit")
        for file in path:
            older = [f for f in instance.files if f.kind == file.kind and f.version is not None
                     and f.version < (file.version or 0)]
            found.append(Target(rel(file.path), file.kind,
                                donor=rel(older[-1].path) if older else None,
                                families=families,
                                newer=_newer(ckpt, instance, later.get(key), file,
                                             next_run)))
            if file.kind == "zip":
                meta = zip_metadata(model, [file])[file.path]
                ssts = zip_sst_paths(model, file, meta)
                for sst in ssts:
                    others = [s for s in instance.of_kind("sst") if s.path != sst]
                    found.append(Target(rel(sst), "sst",
                                        donor=rel(others[0].path) if others else None,
                                        families=families))
        neighbours = [f for f in instance.files if f.path not in on_path and f.kind != "sst"]
        if neighbours and key[2] == 0:  # one partition's is enough: Spark never reads it
            newest = max(neighbours, key=lambda f: (f.version or 0, f.kind))
            found.append(Target(rel(newest.path), f"neighbour-{newest.kind}"))
    return found


def _newer(ckpt: Path, instance: StoreInstance, later: StoreInstance | None,
           file: StateFile, next_run: Path | None) -> str | None:
    """The next newer file of ``file``'s kind: the store's own, else the next run's (change
    files, and zips of a store without changelogs: every batch writes one)."""
    def newer_in(files: tuple[StateFile, ...]) -> list[StateFile]:
        return [f for f in files if f.kind == file.kind and f.version is not None
                and f.version > (file.version or 0)]

    own = newer_in(instance.files)
    if own:
        return os.path.relpath(own[0].path, ckpt)
    if later is None or next_run is None:
        return None
    every_batch = file.kind in ("delta", "changelog") or (
        file.kind == "zip" and not instance.of_kind("changelog"))
    theirs = newer_in(later.files) if every_batch else []
    if not theirs:
        return None
    return "<next-run>/" + os.path.relpath(theirs[0].path, next_run)


def checksum_targets(ckpt: Path, files: list[Target], next_run: Path | None = None
                     ) -> list[Target]:
    """The checksum files of the ``files`` a restart reads (of the first partition):
    Hadoop's hidden one, Spark's JSON one."""
    found = []
    for target in files:
        if not target.read_on_restart or target.families != FILE_FAMILIES:
            continue
        path = ckpt / target.rel
        for crc, role in ((hidden_crc(path), "hadoop-crc"), (spark_crc(path), "spark-crc")):
            if not crc.exists():
                continue
            donors = {}
            if role == "spark-crc":  # another version's JSON checksum (v2)
                for name, other in (("donor", target.donor), ("newer", target.newer)):
                    if other is not None and _donor(ckpt, f"{other}.crc", None,
                                                    next_run) is not None:
                        donors[name] = f"{other}.crc"
            found.append(Target(os.path.relpath(crc, ckpt), f"{role}:{target.role}",
                                families=SPARK_CRC_FAMILIES if role == "spark-crc"
                                else CHECKSUM_FAMILIES, **donors))
    return found


SINK_LOG = "../sink/_spark_metadata"
"""A file sink's log, relative to the checkpoint (the sink lives beside it)."""


def sink_targets(ckpt: Path) -> list[Target]:
    """The file sink's log beside the checkpoint, when there is one: its newest entry and
    the one before (each the other's donor)."""
    log = ckpt / SINK_LOG
    entries = _batches(log)
    found: list[Target] = []
    if not entries:
        return found
    newest = entries[-1]
    for batch, role in ((newest, "sink-log-newest"), (newest - 1, "sink-log-previous")):
        if batch not in entries:
            continue
        other = newest - 1 if batch == newest else newest
        donor = f"{SINK_LOG}/{_entry(log, other).name}" if other in entries else None
        found.append(Target(f"{SINK_LOG}/{_entry(log, batch).name}", role, donor=donor,
                            families=SINK_LOG_FAMILIES))
    return found


def folder_targets(ckpt: Path) -> list[Target]:
    found = [Target(name, f"{name}-folder") for name in ("offsets", "commits", "sources",
                                                          "state")
             if (ckpt / name).is_dir()]
    if (ckpt / SINK_LOG).is_dir():
        found.append(Target(SINK_LOG, "sink-log-folder", families=("delete-folder",)))
    for source in sorted((ckpt / "sources").glob("*")):
        found.append(Target(os.path.relpath(source, ckpt), "source-folder"))
    for op in sorted((ckpt / "state").glob("[0-9]*")):
        found.append(Target(os.path.relpath(op, ckpt), "operator-folder"))
        if (op / "_metadata").is_dir():
            found.append(Target(os.path.relpath(op / "_metadata", ckpt),
                                "operator-metadata-folder"))
        for part in sorted(op.glob("[0-9]*")):
            found.append(Target(os.path.relpath(part, ckpt), "partition-folder"))
            for store in sorted(p for p in part.iterdir() if p.is_dir()
                                and not p.name.startswith("_") and p.name != "SSTs"):
                if part.name == "0":
                    found.append(Target(os.path.relpath(store, ckpt), "store-folder"))
            if (part / "SSTs").is_dir() and part.name == "0":
                found.append(Target(os.path.relpath(part / "SSTs", ckpt), "sst-folder"))
    return found


# the confs a restart pins from the newest offsets entry, and a valid other value for each
_PROVIDERS = ("org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
              "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
_OTHER_VALUE: dict[str, Callable[[str], list[str | None]]] = {
    "spark.sql.shuffle.partitions": lambda v: [str(int(v) + 1), "1"],
    "spark.sql.streaming.stateStore.providerClass":
        lambda v: [p for p in _PROVIDERS if p != v],
    "spark.sql.streaming.stateStore.compression.codec":
        lambda v: [c for c in ("zstd", "snappy") if c != v],
    "spark.sql.streaming.aggregation.stateFormatVersion": lambda v: ["1" if v == "2" else "2"],
    "spark.sql.streaming.join.stateFormatVersion": lambda v: ["1" if v != "1" else "2"],
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion":
        lambda v: ["1" if v == "2" else "2"],
    "spark.sql.streaming.sessionWindow.stateFormatVersion": lambda v: ["1" if v == "2" else "2"],
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": lambda v: [str(int(v) - 1)],
    "spark.sql.streaming.stateStore.encodingFormat":
        lambda v: ["avro" if v == "unsaferow" else "unsaferow"],
    "spark.sql.streaming.stateStore.checkpointFormatVersion":
        lambda v: ["2" if v == "1" else "1"],
}
CHECKPOINT_FORMAT_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def conf_faults(kind: str, ckpt: Path) -> list[Fault]:
    newest = _batches(ckpt / "offsets")[-1]
    rel = f"offsets/{newest}"
    conf = json.loads((ckpt / rel).read_text().split("\n")[1])["conf"]
    found = []
    pinned = dict(conf)
    pinned.setdefault(CHECKPOINT_FORMAT_CONF, "1")  # not pinned by Spark: added by hand
    for key in sorted(pinned):
        if key not in _OTHER_VALUE:
            continue
        for value in _OTHER_VALUE[key](pinned[key]):
            found.append(Fault(kind, CONF_FAMILY, f"{rel}:{key.rsplit('.', 2)[-2]}."
                               f"{key.rsplit('.', 1)[-1]}={value}", "offsets-conf",
                               edit_offsets_conf(rel, key, value)))
    return found


def operator_faults(kind: str, ckpt: Path) -> list[Fault]:
    found = []
    for meta in sorted((ckpt / "state").glob("[0-9]*/_metadata/metadata")) + sorted(
            (ckpt / "state").glob("[0-9]*/_metadata/v2/[0-9]*")):
        rel = os.path.relpath(meta, ckpt)
        stores = json.loads(meta.read_text().split("\n", 1)[1])["stateStoreInfo"]

        def partitions(m: dict) -> None:
            for info in m["stateStoreInfo"]:
                info["numPartitions"] += 1

        def store_names(m: dict) -> None:
            for info in m["stateStoreInfo"]:
                info["storeName"] = info["storeName"] + "-renamed"

        found.append(Fault(kind, OPERATOR_FAMILY, f"{rel}:numPartitions+1",
                           "operator-metadata", edit_operator_metadata(rel, partitions)))
        if stores:
            found.append(Fault(kind, OPERATOR_FAMILY, f"{rel}:storeName",
                               "operator-metadata", edit_operator_metadata(rel, store_names)))
    return found


def enumerate_faults(kind: str, ckpt: Path, other_query: Path | None = None,
                     next_run: Path | None = None) -> list[Fault]:
    """Every fault of the checkpoint at ``ckpt`` (a pristine one; it is not changed), and of
    the file sink's log beside it when there is one.

    ``other_query``: another query's checkpoint, donor of the "another query's file"
    replacements (query id, operator metadata, schema). ``next_run``: this checkpoint after
    its query ran one more batch (a copy), donor of the ``replace-newer`` files.
    """
    files = [*log_targets(ckpt), *state_targets(ckpt, next_run)]
    found: list[Fault] = []
    for target in [*files, *sink_targets(ckpt)]:
        found += _file_faults(kind, ckpt, target, target.families, other_query, next_run)
        if target.newer is not None and target.families == FILE_FAMILIES:
            found += _file_faults(kind, ckpt, target, (REPLACE_NEWER,), other_query, next_run)
    for target in checksum_targets(ckpt, files, next_run):
        for family in target.families:
            if family == "replace-other":
                found += _file_faults(kind, ckpt, target, (family,), other_query, next_run)
                if target.newer is not None:
                    found += _file_faults(kind, ckpt, target, (REPLACE_NEWER,), other_query,
                                          next_run)
                continue
            fault = Fault(kind, family, target.rel, target.role, lambda _: None)
            found.append(Fault(kind, family, target.rel, target.role, file_damage(
                family if family != "delete" else "delete-keep-crc", target.rel,
                fault.seed)))
    for target in folder_targets(ckpt):
        for family in target.families if target.families != FILE_FAMILIES \
                else FOLDER_FAMILIES:
            found.append(Fault(kind, family, target.rel, target.role,
                               folder_damage(family, target.rel)))
    found += conf_faults(kind, ckpt)
    found += operator_faults(kind, ckpt)
    found += outcome_faults(kind, ckpt, files)
    return found


def _file_faults(kind: str, ckpt: Path, target: Target, families: tuple[str, ...],
                 other_query: Path | None, next_run: Path | None) -> list[Fault]:
    found = []
    for family in families:
        donor = _donor(ckpt, target.newer if family == REPLACE_NEWER else target.donor,
                       other_query, next_run)
        if family in ("replace-other", REPLACE_NEWER) and donor is None:
            continue
        if family in ("delete-keep-crc", "truncate-half-no-crc", "flip-bit-no-crc") \
                and not hidden_crc(ckpt / target.rel).exists():
            continue  # the same as its plain family here
        fault = Fault(kind, family, target.rel, target.role, file_damage(
            family, target.rel, 0, donor))
        found.append(Fault(kind, family, target.rel, target.role, file_damage(
            family, target.rel, fault.seed, donor)))
    return found


def outcome_faults(kind: str, ckpt: Path, files: list[Target]) -> list[Fault]:
    """The faults that leave every file valid but make it say something else (a restart's
    outcome is what they change): SST data blocks flipped, source log entries and the
    newest offsets entry rewritten."""
    found: list[Fault] = []
    for target in files:
        if target.role == "sst" and target.families == FILE_FAMILIES:
            offset = data_block_offset(ckpt / target.rel)
            if offset is None:
                continue
            damage = flip_in_block(target.rel, offset)
            found.append(Fault(kind, "flip-data-block", target.rel, target.role, damage))
            if hidden_crc(ckpt / target.rel).exists():
                found.append(Fault(kind, "flip-data-block-no-crc", target.rel, target.role,
                                   without_crc(target.rel, damage)))
        elif target.role in ("source-compact", "source-entry"):
            path = ckpt / target.rel
            if _log_lines(path)[1]:
                found.append(Fault(kind, "source-fewer-files", target.rel, target.role,
                                   edit_source_entry(target.rel, "source-fewer-files")))
            if unread_input_files(path.parent):
                found.append(Fault(kind, "source-extra-file", target.rel, target.role,
                                   edit_source_entry(target.rel, "source-extra-file")))
        elif target.role == "offsets-newest":
            found += _offsets_faults(kind, ckpt, target.rel)
    return found


def _offsets_faults(kind: str, ckpt: Path, rel: str) -> list[Fault]:
    """The newest offsets entry pointing the file sources at an earlier or a later batch of
    their logs, or replaced whole by the entry before it."""
    newest = int(rel.rsplit("/", 1)[-1])
    offsets = file_source_offsets(ckpt / rel)
    found = []
    earlier: dict[int, int] = {}
    for batch in reversed(_batches(ckpt / "offsets")):
        if batch >= newest or len(earlier) == len(offsets):
            continue
        for index, value in file_source_offsets(ckpt / "offsets" / str(batch)).items():
            if index in offsets and index not in earlier and value < offsets[index]:
                earlier[index] = value  # the newest earlier entry with a lower offset
    if earlier:
        found.append(Fault(kind, "offsets-earlier", rel, "offsets-newest",
                           set_log_offsets(rel, earlier)))
    if offsets:
        found.append(Fault(kind, "offsets-later", rel, "offsets-newest",
                           set_log_offsets(rel, {i: v + 1 for i, v in offsets.items()})))
    previous = ckpt / "offsets" / str(newest - 1)
    if previous.is_file():
        found.append(Fault(kind, "replace-previous", rel, "offsets-newest",
                           file_damage("replace-previous", rel, 0, previous)))
    return found


def _donor(ckpt: Path, donor: str | None, other_query: Path | None,
           next_run: Path | None = None) -> Path | None:
    if donor is None:
        return None
    if donor.startswith("<next-run>/"):
        if next_run is None:
            return None
        path = next_run / donor.removeprefix("<next-run>/")
        return path if path.is_file() else None
    if donor.startswith("<other-query>/"):
        if other_query is None:
            return None
        path = other_query / donor.removeprefix("<other-query>/")
        return path if path.is_file() else None
    path = ckpt / donor
    return path if path.is_file() else None


def pristine_fault(kind: str) -> Fault:
    """No damage at all: the control every kind's judgement starts from (the doctor must say
    it restarts with the same outcome, and Spark's restart must measure the same)."""
    return Fault(kind, "none", "-", "pristine", lambda _: None)


def sample_faults(faults: list[Fault], count: int, seed: int, *,
                  shuffle_families: bool = False) -> list[Fault]:
    """``count`` faults drawn evenly over the families (fixed seed): every family is
    represented before any gets a second draw. The families take turns in name order, or —
    ``shuffle_families`` — in an order drawn from the seed (fewer draws than families then
    leave out others than the last names: samples of several kinds with several seeds
    cover the families between them)."""
    by_family: dict[str, list[Fault]] = {}
    for fault in faults:
        by_family.setdefault(fault.family, []).append(fault)
    rng = random.Random(seed)
    for members in by_family.values():
        rng.shuffle(members)
    order = sorted(by_family)
    if shuffle_families:
        rng.shuffle(order)
    chosen: list[Fault] = []
    while len(chosen) < count and any(by_family.values()):
        for family in order:
            if by_family[family] and len(chosen) < count:
                chosen.append(by_family[family].pop())
    return chosen


def damaged_copies(pristine: Path, faults: list[Fault], work: Path) -> Iterator[Fault]:
    """Each fault applied to a fresh copy of ``pristine`` at ``work`` (the previous copy is
    removed first); yields the fault once its copy is ready."""
    for fault in faults:
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(pristine, work, symlinks=True)
        fault.apply(work)
        yield fault
