"""The file sink's log entry for the repartition batch — so the query can keep its output.

A file sink (Parquet, JSON … with ``path``) keeps its own log, ``<output>/_spark_metadata``,
one entry per batch, and every tenth batch (by default) compacts all earlier entries into
``<batch>.compact``. The repartition batch N + 1 writes no output, but the restarted query's
compaction reads every batch's entry and fails on the missing one (``BATCH_METADATA_NOT_FOUND``
… ``_spark_metadata/<N+1>``). Spark's own in-place repartition leaves the same hole.

With ``--file-sink PATH`` statekit writes that entry after the target is published: an empty
batch (``v1``), or — when N + 1 is a compaction batch — the compaction of the entries before
it, exactly as ``CompactibleFileStreamLog`` serializes them. From then on the sink belongs
to the new checkpoint: the source checkpoint must not be restarted against it.
"""

from __future__ import annotations

import posixpath

from statekit.checkpoint.location import Location
from statekit.errors import BadInput, CorruptFile, UnsafeOperation
from statekit.formats.jsontext import loads_json

DEFAULT_COMPACT_INTERVAL = 10
"""``spark.sql.streaming.fileSink.log.compactInterval``."""


def _batch_of(name: str) -> int | None:
    stem = name.removesuffix(".compact")
    return int(stem) if stem.isdigit() else None


def _entries(data: bytes, shown: str) -> list[str]:
    lines = data.decode("utf-8").split("\n")
    if not lines or lines[0] != "v1":
        raise CorruptFile("is not a v1 file sink log entry", path=shown)
    return [line for line in lines[1:] if line.strip()]


def repartition_entry(sink: Location, batch: int) -> tuple[str, bytes]:
    """The log file (relative to the sink) and bytes for repartition batch ``batch``.

    Raises ``UnsafeOperation`` when the sink's log does not end at ``batch - 1`` (it belongs
    to another run, or the sink is ahead of the checkpoint).
    """
    log = posixpath.join(sink.root, "_spark_metadata")
    try:
        names = [posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(log, detail=False)]
    except FileNotFoundError:
        raise BadInput("has no _spark_metadata folder: not a file sink's output",
                       path=sink.url) from None
    batches = {b: n for n in names if (b := _batch_of(n)) is not None}
    if not batches:
        raise BadInput("_spark_metadata holds no batch entries", path=sink.url)
    latest = max(batches)
    if latest != batch - 1:
        raise UnsafeOperation(f"the file sink's log ends at batch {latest}, the checkpoint's "
                              f"at {batch - 1}: it does not belong to this checkpoint",
                              path=sink.url)
    compacts = sorted(b for b, n in batches.items() if n.endswith(".compact"))
    interval = compacts[0] + 1 if compacts else DEFAULT_COMPACT_INTERVAL
    if (batch + 1) % interval:
        return f"_spark_metadata/{batch}", b"v1"
    start = compacts[-1] if compacts else None
    merged: dict[str, str] = {}
    for b in range(start if start is not None else 0, batch):
        name = batches.get(b)
        if name is None:
            raise CorruptFile(f"_spark_metadata lacks batch {b}", path=sink.url)
        shown = f"{sink.url.rstrip('/')}/_spark_metadata/{name}"
        for line in _entries(sink.fs.cat_file(posixpath.join(log, name)), shown):
            entry = loads_json(line)
            if entry.get("action") == "delete":
                merged.pop(entry.get("path"), None)
            else:
                merged[entry.get("path")] = line
    body = "".join("\n" + line for line in merged.values())
    return f"_spark_metadata/{batch}.compact", ("v1" + body).encode()


def write_entry(sink: Location, relative: str, data: bytes) -> None:
    path = posixpath.join(sink.root, relative)
    if sink.fs.exists(path):
        raise UnsafeOperation(f"already has {relative}", path=sink.url)
    sink.fs.pipe(path, data)
