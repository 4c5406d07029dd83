"""What the doctor says: problems, each with what Spark does on restart, and the diagnosis.

A :class:`Problem` is one thing that decides what a restart does; its severity says whether
the restart fails (``fatal``), runs with output or state at risk (``warning``), or is only
worth knowing (``info``). A fatal problem also says how a rollback must look to leave it
behind: the newest batch it may keep (``batch``), and whether a rollback can leave it
behind at all (``rollback_fixes``; a partition whose every file is gone cannot be brought
back by any command). The :class:`Diagnosis` collects them with the fix the doctor found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from statekit.state.verify import Verification

FATAL, WARNING, INFO = "fatal", "warning", "info"
"""``fatal``: the restart fails; ``warning``: it runs, but output or state is at risk (or a
statekit reader fails); ``info``: worth knowing, nothing to do."""
SEVERITY_ORDER = {FATAL: 0, WARNING: 1, INFO: 2}

SAME, LOSES, REPEATS, DIFFERS = "same", "loses", "repeats", "differs"
"""What a restart that runs ends in, against the restart of the checkpoint as Spark wrote
it: the same state and output (``same``); rows, keys or batches missing (``loses``); batches
or input that reach the state or the sinks a second time (``repeats``); other state
(``differs``)."""
OUTCOMES = (LOSES, REPEATS, DIFFERS)
NOT_CHECKED = "not checked"
"""The verdict of a restart path listed, not decoded, with nothing fatal in the listing."""

EXIT_DOCTOR_WARNINGS = 9
"""The checkpoint restarts, with warnings."""
EXIT_DOCTOR_FIXABLE = 11
"""It will not restart; the printed command makes a checkpoint that does."""
EXIT_DOCTOR_UNFIXABLE = 12
EXIT_DOCTOR_WRONG_OUTCOME = 14
"""It restarts, but into another outcome than the checkpoint as Spark wrote it: rows lost,
batches repeated or the state changed, silently."""
"""It will not restart and statekit has no command that repairs it (the remedy says what
can be done by hand)."""

SPARK_LOAD_MISSING_HDFS = "CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS"
SPARK_OPERATOR_GONE = ("STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA (or "
                       "CANNOT_LOAD_STATE_STORE when no operator metadata is left)")
SPARK_LOAD_MISSING_ROCKSDB = "CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE"
SPARK_LOAD_CORRUPT = "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED"
SPARK_CONCURRENT_LOG = "Multiple streaming queries are concurrently using …"
SPARK_RENAME_EXISTS = "Rename destination … already exists"


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
    rollback_fixes: bool = True
    """Whether a rollback into a new checkpoint leaves this problem behind (a fatal problem
    that no rollback fixes makes the checkpoint unfixable by statekit)."""
    lost: str = ""
    """What is lost for good, in words and numbers (an unfixable problem says it)."""
    outcome: str | None = None
    """What a restart that runs ends in because of this problem (:data:`OUTCOMES`);
    ``None``: nothing that differs from the checkpoint as Spark wrote it (or it does not
    restart)."""
    affects: str = ""
    """Which keys, partitions or batches the outcome touches, as a share of the whole."""


def rollback_before_version(version: int, before_what: str) -> tuple[str, int | None]:
    """``(remedy, batch)`` of a problem in state version ``version`` that a rollback leaves
    behind: a rollback to batch B loads version B + 1, so the newest batch it may keep is
    ``version - 2`` (none for the first versions: then only a backup helps)."""
    batch = version - 2
    if batch < 0:
        return "compare with a backup of the checkpoint", None
    return (f"roll back to a batch before {before_what}: the new checkpoint plans the "
            "batches after it again from the sources", batch)


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
    notes: tuple[str, ...] = field(default=())
    """What the doctor could not see and the user should know before running the fix (a
    file sink it was not told about)."""
    decoded: bool = True
    """Whether the state files a restart loads were read and decoded (else only listed)."""
    fix_searched: bool = True
    """Whether the fix was looked for (``fix_command`` ``None`` means no fix only then)."""
    unverified: tuple[str, ...] = field(default=())
    """The parts of the restart's outcome no witness could check (each with why)."""
    sink: str | None = None
    """The query's sink as far as the doctor knows it: ``file``, ``foreachBatch``,
    ``noop``, ``other``; ``None``: unknown."""
    verification: Verification | None = field(default=None, compare=False, repr=False)
    """What decoding the restart path found (``None`` when not decoded): ``report
    --decode`` shows it rather than reading the files twice."""

    @property
    def fatal(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == FATAL)

    @property
    def restarts(self) -> bool:
        return not self.fatal

    @property
    def verdict(self) -> str:
        """``will not restart``, ``restarts (with warnings)`` — or ``not checked`` when the
        state files were only listed and nothing fatal was found: damage only decoding
        sees could still stop the restart, so a listing never says *restarts*."""
        if self.fatal:
            return "will not restart"
        if not self.decoded:
            return NOT_CHECKED
        return "restarts" + (" with warnings" if self._warnings else "")

    @property
    def outcomes(self) -> tuple[str, ...] | None:
        """What the restart ends in besides the same state and output (:data:`OUTCOMES`,
        in that order); ``None`` when it does not restart, empty when it ends the same."""
        if self.fatal:
            return None
        found = {p.outcome for p in self.problems if p.outcome is not None}
        return tuple(o for o in OUTCOMES if o in found)

    @property
    def outcome(self) -> str | None:
        """``same``, or the outcomes joined (``loses, repeats``); ``None``: no restart."""
        outcomes = self.outcomes
        if outcomes is None:
            return None
        return ", ".join(outcomes) if outcomes else SAME

    @property
    def outcome_problems(self) -> tuple[Problem, ...]:
        """The problems that decide the outcome (none when it will not restart)."""
        return () if self.fatal else tuple(p for p in self.problems if p.outcome)

    @property
    def _warnings(self) -> bool:
        return any(p.severity == WARNING for p in self.problems)

    @property
    def exit_code(self) -> int:
        if self.fatal:
            fixable = self.fix_command is not None or (
                not self.fix_searched and all(p.rollback_fixes for p in self.fatal))
            return EXIT_DOCTOR_FIXABLE if fixable else EXIT_DOCTOR_UNFIXABLE
        if self.outcomes:
            return EXIT_DOCTOR_WRONG_OUTCOME
        return EXIT_DOCTOR_WARNINGS if self._warnings else 0

    @property
    def headline(self) -> str:
        """One line for every surface: the verdict and the first fatal problem (or the
        first warning)."""
        if not self.fatal and self.outcomes:
            first, *rest = self.outcome_problems
            more = f" (+{len(rest)} more)" if rest else ""
            return f"{self.verdict}, but {self.outcome}: {first.path}: {first.what}{more}"
        worst = (self.fatal or tuple(p for p in self.problems if p.severity == WARNING))
        if not worst:
            return self.verdict
        first = worst[0]
        more = f" (+{len(worst) - 1} more)" if len(worst) > 1 else ""
        return f"{self.verdict}: {first.path}: {first.what}{more}"

    @property
    def fix_reruns(self) -> str | None:
        """The batches the new checkpoint of the fix plans again from the sources
        (``batches 4…6``), when it rolls back past the newest planned batch."""
        if self.fix_batch is None:
            return None
        last = self.last_planned if self.last_planned is not None else self.fix_batch
        if last <= self.fix_batch:
            return None
        return f"batch {last}" if self.fix_batch + 1 == last else \
            f"batches {self.fix_batch + 1}…{last}"

    @property
    def codes(self) -> list[str]:
        return sorted({p.code for p in self.problems})

    def to_dict(self) -> dict[str, object]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "verification"}
        data["problems"] = [asdict(p) for p in self.problems]
        data.update(verdict=self.verdict, exit_code=self.exit_code, restarts=self.restarts,
                    headline=self.headline, outcome=self.outcome, fix_reruns=self.fix_reruns,
                    outcomes=None if self.outcomes is None else list(self.outcomes))
        return data
