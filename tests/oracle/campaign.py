"""The doctor campaign: each generated fault judged by a real restart.

For one fault of one kind:

1. a fresh copy of the kind's pristine checkpoint and sink (always at the same path, so the
   absolute paths Spark writes into some files stay true) is damaged;
2. ``statekit doctor --json --file-sink SINK`` predicts: restarts (exit 0/9) or not (11/12);
3. the printed fix, if any, is run exactly as printed (the damaged checkpoint must not change);
4. Spark restarts the damaged checkpoint with one new input file — the judge of 2;
5. the query restarts on the fix's new checkpoint: it must run, and for deterministic
   queries end in the state a restart of the undamaged checkpoint ends in.

``Verdict`` keeps everything a report or a failing test needs.
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
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.oracle.fault_space import Fault, enumerate_faults
from tests.oracle.kinds import KINDS, Kind, build
from tests.oracle.restart import Outcome, end_state, run_query
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

    @property
    def spark_outcome(self) -> str:
        """``fails`` (the restart stops with an error), ``changed`` (it runs, but the state it
        commits is not the healthy restart's, or Spark cannot read it back: rows silently
        lost, changed or duplicated) or ``clean``."""
        if not self.spark_restarted:
            return "fails"
        if self.spark_state_error is not None or self.restart_state_same is False:
            return "changed"
        return "clean"

    @property
    def agrees(self) -> bool:
        """The doctor's restart verdict matches Spark's: it restarts (exit 0 or 9) when the
        restart runs; it will not (11/12) when the restart fails — or when it runs on a
        version whose damage the doctor names as failing-or-losing (:data:`FAILS_OR_LOSES`)
        and Spark's state comes out changed."""
        outcome = self.spark_outcome
        if self.doctor_exit in (0, 9, 14):  # 14: restarts, into another outcome
            return outcome in ("clean", "changed")
        if self.doctor_exit in (11, 12):
            return outcome == "fails" or (
                outcome == "changed" and bool(set(self.doctor_codes) & FAILS_OR_LOSES))
        return False

    @property
    def unwarned_change(self) -> bool:
        """Spark restarted into another state than the healthy restart's (rows lost,
        changed or counted twice) and the doctor called the checkpoint healthy."""
        return self.doctor_exit == 0 and self.spark_outcome == "changed"

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

    def __init__(self, spark, kind: Kind | str, base: Path, seed: int = 17) -> None:
        self.spark = spark
        self.kind = KINDS[kind] if isinstance(kind, str) else kind
        self.base = base
        self.work = base / "work"
        self.pristine = base / "pristine"
        if self.work.exists():  # left by an interrupted run
            shutil.rmtree(self.work)
        built = build(spark, self.kind, base, seed=seed, run_in=self.work)
        self.input_dir = built.input_dir
        age_offsets(self.work / "checkpoint", 86_400)
        if self.pristine.exists():
            shutil.rmtree(self.pristine)
        self.work.rename(self.pristine)
        self._healthy: Counter | None = None

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

    def healthy_state(self) -> Counter:
        """The end state of a restart of the undamaged checkpoint."""
        if self._healthy is None:
            self.fresh_copy()
            outcome = self.restart(self.checkpoint, self.sink)
            assert outcome.error is None, f"{self.kind.name}: healthy restart failed: " \
                                          f"{outcome.error_line}"
            self._healthy = end_state(self.spark, self.checkpoint, self.pristine / "checkpoint")
        return self._healthy

    def faults(self, other_query: Path | None = None) -> list[Fault]:
        return enumerate_faults(self.kind.name, self.pristine / "checkpoint", other_query)

    def restart(self, checkpoint: Path, sink: Path) -> Outcome:
        return run_query(self.spark, self.kind, checkpoint, sink, self.input_dir)

    def judge(self, fault: Fault, *, fixes: bool = True, compare_restarts: bool = True,
              surfaces: bool = True) -> Verdict:
        """Damage a fresh copy with ``fault`` and judge the doctor on it (``surfaces``: and
        hold every surface to the assessment on it first, JVM-free)."""
        from tests.oracle.surfaces import contradictions

        started = time.perf_counter()
        healthy = self.healthy_state() if fixes or compare_restarts else None
        self.fresh_copy()
        fault.apply(self.checkpoint)
        contradicted = contradictions(self.checkpoint) if surfaces else []
        damaged_sink = self.work / "sink-damaged"
        shutil.copytree(self.sink, damaged_sink, symlinks=True)

        code, out, err = statekit(["doctor", self.checkpoint, "--file-sink", self.sink,
                                   "--progress-log", self.pristine / "progress.jsonl", "--json"])
        diagnosis = _json_or_none(out) if code in (0, 9, 11, 12, 14) else None
        problems = diagnosis["problems"] if diagnosis else []
        fatal = [p for p in problems if p["severity"] == "fatal"]
        verdict = Verdict(
            id=fault.id, kind=fault.kind, family=fault.family, role=fault.role,
            target=fault.target, doctor_exit=code,
            doctor_verdict=diagnosis["verdict"] if diagnosis else None,
            doctor_codes=[p["code"] for p in (fatal or problems)],
            predicted_errors=[p["spark_error"] for p in fatal if p.get("spark_error")],
            doctor_stderr=err.strip(), spark_restarted=False, spark_error=None,
            surfaces=contradicted)

        fix_args = None
        if diagnosis and diagnosis.get("fix_command") and fixes:
            fix_args = shlex.split(diagnosis["fix_command"])
            before = tree_hash(self.checkpoint)
            fix_code, _fix_out, fix_err = statekit(fix_args[1:])
            verdict.fix = FixResult(diagnosis["fix_command"], fix_code, fix_err.strip(),
                                    tree_hash(self.checkpoint) == before)

        outcome = self.restart(self.checkpoint, damaged_sink)
        verdict.spark_restarted = outcome.restarted
        verdict.spark_error = outcome.error_line
        verdict.spark_error_text = outcome.error[:4000] if outcome.error else None
        if outcome.restarted:
            state, verdict.spark_state_error = self._read_back(self.checkpoint)
            if state is not None and healthy is not None:
                verdict.restart_state_same = state == healthy

        if verdict.fix is not None and verdict.fix.exit_code == 0 and fix_args is not None:
            fixed = Path(fix_args[fix_args.index("--out") + 1])
            fixed_outcome = self.restart(fixed, self.sink)
            verdict.fix.restarted = fixed_outcome.restarted
            verdict.fix.error_line = fixed_outcome.error_line
            if fixed_outcome.restarted:
                state, verdict.fix.state_error = self._read_back(fixed)
                if state is not None and self.kind.deterministic and healthy is not None:
                    verdict.fix.same_state = state == healthy
        verdict.seconds = round(time.perf_counter() - started, 2)
        return verdict

    def _read_back(self, checkpoint: Path) -> tuple[Counter | None, str | None]:
        """The committed end state as Spark's state data source reads it, or why it cannot."""
        try:
            return end_state(self.spark, checkpoint, self.pristine / "checkpoint"), None
        except Exception as error:  # Spark's error is the verdict
            return None, " ".join(str(error).split())[:300]


def _json_or_none(text: str) -> dict | None:
    try:
        return json.loads(text)
    except ValueError:
        return None

