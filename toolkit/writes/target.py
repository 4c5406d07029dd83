"""The target checkpoint's logs and metadata: copied from the source, or derived from it.

What a restart on the target needs, and no more: ``metadata``; offsets and commits up to the
last committed batch N; ``sources/``; the schema files; a repartition batch N + 1 whose
offsets entry is N's with the new ``spark.sql.shuffle.partitions`` and whose commit is N's;
operator metadata (v1, and v2 where the source has it) with the new partition count. State
files are written by the job (HDFS) or by Spark's own repartition or state rewriter
(RocksDB). A migration's offsets entry N + 1 also pins the new provider.

Every file is rewritten from its parsed form only where it must change; the rest is copied
byte for byte, so anything Spark wrote that statekit does not model survives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.logs import (
    CONF_PROVIDER,
    CONF_SHUFFLE_PARTITIONS,
    HDFS_PROVIDER,
    ROCKSDB_PROVIDER,
)
from statekit.formats.jsontext import loads_json
from statekit.support.errors import CorruptFile
from statekit.writes.repartition_plan import RepartitionPlan
from statekit.writes.staging import Staging

_SCHEMA_PARTITION = re.compile(r"^state/\d+/(\d+)/")
PROVIDER_CLASSES = {"hdfs": HDFS_PROVIDER, "rocksdb": ROCKSDB_PROVIDER}
READ_VIEW = "_statekit_read_view"
"""A folder inside the staging folder, removed before verification: what Spark's reader
opens instead of the source where it cannot open the source itself (see
:func:`write_read_view`)."""


def _lines(data: bytes, shown: str) -> list[str]:
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise CorruptFile("is not UTF-8 text", path=shown) from None


def repartition_offsets(data: bytes, partitions: int, shown: str,
                        provider: str | None = None) -> bytes:
    """Offsets entry N + 1: N's, with the new shuffle-partition count pinned (and, for a
    migration, the new provider's class)."""
    lines = _lines(data, shown)
    meta = loads_json(lines[1])
    conf = meta.setdefault("conf", {})
    conf[CONF_SHUFFLE_PARTITIONS] = str(partitions)
    if provider is not None:
        conf[CONF_PROVIDER] = PROVIDER_CLASSES[provider]
    lines[1] = json.dumps(meta, separators=(",", ":"))
    return "\n".join(lines).encode()


def operator_metadata(data: bytes, partitions: int, shown: str) -> bytes:
    """Operator metadata (v1 ``_metadata/metadata`` or v2 ``_metadata/v2/<batch>``) with
    every store's ``numPartitions`` set to the new count."""
    lines = _lines(data, shown)
    meta = loads_json(lines[1])
    for store in meta.get("stateStoreInfo") or []:
        store["numPartitions"] = partitions
    lines[1] = json.dumps(meta, separators=(",", ":"))
    return "\n".join(lines).encode()


def write_logs(ckpt: Checkpoint, plan: RepartitionPlan, staging: Staging, *,
               new_batch: bool = True) -> None:
    """Everything but state files and the final commit, into the staging folder.

    ``new_batch=False`` (Spark's own repartition writes the batch): no ``offsets/N+1``, and
    the operator metadata copied unchanged (see :func:`write_operator_metadata`)."""
    n = plan.last_committed
    data = ckpt.read_many([ckpt.location.path(p) for p in plan.copied_logs])
    for relative in plan.copied_logs:
        match = _SCHEMA_PARTITION.match(relative)
        if match and int(match.group(1)) >= plan.to_partitions:
            continue
        staging.write(relative, data[ckpt.location.path(relative)])
    if new_batch:
        offsets = ckpt.location.path("offsets", str(n))
        staging.write(f"offsets/{n + 1}", repartition_offsets(
            ckpt.read_bytes(offsets), plan.to_partitions, ckpt.display(offsets),
            plan.target_provider if plan.migrates else None))
    write_operator_metadata(ckpt, plan, staging,
                            plan.to_partitions if new_batch else plan.from_partitions)


def write_operator_metadata(ckpt: Checkpoint, plan: RepartitionPlan, staging: Staging,
                            partitions: int) -> None:
    """Operator metadata v1 and v2 with ``partitions`` (Spark's own repartition updates only
    v2, so ``state-metadata`` would still report the old count from v1).

    An operator Spark wrote no metadata for (Spark before 4.0) gets the v1 file Spark 4
    writes, from what statekit derived (:func:`derived_operator_metadata`): Spark's state
    rewriter and ``state-metadata`` need it."""
    for meta in [*ckpt.inventory.meta("operator-metadata"),
                 *ckpt.inventory.meta("operator-metadata-v2")]:
        path = meta.path
        staging.write(ckpt.location.relative(path), operator_metadata(
            ckpt.read_bytes(path), partitions, ckpt.display(path)))
    for relative, data in derived_operator_metadata(ckpt, partitions).items():
        staging.write(relative, data)


def derived_operator_metadata(ckpt: Checkpoint, partitions: int) -> dict[str, bytes]:
    """``state/<op>/_metadata/metadata`` (v1) for every operator of ``ckpt`` that has none,
    as Spark 4 writes it: the derived name, each store with ``numColsPrefixKey`` (a session
    window's grouping-key columns, else 0) and ``partitions``."""
    from statekit.checkpoint.operators import DERIVED_VERSION
    from statekit.writes.partition_key import SESSION_WINDOW, partition_fields

    derived = {op: m for op, m in ckpt.operators.items() if m.version == DERIVED_VERSION}
    if not derived:
        return {}
    placed_by = partition_fields(ckpt)
    out = {}
    for op, meta in sorted(derived.items()):
        stores = [{"storeName": store.name,
                   "numColsPrefixKey": len(placed_by.get((op, store.name), []))
                   if meta.name == SESSION_WINDOW else 0,
                   "numPartitions": partitions} for store in meta.stores]
        body = {"operatorInfo": {"operatorId": op, "operatorName": meta.name},
                "stateStoreInfo": stores}
        out[f"state/{op}/_metadata/metadata"] = \
            f"v1\n{json.dumps(body, separators=(',', ':'))}".encode()
    return out


def commit_entry(ckpt: Checkpoint, plan: RepartitionPlan,
                 unique_ids: dict[str, list[list[str]]] | None = None) -> tuple[str, bytes]:
    """``commits/N+1``: N's commit (the same watermark for the next batch). Written last.

    With checkpoint format v2 a commit also names the state files it committed
    (``stateUniqueIds``: operator → partition → store → id). N's ids name the source's
    files, so they are replaced by ``unique_ids``, the ids of the files written for N + 1;
    without them (an HDFS target, which is format v1) the entry is a v1 commit.
    """
    n = plan.last_committed
    path = ckpt.location.path("commits", str(n))
    data = ckpt.read_bytes(path)
    lines = _lines(data, ckpt.display(path))
    entry = loads_json(lines[1]) if len(lines) > 1 else None  # parsed when opened
    if not isinstance(entry, dict) or ("stateUniqueIds" not in entry and unique_ids is None):
        return f"commits/{n + 1}", data  # v1: byte for byte
    entry.pop("stateUniqueIds", None)
    if unique_ids is not None:
        entry["stateUniqueIds"] = unique_ids
    header = "v2" if unique_ids is not None else "v1"
    return f"commits/{n + 1}", f"{header}\n{json.dumps(entry, separators=(',', ':'))}".encode()


def write_read_view(ckpt: Checkpoint, plan: RepartitionPlan, staging: Staging, *,
                    with_state: bool = False) -> str:
    """The source's metadata, batch N's logs and its schema/operator metadata files, under
    ``READ_VIEW`` in the staging folder, with offsets N naming the RocksDB provider; returns
    the folder's relative path.

    Spark's state rewriter (the only writer of RocksDB state files statekit can drive) and
    its raw-row reader open their input through the ``statestore`` reader, which accepts
    only RocksDB checkpoints with operator metadata. For an HDFS source statekit replaces
    that input with the rows it replays from the HDFS files itself, but the reader must
    still be *planned*: this view gives it the schemas it needs and is never scanned. For a
    RocksDB source written before Spark 4.0 (no operator metadata), ``with_state`` also
    copies the files that load version N + 1, and the view is what Spark reads. Operator
    metadata is derived where Spark wrote none. The source is not touched.
    """
    n = plan.last_committed
    wanted = [p for p in plan.copied_logs
              if p == "metadata" or p == f"commits/{n}" or p.startswith("state/")]
    data = ckpt.read_many([ckpt.location.path(p) for p in wanted])
    for relative in wanted:
        staging.write(f"{READ_VIEW}/{relative}", data[ckpt.location.path(relative)])
    for meta in [*ckpt.inventory.meta("operator-metadata"),
                 *ckpt.inventory.meta("operator-metadata-v2")]:
        staging.write(f"{READ_VIEW}/{ckpt.location.relative(meta.path)}",
                      ckpt.read_bytes(meta.path))
    for relative, body in derived_operator_metadata(ckpt, plan.from_partitions).items():
        staging.write(f"{READ_VIEW}/{relative}", body)
    offsets = ckpt.location.path("offsets", str(n))
    staging.write(f"{READ_VIEW}/offsets/{n}", repartition_offsets(
        ckpt.read_bytes(offsets), plan.from_partitions, ckpt.display(offsets), "rocksdb"))
    if with_state:
        for file in files_loading(ckpt, plan.last_committed + 1):
            staging.write_chunks(f"{READ_VIEW}/{ckpt.location.relative(file.path)}",
                                 ckpt.read_chunks(file.path))
    return READ_VIEW


def files_loading(ckpt: Checkpoint, version: int,
                  chain: Callable[[StoreInstance, int], list[StateFile] | None] | None = None
                  ) -> list[StateFile]:
    """Every state file Spark reads to load ``version`` of every store instance (RocksDB:
    the zips or changelogs and the SSTs the base zip names). ``chain`` picks an instance's
    files (default: by version numbers, :meth:`StoreInstance.files_to_load`)."""
    from statekit.checkpoint.state_data import zip_metadata

    out = []
    for instance in ckpt.inventory.instances.values():
        files = (chain(instance, version) or []) if chain else instance.files_to_load(version)
        bases = [f for f in files if f.kind == "zip"]
        ssts = {s.dfs_name for m in zip_metadata(ckpt, bases).values() for s in m.sst_files}
        out += files + instance.ssts_named(ssts)
    return out


_SCHEMA_FILE = re.compile(r"(state/\d+/_stateSchema/.+)$")


def retarget_schema_paths(ckpt: Checkpoint, staging: Staging, target_url: str) -> list[str]:
    """Point the staged v2 operator metadata's ``stateSchemaFilePaths`` (absolute: Spark
    writes ``file:/…/state/<op>/_stateSchema/…``) at the target's own copies under
    ``target_url`` (the target as Spark will open it); returns the relative paths of the
    rewritten files.

    Until then they name the source's files (read-only, the same bytes), which is what Spark's
    state rewriter and the verification read in the staging folder; this runs just before
    publishing, so the published checkpoint never refers to its source."""
    rewritten = []
    for meta in ckpt.inventory.meta("operator-metadata-v2"):
        relative = ckpt.location.relative(meta.path)
        staged = staging.fs.cat_file(staging.path(relative))
        shown = ckpt.display(meta.path)
        lines = _lines(staged, shown)
        body = loads_json(lines[1])
        changed = False
        for store in body.get("stateStoreInfo") or []:
            paths = store.get("stateSchemaFilePaths") or []
            moved = []
            for path in paths:
                found = _SCHEMA_FILE.search(str(path))
                if not found:
                    raise CorruptFile(f"stateSchemaFilePaths entry {path!r} is not under "
                                      "state/<op>/_stateSchema/", path=shown)
                moved.append(f"{target_url.rstrip('/')}/{found.group(1)}")
            changed |= moved != paths
            store["stateSchemaFilePaths"] = moved
        if changed:
            lines[1] = json.dumps(body, separators=(",", ":"))
            staging.write(relative, "\n".join(lines).encode())
            rewritten.append(relative)
    return rewritten
