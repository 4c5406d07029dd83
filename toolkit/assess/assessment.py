"""One assessment of a checkpoint: every answer a surface shows, computed once.

"Will it restart, which version does it load and how many keys, how long, does it meet the
RTO, is it growing, what next" is asked on every surface — the CLI's text and ``--json``,
``statekit metrics``, the TUI's Overview and Fix tab, the fleet list, the web view. When each
surface worked the answer out on its own they disagreed on a damaged checkpoint, exactly
when the person on call needs them to agree. So :func:`assess` computes each answer once,
from the one model that owns it — the restart verdict from the doctor (with whether the
state files were decoded or only listed), the loaded version's keys from the replayed
history *at that version* (not the newest files, which may be a crashed batch's), the
estimate only for a checkpoint that restarts and for the doctor's version, the RTO by
:func:`statekit.recovery.rto.within_rto` — and every surface renders the
:class:`Assessment` it returns.

A verdict from listings alone cannot see a truncated or flipped state file: when the files
were not decoded and the listing finds nothing fatal, the verdict is *not checked*, never
*restarts*.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statekit.assess.findings import explain, meaning
from statekit.doctor.problems import NOT_CHECKED
from statekit.recovery.rto import RtoJudgement, judge_rto
from statekit.support.errors import StatekitError

if TYPE_CHECKING:
    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.event_log import StatefulTask
    from statekit.checkpoint.location import Location
    from statekit.checkpoint.progress_log import BatchTiming
    from statekit.doctor.problems import Diagnosis
    from statekit.growth.analysis import GrowthReport
    from statekit.recovery.cost_model import CostModel
    from statekit.recovery.estimate import RecoveryEstimate
    from statekit.report.checkpoint_report import CheckpointReport
    from statekit.state.workers import GroupRunner

Progress = Callable[[str], None]

RESTART_VERDICTS = ("restarts", "restarts with warnings", "will not restart", NOT_CHECKED)


@dataclass(frozen=True)
class StoreLoad:
    """One store at the version a restart loads."""

    operator_id: int
    store: str
    keys: int | None
    """Live keys at that version (``None``: its history does not reach it)."""
    bytes: int | None
    """Key + value bytes of those keys (logical, uncompressed)."""


@dataclass(frozen=True)
class LoadedVersion:
    """The state version a restart loads, and what it holds."""

    version: int | None
    stores: tuple[StoreLoad, ...] = ()
    why_unknown: str | None = None
    """Why the keys are not known (``None`` when they are)."""

    @property
    def keys(self) -> int | None:
        known = [s.keys for s in self.stores]
        if self.why_unknown is not None or any(k is None for k in known):
            return None
        return sum(k for k in known if k is not None)

    @property
    def bytes(self) -> int | None:
        known = [s.bytes for s in self.stores]
        if self.why_unknown is not None or not known or any(b is None for b in known):
            return None
        return sum(b for b in known if b is not None)

    def store(self, operator_id: int, store: str) -> StoreLoad | None:
        return next((s for s in self.stores if (s.operator_id, s.store) ==
                     (operator_id, store)), None)

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "keys": self.keys, "bytes": self.bytes,
                "why_unknown": self.why_unknown,
                "stores": [{"operator_id": s.operator_id, "store": s.store, "keys": s.keys,
                            "bytes": s.bytes} for s in self.stores]}


@dataclass(frozen=True)
class ExplainedFinding:
    code: str
    severity: str
    message: str
    meaning: str | None
    text: str
    """The message with its meaning (what the surfaces print)."""


@dataclass(frozen=True)
class Assessment:
    """Everything every surface shows of one checkpoint (see the module docstring)."""

    checkpoint: str
    """As the user named it (what the next command repeats)."""
    diagnosis: Diagnosis
    report: CheckpointReport
    loaded: LoadedVersion
    findings: tuple[ExplainedFinding, ...]
    growth: GrowthReport | None = None
    growth_error: str | None = None
    """Why there is no growth analysis, when it was asked for and failed."""
    estimate: RecoveryEstimate | None = None
    estimate_error: str | None = None
    rto: RtoJudgement | None = None
    rto_s: float | None = None
    computed: frozenset[str] = field(default_factory=frozenset)
    """Which optional parts were asked for: ``growth``, ``estimate``."""

    # -- the restart --------------------------------------------------------------------

    @property
    def decoded(self) -> bool:
        return self.diagnosis.decoded

    @property
    def verdict(self) -> str:
        """The doctor's verdict; *not checked* when nothing fatal was found without reading
        the state files."""
        return self.diagnosis.verdict

    @property
    def restarts(self) -> bool | None:
        """``None``: not checked."""
        return None if self.verdict == NOT_CHECKED else self.diagnosis.restarts

    @property
    def outcome(self) -> str | None:
        """What the restart ends in (``same``, ``loses``, ``repeats``, ``differs``, joined
        when several): the doctor's; ``None`` when it will not restart."""
        return self.diagnosis.outcome

    @property
    def exit_code(self) -> int:
        """The doctor's exit code when the checkpoint will not restart, else 0: what the
        commands that are not the doctor exit with."""
        return 0 if self.diagnosis.restarts else self.diagnosis.exit_code

    @property
    def headline(self) -> str:
        """The verdict in one line (with the first problem when there is one)."""
        if self.verdict == NOT_CHECKED:
            return (f"{NOT_CHECKED}: the state files were listed, not decoded (the listing "
                    "shows no fatal problem)")
        return self.diagnosis.headline

    # -- the estimate -------------------------------------------------------------------

    @property
    def estimate_applies(self) -> bool:
        return self.diagnosis.restarts

    @property
    def next_command(self) -> str | None:
        """The one command to run next, if any."""
        ckpt = shlex.quote(self.checkpoint)
        d = self.diagnosis
        if not d.restarts:
            return d.fix_command or f"statekit doctor {ckpt}"
        if d.outcomes:
            return d.fix_command or f"statekit doctor {ckpt}"
        if self.verdict == NOT_CHECKED or any(f.severity == "error" for f in self.findings):
            return f"statekit doctor {ckpt}"
        if self.rto is not None and not self.rto.meets:
            return f"statekit recovery {ckpt} --rto {self.rto.rto_s:g}s"
        if self.growth is not None and self.growth.verdict in ("growing", "accelerating"):
            return f"statekit growth {ckpt}"
        return None

    def restart_dict(self) -> dict[str, object]:
        d = self.diagnosis
        return {"verdict": self.verdict, "restarts": self.restarts, "exit_code": self.exit_code,
                "doctor_exit_code": d.exit_code, "headline": self.headline,
                "decoded": d.decoded, "codes": d.codes, "fix_command": d.fix_command,
                "outcome": d.outcome, "outcomes": None if d.outcomes is None else
                list(d.outcomes), "unverified": list(d.unverified),
                "outcome_problems": [{"code": p.code, "path": p.path, "outcome": p.outcome,
                                      "affects": p.affects}
                                     for p in d.outcome_problems],
                "restart_batch": d.restart_batch, "restart_version": d.restart_version,
                "last_committed": d.last_committed,
                "fatal": [{"code": p.code, "path": p.path, "what": p.what,
                           "spark_error": p.spark_error, "lost": p.lost} for p in d.fatal]}

    def estimate_dict(self) -> dict[str, object] | None:
        e = self.estimate
        if e is None:
            return None
        return {"estimate_s": e.estimate_s, "low_s": e.low_s, "high_s": e.high_s,
                "state_load_s": e.state_load_s, "rerun_s": e.rerun_s, "version": e.version,
                "cores": e.cores}

    def to_dict(self) -> dict[str, object]:
        """What ``--json`` of every command carries as ``"assessment"``."""
        return {"checkpoint": self.checkpoint, "restart": self.restart_dict(),
                "loaded": self.loaded.to_dict(), "estimate": self.estimate_dict(),
                "estimate_applies": self.estimate_applies,
                "estimate_error": self.estimate_error,
                "rto": self.rto.to_dict() if self.rto is not None else None,
                "growth": None if self.growth is None else {
                    "verdict": self.growth.verdict,
                    "outlook": self.growth.outlook.to_dict() if self.growth.outlook else None},
                "growth_error": self.growth_error,
                "findings": [{"code": f.code, "severity": f.severity, "message": f.message,
                              "meaning": f.meaning} for f in self.findings],
                "next": self.next_command}


def loaded_version(version: int | None, growth: GrowthReport | None,
                   growth_error: str | None = None) -> LoadedVersion:
    """What the stores hold at ``version`` (the version a restart loads), from the replayed
    history at exactly that version."""
    if version is None:
        return LoadedVersion(None, (), "the restart loads no state version")
    if growth is None:
        return LoadedVersion(version, (), growth_error or "the history was not replayed")
    stores = []
    missing = []
    for s in growth.stores:
        at = next((v for v in s.history.versions if v.version == version), None)
        if at is None:
            if not s.history.versions and version == 0:
                stores.append(StoreLoad(s.operator_id, s.store, 0, 0))
                continue
            last = s.history.versions[-1].version if s.history.versions else None
            missing.append(f"operator {s.operator_id} store {s.store}'s history "
                           + (f"ends at version {last}" if last is not None else "is empty")
                           + (f" ({s.history.damaged})" if s.history.damaged else ""))
            stores.append(StoreLoad(s.operator_id, s.store, None, None))
            continue
        stores.append(StoreLoad(s.operator_id, s.store, at.keys, at.bytes))
    why = f"version {version} is not in the replayed history: " + "; ".join(missing) \
        if missing else None
    return LoadedVersion(version, tuple(stores), why)


def explained(report: CheckpointReport) -> tuple[ExplainedFinding, ...]:
    return tuple(ExplainedFinding(f.code, f.severity, f.message, meaning(f.code),
                                  explain(f.code, f.message)) for f in report.findings)


@dataclass(frozen=True)
class EstimateOptions:
    """What ``statekit recovery``'s options change in the estimate."""

    cores: int
    model: CostModel | None = None
    timings: Sequence[BatchTiming] | None = None
    sink: Location | None = None
    current_min_deltas: int | None = None
    executors: int = 1
    memory_limit: int | None = None
    tasks: Sequence[StatefulTask] | None = None
    """Spark's event log's stateful tasks: each past restart's slowest partition, timed."""


def assess(ckpt: Checkpoint, *, shown: str | None = None, decode: bool = True,
           fix: bool = True, growth: bool = True, estimate: EstimateOptions | None = None,
           rto_s: float | None = None, file_sink: Location | None = None,
           report_options: Mapping[str, Any] | None = None,
           progress: Progress | None = None, runner: GroupRunner | None = None,
           diagnosis: Diagnosis | None = None,
           growth_report: GrowthReport | None = None,
           growth_error: str | None = None,
           listed_report: CheckpointReport | None = None) -> Assessment:
    """Assess ``ckpt`` once for every surface.

    ``decode``: the doctor reads and decodes every state file a restart loads (through the
    decode cache); else the verdict is *not checked* unless the listing alone finds a fatal
    problem. ``growth``: replay the history (the loaded version's keys and the growth
    verdict). ``estimate``: estimate the restart (only when it restarts) with these options;
    ``rto_s`` is judged against it. ``report_options``: ``operator``, ``partition``,
    ``min_deltas`` of the file-level report. ``diagnosis``, ``growth_report``: the doctor's
    and the growth analysis, when the caller already has them for this very checkpoint
    (``statekit growth`` analyses with its own options); ``growth_error``: why the caller's
    growth analysis failed (it is not tried again); ``listed_report``: the report the caller
    built from the listing (no ``report_options``), completed here with what decoding found
    instead of built again (the fleet list and the TUI show it before the assessment)."""
    from statekit.doctor import diagnose
    from statekit.report.checkpoint_report import build_report, with_verification

    if diagnosis is None:
        diagnosis = diagnose(ckpt, decode=decode, fix=fix, progress=progress, runner=runner,
                             file_sink=file_sink)
    if listed_report is not None and not report_options:
        report = with_verification(listed_report, diagnosis.verification)
    else:
        report = build_report(ckpt, **dict(report_options or {}),
                              verification=diagnosis.verification, progress=progress)
    computed = set()
    grown = None
    if growth_error is not None:
        computed.add("growth")
    elif growth_report is not None:
        computed.add("growth")
        grown = growth_report
    elif growth:
        computed.add("growth")
        from statekit.growth.analysis import analyse

        try:
            grown = analyse(ckpt, on_progress=progress,
                            executors=estimate.executors if estimate else 1,
                            executor_memory=estimate.memory_limit if estimate else None)
        except StatekitError as error:
            growth_error = str(error)
    version = diagnosis.restart_version
    if estimate is not None and diagnosis.restarts:  # a file sink's skipped batches count
        from statekit.recovery.reruns import plan_reruns, version_loaded

        reruns, planned = plan_reruns(ckpt, estimate.timings, estimate.sink or file_sink)
        version = version_loaded(version, reruns, planned)
    loaded = loaded_version(version, grown, growth_error) if "growth" in computed else \
        LoadedVersion(version, (), "the history was not replayed")
    recovery = estimate_error = None
    if estimate is not None:
        computed.add("estimate")
        if diagnosis.restarts:
            from statekit.recovery.estimate import estimate_recovery

            try:
                recovery = estimate_recovery(
                    ckpt, cores=estimate.cores, model=estimate.model,
                    timings=estimate.timings, sink=estimate.sink or file_sink, rto_s=rto_s,
                    current_min_deltas=estimate.current_min_deltas,
                    executors=estimate.executors, memory_limit=estimate.memory_limit,
                    version=version, loaded_rows=loaded.keys, tasks=estimate.tasks)
            except StatekitError as error:
                estimate_error = str(error)
    rto = judge_rto(recovery.high_s if recovery is not None else None, rto_s)
    return Assessment(shown or ckpt.location.url, diagnosis, report, loaded,
                      explained(report), grown, growth_error, recovery, estimate_error, rto,
                      rto_s, frozenset(computed))
