"""Roll a checkpoint back to an earlier committed batch — into a new checkpoint.

Spark restarts a query from its last committed batch N: it loads state version N + 1 and
plans batch N + 1 from the offsets of N. A checkpoint whose logs end at an earlier batch B
(offsets, commits and source logs up to B) and whose state files rebuild version B + 1 makes
the unchanged query reprocess every batch after B, as Kafka Streams' reset tool does for
its applications. Nothing is rewritten: the target is a *subset* of the source's files
(logs up to B, the schema and operator metadata, the state files that load B + 1), copied
through the staging folder of :mod:`statekit.writes.staging` and published with
``commits/B`` last.

Checkpoint format v2 names state files ``<version>_<uuid>``, and a retried batch leaves
files of the same version under another id: the files that load version V are those whose
id ``commits/V-1`` names (``stateUniqueIds``, per operator, partition and store), the base
zip and every changelog after it (:func:`v2_chain`). Those files are copied, under their
names, with the commits that name them, so the target's lineage is the source's.

Which batches are possible depends on what the source still holds: Spark purges state
files older than ``minBatchesToRetain`` versions, and the file source compacts its log (its
entries before a compaction may be gone). :func:`rollback_choices` says, per committed
batch, whether it is possible and why not.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.location import Location
from statekit.support.errors import BadInput, StatekitError
from statekit.writes.source_offsets import (
    OffsetChange,
    OffsetEdit,
    OffsetsRewrite,
    check_edits_applied,
    rewrite_offsets,
)
from statekit.writes.staging import Staging

_SOURCE_ENTRY = re.compile(r"^sources/[^/]+/(\d+)(\.compact)?$")


@dataclass(frozen=True)
class RollbackChoice:
    """Whether the query can restart from committed batch ``batch``, and why not."""

    batch: int
    possible: bool
    reason: str = ""


@dataclass(frozen=True)
class RollbackPlan:
    source: str
    target: str
    batch: int
    """The target's last committed batch B (the query reprocesses B + 1 onwards)."""
    last_committed: int
    """The source's last committed batch."""
    copied: tuple[str, ...]
    """Relative paths copied byte for byte; ``commits/B`` is published last."""
    state_bytes: int
    dropped_batches: tuple[int, ...]
    """Batches the source planned after B: the query runs them again."""
    new_query_id: str | None = None
    """``--new-query-id``: the id written into the target's ``metadata`` instead of a copy
    of the source's (which may be missing)."""
    file_sink: str | None = None
    sink_entries: tuple[str, ...] = ()
    """``--file-sink``: the entries of the sink's ``_spark_metadata`` after B, moved out of
    the log after publishing (:func:`statekit.writes.file_sink.sink_log_after`)."""
    offset_changes: tuple[OffsetChange, ...] = ()
    """``--set-offset`` / ``--shift-by``: where each source resumes, before and after."""
    offsets_lowered: tuple[OffsetChange, ...] = ()
    """What ``offsets/B-1`` needed lowered to match (:func:`rewrite_offsets`)."""
    rewritten: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    """Offsets entries written instead of copied (only when the offsets change)."""
    notes: tuple[str, ...] = ()
    """What a dry run would have been refused for, had it written (see ``dry_run``)."""

    @property
    def reruns(self) -> str:
        """What the restarted query runs again, as one phrase for every front end:
        ``the query runs no batch again`` / ``… batch 12 again`` / ``… batches 12…14 again``."""
        again = self.dropped_batches
        if not again:
            return "the query runs no batch again"
        if len(again) == 1:
            return f"the query runs batch {again[0]} again"
        return f"the query runs batches {again[0]}…{again[-1]} again"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["copied"] = len(self.copied)
        out["offset_changes"] = [c.to_dict() for c in self.offset_changes]
        out["offsets_lowered"] = [c.to_dict() for c in self.offsets_lowered]
        out.pop("rewritten")
        return out


def rollback_choices(ckpt: Checkpoint) -> list[RollbackChoice]:
    """Every committed batch, newest first, with whether a rollback to it is possible."""
    logs, chain = _SourceLogs(ckpt), state_chain(ckpt)
    return [_choice(ckpt, b, logs, chain)
            for b in sorted(ckpt.committed_batches, reverse=True)]


def _choice(ckpt: Checkpoint, batch: int, logs: _SourceLogs, chain: StateChain | None
            ) -> RollbackChoice:
    planned = set(ckpt.planned_batches)
    if batch not in planned:
        return RollbackChoice(batch, False, f"offsets/{batch} is missing")
    if batch > 0 and batch - 1 not in planned:
        return RollbackChoice(batch, False, (
            f"offsets/{batch - 1} is missing: Spark also reads the offsets of the batch before "
            "the last on restart"))
    ledger = ckpt.ledger
    for folder, entry, parsed in (("offsets", batch, ledger.offsets),
                                  ("offsets", batch - 1, ledger.offsets),
                                  ("commits", batch, ledger.commits)):
        if entry >= 0 and entry not in parsed:
            return RollbackChoice(batch, False, f"{folder}/{entry} does not parse (a restart "
                                                "reads it)")
    for instance in ckpt.inventory.instances.values():
        if not (chain(instance, batch + 1) if chain else instance.files_to_load(batch + 1)):
            return RollbackChoice(batch, False, (
                f"state version {batch + 1} of operator {instance.operator_id} store "
                f"{instance.store} partition {instance.partition} cannot be rebuilt from the "
                "retained files (purged, see minBatchesToRetain)"
                + (" named by the commit log (checkpoint format v2)" if chain else "")))
    gone = _missing_instances(ckpt, batch)
    if gone:
        return RollbackChoice(batch, False, gone)
    lost = logs.compacted_away(batch)
    if lost:
        return RollbackChoice(batch, False, lost)
    return RollbackChoice(batch, True)


def _missing_instances(ckpt: Checkpoint, batch: int) -> str:
    """A partition (or join store) the query loads at ``batch`` + 1 that has no state file
    at all: no rollback brings it back ("" when every one is there)."""
    from statekit.checkpoint.operators import JOIN_STORES

    entry = ckpt.ledger.offsets.get(batch)
    partitions = entry.shuffle_partitions if entry is not None else None
    if not partitions:
        return ""
    for op_id in ckpt.inventory.operator_ids:
        stores = set(ckpt.inventory.stores(op_id))
        if stores & set(JOIN_STORES):
            stores |= set(JOIN_STORES)
        for store in sorted(stores):
            for partition in range(partitions):
                instance = ckpt.inventory.instances.get((op_id, store, partition))
                if instance is None or not instance.files:
                    return (f"operator {op_id} store {store} partition {partition} has no "
                            "state file at all (deleted?): Spark cannot load it at any batch")
    return ""


StateChain = Callable[[StoreInstance, int], list[StateFile] | None]
"""An instance's files that load a version (``None``/empty: it cannot be loaded)."""


def state_chain(ckpt: Checkpoint) -> StateChain | None:
    """:func:`v2_chain` for a checkpoint format v2 checkpoint, else ``None`` (versions
    alone decide)."""
    if not any(f.unique_id for f in ckpt.inventory.all_files()):
        return None
    commits = ckpt.ledger.commits
    lineages: dict[str, dict[int, str]] = {}

    def lineage_of(file: StateFile) -> dict[int, str]:
        if file.path not in lineages:
            lineages[file.path] = changelog_lineage(ckpt, file)
        return lineages[file.path]

    def ids_of(instance: StoreInstance, version: int) -> set[str]:
        entry = commits.get(version - 1)
        ids = entry.state_unique_ids if entry is not None else None
        partitions = (ids or {}).get(str(instance.operator_id)) or []
        if instance.partition >= len(partitions):
            return set()
        stores = partitions[instance.partition]
        return {str(i) for i in (stores if isinstance(stores, list) else [stores])}

    return lambda instance, version: v2_chain(instance, version, ids_of, lineage_of)


def changelog_lineage(ckpt: Checkpoint, file: StateFile) -> dict[int, str]:
    """``{version: unique id}`` of the versions a format-v2 changelog says it follows (its
    v3/v4 header's lineage); ``{}`` when it has none or does not read."""
    from statekit.checkpoint.state_data import file_codec
    from statekit.formats.compression import raw_decompressed
    from statekit.formats.records import read_changelog

    try:
        data = ckpt.read_bytes(file.path)
        stream = raw_decompressed(io.BytesIO(data), file_codec(ckpt, data[:8]),
                                  path=ckpt.display(file.path))
        header, _ = read_changelog(stream, path=ckpt.display(file.path), spark_view=True)
    except StatekitError:
        return {}
    found: dict[int, str] = {}
    for entry in header.lineage if isinstance(header.lineage, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("version"), int):
            found[int(entry["version"])] = str(entry.get("checkpointUniqueId"))
    return found


def v2_chain(instance: StoreInstance, version: int,
             ids_of: Callable[[StoreInstance, int], set[str]],
             lineage_of: Callable[[StateFile], dict[int, str]] | None = None
             ) -> list[StateFile] | None:
    """The files that load ``version`` in checkpoint format v2: going down from
    ``version``, the changelog of the version whose id ``ids_of`` names (the commit log),
    then for each older version the id the lineage of the changelog above it names (else
    the commit log's) — as Spark follows it — until a zip so named (or version 1: from
    empty). ``None`` when one is missing."""
    changes: list[StateFile] = []
    ids = ids_of(instance, version)
    for v in range(version, 0, -1):
        named = {f.kind: f for f in instance.files
                 if f.version == v and f.unique_id in ids and f.kind in ("zip", "changelog")}
        if "zip" in named:
            return [named["zip"], *reversed(changes)]
        if "changelog" not in named:
            return None
        changes.append(named["changelog"])
        previous = lineage_of(named["changelog"]).get(v - 1) if lineage_of else None
        ids = {previous} if previous else ids_of(instance, v - 1)
    return list(reversed(changes))


class _SourceLogs:
    """The source logs' entries, listed once, and the batches each compaction lists, read
    once: ``--list`` asks about every committed batch."""

    def __init__(self, ckpt: Checkpoint) -> None:
        from statekit.writes.repartition_plan import source_log_files

        self._ckpt = ckpt
        self.entries: dict[str, dict[int, str]] = {}
        """``{source folder: {batch: relative path}}``."""
        for relative in source_log_files(ckpt):
            match = _SOURCE_ENTRY.match(relative)
            if match:
                self.entries.setdefault(relative.rsplit("/", 1)[0], {})[
                    int(match.group(1))] = relative
        self._lines: dict[str, list[int]] = {}

    def _batches_in(self, compact: str) -> set[int]:
        """The ``batchId`` of every entry a compaction file lists."""
        return set(self._entry_batches(compact))

    def files_in(self, folder: str, first: int, last: int) -> int | None:
        """How many files the log entries ``first … last`` of ``folder`` list (``None``
        when an entry is in neither its own file nor a later compaction)."""
        entries = self.entries.get(folder, {})
        total = 0
        for batch in range(max(first, 0), last + 1):
            holder = entries.get(batch) or entries.get(min(
                (b for b, p in entries.items() if b > batch and p.endswith(".compact")),
                default=-1), "")
            if not holder:
                return None
            total += sum(1 for b in self._entry_batches(holder) if b == batch)
        return total

    def _entry_batches(self, relative: str) -> list[int]:
        """The ``batchId`` of every line of one log file (an entry or a compaction)."""
        if relative not in self._lines:
            text = self._ckpt.read_bytes(self._ckpt.location.path(relative))
            found = []
            for line in text.decode("utf-8", "replace").split("\n")[1:]:
                try:
                    entry_batch = json.loads(line).get("batchId")
                except (ValueError, AttributeError):
                    continue
                if isinstance(entry_batch, int):
                    found.append(entry_batch)
            self._lines[relative] = found
        return self._lines[relative]

    def cut(self, folder: str, batch: int) -> int:
        """The newest entry of ``folder``'s log a rollback to query batch ``batch`` keeps:
        the file source's ``logOffset`` in ``offsets/<batch>`` (a source's log counts its
        own batches, which fall behind the query's at every batch without new files), else
        ``batch``."""
        from statekit.formats.jsontext import loads_json

        index = folder.rsplit("/", 1)[-1]
        try:
            entry = self._ckpt.ledger.offsets.get(batch)
        except StatekitError:
            entry = None
        if entry is None or not index.isdigit() or int(index) >= len(entry.sources):
            return batch
        raw = entry.sources[int(index)].offset
        try:
            value = loads_json(raw) if raw else None
        except ValueError:
            return batch
        if isinstance(value, dict) and isinstance(value.get("logOffset"), int):
            return int(value["logOffset"])
        return batch

    def compacted_away(self, batch: int) -> str:
        """Why a file source log cannot be cut at ``batch`` ("" when it can): a compaction
        after the cut lists entries up to it whose own files are gone."""
        for folder, entries in self.entries.items():
            batch_cut = self.cut(folder, batch)
            later = [b for b, p in entries.items() if b > batch_cut and p.endswith(".compact")]
            if not later:
                continue
            needed = {b for b in self._batches_in(entries[min(later)]) if b <= batch_cut}
            newest_kept = max((b for b, p in entries.items() if b <= batch_cut and
                               p.endswith(".compact")), default=-1)
            missing = sorted(b for b in needed if b > newest_kept and b not in entries)
            if missing:
                return (f"{folder}: the file source log was compacted at batch {min(later)} "
                        f"and its entries for batch(es) {', '.join(map(str, missing[:5]))} "
                        "are gone")
        return ""


def plan_rollback(ckpt: Checkpoint, target: Location, batch: int, *,
                  force: bool = False, now_ms: float | None = None,
                  new_query_id: str | None = None,
                  file_sink: Location | None = None,
                  offset_edits: Sequence[OffsetEdit] = (), dry_run: bool = False
                  ) -> RollbackPlan:
    """The plan to roll ``ckpt`` back to committed batch ``batch`` in ``target``.
    ``dry_run``: a live-looking query or a target with content is a note, not a refusal
    (nothing will be written).

    Raises
    ------
    BadInput
        ``batch`` is not committed, or its state or source log is no longer complete; the
        source has no ``metadata`` file and no ``new_query_id`` is given; an offset edit
        matches nothing or gives an impossible offset
        (:func:`statekit.writes.source_offsets.edit_offsets`).
    UnsafeOperation
        The query looks live, or the target is not a new, empty folder outside the source.
    """
    from statekit.writes.repartition_plan import live_refusal, target_refusal
    from statekit.writes.target import files_loading

    url = ckpt.location.url
    committed = sorted(ckpt.committed_batches)
    if batch not in committed:
        shown = f"{committed[0]}…{committed[-1]}" if committed else "none"
        raise BadInput(f"batch {batch} is not committed (committed batches: {shown})",
                       path=url)
    if not ckpt.has_metadata and new_query_id is None:
        raise BadInput("missing: Spark refuses to restart without the query-id file; pass "
                       "--new-query-id to write a new one into the target",
                       path=ckpt.display(ckpt.location.path("metadata")))
    logs, chain = _SourceLogs(ckpt), state_chain(ckpt)
    choice = _choice(ckpt, batch, logs, chain)
    if not choice.possible:
        raise BadInput(f"cannot roll back to batch {batch}: {choice.reason} "
                       "(`statekit rollback --list` shows the possible batches)", path=url)
    notes = live_refusal(ckpt, force=force, now_ms=now_ms, dry_run=dry_run) + \
        target_refusal(ckpt, target, dry_run=dry_run)
    sink_entries: list[str] = []
    if file_sink is not None:
        from statekit.writes.file_sink import sink_log_after

        sink_entries = sink_log_after(file_sink, batch)
    state = files_loading(ckpt, batch + 1, chain)
    rewrite = _edited_offsets(ckpt, logs, batch, offset_edits) if offset_edits else None
    rel = ckpt.location.relative
    copied = [] if new_query_id is not None else ["metadata"]
    copied += [f"offsets/{b}" for b in sorted(ckpt.planned_batches) if b <= batch]
    copied += [f"commits/{b}" for b in committed if b < batch]
    for folder, entries in logs.entries.items():
        cut = logs.cut(folder, batch)
        copied += [p for b, p in sorted(entries.items()) if b <= cut]
    for kind in ("schema", "schema-v3", "operator-metadata", "operator-metadata-v2"):
        copied += sorted(rel(m.path) for m in ckpt.inventory.meta(kind))
    copied += [rel(f.path) for f in state]
    copied.append(f"commits/{batch}")
    last = max(ckpt.planned_batches)
    return RollbackPlan(url, target.url, batch, committed[-1],
                        tuple(dict.fromkeys(copied)), sum(f.size for f in state),
                        tuple(range(batch + 1, last + 1)), new_query_id,
                        file_sink.url if file_sink is not None else None,
                        tuple(sink_entries),
                        rewrite.changes if rewrite else (), rewrite.lowered if rewrite else (),
                        dict(rewrite.entries) if rewrite else {}, tuple(notes))


def _edited_offsets(ckpt: Checkpoint, logs: _SourceLogs, batch: int,
                    edits: Sequence[OffsetEdit]) -> OffsetsRewrite:
    """The target's ``offsets/B`` with ``edits`` applied, bounded by the file source logs
    the target keeps (entries up to B)."""
    ends = {folder.split("/", 1)[1]: max(kept)
            for folder, entries in logs.entries.items()
            if (kept := [b for b in entries if b <= logs.cut(folder, batch)])}

    def files_between(change: OffsetChange) -> str:
        if change.kind != "file":
            return ""
        low, high = sorted((change.before, change.after))
        files = logs.files_in(f"sources/{change.source}", low + 1, high)
        return "" if files is None else f"{files} file{'s' * (files != 1)}"

    path = ckpt.location.path
    return rewrite_offsets(lambda rel: ckpt.read_bytes(path(rel)),
                           lambda rel: ckpt.display(path(rel)), batch, edits,
                           file_log_ends=ends, describe=files_between)


def write_rollback(ckpt: Checkpoint, plan: RollbackPlan, staging: Staging) -> str:
    """Copy the plan's files into ``staging``; returns the relative path of ``commits/B``,
    which :meth:`Staging.publish` moves last. transformWithState's v2 operator metadata
    still names the source's schema files (what a verification in the staging folder
    reads): :func:`statekit.writes.target.retarget_schema_paths` must point it at the
    target's own just before publishing."""
    if plan.new_query_id is not None:  # as Spark's StreamMetadata writes it
        staging.write("metadata", json.dumps({"id": plan.new_query_id},
                                             separators=(",", ":")).encode())
    for relative in plan.copied:
        if relative not in plan.rewritten:
            staging.write_chunks(relative, ckpt.read_chunks(ckpt.location.path(relative)))
    for relative, data in plan.rewritten.items():
        staging.write(relative, data)
    for relative, changes in ((f"offsets/{plan.batch}", plan.offset_changes),
                              (f"offsets/{plan.batch - 1}", plan.offsets_lowered)):
        if changes:  # read back as the restart reads it
            with staging.fs.open(staging.path(relative), "rb") as back:
                check_edits_applied(back.read(), staging.path(relative), changes)
    return f"commits/{plan.batch}"
