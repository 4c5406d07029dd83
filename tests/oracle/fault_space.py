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
  checkpoint format version), and the operator metadata's partition count and store names.

Families per file: ``delete`` (the file and its hidden Hadoop checksum, as Hadoop deletes),
``delete-keep-crc`` (``rm`` of the file alone), ``truncate-0``, ``truncate-half`` and
``flip-bit`` with the checksum left as it was (bit rot, a partial overwrite), the same two
with the checksum gone (``…-no-crc``, as on object stores that have none), and
``replace-other`` (another valid file of the same kind: an older batch's, another query's).
The partitions after the first get deletion and a flipped bit only (their files play the
roles the first partition's already cover). Checksum files (of what a restart reads): delete,
flip. Folders: delete, empty. The byte a flip hits is
drawn from a seed made of the fault's id, so the space is the same on every run.
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

FILE_FAMILIES = ("delete", "delete-keep-crc", "truncate-0", "truncate-half",
                 "truncate-half-no-crc", "flip-bit", "flip-bit-no-crc", "replace-other")
CHECKSUM_FAMILIES = ("delete", "flip-bit")
FOLDER_FAMILIES = ("delete-folder", "empty-folder")
CONF_FAMILY = "conf-edit"
OPERATOR_FAMILY = "operator-edit"
FAMILIES = (*FILE_FAMILIES, *FOLDER_FAMILIES, CONF_FAMILY, OPERATOR_FAMILY)


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


def _replace(path: Path, donor: Path) -> None:
    """``donor``'s bytes (and its hidden checksum, so the pair stays consistent)."""
    path.write_bytes(donor.read_bytes())
    crc = hidden_crc(path)
    if hidden_crc(donor).exists():
        crc.write_bytes(hidden_crc(donor).read_bytes())
    else:
        crc.unlink(missing_ok=True)


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
        elif family == "replace-other":
            assert donor is not None
            _replace(path, donor)
        else:
            raise ValueError(family)
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


def state_targets(ckpt: Path) -> list[Target]:
    """Operator metadata, schema files and the state files of each load path."""
    from statekit.checkpoint import open_checkpoint
    from statekit.checkpoint.state_data import zip_metadata, zip_sst_paths

    model = open_checkpoint(str(ckpt))
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
                                families=families))
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


def checksum_targets(ckpt: Path, files: list[Target]) -> list[Target]:
    """The checksum files of the ``files`` a restart reads (of the first partition):
    Hadoop's hidden one, Spark's JSON one."""
    found = []
    for target in files:
        if not target.read_on_restart or target.families != FILE_FAMILIES:
            continue
        path = ckpt / target.rel
        for crc, role in ((hidden_crc(path), "hadoop-crc"),
                          (path.parent / f"{path.name}.crc", "spark-crc")):
            if crc.exists():
                found.append(Target(os.path.relpath(crc, ckpt), f"{role}:{target.role}"))
    return found


def folder_targets(ckpt: Path) -> list[Target]:
    found = [Target(name, f"{name}-folder") for name in ("offsets", "commits", "sources",
                                                          "state")
             if (ckpt / name).is_dir()]
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


def enumerate_faults(kind: str, ckpt: Path, other_query: Path | None = None) -> list[Fault]:
    """Every fault of the checkpoint at ``ckpt`` (a pristine one; it is not changed).

    ``other_query``: another query's checkpoint, donor of the "another query's file"
    replacements (query id, operator metadata, schema).
    """
    files = [*log_targets(ckpt), *state_targets(ckpt)]
    found: list[Fault] = []
    for target in files:
        for family in target.families:
            donor = _donor(ckpt, target, other_query)
            if family == "replace-other" and donor is None:
                continue
            if family in ("delete-keep-crc", "truncate-half-no-crc", "flip-bit-no-crc") \
                    and not hidden_crc(ckpt / target.rel).exists():
                continue  # the same as its plain family here
            fault = Fault(kind, family, target.rel, target.role, file_damage(
                family, target.rel, 0, donor))
            found.append(Fault(kind, family, target.rel, target.role, file_damage(
                family, target.rel, fault.seed, donor)))
    for target in checksum_targets(ckpt, files):
        for family in CHECKSUM_FAMILIES:
            fault = Fault(kind, family, target.rel, target.role, lambda _: None)
            found.append(Fault(kind, family, target.rel, target.role, file_damage(
                family if family != "delete" else "delete-keep-crc", target.rel,
                fault.seed)))
    for target in folder_targets(ckpt):
        for family in FOLDER_FAMILIES:
            found.append(Fault(kind, family, target.rel, target.role,
                               folder_damage(family, target.rel)))
    found += conf_faults(kind, ckpt)
    found += operator_faults(kind, ckpt)
    return found


def _donor(ckpt: Path, target: Target, other_query: Path | None) -> Path | None:
    if target.donor is None:
        return None
    if target.donor.startswith("<other-query>/"):
        if other_query is None:
            return None
        path = other_query / target.donor.removeprefix("<other-query>/")
        return path if path.is_file() else None
    path = ckpt / target.donor
    return path if path.is_file() else None


def sample_faults(faults: list[Fault], count: int, seed: int) -> list[Fault]:
    """``count`` faults drawn evenly over the families (fixed seed): every family is
    represented before any gets a second draw."""
    by_family: dict[str, list[Fault]] = {}
    for fault in faults:
        by_family.setdefault(fault.family, []).append(fault)
    rng = random.Random(seed)
    for members in by_family.values():
        rng.shuffle(members)
    chosen: list[Fault] = []
    while len(chosen) < count and any(by_family.values()):
        for family in sorted(by_family):
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
