"""The target checkpoint's logs and metadata: copied from the source, or derived from it.

What a restart on the target needs, and no more: ``metadata``; offsets and commits up to the
last committed batch N; ``sources/``; the schema files; a repartition batch N + 1 whose
offsets entry is N's with the new ``spark.sql.shuffle.partitions`` and whose commit is N's;
operator metadata (v1, and v2 where the source has it) with the new partition count. State
files are written by the job (HDFS) or by Spark's own repartition (RocksDB).

Every file is rewritten from its parsed form only where it must change; the rest is copied
byte for byte, so anything Spark wrote that statekit does not model survives.
"""

from __future__ import annotations

import json
import re

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.logs import CONF_SHUFFLE_PARTITIONS
from statekit.errors import CorruptFile
from statekit.formats.jsontext import loads_json
from statekit.repartition.plan import RepartitionPlan
from statekit.repartition.staging import Staging

_SCHEMA_PARTITION = re.compile(r"^state/\d+/(\d+)/")


def _lines(data: bytes, shown: str) -> list[str]:
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise CorruptFile("is not UTF-8 text", path=shown) from None


def repartition_offsets(data: bytes, partitions: int, shown: str) -> bytes:
    """Offsets entry N + 1: N's, with the new shuffle-partition count pinned."""
    lines = _lines(data, shown)
    meta = loads_json(lines[1])
    meta.setdefault("conf", {})[CONF_SHUFFLE_PARTITIONS] = str(partitions)
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
            ckpt.read_bytes(offsets), plan.to_partitions, ckpt.display(offsets)))
    write_operator_metadata(ckpt, plan, staging,
                            plan.to_partitions if new_batch else plan.from_partitions)


def write_operator_metadata(ckpt: Checkpoint, plan: RepartitionPlan, staging: Staging,
                            partitions: int) -> None:
    """Operator metadata v1 and v2 with ``partitions`` (Spark's own repartition updates only
    v2, so ``state-metadata`` would still report the old count from v1)."""
    for meta in [*ckpt.inventory.meta("operator-metadata"),
                 *ckpt.inventory.meta("operator-metadata-v2")]:
        path = meta.path
        staging.write(ckpt.location.relative(path), operator_metadata(
            ckpt.read_bytes(path), partitions, ckpt.display(path)))


def commit_entry(ckpt: Checkpoint, plan: RepartitionPlan) -> tuple[str, bytes]:
    """``commits/N+1``: N's commit (the same watermark for the next batch). Written last."""
    n = plan.last_committed
    return f"commits/{n + 1}", ckpt.read_bytes(ckpt.location.path("commits", str(n)))
