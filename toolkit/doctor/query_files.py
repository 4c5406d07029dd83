"""The query's own files on restart: ``metadata``, ``offsets/``, ``commits/``.

Each is read as Spark reads it (:mod:`statekit.checkpoint.spark_reads`), not as statekit's
strict parsers do: a commit entry with only its ``v1`` line restarts, a JSON line with
garbage after its value restarts, an offsets entry without a metadata line does not. Only
the entries a restart reads count (``offsets/L``, ``offsets/L-1``, ``commits/C``); damage in
older ones is history (the report lists it).
"""

from __future__ import annotations

from collections.abc import Mapping

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.progress_log import BatchRecord
from statekit.checkpoint.spark_reads import (
    SparkOffsets,
    SparkReadError,
    commit_entry,
    file_source_offset,
    offsets_entry,
    query_id,
)
from statekit.doctor.changed_files import Change, changed_since_written, log_changed
from statekit.doctor.entry_changes import TIMER_OPERATORS, commit_outcome, offsets_outcome
from statekit.doctor.outcomes import rerun_outcome
from statekit.doctor.plan import RestartPlan
from statekit.doctor.problems import (
    FATAL,
    INFO,
    SPARK_CONCURRENT_LOG,
    WARNING,
    Problem,
)
from statekit.doctor.state import operator_names
from statekit.support.errors import StatekitError

LEGACY_DEFAULTS = {
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "1",
    "spark.sql.streaming.aggregation.stateFormatVersion": "1",
    "spark.sql.streaming.join.stateFormatVersion": "1",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "false",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "true",
    "spark.sql.streaming.stateStore.encodingFormat": "unsaferow",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
}
"""Spark's ``relevantSQLConfDefaultValues``: what a conf missing from the offsets entry is
taken to be (the behaviour of checkpoints written before the conf was pinned)."""


class QueryFiles:
    """The ledger as Spark sees it: the newest entries read and parsed its way."""

    def __init__(self, ckpt: Checkpoint, plan: RestartPlan) -> None:
        self.ckpt = ckpt
        self.plan = plan
        self.offsets: dict[int, SparkOffsets] = {}
        self.offset_errors: dict[int, str] = {}
        self.commit_errors: dict[int, str] = {}
        self.changed: dict[tuple[str, int], Change] = {}
        """``{(folder, batch): how}`` for entries whose checksum file disagrees with them."""
        wanted = [b for b in (plan.last_planned, (plan.last_planned or 0) - 1)
                  if b is not None and b >= 0]
        for batch in dict.fromkeys(wanted):
            self._read_offsets(batch)
        if plan.last_committed is not None:
            self._read_commit(plan.last_committed)

    def _read(self, folder: str, batch: int) -> bytes | str | None:
        """The entry's bytes, the reason it cannot be read, or ``None`` when it is not
        there."""
        entries = self.ckpt.entries(folder)
        entry = entries.get(str(batch))
        if entry is None:
            return None
        if entry.get("type") != "file":
            return f"is not a regular file ({entry.get('type')}): Spark cannot open it"
        try:
            data = self.ckpt.read_bytes(entry["name"])
        except StatekitError as error:
            return error.message
        changed = changed_since_written(self.ckpt, entry["name"], data, entries)
        if changed is not None:
            self.changed[(folder, batch)] = changed
        return data

    def _read_offsets(self, batch: int) -> SparkOffsets | None:
        if batch in self.offsets:
            return self.offsets[batch]
        data = self._read("offsets", batch)
        if isinstance(data, bytes):
            try:
                self.offsets[batch] = offsets_entry(data)
            except SparkReadError as error:
                self.offset_errors[batch] = str(error)
        elif isinstance(data, str):
            self.offset_errors[batch] = data
        return self.offsets.get(batch)

    def _read_commit(self, batch: int) -> None:
        data = self._read("commits", batch)
        if isinstance(data, bytes):
            try:
                commit_entry(data)
            except SparkReadError as error:
                self.commit_errors[batch] = str(error)
        elif isinstance(data, str):
            self.commit_errors[batch] = data

    def offsets_of(self, batch: int) -> SparkOffsets | None:
        return self._read_offsets(batch)

    @property
    def newest_conf(self) -> Mapping[str, str]:
        """The confs the restart runs with (``OffsetSeqMetadata.setSessionConf``): the newest
        offsets entry's; a conf it lacks takes Spark's legacy default where Spark has one,
        else the session's — assumed to be what the query ran with before (the entry before
        the newest says)."""
        last = self.plan.last_planned
        entry = self.offsets.get(last) if last is not None else None
        if entry is None:
            return {}
        previous = self.offsets.get(last - 1) if last else None
        conf = dict(entry.conf)
        for key, value in (previous.conf if previous is not None else {}).items():
            if key not in conf:
                conf[key] = LEGACY_DEFAULTS.get(key, value)
        return conf

    def path(self, folder: str, batch: int | str) -> str:
        return self.ckpt.display(self.ckpt.location.path(folder, str(batch)))


def metadata_problems(ckpt: Checkpoint) -> list[Problem]:
    """The query-id file: Spark reads it first, before any log."""
    shown = ckpt.display(ckpt.location.path("metadata"))
    entry = ckpt.root_entries.get("metadata")
    has_batches = bool(ckpt.planned_batches)
    if entry is None:
        if not has_batches:
            return []
        return [Problem(
            "metadata-missing", FATAL, shown,
            "the query-id file is missing while the logs hold batches",
            "Spark refuses to start the query", "STREAMING_CHECKPOINT_MISSING_METADATA_FILE",
            "roll back with --new-query-id: the new checkpoint gets a new query id "
            "(dashboards keyed by query id see a new query); nothing else changes")]
    if entry.get("type") != "file":
        return [Problem(
            "metadata-corrupt", FATAL, shown, "is a folder, not the query-id file",
            "Spark fails opening it", "an I/O error (is a directory)",
            "roll back with --new-query-id (the new checkpoint gets a new query id)")]
    try:
        data = ckpt.read_bytes(entry["name"])
        query_id(data)
    except (SparkReadError, StatekitError) as error:
        message = error.message if isinstance(error, StatekitError) else str(error)
        return [Problem(
            "metadata-corrupt", FATAL, shown,
            f"the query-id file does not parse: {message}",
            "Spark fails reading it when the query starts", message,
            "roll back with --new-query-id: the new checkpoint gets a new query id "
            "(dashboards keyed by query id see a new query); nothing else changes")]
    changed = changed_since_written(ckpt, entry["name"], data, ckpt.root_entries)
    if changed is not None:
        # another id, same state and output: the restart runs as another query
        return [log_changed(ckpt, entry["name"], changed,
                            reads="the query runs under the query id it reads now",
                            rollback_to=None, outcome=None)]
    return []


def ledger_problems(ckpt: Checkpoint, files: QueryFiles, sink: str | None = None,
                    records: Mapping[int, BatchRecord] | None = None) -> list[Problem]:
    """The newest offsets and commit entries, the one before the newest offsets, the logs'
    folders and how they fit together. ``sink``: the query's sink kind, when known (what a
    batch run again does to the output: :mod:`statekit.doctor.outcomes`); ``records``: the
    query's progress reports (how late a changed watermark is)."""
    plan = files.plan
    found: list[Problem] = []
    last, committed = plan.last_planned, plan.last_committed
    offsets_shown = ckpt.display(ckpt.location.path("offsets"))
    if last is None:
        if committed is not None or _has_state_files(ckpt):
            found.append(Problem(
                "offsets-missing", FATAL, offsets_shown,
                "the offsets log is gone (or empty) while commits or state exist",
                "Spark plans batch 0 afresh, finds it committed already (or state it "
                "cannot place) and fails an internal check", "assertion failed",
                "none from statekit: the offsets of every batch are lost. Restore offsets/ "
                "from a backup, or start the query on a new checkpoint (every input is "
                "read again from the sources' start)",
                rollback_fixes=False,
                lost="the offsets of every batch: where each source stopped is unknown"))
        return found
    for batch, error in sorted(files.offset_errors.items()):
        role = "the newest entry" if batch == last else "the entry before the newest"
        found.append(Problem(
            "corrupt-offsets", FATAL, files.path("offsets", batch),
            f"{role} does not parse as Spark reads it: {error}",
            f"Spark reads {role} of the offsets log on restart and fails", error,
            "roll back to the newest batch whose offsets parse", batch - 1))
    if last > 0 and last - 1 not in files.offsets and last - 1 not in files.offset_errors:
        found.append(Problem(
            "offsets-gap", FATAL, files.path("offsets", last - 1),
            f"missing: a restart reads the offsets of the batch before the newest ({last})",
            "Spark reads them to know where batch "
            f"{last} started and fails", f"batch {last - 1} doesn't exist",
            "roll back to a batch whose own offsets and the ones before it are retained",
            last - 2))
    commits_folder = ckpt.has_folder("commits")
    if committed is not None:
        for batch, error in files.commit_errors.items():
            found.append(Problem(
                "corrupt-commits", FATAL, files.path("commits", batch),
                f"the newest commit entry does not parse as Spark reads it: {error}",
                "Spark reads the newest commit entry on restart and fails", error,
                "roll back to the newest batch whose entries parse", batch - 1))
        if committed > last:
            found.append(Problem(
                "commit-without-offsets", FATAL, files.path("commits", committed),
                f"batch {committed} is committed but the newest offsets entry is {last}: "
                "the logs do not belong together",
                f"Spark runs batch {last} again and fails writing its commit, which exists",
                "CONCURRENT_STREAM_LOG_UPDATE",
                "roll back to the newest batch planned and committed", last))
    outcome, affects, sink_does = rerun_outcome(sink, f"batch {last}")
    if (not commits_folder or committed is None) and ckpt.planned_batches:
        found.append(Problem(
            "commits-missing", WARNING, ckpt.display(ckpt.location.path("commits")),
            "the commit log is gone" if not commits_folder else
            "the commit log holds no entry",
            f"Spark restarts: it runs batch {last} again with its logged offsets, on state "
            f"version {last}, then carries on ({sink_does})", None,
            "nothing needed for the restart; statekit's readers want the commit log back",
            outcome=outcome, affects=affects))
    elif committed is not None and committed < last - 1:
        found.append(Problem(
            "commits-behind", WARNING, files.path("commits", committed),
            f"the newest commit is batch {committed}, the newest offsets entry {last}",
            f"Spark runs batch {last} again on state version {last} (it warns that the "
            f"logs are inconsistent; {sink_does}); the batches in between are not run "
            "again", None, outcome=outcome, affects=affects))
    found += _changed_entries(files, records or {})
    found += _offsets_source_problems(files)
    found += _unfinished_repartition(ckpt, files)
    if plan.batch == last and committed == last - 1 and _format_v2(ckpt) and \
            _no_new_data(files, last):
        found.append(Problem(
            "v2-no-data-rerun", FATAL, files.path("offsets", last),
            f"batch {last} read no new data (a batch that only moves the watermark) and "
            "never committed, in checkpoint format v2",
            f"Spark runs batch {last} again; with checkpoint format v2 the re-run records no "
            "state store checkpoint for its partitions and the commit fails (measured with "
            "pyspark 4.3)", "assertion failed: CheckpointInfo length: 0",
            f"roll back to batch {committed}: the restart plans its next batch afresh",
            committed))
    elif plan.batch == last and committed is not None and committed < last:
        found.append(Problem(
            "uncommitted-batch", INFO, files.path("offsets", last),
            f"batch {last} was planned but not committed (a crash, or the query is running)",
            f"Spark runs batch {last} again with the same offsets: {sink_does} (rows it "
            "wrote before the crash come twice from a sink that is not idempotent per batch "
            "id)", None, outcome=outcome, affects=affects))
    return found


def _changed_entries(files: QueryFiles, records: Mapping[int, BatchRecord]) -> list[Problem]:
    """Entries the restart reads that parse but differ from their checksum files."""
    found = []
    for (folder, batch), how in sorted(files.changed.items()):
        parsed = batch in files.offsets if folder == "offsets" else \
            batch not in files.commit_errors
        if not parsed:
            continue
        reads = ("the sources' positions and the confs it logs" if folder == "offsets" else
                 "the watermark it logs for the next batch")
        plan = files.plan
        if folder == "offsets":
            outcome, affects = offsets_outcome(
                how.original, how.current, rerun=batch == plan.last_planned and
                plan.last_committed != plan.last_planned)
            if batch != plan.last_planned and plan.last_committed == plan.last_planned:
                outcome, affects = None, None  # read only to prepare the sources
        else:
            seen = [r.event_max_ms for b, r in records.items()
                    if b <= batch and r.event_max_ms is not None]
            outcome, affects = commit_outcome(
                how.original, how.current, newest_event_ms=max(seen, default=None),
                timers=bool(set(operator_names(files.ckpt).values()) & TIMER_OPERATORS)
                if files.ckpt.has_state else False)
        found.append(log_changed(files.ckpt, files.ckpt.location.path(folder, str(batch)),
                                 how, reads=reads, rollback_to=batch - 1 if batch else None,
                                 outcome=outcome, affects=affects))
    return found


def _format_v2(ckpt: Checkpoint) -> bool:
    """Checkpoint format version 2: state files named ``<version>_<id>``."""
    return ckpt.has_state and any(f.unique_id for f in ckpt.inventory.all_files())


def _no_new_data(files: QueryFiles, batch: int) -> bool:
    now, before = files.offsets.get(batch), files.offsets.get(batch - 1)
    return now is not None and before is not None and now.sources == before.sources


def _has_state_files(ckpt: Checkpoint) -> bool:
    return ckpt.has_state and any(True for _ in ckpt.inventory.all_files())


def _offsets_source_problems(files: QueryFiles) -> list[Problem]:
    """The newest entry's source lines against the entry before it: the same number of
    sources, and file sources' offsets that do not go backwards (Spark calls
    ``getBatch(offsets/L-1, offsets/L)`` on restart)."""
    plan = files.plan
    last = plan.last_planned
    if last is None or last < 1:
        return []
    current, previous = files.offsets.get(last), files.offsets.get(last - 1)
    if current is None or previous is None:
        return []
    shown = files.path("offsets", last)
    if len(current.sources) != len(previous.sources):
        return [Problem(
            "offsets-sources", FATAL, shown,
            f"{len(current.sources)} source offsets where batch {last - 1} has "
            f"{len(previous.sources)} (truncated or edited?)",
            "Spark compares the number of sources in the newest entry with the query's and "
            "fails", "There are [N] sources in the checkpoint offsets and now there are [M] "
            "sources requested by the query",
            "roll back to the batch before it", last - 1)]
    found: list[Problem] = []
    for index, (now_raw, then_raw) in enumerate(zip(current.sources, previous.sources,
                                                    strict=True)):
        if now_raw is None or then_raw is None:
            continue
        now, then = _file_offset(now_raw), _file_offset(then_raw)
        file_source = _looks_like_file_source(now_raw) or _looks_like_file_source(then_raw)
        for batch, raw, value in ((last, now_raw, now), (last - 1, then_raw, then)):
            if file_source and not isinstance(value, int):
                found.append(Problem(
                    "offsets-source-corrupt", FATAL, files.path("offsets", batch),
                    f"source {index}'s offset in batch {batch} is not a file source offset: "
                    f"{raw[:80]}",
                    "the file source parses the offsets of the newest batch and the one "
                    "before it on restart and fails", "No usable value for logOffset",
                    "roll back to a batch before it", batch - 1))
        if not (isinstance(now, int) and isinstance(then, int)):
            continue
        if isinstance(now, int) and isinstance(then, int) and then > now:
            committed = plan.last_committed == last
            found.append(Problem(
                "offsets-backwards", FATAL, shown,
                f"file source {index} ends batch {last} at logOffset {now} but batch "
                f"{last - 1} at {then}: its offsets go backwards (edited by hand, or an "
                "older batch's entry copied over it?)",
                f"Spark calls getBatch(offsets/{last - 1}, offsets/{last}) on restart and "
                "the file source asserts start <= end", "assertion failed",
                f"roll back to batch {last - 1}: the query runs batch {last} again from the "
                "sources (if offsets/" f"{last} was edited on purpose to replay input, use "
                f"`statekit rollback --to-batch {last} --shift-by {index}/logOffset=0` "
                "instead, which keeps the edit)" if committed else
                f"roll back to batch {last - 1}", last - 1))
    return found


def _file_offset(raw: str) -> int | str:
    """A file source's logOffset, or why it is not one."""
    try:
        return file_source_offset(raw)
    except SparkReadError as error:
        return str(error)


def _looks_like_file_source(raw: str) -> bool:
    return "logOffset" in raw or raw.strip().isdigit()


def _unfinished_repartition(ckpt: Checkpoint, files: QueryFiles) -> list[Problem]:
    plan = files.plan
    last, committed = plan.last_planned, plan.last_committed
    if last is None or committed is None or committed >= last:
        return []
    newest = files.offsets.get(last)
    try:
        before = ckpt.ledger.offsets.get(committed)
    except StatekitError:
        before = None
    if newest is None or before is None:
        return []
    parts_now = newest.conf.get("spark.sql.shuffle.partitions")
    parts_then = before.conf.get("spark.sql.shuffle.partitions")
    if parts_now is None or parts_then is None or parts_now == parts_then:
        return []
    return [Problem(
        "unfinished-repartition", FATAL, files.path("offsets", last),
        f"batch {last} repartitions the state to {parts_now} partitions (from {parts_then}) "
        "and never committed", "Spark refuses to run until the repartition is finished",
        "STREAMING_UNFINISHED_REPARTITION_DETECTED",
        "roll back to the last committed batch (drops the unfinished repartition batch); "
        "`statekit repartition` can then repartition into a new checkpoint", committed)]


def stale_checksum_problems(ckpt: Checkpoint, plan: RestartPlan) -> list[Problem]:
    """Log entries the restart writes whose hidden checksum file is still there (the entry
    was deleted by hand, its ``.crc`` not): the rename that publishes the new entry fails."""
    if plan.batch is None:
        return []
    found: list[Problem] = []
    writes = [("commits", plan.batch)]
    if plan.replans:
        writes.append(("offsets", plan.batch))
    for folder, batch in writes:
        entries = ckpt.entries(folder)
        if str(batch) not in entries and f".{batch}.crc" in entries:
            found.append(Problem(
                "stale-checksum", FATAL,
                ckpt.display(ckpt.location.path(folder, f".{batch}.crc")),
                f"{folder}/{batch} is gone but its hidden checksum file is still there "
                "(deleted by hand?)",
                f"Spark runs batch {batch} and fails writing {folder}/{batch}: the rename "
                "into place finds the checksum file", SPARK_CONCURRENT_LOG,
                "roll back into a new checkpoint (it has no stale checksum files); or delete "
                f"the file {folder}/.{batch}.crc by hand", None))
    return found
