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
NOT_CHECKED = "not checked"
"""The verdict of a restart path listed, not decoded, with nothing fatal in the listing."""

EXIT_DOCTOR_WARNINGS = 9
"""The checkpoint restarts, with warnings."""
EXIT_DOCTOR_FIXABLE = 11
"""It will not restart; the printed command makes a checkpoint that does."""
EXIT_DOCTOR_UNFIXABLE = 12
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
    def _warnings(self) -> bool:
        return any(p.severity == WARNING for p in self.problems)

    @property
    def exit_code(self) -> int:
        if self.fatal:
            fixable = self.fix_command is not None or (
                not self.fix_searched and all(p.rollback_fixes for p in self.fatal))
            return EXIT_DOCTOR_FIXABLE if fixable else EXIT_DOCTOR_UNFIXABLE
        return EXIT_DOCTOR_WARNINGS if self._warnings else 0

    @property
    def headline(self) -> str:
        """One line for every surface: the verdict and the first fatal problem (or the
        first warning)."""
        worst = (self.fatal or tuple(p for p in self.problems if p.severity == WARNING))
        if not worst:
            return self.verdict
        first = worst[0]
        more = f" (+{len(worst) - 1} more)" if len(worst) > 1 else ""
        return f"{self.verdict}: {first.path}: {first.what}{more}"

    @property
    def codes(self) -> list[str]:
        return sorted({p.code for p in self.problems})

    def to_dict(self) -> dict[str, object]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "verification"}
        data["problems"] = [asdict(p) for p in self.problems]
        data.update(verdict=self.verdict, exit_code=self.exit_code, restarts=self.restarts,
                    headline=self.headline)
        return data
