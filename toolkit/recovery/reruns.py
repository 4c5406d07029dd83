"""What a restart does first with the batches planned before the crash and never committed:
re-run each (it costs a batch), or skip one its file sink already committed (it costs the
planning) — and which state version the restart then loads.

Apart from the load estimate because the question is the sink's and the logs', not the
state files': it reads ``_spark_metadata`` and the progress log, never a state file.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median_high

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.checkpoint.progress_log import BatchTiming, runs

SKIPPED_BATCH_S = 0.35
"""A re-planned batch whose sink already committed it, without a progress log to time a warm
batch's planning and log writes (``triggerExecution − addBatch``; benchmark: 0.35 s)."""


@dataclass(frozen=True)
class Rerun:
    """A batch planned before the crash and not committed: what the restart does with it."""

    batch: int
    action: str
    """``re-run`` (processed again, first) or ``skip`` (its sink already committed it:
    Spark re-plans it and writes nothing)."""
    seconds: float
    source: str


def file_sink_committed(sink: Location, batch: int) -> bool | None:
    """Whether the file sink at ``sink`` already committed ``batch`` (its ``_spark_metadata``
    log has ``<batch>`` or ``<batch>.compact``); None when its log cannot be read."""
    try:
        names = {str(p).rstrip("/").rsplit("/", 1)[-1]
                 for p in sink.fs.ls(sink.path("_spark_metadata"), detail=False)}
    except (OSError, ValueError):
        return None
    return str(batch) in names or f"{batch}.compact" in names


def _batch_seconds(ckpt: Checkpoint, timings: Sequence[BatchTiming] | None
                   ) -> tuple[float | None, str]:
    """What re-running a batch adds to a restart.

    The re-run is the restart's first batch and pays the JVM's cold start (as the first new
    batch would have), so what it adds is a batch *after* the cold one: the second batch of a
    run, which is still far from warm (JIT, Python workers). The progress log shows those at
    every start of the query; without a start in the log, its median batch; without a log,
    the offset log's median gap between batch starts.
    """
    if timings:
        seconds = [run[1].trigger_s for run in runs(timings) if len(run) > 1
                   and run[0].run_id is not None]
        if seconds:
            return median_high(seconds), "progress log: the second batch after a start"
        return (median_high([t.trigger_s for t in timings[-20:]]),
                "progress log: median of the last 20 batches")
    committed = ckpt.committed_batches[-12:]
    pending = ckpt.uncommitted_batches[:1]
    readable = ckpt.ledger.offsets  # a damaged old entry costs its timestamp, not the answer
    stamps = {b: readable[b] for b in [*committed, *pending] if b in readable}
    times = [ms for b in sorted(stamps) if (ms := stamps[b].timestamp_ms)]
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    if not gaps:
        return None, "unknown: no progress log and no batch timestamps"
    return median_high(gaps) / 1000, "offset log: median gap between batch starts"


def _skip_seconds(timings: Sequence[BatchTiming] | None) -> tuple[float, str]:
    """A re-planned batch that its sink already committed. It writes nothing and, as the
    restart's first batch, plans cold — but then the first new batch plans warm instead of
    cold, so what the skip adds is what a *warm* batch spends outside ``addBatch`` (planning,
    offset and commit log writes): the median over the log's batches that are not the first
    after a start; else a default."""
    if not timings:
        return SKIPPED_BATCH_S, "default for a skipped batch"
    warm = [t for run in runs(timings) for t in run[1:]][-20:] or list(timings)
    return (median_high([max(0.0, t.trigger_s - t.add_batch_s) for t in warm]),
            "progress log: a warm batch's planning and log writes")


def plan_reruns(ckpt: Checkpoint, timings: Sequence[BatchTiming] | None = None,
                sink: Location | None = None) -> tuple[tuple[Rerun, ...], int]:
    """The uncommitted batches a restart runs first, and the state version it then loads.

    Spark re-runs the newest planned batch without a commit. A file sink that already
    committed it (a crash between the sink's commit and the commit log's) makes Spark skip
    the write — nothing is loaded for it; the next batch loads the version the crashed run
    wrote. Any other re-run loads ``last commit + 1`` and processes the batch again.
    """
    committed = ckpt.last_committed_batch
    version = committed + 1 if committed is not None else 0
    reruns = []
    batch_s, batch_source = _batch_seconds(ckpt, timings)
    skipping = True
    for batch in ckpt.uncommitted_batches:
        done = file_sink_committed(sink, batch) if sink and skipping else None
        if done:
            reruns.append(Rerun(batch, "skip", *_skip_seconds(timings)))
            version = batch + 1
            continue
        skipping = False
        reruns.append(Rerun(batch, "re-run", batch_s or 0.0, batch_source))
    return tuple(reruns), version


def version_loaded(doctor_version: int | None, reruns: Sequence[Rerun], planned: int
                   ) -> int:
    """The state version the restart loads: the doctor's (its restart plan reads more than
    the logs: ``commits/`` gone, a repartition left unfinished), moved on past the batches a
    file sink already committed (which the restart skips; the doctor does not know the
    sink's log)."""
    if doctor_version is None or any(r.action == "skip" for r in reruns):
        return planned
    return doctor_version


def rerun_notes(reruns: Sequence[Rerun], sink: Location | None, version: int) -> list[str]:
    notes = []
    for rerun in reruns:
        if rerun.action == "skip":
            notes.append(f"batch {rerun.batch} was planned but not committed, and the file "
                         f"sink {sink.url if sink else '-'} already committed it: the restart "
                         f"re-plans it and writes nothing; state then loads at version {version}")
        else:
            notes.append(f"batch {rerun.batch} was planned but not committed: the restart "
                         f"re-runs it first ({rerun.source})")
    if any(r.action == "re-run" for r in reruns) and not sink:
        notes.append("if the sink already committed that batch (a file sink's "
                     "_spark_metadata/<batch>), Spark skips the re-run: give --file-sink PATH "
                     "(or a --progress-log log naming the sink) to check")
    return notes
