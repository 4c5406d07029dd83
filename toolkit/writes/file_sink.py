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
from statekit.formats.jsontext import loads_json
from statekit.support.errors import BadInput, CorruptFile, UnsafeOperation

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
    batches = _log_batches(sink)
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


def _log_names(sink: Location) -> list[str]:
    log = posixpath.join(sink.root, "_spark_metadata")
    try:
        return [posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(log, detail=False)]
    except FileNotFoundError:
        raise BadInput("has no _spark_metadata folder: not a file sink's output",
                       path=sink.url) from None


def _log_batches(sink: Location) -> dict[int, str]:
    return {b: n for n in _log_names(sink) if (b := _batch_of(n)) is not None}


def _stale_checksums(sink: Location) -> dict[int, str]:
    """Hidden checksum files of entries that are gone (``.7.crc`` without ``7``): the
    re-run batch's rename of its entry fails on one (``Multiple streaming queries …``)."""
    names = _log_names(sink)
    present = set(names)
    stale = {}
    for name in names:
        if name.startswith(".") and name.endswith(".crc"):
            entry = name[1:].removesuffix(".crc")
            batch = _batch_of(entry)
            if batch is not None and entry not in present:
                stale[batch] = name
    return stale


def sink_log_after(sink: Location, batch: int) -> list[str]:
    """The entries of the sink's log after ``batch`` (names in ``_spark_metadata``) that a
    rollback to ``batch`` must take out of the log — with the checksum files left behind by
    entries after it that are gone.

    Why: a file sink *skips* every batch its log already has — without running it, so a
    stateful query writes no state version for it — and the first batch after the skipped
    ones then fails to load its state (measured with pyspark 4.3:
    ``CANNOT_LOAD_STATE_STORE``). Cut back to ``batch``, the log lets the re-run batches
    write again. Raises ``UnsafeOperation`` when the log cannot end at ``batch``: a
    compaction after it replaced entries at or before it that are gone.
    """
    batches = _log_batches(sink)
    after = sorted(b for b in batches if b > batch)
    kept_compacts = [b for b, n in batches.items() if b <= batch and n.endswith(".compact")]
    start = max(kept_compacts) if kept_compacts else 0  # a sink logs every batch from 0
    lost = [b for b in range(start, batch + 1) if b not in batches]
    if after and lost:
        raise UnsafeOperation(
            f"its log was compacted after batch {batch} and the entries of batch(es) "
            f"{', '.join(map(str, lost[:5]))} are gone: it cannot be cut back to batch {batch}",
            path=sink.url)
    stale = [name for b, name in sorted(_stale_checksums(sink).items()) if b > batch]
    return [batches[b] for b in after] + stale


def cut_sink_log(sink: Location, names: list[str], backup: str) -> str:
    """Move ``names`` out of ``_spark_metadata`` into ``<sink>/<backup>`` (a folder name
    starting with ``_``: Spark's readers skip it); returns the backup folder. The data files
    those batches wrote stay where they are, unlisted, so readers of the sink no longer see
    them — the re-run batches write their rows again."""
    log = posixpath.join(sink.root, "_spark_metadata")
    folder = posixpath.join(sink.root, backup)
    sink.fs.makedirs(folder, exist_ok=True)
    for name in reversed(names):  # newest first: an interrupted cut leaves no holes
        for moved in (name, f".{name}.crc"):  # a stale checksum would fail the rewrite
            if sink.fs.exists(posixpath.join(log, moved)):
                sink.fs.mv(posixpath.join(log, moved), posixpath.join(folder, moved))
    return sink.display(folder)
