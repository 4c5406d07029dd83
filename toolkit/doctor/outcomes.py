"""What a restart that runs does to the output: the outcome rules that depend on the sink.

A batch the restart runs again (its commit is gone, or it never committed) reaches the sink
a second time — unless the sink is Spark's file sink, which skips a batch its own log
already has (exactly once), or the noop sink, which keeps nothing. Every other sink
(``foreachBatch``, Kafka, a table written by hand) gets the batch's rows again unless the
code behind it is idempotent per batch id. The doctor knows the sink from ``--file-sink`` or
from the query's progress log (``sink.description``); when it knows neither it says that the
re-run repeats, and that it could not check the sink.
"""

from __future__ import annotations

from collections.abc import Sequence

from statekit.doctor.problems import FATAL, REPEATS, Problem

EXACTLY_ONCE_SINKS = {"file": "the file sink skips a batch its log already has (exactly "
                              "once)",
                      "noop": "the noop sink keeps no output"}
UNKNOWN_SINK = ("which sink the query writes to (give --file-sink PATH, or the query's "
                "--progress-log): a batch run again repeats its output in every sink but "
                "the file sink")


def rerun_outcome(sink: str | None, batches: str) -> tuple[str | None, str, str]:
    """``(outcome, affects, spark)`` of a restart that runs ``batches`` (``"batch 7"``)
    again with ``sink``: ``REPEATS`` unless the sink keeps each batch once; ``spark`` says
    what the sink does, in words."""
    if sink in EXACTLY_ONCE_SINKS:
        return None, "", EXACTLY_ONCE_SINKS[sink]
    who = {"foreachBatch": "the foreachBatch function is called with it again",
           "other": "the sink gets its rows again"}.get(
        sink or "", "a sink that is not the file sink gets its rows again")
    return REPEATS, f"{batches} reaches the sink again", who


def unverified_parts(problems: Sequence[Problem], *, decode: bool, sink: str | None,
                     progress: bool = True, uncounted: Sequence[str] = (),
                     file_sink_given: bool = True) -> tuple[str, ...]:
    """What the doctor could not check about the restart's outcome, each with why.
    ``progress``: the query's progress log was given; ``uncounted``: the stateful operators
    whose change files no row count witnesses (``"operator 0 (symmetricHashJoin)"``);
    ``file_sink_given``: the file sink (when the query has one) was given."""
    if any(p.severity == FATAL for p in problems):
        return ()
    parts = []
    if not decode:
        parts.append("the state files' content (listed, not decoded: --no-decode)")
    elif not progress:
        parts.append("the state's change files and zips against the query's row counts, and "
                     "the offsets log against its reports (no --progress-log)")
    elif uncounted:
        parts.append(f"the change files of {', '.join(uncounted)} against the query's row "
                     "counts (it counts rows its own way; copies of retained versions, "
                     "files written after their commit and a join's paired stores are "
                     "checked)")
    if not file_sink_given:
        parts.append("the file sink's log (the query writes a file sink: give --file-sink)")
    if sink is None and any(p.outcome == REPEATS and p.code in RERUN_CODES
                            for p in problems):
        parts.append(UNKNOWN_SINK)
    for problem in problems:
        if problem.code == "conf-changed" and problem.outcome is None:
            parts.append(f"what the edited conf changes ({problem.path}): statekit does "
                         "not model it")
    return tuple(parts)


RERUN_CODES = ("uncommitted-batch", "commits-missing", "commits-behind")
"""The problems whose outcome is a batch run again (what the sink decides)."""
