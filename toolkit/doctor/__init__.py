"""``statekit doctor``: will this checkpoint restart, and if not, what is the safest fix?

``report`` lists what is odd about a checkpoint; the person on call needs a different answer:
*what will Spark do when the query restarts on it*, and *which one command makes it restart*.
So the doctor is a model of Spark's restart (:mod:`statekit.doctor.plan`): the files Spark
reads and writes on the way, in its order, each read the way Spark reads it
(:mod:`statekit.checkpoint.spark_reads`, :mod:`statekit.state.verify`), each rule predicting
Spark's own behaviour — the error it fails with, or that it restarts and what it then does.
The predictions are judged by Spark itself: ``benchmarks/doctor_campaign.py`` generates
faults over every file a restart touches, for every kind of checkpoint, and restarts the
query on each (``tests/spark/test_doctor_campaign.py`` runs a fixed sample of it).

The fix is a ``statekit rollback`` into a new checkpoint, to the newest committed batch
whose restart is sound (:mod:`statekit.doctor.fix`); where no rollback can help (a
partition with no file left) the doctor says what is lost and exits 12. The doctor itself
never writes and never starts a JVM.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.checkpoint.progress_log import BatchRecord
from statekit.doctor.confs import conf_problems, partitions_before_edit
from statekit.doctor.count_witness import (
    COUNTED_OPERATORS,
    count_problems,
    harmless_repeats,
    zip_problems,
)
from statekit.doctor.fix import find_fix
from statekit.doctor.operators import (
    operator_metadata_problems,
    schema_problems,
    tws_metadata_problems,
)
from statekit.doctor.outcomes import unverified_parts
from statekit.doctor.plan import RestartPlan, restart_plan
from statekit.doctor.problems import (
    EXIT_DOCTOR_FIXABLE,
    EXIT_DOCTOR_UNFIXABLE,
    EXIT_DOCTOR_WARNINGS,
    FATAL,
    INFO,
    SEVERITY_ORDER,
    WARNING,
    Diagnosis,
    Problem,
)
from statekit.doctor.progress_witness import progress_problems
from statekit.doctor.query_files import (
    QueryFiles,
    ledger_problems,
    metadata_problems,
    stale_checksum_problems,
)
from statekit.doctor.sinks import sink_log_end, sink_problems
from statekit.doctor.sources import source_problems
from statekit.doctor.state import StateCheck, stale_metadata_checksums, state_problems
from statekit.doctor.surroundings import live_problems, staging_problems
from statekit.state.verify import Progress
from statekit.state.workers import GroupRunner

__all__ = ["EXIT_DOCTOR_FIXABLE", "EXIT_DOCTOR_UNFIXABLE", "EXIT_DOCTOR_WARNINGS", "FATAL",
           "INFO", "WARNING", "Diagnosis", "Problem", "RestartPlan", "diagnose",
           "sink_log_end"]


def _state_conf(files: QueryFiles, problems: list[Problem]) -> Mapping[str, str]:
    """The confs the state is checked with: the restart's — except when Spark refuses an
    unfinished repartition before it loads any state; then the committed batch's, which is
    what a rollback keeps."""
    conf = files.newest_conf
    committed = files.plan.last_committed
    if committed is None or not any(p.code == "unfinished-repartition" for p in problems):
        return conf
    before = files.offsets_of(committed)
    return {**conf, **before.conf} if before is not None else conf


def diagnose(ckpt: Checkpoint, *, file_sink: Location | None = None, decode: bool = True,
             fix: bool = True, progress: Progress | None = None,
             runner: GroupRunner | None = None, query_operators: int | None = None,
             sink: str | None = None,
             progress_records: Mapping[int, BatchRecord] | None = None,
             now: Callable[[], float] = time.perf_counter) -> Diagnosis:
    """Predict what a restart on ``ckpt`` does, and find the safest fix.

    ``decode``: read and decode every state file the restart loads (else only their
    presence counts: what a listing shows). ``fix``: search for the rollback that fixes a
    checkpoint that will not restart. ``query_operators``: how many stateful operators the
    query runs (from its progress log), which finds the highest one's folder gone.
    ``sink``: the query's sink kind (its progress log's ``sink.description``: ``file``,
    ``foreachBatch``, ``noop``, ``other``); ``file_sink`` makes it ``file``. What a batch
    run again does to the output depends on it. ``progress_records``: the query's own
    report of each batch (its progress log), a witness of the offsets log.
    """
    started = now()
    plan = restart_plan(ckpt)
    files = QueryFiles(ckpt, plan)
    problems: list[Problem] = []
    problems += metadata_problems(ckpt)
    if file_sink is not None:
        sink = "file"
    problems += ledger_problems(ckpt, files, sink, progress_records)
    problems += stale_checksum_problems(ckpt, plan)
    problems += source_problems(ckpt, plan, files, progress_records)
    unverified: list[str] = []
    if progress_records:
        contradicted, unchecked = progress_problems(ckpt, files, progress_records)
        problems += contradicted
        unverified += unchecked
    check = StateCheck(ckpt, plan, _state_conf(files, problems), query_operators,
                       partitions_before_edit(files))
    found, verification = state_problems(ckpt, check, decode=decode, progress=progress,
                                         runner=runner)
    problems += found
    if decode and progress_records and verification is not None and not verification.fatal:
        harmless = harmless_repeats(ckpt, check, progress_records)
        problems = [_harmless(p, harmless) for p in problems]
        problems += count_problems(ckpt, check, progress_records, explained=harmless)
        problems += zip_problems(ckpt, check, progress_records)
    problems += conf_problems(ckpt, files, check)
    problems += stale_metadata_checksums(ckpt)
    problems += operator_metadata_problems(ckpt)
    problems += schema_problems(ckpt)
    problems += tws_metadata_problems(ckpt)
    problems += staging_problems(ckpt)
    if file_sink is not None:
        problems += sink_problems(ckpt, file_sink, plan)
    problems += live_problems(ckpt)
    problems = _deduplicated(problems)

    files_read = verification.files if verification else 0
    bytes_read = verification.bytes if verification else 0
    remedy = None
    if fix:
        good = set() if verification is None else {
            f.path for key in check.expected() if not _damaged_key(key, verification)
            for f in (check.files_at(key, plan.version or 0) or [])}
        remedy = find_fix(ckpt, plan, check, problems, file_sink=file_sink,
                          good_files=good, progress=progress)
        files_read += remedy.files
        bytes_read += remedy.bytes
    return Diagnosis(
        checkpoint=ckpt.location.url, last_planned=plan.last_planned,
        last_committed=plan.last_committed, restart_batch=plan.batch,
        restart_version=plan.version,
        problems=tuple(sorted(problems, key=lambda p: SEVERITY_ORDER[p.severity])),
        fix_batch=remedy.batch if remedy else None,
        fix_command=remedy.command if remedy else None, files_read=files_read,
        bytes_read=bytes_read, elapsed_s=round(now() - started, 3),
        notes=tuple(remedy.notes) if remedy else (), decoded=decode,
        fix_searched=fix,
        unverified=(*unverified, *unverified_parts(
            problems, decode=decode, sink=sink, progress=bool(progress_records),
            uncounted=[f"operator {op} ({name})" for op, name in sorted(check.names.items())
                       if name not in COUNTED_OPERATORS],
            file_sink_given=file_sink is not None or sink != "file")),
        sink=sink, verification=verification)


def _damaged_key(key: tuple[int, str, int], verification) -> bool:  # type: ignore[no-untyped-def]
    return any((d.operator_id, d.partition) == (key[0], key[2])
               for d in verification.damaged)


def _deduplicated(problems: list[Problem]) -> list[Problem]:
    """One problem per (code, path): two rules may find the same file."""
    seen: set[tuple[str, str]] = set()
    out = []
    for problem in problems:
        key = (problem.code, problem.path)
        if key not in seen:
            seen.add(key)
            out.append(problem)
    return out


def _harmless(problem: Problem, harmless: dict[str, str]) -> Problem:
    """A copy the query's own report shows changes nothing, as information."""
    why = harmless.get(problem.path)
    if why is None or problem.code not in ("state-file-copied", "state-file-late"):
        return problem
    return replace(problem, severity=INFO, what=f"{problem.what}; {why}",
                   spark="Spark loads it and restarts on the same state", remedy="", batch=None,
                   outcome=None, affects="")
