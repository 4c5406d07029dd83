"""``statekit doctor``: will this checkpoint restart, and if not, what is the safest fix?

``report`` lists what is odd about a checkpoint; the person on call needs a different answer:
*what will Spark do when the query restarts on it*, and *which one command makes it restart*.
So every rule here predicts Spark's own behaviour — the error class (or message) it fails
with, or that it restarts and what it then does — and each prediction was measured: the
fault was made in a copy of a checkpoint pyspark 4.3 wrote and the query restarted on it
(``tests/spark/test_doctor.py`` keeps doing exactly that). Some of Spark's answers are not
what the files suggest: a missing operator-metadata or schema file is rewritten on restart,
a missing ``commits/`` folder makes Spark re-run the newest batch, but a missing
``offsets/N-1`` (history, one would think) stops it, and so does a file source offset in
``offsets/N-1`` above ``offsets/N``'s (Spark replays ``getBatch(N-1, N)`` on restart).

The fix is almost always the same safe move: ``statekit rollback`` to the newest committed
batch whose logs parse and whose state version *decodes* (every file that version loads is
read, as ``report --verify`` reads the restart path), into a new checkpoint — the query then
re-runs the batches after it. The doctor searches for that batch and prints the exact
command; running it is the user's decision (the doctor only reads).

Nothing here starts a JVM: logs, listings and state files are read in pure Python.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.ledger import Ledger, LogProblem
from statekit.checkpoint.location import Location
from statekit.errors import EXIT_UNSUPPORTED, StatekitError
from statekit.formats.jsontext import loads_json
from statekit.partition_workers import GroupRunner
from statekit.repartition.rollback import RollbackChoice, rollback_choices
from statekit.repartition.source_offsets import source_kind
from statekit.repartition.staging import MARKER
from statekit.verify import DamagedFile, Progress, first_damaged, verify_restart_path

FATAL, WARNING, INFO = "fatal", "warning", "info"
"""``fatal``: the restart fails; ``warning``: it runs, but output or state is at risk (or a
statekit reader fails); ``info``: worth knowing, nothing to do."""

EXIT_DOCTOR_WARNINGS = 9
"""The checkpoint restarts, with warnings."""
EXIT_DOCTOR_FIXABLE = 11
"""It will not restart; the printed command makes a checkpoint that does."""
EXIT_DOCTOR_UNFIXABLE = 12
"""It will not restart and statekit has no command that repairs it (the remedy says what
can be done by hand)."""

SPARK_LOAD_MISSING_HDFS = "CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS"
SPARK_LOAD_MISSING_ROCKSDB = "CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE"
SPARK_LOAD_CORRUPT = "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED"


@dataclass(frozen=True)
class Problem:
    """One thing that decides what a restart does."""

    code: str
    severity: str
    path: str
    what: str
    """What is wrong, in plain words."""
    spark: str
    """What Spark does on restart, in plain words."""
    spark_error: str | None = None
    """The error class (or, for Spark's unclassified errors, the message) the restart fails
    with; ``None`` when it restarts."""
    remedy: str = ""
    batch: int | None = None
    """The newest batch a rollback may keep for this problem to go (``None``: any)."""


@dataclass(frozen=True)
class Diagnosis:
    checkpoint: str
    last_planned: int | None
    last_committed: int | None
    restart_batch: int | None
    """The batch Spark runs first on restart (an uncommitted one is run again)."""
    restart_version: int | None
    """The state version that batch loads."""
    problems: tuple[Problem, ...]
    fix_batch: int | None
    """The batch the fix rolls back to."""
    fix_command: str | None
    files_read: int
    bytes_read: int
    elapsed_s: float

    @property
    def fatal(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == FATAL)

    @property
    def verdict(self) -> str:
        if self.fatal:
            return "will not restart"
        return "restarts" + (" with warnings" if self._warnings else "")

    @property
    def _warnings(self) -> bool:
        return any(p.severity == WARNING for p in self.problems)

    @property
    def exit_code(self) -> int:
        if self.fatal:
            return EXIT_DOCTOR_FIXABLE if self.fix_command else EXIT_DOCTOR_UNFIXABLE
        return EXIT_DOCTOR_WARNINGS if self._warnings else 0

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data.update(verdict=self.verdict, exit_code=self.exit_code)
        return data


# ------------------------------------------------------------------------------ the ledger
def _log_error_of(problem: LogProblem) -> str:
    """The error Spark's log reader fails with on a file statekit could not parse."""
    message = problem.message
    if problem.exit_code == EXIT_UNSUPPORTED:
        return "INVALID_LOG_VERSION.MAX_SUPPORTED_VERSION"
    if "empty log file" in message or "first line is" in message:
        return "Log file was malformed: failed to detect the log file version line"
    if "incomplete" in message:
        return "Incomplete log file"
    return "a JSON parse error from Jackson (Unexpected character / end-of-input)"


def _ledger_problems(ckpt: Checkpoint, ledger: Ledger, last_offset: int | None,
                     last_commit: int | None) -> list[Problem]:
    found: list[Problem] = []
    offsets_shown = ckpt.display(ckpt.location.path("offsets"))
    if not ckpt.has_folder("offsets") and ckpt.has_folder("commits") and last_commit is not None:
        found.append(Problem(
            "offsets-missing", FATAL, offsets_shown,
            "the offsets log is gone while commits exist",
            "Spark plans batch 0 afresh, finds it committed already and fails an internal "
            "check", "assertion failed",
            "none from statekit: the offsets of every batch are lost. Restore offsets/ from "
            "a backup, or start the query on a new checkpoint (state is rebuilt from the "
            "sources' start)"))
    if not ckpt.has_folder("commits") and last_offset is not None:
        found.append(Problem(
            "commits-missing", WARNING, ckpt.display(ckpt.location.path("commits")),
            "the commit log is gone",
            f"Spark restarts: it re-runs batch {last_offset} with its logged offsets, on "
            f"state version {last_offset}, then carries on (the sinks get batch "
            f"{last_offset} again; a file sink skips it)", None,
            "nothing needed for the restart; statekit's readers want the commit log back"))
    for problem in ledger.problems:
        if problem.severity != "error" or problem.code in ("missing-log", "log-gap"):
            continue
        batch = problem.batch_id
        if problem.code == "missing-previous-offsets":
            found.append(Problem(
                "offsets-gap", FATAL, problem.path, problem.message,
                "Spark reads the offsets of the batch before the newest and fails",
                f"batch {batch} doesn't exist",
                "roll back to a batch whose own offsets and the ones before it are retained",
                None if batch is None else batch - 1))
        elif problem.code == "commit-without-offsets":
            found.append(Problem(
                "commit-without-offsets", FATAL, problem.path, problem.message,
                "Spark re-plans the batch and finds its logs already written",
                "CONCURRENT_STREAM_LOG_UPDATE",
                "roll back to the newest batch planned and committed", last_offset))
        elif problem.code in ("corrupt-log", "odd-log-entry"):
            folder = "commits" if "/commits/" in f"/{problem.path}" else "offsets"
            found.append(Problem(
                f"corrupt-{folder}", FATAL, problem.path, problem.message,
                f"Spark reads this {folder} entry on restart and fails",
                _log_error_of(problem) if problem.code == "corrupt-log" else
                "an I/O error reading it",
                "roll back to the newest batch whose entries parse",
                None if batch is None else batch - 1))
        else:  # bad conf, unsupported codec, truncated source list: not measured one by one
            found.append(Problem(
                problem.code, FATAL, problem.path, problem.message,
                "Spark reads this entry on restart; statekit expects it to fail (this case "
                "is not measured)", "a failure reading the logs",
                "roll back to a batch before it", None if batch is None else batch - 1))
    uncommitted = ckpt.uncommitted_batches
    if uncommitted and last_commit is not None:
        committed_parts = ledger.offsets[last_commit].shuffle_partitions \
            if last_commit in ledger.offsets else None
        newest = ledger.offsets.get(uncommitted[-1])
        if (newest is not None and committed_parts is not None
                and newest.shuffle_partitions not in (None, committed_parts)):
            found.append(Problem(
                "unfinished-repartition", FATAL,
                ckpt.display(ckpt.log_paths("offsets")[newest.batch_id]),
                f"batch {newest.batch_id} repartitions the state to "
                f"{newest.shuffle_partitions} partitions (from {committed_parts}) and never "
                "committed",
                "Spark refuses to run until the repartition is finished",
                "STREAMING_UNFINISHED_REPARTITION_DETECTED",
                "roll back to the last committed batch (drops the unfinished repartition "
                "batch); `statekit repartition` can then repartition into a new checkpoint",
                last_commit))
            return found
    if uncommitted and not any(p.severity == FATAL for p in found):
        found.append(Problem(
            "uncommitted-batch", INFO,
            ckpt.display(ckpt.log_paths("offsets")[uncommitted[-1]]),
            f"batch {uncommitted[-1]} was planned but not committed (a crash, or the query "
            "is running)",
            f"Spark runs batch {uncommitted[-1]} again with the same offsets; sinks that are "
            "not idempotent per batch id may get its rows twice", None))
    return found


# ------------------------------------------------------------------------------ the state
def _backwards_file_sources(ledger: Ledger, last_offset: int | None
                            ) -> list[tuple[str, int, int]]:
    """``(source id, logOffset in offsets/L, in offsets/L-1)`` of every file source whose
    offset goes backwards from batch L-1 to L (a hand-edited ``offsets/L``)."""
    if last_offset is None or last_offset < 1:
        return []
    current, previous = ledger.offsets.get(last_offset), ledger.offsets.get(last_offset - 1)
    if current is None or previous is None:
        return []
    before = {s.source: s.offset for s in previous.sources}
    out = []
    for source in current.sources:
        old = before.get(source.source)
        if not source.offset or not old:
            continue
        now, then = loads_json(source.offset), loads_json(old)
        if source_kind(now) == source_kind(then) == "file" and \
                then["logOffset"] > now["logOffset"]:
            out.append((source.source, now["logOffset"], then["logOffset"]))
    return out


def _offsets_order_problems(ckpt: Checkpoint, ledger: Ledger, last_offset: int | None,
                            last_commit: int | None) -> list[Problem]:
    if last_offset is None:
        return []
    committed = last_commit == last_offset
    shown = ckpt.display(ckpt.location.path("offsets", str(last_offset)))
    return [Problem(
        "offsets-backwards", FATAL, shown,
        f"file source {source} ends batch {last_offset} at logOffset {now} but batch "
        f"{last_offset - 1} at {then}: its offsets go backwards (a hand-edited entry?)",
        f"Spark calls getBatch(offsets/{last_offset - 1}, offsets/{last_offset}) on restart "
        "and the file source asserts start <= end", "assertion failed",
        (f"roll back to batch {last_offset} with --shift-by {source}/logOffset=0: statekit "
         f"lowers offsets/{last_offset - 1} to match and the query resumes at logOffset {now}"
         if committed else f"roll back to batch {last_offset - 1}"),
        batch=last_offset if committed else last_offset - 1)
        for source, now, then in _backwards_file_sources(ledger, last_offset)]


def _provider_of(instance: StoreInstance) -> str:
    return "rocksdb" if any(f.kind in ("zip", "changelog", "sst") for f in instance.files) \
        else "hdfs"


def _first_missing(instance: StoreInstance, version: int) -> str:
    """The change file Spark looks for first and does not find when ``version`` cannot be
    rebuilt: the one after the newest snapshot/zip at or below it (or version 1)."""
    base = instance.latest_snapshot(version) or 0
    present = {f.version for f in instance.files if f.kind in ("delta", "changelog")}
    kind = "changelog" if _provider_of(instance) == "rocksdb" else "delta"
    missing = next((v for v in range(base + 1, version + 1) if v not in present), version)
    return f"{missing}.{kind}"


def _state_problems(ckpt: Checkpoint, version: int, damaged: tuple[DamagedFile, ...]
                    ) -> list[Problem]:
    found: list[Problem] = []
    inventory = ckpt.inventory
    try:
        operators = ckpt.operators
    except StatekitError:  # damaged operator metadata: its own problem; go by folders
        operators = {}
    newest = ckpt.ledger.newest_readable_offset
    pinned = newest.shuffle_partitions if newest is not None else None
    for op_id in inventory.operator_ids:
        meta = operators.get(op_id)
        declared = {s.name: s.num_partitions for s in meta.stores} if meta else {}
        for store in dict.fromkeys([*inventory.stores(op_id), *declared]):
            present = set(inventory.partitions(op_id, store))
            expected = declared.get(store) or pinned or max(present, default=-1) + 1
            for partition in range(expected):
                instance = inventory.instances.get((op_id, store, partition))
                if instance is not None and instance.files_to_load(version):
                    continue
                folder = ckpt.location.path("state", str(op_id), str(partition))
                rocks = (instance is not None and _provider_of(instance) == "rocksdb") or (
                    instance is None and newest is not None and newest.provider == "rocksdb")
                missing = _first_missing(instance, version) if instance is not None else (
                    "1.changelog" if rocks else "1.delta")
                shown = ckpt.display(posixpath.join(
                    folder, *([] if store == "default" else [store]), missing))
                found.append(Problem(
                    "state-file-missing", FATAL, shown,
                    f"operator {op_id} store {store} partition {partition}: state version "
                    f"{version} cannot be rebuilt, {missing} is missing"
                    + ("" if instance is not None else " (the partition's folder is gone)"),
                    "Spark fails loading the state of that partition",
                    SPARK_LOAD_MISSING_ROCKSDB if rocks else SPARK_LOAD_MISSING_HDFS,
                    "roll back to the newest batch whose state still loads"))
    for d in damaged:
        if d.checksum_only:
            found.append(Problem(
                "checksum-file-damaged", INFO, d.path, d.message,
                "Spark restarts: Hadoop ignores a damaged checksum file when the data file "
                "reads", None))
        elif d.repaired_from is not None:
            found.append(Problem(
                "state-file-corrupt", WARNING, d.path, d.message,
                f"Spark 4.3 restarts: its automatic snapshot repair loads version "
                f"{d.repaired_from} and replays the change files after it (older Spark "
                "versions fail)", None,
                "nothing needed on Spark 4.3; on older Spark roll back to a batch before the "
                "damaged file"))
        else:
            found.append(Problem(
                "state-file-corrupt", FATAL, d.path, d.message,
                "Spark fails loading the state of that partition", SPARK_LOAD_CORRUPT,
                "roll back to the newest batch whose state still decodes"))
    return found


def _metadata_problems(ckpt: Checkpoint) -> list[Problem]:
    found: list[Problem] = []
    for op_id in ckpt.inventory.operator_ids:
        if not ckpt.inventory.stores(op_id):
            continue
        metas = [*ckpt.inventory.meta("operator-metadata", op_id),
                 *ckpt.inventory.meta("operator-metadata-v2", op_id)]
        if not metas:
            found.append(Problem(
                "operator-metadata-missing", INFO,
                ckpt.display(ckpt.location.path("state", str(op_id), "_metadata", "metadata")),
                f"operator {op_id} has no operator metadata (Spark 3.5 wrote none; or it was "
                "deleted)",
                "Spark restarts and writes it again", None,
                "nothing needed; Spark's state-metadata reader needs it until then"))
    try:
        ckpt.operators  # noqa: B018 - parses every operator metadata file
    except StatekitError as error:
        found.append(Problem(
            "operator-metadata-corrupt", WARNING, error.path or ckpt.location.url,
            error.message,
            "Spark restarts (it does not read the v1 operator metadata on restart)", None,
            "Spark's and statekit's state readers fail on it: `statekit rollback` keeps "
            "the file as it is, so restore it from a backup or let a new checkpoint write "
            "it"))
    for meta in ckpt.inventory.meta("schema"):
        from statekit.formats.schema_file import parse_schema_bytes

        shown = ckpt.display(meta.path)
        try:
            data = ckpt.read_bytes(meta.path)
            parse_schema_bytes(data, path=shown)
        except StatekitError as error:
            found.append(Problem(
                "schema-corrupt", FATAL, shown, error.message,
                "Spark fails reading the state schema", _schema_error(data),
                "in a copy of the checkpoint, delete this schema file (Spark 4.3 writes it "
                "again on restart: measured); statekit has no command for it yet"))
    return found


def _schema_error(data: bytes) -> str:
    """What Spark's schema reader fails with: the file starts with the version tag as Java's
    ``writeUTF`` writes it (a two-byte length, then ``v<N>``)."""
    size = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
    if size is None or len(data) < 2 + size:  # readUTF runs out of bytes
        return "an exception without a message (EOFException reading the version tag)"
    if not re.fullmatch(rb"v\d+", data[2:2 + size]):
        return "MALFORMED_LOG_FILE (failed to read correct log version)"
    return "an error parsing the schema's JSON (not measured)"


# ------------------------------------------------------------------------------ around it
def _staging_problems(ckpt: Checkpoint) -> list[Problem]:
    found: list[Problem] = []
    fs, root = ckpt.fs, ckpt.location.root.rstrip("/")
    parent, name = posixpath.split(root)
    staging = posixpath.join(parent, f".{name}.statekit-staging")
    for folder, inside in ((staging, False), (root, True)):
        marker = posixpath.join(folder, MARKER)
        try:
            if not fs.exists(marker):
                continue
            facts = json.loads(fs.cat_file(marker))
        except (OSError, ValueError):
            facts = {}
        argv = facts.get("argv") or []
        again = ("rerun `" + shlex.join(["statekit", *argv[1:]]) + "`"
                 if argv else "rerun the statekit command that wrote it")
        found.append(Problem(
            "unfinished-statekit-write", WARNING if not inside else FATAL,
            ckpt.display(folder),
            ("a statekit write into this folder never finished (its staging folder is still "
             "there)" if not inside else
             "this is a statekit staging folder, not a published checkpoint")
            + (f"; source {facts['source']}" if facts.get("source") else ""),
            "Spark would restart the checkpoint as it is, ignoring the staging folder"
            if not inside else "Spark would run on a checkpoint statekit never verified",
            None if not inside else "not predicted: do not restart on it",
            f"{again}: it removes its stale staging folder; or delete {folder}"))
    return found


def sink_log_end(sink: Location) -> int | None:
    """The newest batch in the file sink's log (``None``: no entries)."""
    log = posixpath.join(sink.root, "_spark_metadata")
    names = [posixpath.basename(p.rstrip("/")) for p in sink.fs.ls(log, detail=False)]
    batches = [int(n.removesuffix(".compact")) for n in names
               if n.removesuffix(".compact").isdigit()]
    return max(batches, default=None)


def _sink_problems(ckpt: Checkpoint, sink: Location, last_offset: int | None,
                   last_commit: int | None) -> list[Problem]:
    log = posixpath.join(sink.root, "_spark_metadata")
    shown = sink.display(log)
    try:
        end = sink_log_end(sink)
    except FileNotFoundError:
        return [Problem("file-sink-not-found", WARNING, shown,
                        "no _spark_metadata folder: not a file sink's output",
                        "nothing to predict for this path", None)]
    if end is None or last_commit is None:
        return []
    newest = end
    first_run = last_commit + 1
    unloadable = [i for i in ckpt.inventory.instances.values()
                  if newest >= first_run and not i.files_to_load(newest + 1)]
    if unloadable:
        rocks = _provider_of(unloadable[0]) == "rocksdb"
        return [Problem(
            "file-sink-ahead", FATAL, shown,
            f"the file sink's log has batches up to {newest}, the checkpoint committed only "
            f"up to {last_commit} (rolled back without --file-sink?)",
            f"Spark skips batches {first_run}…{newest} without running them (the sink has "
            f"them), so no state is written for them; batch {newest + 1} then fails loading "
            f"state version {newest + 1}",
            SPARK_LOAD_MISSING_ROCKSDB if rocks else SPARK_LOAD_MISSING_HDFS,
            "roll back with --file-sink: the sink's log entries after the batch move aside "
            "and the re-run batches write again", last_commit)]
    if newest < last_commit:
        lost = f"{newest + 1}…{last_commit}" if newest + 1 < last_commit else str(last_commit)
        return [Problem(
            "file-sink-behind", WARNING, shown,
            f"the file sink's log ends at batch {newest}, the checkpoint's commits at "
            f"{last_commit}",
            f"Spark restarts at batch {last_commit + 1}; the files batches {lost} wrote are "
            "not in the sink's log, so every reader of the sink (Spark reads through "
            "_spark_metadata) misses their rows", None,
            f"roll back to batch {newest}: the query re-runs batches {lost} and the sink logs "
            "them", newest)]
    planned = last_offset if last_offset is not None else last_commit
    if newest > planned:
        return [Problem(
            "file-sink-ahead", WARNING, shown,
            f"the file sink's log has batches up to {newest}, the checkpoint planned only up "
            f"to {planned} (rolled back, or another query writes to this sink)",
            f"Spark restarts, and the file sink skips writing batches {planned + 1}…{newest} "
            "(already in its log): their new output is dropped, the old stays", None,
            "fine when the re-run reads the same input as before; otherwise write to a new "
            "output path")]
    if newest > last_commit:
        return [Problem(
            "file-sink-ahead", INFO, shown,
            f"the file sink committed batch {newest}, the checkpoint did not (a crash between "
            "the two)",
            f"Spark re-runs batch {newest} and the file sink skips it: exactly once", None)]
    return []


def _live_problem(ckpt: Checkpoint) -> list[Problem]:
    from statekit.repartition.plan import looks_live

    live = looks_live(ckpt, time.time() * 1000)
    if not live:
        return []
    return [Problem("looks-live", INFO, ckpt.location.url, live,
                    "a second run on the same checkpoint is refused by Spark while this one "
                    "runs", None, "stop the query before repairing (statekit's writes refuse "
                    "while it looks live)")]


# ------------------------------------------------------------------------------ the fix
class _ChainCheck:
    """Whether every file a version loads decodes; each file read at most once."""

    def __init__(self, ckpt: Checkpoint, known_good: set[str]) -> None:
        self.ckpt = ckpt
        self.good = known_good
        self.bad: set[str] = set()
        self.files = self.bytes = 0

    def loads(self, version: int) -> bool:
        for instance in self.ckpt.inventory.instances.values():
            chain = instance.files_to_load(version)
            if not chain:
                return False
            for file in chain:
                if not self._ok(file):
                    return False
        return True

    def _ok(self, file: StateFile) -> bool:
        if file.path in self.bad:
            return False
        if file.path not in self.good:
            self.files += 1
            self.bytes += file.size
            if first_damaged(self.ckpt, [file]) is not None:
                self.bad.add(file.path)
                return False
            self.good.add(file.path)
        return True


def _fix_batch(choices: list[RollbackChoice], limit: int | None, check: _ChainCheck
               ) -> int | None:
    """The newest possible rollback batch ≤ ``limit`` whose state decodes."""
    for choice in choices:  # newest first
        if limit is not None and choice.batch > limit:
            continue
        if choice.possible and check.loads(choice.batch + 1):
            return choice.batch
    return None


def _fix_target(ckpt: Checkpoint, batch: int) -> str:
    url = ckpt.location.url.rstrip("/")
    candidate, n = f"{url}-at-{batch}", 2
    while ckpt.fs.exists(ckpt.location.fs._strip_protocol(candidate)):
        candidate, n = f"{url}-at-{batch}-{n}", n + 1
    return candidate


def diagnose(ckpt: Checkpoint, *, file_sink: Location | None = None,
             progress: Progress | None = None, runner: GroupRunner | None = None,
             now: Callable[[], float] = time.perf_counter) -> Diagnosis:
    """Predict what a restart on ``ckpt`` does, and find the safest fix."""
    started = now()
    problems: list[Problem] = []
    if not ckpt.has_metadata:
        problems.append(Problem(
            "metadata-missing", FATAL, ckpt.display(ckpt.location.path("metadata")),
            "the query-id file is missing while the logs hold batches",
            "Spark refuses to start the query", "STREAMING_CHECKPOINT_MISSING_METADATA_FILE",
            "roll back with --new-query-id: the target gets a new query id (dashboards keyed "
            "by query id see a new query)"))
    ledger = ckpt.ledger
    planned = ckpt.planned_batches
    committed = ckpt.committed_batches
    last_offset = planned[-1] if planned else None
    last_commit = committed[-1] if committed else None
    problems += _ledger_problems(ckpt, ledger, last_offset, last_commit)
    problems += _offsets_order_problems(ckpt, ledger, last_offset, last_commit)
    if last_offset is None:
        restart_batch = version = None
    elif last_commit == last_offset:
        restart_batch, version = last_offset + 1, last_offset + 1
    else:
        restart_batch, version = last_offset, last_offset
    damaged: tuple[DamagedFile, ...] = ()
    files = size = 0
    if version is not None and ckpt.has_state:
        verification = verify_restart_path(ckpt, version=version, progress=progress,
                                           runner=runner)
        damaged, files, size = verification.damaged, verification.files, verification.bytes
        problems += _state_problems(ckpt, version, damaged)
    problems += _metadata_problems(ckpt)
    problems += _staging_problems(ckpt)
    if file_sink is not None:
        problems += _sink_problems(ckpt, file_sink, last_offset, last_commit)
    problems += _live_problem(ckpt)

    fix_batch = fix_command = None
    wanted = [p for p in problems if p.severity == FATAL or p.code == "file-sink-behind"]
    # (a sink ahead needs no older batch: the rollback's --file-sink cuts its log)
    unfixable = {"offsets-missing", "schema-corrupt", "unfinished-statekit-write"}
    if wanted and not any(p.code in unfixable for p in wanted) and version is not None:
        if progress:
            progress("looking for the newest batch that loads…")
        limits = [p.batch for p in wanted if p.batch is not None]
        limit = min(limits) if limits else None
        if any(p.code in ("state-file-missing", "state-file-corrupt") for p in wanted):
            limit = min(limit if limit is not None else version - 2, version - 2)
        # the restart path of undamaged instances decoded already; a damaged instance's
        # files are read again, one at a time, as older versions are tried
        damaged_keys = _damaged_keys(ckpt, damaged)
        good = {f.path for key, instance in ckpt.inventory.instances.items()
                if key not in damaged_keys for f in instance.files_to_load(version)}
        check = _ChainCheck(ckpt, good)
        fix_batch = _fix_batch(rollback_choices(ckpt), limit, check)
        files, size = files + check.files, size + check.bytes
        if fix_batch is not None:
            sink_end = _sink_end_or_none(file_sink)
            fix_command = shlex.join([
                "statekit", "rollback", ckpt.location.url, "--to-batch", str(fix_batch),
                "--out", _fix_target(ckpt, fix_batch),
                *(["--file-sink", file_sink.url] if file_sink is not None and sink_end
                  is not None and sink_end > fix_batch else []),
                *(["--new-query-id"] if not ckpt.has_metadata else []),
                *[arg for source, _, _ in _backwards_file_sources(ledger, last_offset)
                  if fix_batch == last_offset
                  for arg in ("--shift-by", f"{source}/logOffset=0")]])
    order = {FATAL: 0, WARNING: 1, INFO: 2}
    return Diagnosis(
        checkpoint=ckpt.location.url, last_planned=last_offset, last_committed=last_commit,
        restart_batch=restart_batch, restart_version=version,
        problems=tuple(sorted(problems, key=lambda p: order[p.severity])),
        fix_batch=fix_batch, fix_command=fix_command, files_read=files, bytes_read=size,
        elapsed_s=round(now() - started, 3))


def _sink_end_or_none(sink: Location | None) -> int | None:
    if sink is None:
        return None
    try:
        return sink_log_end(sink)
    except FileNotFoundError:
        return None


def _damaged_keys(ckpt: Checkpoint, damaged: tuple[DamagedFile, ...]
                  ) -> set[tuple[int, str, int]]:
    """The store instances a damaged file belongs to (their files are read again when an
    older version is tried)."""
    by_part = {(d.operator_id, d.partition) for d in damaged}
    return {key for key in ckpt.inventory.instances if (key[0], key[2]) in by_part}

