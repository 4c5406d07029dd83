"""What each of the report's findings means for the person on call.

The report names a finding by its code and says what it saw; whether that matters — a slower
restart, a restart that fails, files a crash left behind — is the same sentence wherever the
finding is shown, so it lives here, below every surface: the CLI prints it beside the
finding, ``--json`` carries it, the TUI's Overview shows it.
"""

from __future__ import annotations

FINDING_HELP = {
    "snapshot-lag": "a restart replays every delta since the last snapshot: slower recovery",
    "no-snapshot": "a restart replays every delta from version 1",
    "missing-partitions": "Spark cannot load the stores of those partitions",
    "cannot-load": "the files cannot rebuild the committed version: a restart would fail",
    "orphan-files": "state files beyond the committed version (a crash or a running batch)",
    "uncommitted-batch": "a planned batch has no commit: the restart re-runs it",
    "unfinished-repartition": "a repartition batch was planned but not committed: Spark "
                              "refuses to restart until it is finished or removed",
    "corrupt-log": "an offsets or commit entry does not parse",
    "odd-log-entry": "a log entry is a folder, symlink or FIFO instead of a file",
    "missing-log": "the offsets or commits folder is gone",
    "extra-partitions": "state partitions beyond the query's partition count",
    "partition-mismatch": "operator metadata and the pinned partition count disagree",
    "damaged-file": "a state file does not decode as Spark reads it",
    "size-mismatch": "a state file's size disagrees with its checksum file",
    "not-a-file": "an entry under state/ is not a regular file",
    "clock-skew": "batch timestamps go backwards or lie in the future",
}
"""One-line meanings of the report's finding codes."""


def meaning(code: str) -> str | None:
    """What the finding ``code`` means, when statekit knows."""
    return FINDING_HELP.get(code)


def explain(code: str, message: str) -> str:
    """The finding's message plus what it means (once: not when the message says it)."""
    hint = FINDING_HELP.get(code)
    return f"{message} — {hint}" if hint and hint not in message else message
