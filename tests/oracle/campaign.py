"""The doctor campaign: each generated fault judged by a real restart, on two axes.

For one fault of one kind:

1. a fresh copy of the kind's pristine checkpoint and sink (always at the same path, so the
   absolute paths Spark writes into some files stay true) is damaged;
2. ``statekit doctor --json [--file-sink SINK] --progress-log LOG`` predicts: restarts
   (exit 0/9/14) or not (11/12) — and, for a restart, its *outcome*: ``same`` or some of
   ``loses``/``repeats``/``differs``;
3. the printed fix, if any, is run exactly as printed (the damaged checkpoint must not change);
4. the state the damaged copy's newest commit holds is read through Spark's reader (when that
   commit is the pristine one's): the state a restart loads;
5. Spark restarts the damaged checkpoint with one new input file — the judge of 2. When it
   runs, its outcome is measured against a restart of the undamaged checkpoint: the state it
   loaded and ended in (keys lost, keys added, values changed), the rows its sink holds (rows
   lost, changed, written again, new) and the batches it ran again (which reach a
   ``foreachBatch`` sink twice);
6. the query restarts on the fix's new checkpoint: it must run, and for deterministic
   queries end in the state a restart of the undamaged checkpoint ends in.

``Verdict`` keeps everything a report or a failing test needs, the measurements as numbers:
the rules that turn them into verdicts are properties, so a recorded run is judged again by
today's rules (:meth:`Verdict.from_dict`).
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import shutil
import struct
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.oracle.fault_space import Fault, enumerate_faults
from tests.oracle.kinds import KINDS, Kind, build
from tests.oracle.restart import (
    Outcome,
    Rows,
    State,
    end_state,
    newest_commit,
    progress_batches,
    run_query,
    sink_diff,
    sink_rows,
    state_diff,
)
from tests.support.trees import tree_hash


@dataclass
class FixResult:
    command: str
    exit_code: int
    stderr: str
    source_unchanged: bool
    restarted: bool | None = None
    error_line: str | None = None
    state_error: str | None = None
    """The fixed checkpoint restarted, but Spark cannot read its state back."""
    same_state: bool | None = None
    """The fixed checkpoint's end state equals the healthy restart's (``None``: not
    compared — a kind whose re-run is not deterministic, or the restart failed)."""

    @property
    def ok(self) -> bool:
        return (self.exit_code == 0 and self.source_unchanged and bool(self.restarted)
                and self.state_error is None and self.same_state is not False)


#: Doctor codes for damage Spark meets only when it reads the damaged part: the restart may
#: run, and then fails on a key in it or silently skips it in every scan.
FAILS_OR_LOSES = frozenset({"state-block-damaged"})

OUTCOMES = ("loses", "repeats", "differs")
"""What a restart that runs can do besides ending where the healthy restart ends: lose keys,
partitions or batches; write batches into the sink again; end in another state or output."""
DOCTOR_FIELDS = ("doctor_exit", "doctor_verdict", "doctor_codes", "predicted_errors",
                 "doctor_stderr", "doctor_outcome", "doctor_outcomes", "doctor_unverified",
                 "doctor_problem_outcomes")
"""The fields of a :class:`Verdict` the doctor fills (:meth:`KindCampaign.rejudge`)."""
RESTARTS = (0, 9, 14)
"""Doctor exits that say the query restarts (14: with an outcome other than ``same``)."""
WILL_NOT_RESTART = (11, 12)
DIAGNOSED = (*RESTARTS, *WILL_NOT_RESTART)
"""Doctor exits that come with a diagnosis (JSON on stdout)."""


@dataclass
class Verdict:
    id: str
    kind: str
    family: str
    role: str
    target: str
    doctor_exit: int
    doctor_verdict: str | None
    doctor_codes: list[str]
    """The codes of the doctor's fatal problems (all problems when it predicts a restart)."""
    predicted_errors: list[str]
    doctor_stderr: str
    spark_restarted: bool
    spark_error: str | None
    spark_error_text: str | None = None
    """The start of Spark's whole error (its cause chain), for reading what went wrong."""
    spark_state_error: str | None = None
    """Spark restarted the damaged checkpoint, but its state data source cannot read the
    committed state back (RocksDB reads a damaged SST data block only when a key in it is
    touched: the restart batch may pass, and the first batch or scan that reaches the block
    fails)."""
    fix: FixResult | None = None
    restart_state_same: bool | None = None
    """Spark restarted the damaged checkpoint: did it end in the healthy state? (``False``:
    it restarted, but state was silently lost or changed.)"""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    surfaces: list[str] = field(default_factory=list)
    """Where a surface (report, batches, growth, recovery, metrics, the TUI's model)
    contradicted the assessment on the damaged copy (:mod:`tests.oracle.surfaces`)."""
    sink_kind: str = "file"
    """The kind's sink: ``file``, ``foreach-batch`` or ``noop``."""
    doctor_outcome: str | None = None
    """The doctor's ``outcome``: ``same``, a comma-joined list, or ``None`` (it predicts no
    restart, or this doctor has no outcome axis)."""
    doctor_outcomes: list[str] | None = None
    """The doctor's ``outcomes`` (``[]``: same); ``None`` when its JSON has none."""
    doctor_unverified: list[str] = field(default_factory=list)
    """What the doctor says it could not verify."""
    doctor_problem_outcomes: list[list[str]] = field(default_factory=list)
    """``[code, outcome]`` of each problem the doctor gives an outcome."""
    loaded_state_diff: dict | None = None
    """The state the damaged copy's newest commit holds, read through Spark's reader before
    the restart, against the pristine checkpoint's (:class:`~tests.oracle.restart.StateDiff`
    as a dict; ``None``: not compared — another newest commit, or the reader failed)."""
    loaded_state_error: str | None = None
    """Spark's reader could not read the damaged copy's newest committed state."""
    end_state_diff: dict | None = None
    """The restart's end state against the healthy restart's (``StateDiff`` as a dict)."""
    sink_diff: dict | None = None
    """The sink's rows after the restart against after the healthy restart
    (:class:`~tests.oracle.restart.SinkDiff` as a dict)."""
    sink_error: str | None = None
    """The sink's output could not be read after the restart (a file sink's damaged log)."""
    restart_batches: list[int] | None = None
    """The batches the restart ran."""
    rerun_batches: list[int] | None = None
    """The batches the restart ran that the pristine run had already run."""

    @property
    def measured(self) -> bool:
        """The restart's outcome was measured (records before the outcome axis, or a judge
        without the healthy restart, compared the end state only)."""
        return any(v is not None for v in (self.end_state_diff, self.sink_diff,
                                           self.sink_error, self.rerun_batches))

    @property
    def spark_outcomes(self) -> list[str] | None:
        """What Spark's restart did, besides ending where the healthy restart ends
        (``[]``: the same state and output; ``None``: it failed, or was not measured):

        * ``loses``: keys the healthy state has are missing (loaded or at the end), sink
          rows are missing, the state or the sink cannot be read back;
        * ``differs``: keys the healthy state lacks, values changed, sink rows changed or
          new;
        * ``repeats``: sink rows written again (a healthy row twice), or batches the
          pristine run ran that reached a ``foreachBatch`` sink again (a file sink skips the
          batches its log has — its rows say whether any came twice; a noop sink has no
          output)."""
        if not self.spark_restarted or not self.measured:
            return None
        found: set[str] = set()
        for diff in (self.loaded_state_diff, self.end_state_diff):
            if diff:
                if diff.get("lost_keys"):
                    found.add("loses")
                if diff.get("extra_keys") or diff.get("changed_values"):
                    found.add("differs")
        if self.spark_state_error is not None or self.sink_error is not None:
            found.add("loses")
        if self.sink_diff:
            if self.sink_diff.get("missing"):
                found.add("loses")
            if self.sink_diff.get("changed") or self.sink_diff.get("other"):
                found.add("differs")
            if self.sink_diff.get("duplicates"):
                found.add("repeats")
        if self.sink_kind == "foreach-batch" and self.rerun_batches:
            found.add("repeats")
        return [o for o in OUTCOMES if o in found]

    @property
    def spark_outcome(self) -> str:
        """``fails`` (the restart stops with an error), ``changed`` (it runs, but the state it
        loads or commits, or the sink's output, is not the healthy restart's, or Spark cannot
        read them back: rows silently lost, changed or duplicated) or ``clean``."""
        if not self.spark_restarted:
            return "fails"
        if self.spark_state_error is not None or self.restart_state_same is False \
                or self.spark_outcomes:
            return "changed"
        return "clean"

    @property
    def agrees(self) -> bool:
        """The doctor's restart verdict matches Spark's: it restarts (exit 0, 9 or 14) when
        the restart runs; it will not (11/12) when the restart fails — or when it runs on a
        version whose damage the doctor names as failing-or-losing (:data:`FAILS_OR_LOSES`)
        and Spark's state comes out changed."""
        outcome = self.spark_outcome
        if self.doctor_exit in RESTARTS:
            return outcome in ("clean", "changed")
        if self.doctor_exit in WILL_NOT_RESTART:
            return outcome == "fails" or (
                outcome == "changed" and bool(set(self.doctor_codes) & FAILS_OR_LOSES))
        return False

    @property
    def doctor_expects(self) -> list[str] | None:
        """The outcomes the doctor predicts for a restart (``[]``: same), ``None`` when it
        predicts none (no restart; exit 14 without ``outcomes``). A doctor without the
        outcome axis says the same outcome by exiting 0 or 9."""
        if self.doctor_exit not in RESTARTS:
            return None
        if self.doctor_outcomes is not None:
            return [o for o in OUTCOMES if o in self.doctor_outcomes]
        return [] if self.doctor_exit in (0, 9) else None

    @property
    def outcome_agrees(self) -> bool | None:
        """The doctor's outcome matches Spark's on what the person on call must know: Spark
        failed — the doctor said it will not restart; Spark ran — both say the restart ends
        in the same state and output, or both say it does not (a run on damage the doctor
        calls fatal-or-losing: as :attr:`agrees`). Which kind of harm is
        :attr:`outcome_category_agrees`. ``None``: Spark's outcome was not measured."""
        if not self.spark_restarted:
            return self.doctor_exit in WILL_NOT_RESTART
        spark = self.spark_outcomes
        if spark is None:
            return None
        if self.doctor_exit in WILL_NOT_RESTART:
            return self.agrees
        doctor = self.doctor_expects
        if doctor is None:
            return False
        return bool(spark) == bool(doctor)

    @property
    def outcome_category_agrees(self) -> bool | None:
        """As :attr:`outcome_agrees`, and where both say the restart is not right they name
        a kind of harm in common (the state diff calls input read twice into an aggregate
        ``differs``; the doctor names the mechanism, ``repeats``: the two may differ)."""
        agrees = self.outcome_agrees
        if not agrees or not self.spark_restarted or self.doctor_exit in WILL_NOT_RESTART:
            return agrees
        spark, doctor = set(self.spark_outcomes or ()), set(self.doctor_expects or ())
        return (not spark and not doctor) or bool(spark & doctor)

    @property
    def outcome_exact(self) -> bool | None:
        """As :attr:`outcome_agrees`, but the categories must be the same set."""
        agrees = self.outcome_category_agrees
        if not agrees or not self.spark_restarted or self.doctor_exit in WILL_NOT_RESTART:
            return agrees
        return set(self.spark_outcomes or ()) == set(self.doctor_expects or ())

    @property
    def doctor_says_same(self) -> bool:
        return self.doctor_exit == 0 or self.doctor_outcome == "same" or (
            self.doctor_exit in RESTARTS and self.doctor_outcomes == [])

    @property
    def unwarned_change(self) -> bool:
        """The restart ran into another outcome than the healthy restart's (state or output
        lost, changed or written twice) and the doctor said the outcome is the same (or
        exited 0)."""
        return self.spark_outcome == "changed" and self.doctor_says_same

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        """A recorded verdict (:meth:`to_dict`), judged again by today's rules."""
        known = {f for f in cls.__dataclass_fields__}
        fields = {k: v for k, v in data.items() if k in known}
        if isinstance(fields.get("fix"), dict):
            fix_known = set(FixResult.__dataclass_fields__)
            fields["fix"] = FixResult(**{k: v for k, v in fields["fix"].items()
                                         if k in fix_known})
        return cls(**fields)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(spark_outcome=self.spark_outcome, agrees=self.agrees,
                    spark_outcomes=self.spark_outcomes, doctor_expects=self.doctor_expects,
                    outcome_agrees=self.outcome_agrees,
                    outcome_category_agrees=self.outcome_category_agrees,
                    outcome_exact=self.outcome_exact,
                    unwarned_change=self.unwarned_change,
                    fix_ok=self.fix.ok if self.fix else None)
        return data


def hadoop_crc(data: bytes, per_chunk: int = 512) -> bytes:
    """Hadoop's ``.<name>.crc`` for ``data`` (CRC32 per 512-byte chunk)."""
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + per_chunk]))
                    for i in range(0, len(data), per_chunk))
    return b"crc\x00" + struct.pack(">i", per_chunk) + sums


def age_offsets(ckpt: Path, seconds: float) -> None:
    """Move every batch's start time ``seconds`` into the past (checksums rewritten): a
    query that stopped that long ago, so no command takes it for a live one."""
    for path in (ckpt / "offsets").iterdir():
        if not path.name.isdigit():
            continue
        lines = path.read_text().split("\n")
        meta = json.loads(lines[1])
        if isinstance(meta.get("batchTimestampMs"), int):
            meta["batchTimestampMs"] -= int(seconds * 1000)
        lines[1] = json.dumps(meta, separators=(",", ":"))
        data = "\n".join(lines).encode()
        path.write_bytes(data)
        (path.parent / f".{path.name}.crc").write_bytes(hadoop_crc(data))


def statekit(args: list[str]) -> tuple[int, str, str]:
    """Run a statekit command in this process, as the console script does."""
    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(cli, "statekit", [str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


class KindCampaign:
    """One kind's pristine checkpoint, its healthy restart, and the faults judged on it."""

    def __init__(self, spark, kind: Kind | str, base: Path, seed: int = 17, *,
                 reuse: bool = False) -> None:
        """``reuse``: take the pristine checkpoint an earlier campaign left in ``base``
        (and its healthy restart, donor of newer files) instead of writing one — the
        checkpoint its recorded faults were made on (:meth:`rejudge`)."""
        self.spark = spark
        self.kind = KINDS[kind] if isinstance(kind, str) else kind
        self.base = base
        self.reused = reuse
        self.work = base / "work"
        self.pristine = base / "pristine"
        if self.work.exists():  # left by an interrupted run
            shutil.rmtree(self.work)
        if reuse:
            if not (self.pristine / "checkpoint").is_dir() or not self.next_run.is_dir():
                raise FileNotFoundError(f"{base}: no pristine checkpoint and healthy restart "
                                        "of an earlier campaign to reuse")
            self.input_dir = base / "input"
        else:
            built = build(spark, self.kind, base, seed=seed, run_in=self.work)
            self.input_dir = built.input_dir
            age_offsets(self.work / "checkpoint", 86_400)
            if self.pristine.exists():
                shutil.rmtree(self.pristine)
            self.work.rename(self.pristine)
        self.pristine_batches = frozenset(progress_batches(self.pristine / "progress.jsonl"))
        """The batches the pristine run ran (its progress log)."""
        self._healthy: State | None = None
        self._healthy_sink: Rows | None = None
        self._loaded: State | None = None

    @property
    def checkpoint(self) -> Path:
        return self.work / "checkpoint"

    @property
    def sink(self) -> Path:
        return self.work / "sink"

    def fresh_copy(self) -> None:
        if self.work.exists():
            shutil.rmtree(self.work)
        shutil.copytree(self.pristine, self.work, symlinks=True)

    def healthy_state(self) -> State:
        """The end state of a restart of the undamaged checkpoint (its sink's rows:
        :meth:`healthy_sink`)."""
        if self._healthy is None:
            self.fresh_copy()
            outcome = self.restart(self.checkpoint, self.sink)
            assert outcome.error is None, f"{self.kind.name}: healthy restart failed: " \
                                          f"{outcome.error_line}"
            self._healthy = end_state(self.spark, self.checkpoint, self.pristine / "checkpoint")
            self._healthy_sink = sink_rows(self.spark, self.kind, self.sink, self.input_dir)
            if not (self.reused and self.next_run.exists()):  # the recorded faults' donor
                if self.next_run.exists():
                    shutil.rmtree(self.next_run)
                shutil.copytree(self.checkpoint, self.next_run, symlinks=True)
        return self._healthy

    @property
    def next_run(self) -> Path:
        """The checkpoint after the healthy restart (one batch more than the pristine one):
        donor of the ``replace-newer`` faults."""
        return self.base / "next" / "checkpoint"

    def healthy_sink(self) -> Rows:
        """The rows the sink holds after a restart of the undamaged checkpoint."""
        self.healthy_state()
        assert self._healthy_sink is not None
        return self._healthy_sink

    def loaded_state(self) -> State:
        """The undamaged checkpoint's state at its newest commit: what a restart loads."""
        if self._loaded is None:
            self.fresh_copy()
            self._loaded = end_state(self.spark, self.checkpoint, self.pristine / "checkpoint")
        return self._loaded

    def faults(self, other_query: Path | None = None, *, restart_first: bool = True
               ) -> list[Fault]:
        """Every fault of the kind's pristine checkpoint (the healthy restart runs first: its
        checkpoint is the donor of newer files; ``restart_first=False``: an earlier one's)."""
        if restart_first:
            self.healthy_state()
        return enumerate_faults(self.kind.name, self.pristine / "checkpoint", other_query,
                                self.next_run)

    def restart(self, checkpoint: Path, sink: Path) -> Outcome:
        return run_query(self.spark, self.kind, checkpoint, sink, self.input_dir)

    def doctor_args(self) -> list:
        """The doctor's command line for the damaged copy: ``--file-sink`` for a file sink
        (nothing else has a sink log to hand it), the pristine run's progress log always
        (its ``sink.description`` names the sink)."""
        args: list = ["doctor", self.checkpoint]
        if self.kind.sink == "file":
            args += ["--file-sink", self.sink]
        return [*args, "--progress-log", self.pristine / "progress.jsonl", "--json"]

    def judge(self, fault: Fault, *, fixes: bool = True, compare_restarts: bool = True,
              surfaces: bool = True) -> Verdict:
        """Damage a fresh copy with ``fault`` and judge the doctor on it (``surfaces``: and
        hold every surface to the assessment on it first, JVM-free; ``compare_restarts``: and
        measure the outcome of a restart that runs against the healthy restart's)."""
        from tests.oracle.surfaces import contradictions

        started = time.perf_counter()
        compare = fixes or compare_restarts
        healthy = self.healthy_state() if compare else None
        loaded = self.loaded_state() if compare_restarts else None
        self.fresh_copy()
        fault.apply(self.checkpoint)
        contradicted = contradictions(self.checkpoint) if surfaces else []
        # the damaged restart must write the sink at its own path (a file sink's log names
        # its files by absolute path: a copy elsewhere reads only the files written there),
        # and a fix run with --file-sink changes the sink: keep the damaged one aside
        damaged_sink, fixed_sink = self.work / "sink-damaged", self.work / "sink-fixed"
        if self.sink.exists():
            shutil.copytree(self.sink, damaged_sink, symlinks=True)

        verdict, diagnosis = self._diagnose(fault, contradicted)
        fix_args = self._run_fix(verdict, diagnosis) if fixes else None

        if loaded is not None:
            self._compare_loaded(verdict, loaded)

        if damaged_sink.exists():
            if self.sink.exists():
                self.sink.rename(fixed_sink)
            damaged_sink.rename(self.sink)
        outcome = self.restart(self.checkpoint, self.sink)
        verdict.spark_restarted = outcome.restarted
        verdict.spark_error = outcome.error_line
        verdict.spark_error_text = outcome.error[:4000] if outcome.error else None
        if outcome.restarted:
            verdict.restart_batches = list(outcome.batch_ids)
            verdict.rerun_batches = sorted(set(outcome.batch_ids) & self.pristine_batches)
            state, verdict.spark_state_error = self._read_back(self.checkpoint, verdict)
            if state is not None and healthy is not None:
                verdict.restart_state_same = state == healthy
                if compare_restarts:
                    verdict.end_state_diff = state_diff(healthy, state).to_dict()
            if healthy is not None and compare_restarts:
                try:
                    rows = sink_rows(self.spark, self.kind, self.sink, self.input_dir)
                    verdict.sink_diff = sink_diff(self.healthy_sink(), rows).to_dict()
                except Exception as error:  # Spark's error is the measurement
                    verdict.sink_error = " ".join(str(error).split())[:300]

        if fixed_sink.exists():
            shutil.rmtree(self.sink, ignore_errors=True)
            fixed_sink.rename(self.sink)
        self._restart_fix(verdict, fix_args, healthy)
        verdict.seconds = round(time.perf_counter() - started, 2)
        return verdict

    def rejudge(self, fault: Fault, recorded: Verdict) -> Verdict:
        """The doctor judged again on ``fault`` against the restart ``recorded`` measured on
        the same pristine checkpoint (Spark's measurements kept, no restart of the damaged
        copy): today's doctor held to yesterday's oracle. A fix whose command changed is run
        and restarted again; an unchanged one keeps its recorded result."""
        started = time.perf_counter()
        self.fresh_copy()
        fault.apply(self.checkpoint)
        fresh, diagnosis = self._diagnose(fault, [])
        verdict = Verdict.from_dict(recorded.to_dict())
        for name in DOCTOR_FIELDS:
            setattr(verdict, name, getattr(fresh, name))
        command = diagnosis.get("fix_command") if diagnosis else None
        if command != (recorded.fix.command if recorded.fix else None):
            verdict.fix = None
            healthy = self.healthy_state()  # first: a healthy restart starts from a fresh copy
            self.fresh_copy()
            fault.apply(self.checkpoint)
            fix_args = self._run_fix(verdict, diagnosis)
            self._restart_fix(verdict, fix_args, healthy)
            verdict.notes.append("the fix changed since the recorded run: run and restarted "
                                 "again")
        verdict.seconds = round(recorded.seconds + time.perf_counter() - started, 2)
        return verdict

    def _diagnose(self, fault: Fault, contradicted: list[str]) -> tuple[Verdict, dict | None]:
        """The doctor on the damaged copy: a verdict holding its prediction only."""
        code, out, err = statekit(self.doctor_args())
        diagnosis = _json_or_none(out) if code in DIAGNOSED else None
        problems = diagnosis["problems"] if diagnosis else []
        fatal = [p for p in problems if p["severity"] == "fatal"]
        verdict = Verdict(
            id=fault.id, kind=fault.kind, family=fault.family, role=fault.role,
            target=fault.target, doctor_exit=code,
            doctor_verdict=diagnosis["verdict"] if diagnosis else None,
            doctor_codes=[p["code"] for p in (fatal or problems)],
            predicted_errors=[p["spark_error"] for p in fatal if p.get("spark_error")],
            doctor_stderr=err.strip(), spark_restarted=False, spark_error=None,
            surfaces=contradicted, sink_kind=self.kind.sink)
        if diagnosis:
            verdict.doctor_outcome = diagnosis.get("outcome")
            outcomes = diagnosis.get("outcomes")
            verdict.doctor_outcomes = list(outcomes) if isinstance(outcomes, list) else None
            verdict.doctor_unverified = [str(u) for u in diagnosis.get("unverified") or ()]
            verdict.doctor_problem_outcomes = [[p["code"], p["outcome"]] for p in problems
                                               if p.get("outcome")]
        return verdict, diagnosis

    def _run_fix(self, verdict: Verdict, diagnosis: dict | None) -> list[str] | None:
        """Run the printed fix exactly as printed (the damaged copy must not change)."""
        if not diagnosis or not diagnosis.get("fix_command"):
            return None
        fix_args = shlex.split(diagnosis["fix_command"])
        before = tree_hash(self.checkpoint)
        fix_code, _fix_out, fix_err = statekit(fix_args[1:])
        verdict.fix = FixResult(diagnosis["fix_command"], fix_code, fix_err.strip(),
                                tree_hash(self.checkpoint) == before)
        return fix_args

    def _restart_fix(self, verdict: Verdict, fix_args: list[str] | None,
                     healthy: State | None) -> None:
        """Restart the query on the fix's new checkpoint (with the sink the fix left)."""
        if verdict.fix is None or verdict.fix.exit_code != 0 or fix_args is None:
            return
        fixed = Path(fix_args[fix_args.index("--out") + 1])
        fixed_outcome = self.restart(fixed, self.sink)
        verdict.fix.restarted = fixed_outcome.restarted
        verdict.fix.error_line = fixed_outcome.error_line
        if fixed_outcome.restarted:
            state, verdict.fix.state_error = self._read_back(fixed)
            if state is not None and self.kind.deterministic and healthy is not None:
                verdict.fix.same_state = state == healthy

    def _compare_loaded(self, verdict: Verdict, loaded: State) -> None:
        """The state the damaged copy's newest commit holds against the pristine one's, when
        both name the same batch (the restart loads it); the reader's error otherwise."""
        newest = newest_commit(self.checkpoint)
        if newest is None or newest != newest_commit(self.pristine / "checkpoint"):
            return
        before = tree_hash(self.checkpoint)
        state, verdict.loaded_state_error = self._read_state(self.checkpoint, verdict, newest)
        if state is not None:
            verdict.loaded_state_diff = state_diff(loaded, state).to_dict()
        if tree_hash(self.checkpoint) != before:
            verdict.notes.append("reading the loaded state changed the damaged checkpoint")

    def _read_back(self, checkpoint: Path, verdict: Verdict | None = None
                   ) -> tuple[State | None, str | None]:
        """The committed end state as Spark's state data source reads it, or why it cannot."""
        return self._read_state(checkpoint, verdict)

    def _read_state(self, checkpoint: Path, verdict: Verdict | None, batch: int | None = None
                    ) -> tuple[State | None, str | None]:
        """The state at ``batch`` (default: the newest commit) as Spark's state data source
        reads it, or why it cannot. The reader needs operator metadata and schema files the
        query itself rewrites or does without (a damaged ``_metadata/metadata`` restarts;
        its reader fails): when it fails, it reads again a copy with the pristine ones put
        back, so what is measured is the state the query holds, not the reader's own
        prerequisites (the verdict notes it)."""
        pristine = self.pristine / "checkpoint"
        try:
            return end_state(self.spark, checkpoint, pristine, batch=batch), None
        except Exception as error:  # Spark's error is the measurement
            failure = " ".join(str(error).split())[:300]
        copy = self.work / "state-read"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(checkpoint, copy, symlinks=True)
        try:
            if not _restore_reader_files(pristine, copy):
                return None, failure
            state = end_state(self.spark, copy, pristine, batch=batch)
        except Exception:  # the state itself does not read: the first error is the one
            return None, failure
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        if verdict is not None:
            verdict.notes.append(f"the state reader needed the operator metadata and schema "
                                 f"files put back: {failure[:160]}")
        return state, None


def _restore_reader_files(pristine: Path, checkpoint: Path) -> bool:
    """Put the pristine operator metadata and schema files (``state/**/_metadata/**``,
    ``state/**/_stateSchema/**``) back into ``checkpoint`` where they differ; whether any
    did."""
    restored = False
    for source in (pristine / "state").rglob("*"):
        rel = source.relative_to(pristine)
        if not source.is_file() or not {"_metadata", "_stateSchema"} & set(rel.parts):
            continue
        target = checkpoint / rel
        if target.is_file() and target.read_bytes() == source.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        restored = True
    return restored


def _json_or_none(text: str) -> dict | None:
    try:
        return json.loads(text)
    except ValueError:
        return None

