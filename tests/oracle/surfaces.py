"""Every surface shows the one assessment: the doctor's verdict, the RTO, the loaded keys.

``report``, ``batches``, ``growth``, ``recovery`` (text and ``--json``), ``metrics`` and the
TUI's model each run on a (damaged) checkpoint and are held to:

- **the restart verdict** of ``statekit doctor`` (the restart path decoded; pyspark 4.3
  judged the doctor, the campaign proves that part) — in their JSON, in the restart line
  of their text, in metrics' stateset, and in their exit codes; a surface run with
  ``--no-decode`` says *not checked* (or the listing's *will not restart*), never
  *restarts*;
- **the loaded version's key count**: the same number (or the same "unknown") from growth,
  recovery, metrics and the TUI, and the number their text prints;
- **the RTO judgement** for one RTO between the estimate and the high end of its range
  (where the rules used to differ): recovery's JSON and text, metrics and the TUI agree, and
  with the rule (the high end within the RTO);
- no restart estimate for a checkpoint that will not restart; no traceback; one stderr line;
  nothing written into the checkpoint.

The TUI's screens render the same object (tests/tui/test_surfaces_agree.py checks the text
they show through Pilot).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.oracle.campaign import statekit
from tests.support.trees import tree_hash

CORES = 2
"""Every surface estimates with the same task slots, so their RTO judgements compare."""

Ran = dict[tuple[str, ...], tuple[int, str, str]]


def _json(text: str) -> dict:
    def refuse(constant: str) -> object:
        raise AssertionError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def surface_commands(ckpt: Path) -> dict[str, list]:
    """The commands whose output the oracle reads (the fault corpus runs the same ones and
    hands their results over)."""
    return {
        "doctor": ["doctor", ckpt, "--json"],
        "doctor-listed": ["doctor", ckpt, "--json", "--no-decode"],
        "report": ["report", ckpt, "--json"],
        "report-text": ["report", ckpt],
        "report-listed": ["report", ckpt, "--json", "--no-decode"],
        "batches": ["batches", ckpt, "--json"],
        "batches-text": ["batches", ckpt],
        "growth": ["growth", ckpt, "--json"],
        "growth-text": ["growth", ckpt],
        "recovery": ["recovery", ckpt, "--json", "--cores", CORES],
    }


def contradictions(ckpt: Path, ran: Ran | None = None) -> list[str]:
    """Where a surface disagrees with the assessment on ``ckpt`` ([] when none does).
    ``ran``: what commands already printed on this very checkpoint, by their arguments (as
    strings) — those are not run again."""
    before = tree_hash(ckpt)
    found: list[str] = []
    ran = ran or {}

    def result(args: list) -> tuple[int, str, str]:
        key = tuple(str(a) for a in args)
        if key not in ran:
            ran[key] = statekit(args)
        return ran[key]

    results = {name: result(args) for name, args in surface_commands(ckpt).items()}
    for name, (_code, _out, err) in results.items():
        if "Traceback" in err or "internal error" in err:
            found.append(f"{name}: {err.strip()[:300]}")
        if err and err.count("\n") > 1:
            found.append(f"{name}: more than one stderr line: {err[:300]!r}")
    code, out, err = results["doctor"]
    if code not in (0, 9, 11, 12, 14):  # the checkpoint cannot be read at all
        for name, (other, _o, _e) in results.items():
            if other in (0, 9):
                found.append(f"{name} exits {other} where the doctor cannot read it ({err})")
        return found + _unchanged(ckpt, before)
    doctor = _json(out)
    assessments = {}
    for name in ("report", "batches", "growth", "recovery"):
        problems, assessment = _decoded_surface(name, results[name], doctor)
        found += problems
        if assessment is not None:
            assessments[name] = assessment
    listed = _json(results["doctor-listed"][1])
    if listed["verdict"] != ("will not restart" if not listed["restarts"] else "not checked"):
        found.append(f"doctor --no-decode says {listed['verdict']!r}")
    found += _listed_surface(results["report-listed"], listed)
    for name in ("report-text", "batches-text", "growth-text"):
        found += _restart_line(name, results[name], doctor)
    keys = {name: a["loaded"]["keys"] for name, a in assessments.items()
            if name in ("growth", "recovery")}
    if doctor["restarts"]:  # the restart line shows the keys of a version that loads
        found += _growth_text_keys(results["growth-text"], keys.get("growth"))
    rto = _rto_between(assessments.get("recovery"))
    judged: dict[str, bool | None] = {}
    if doctor["restarts"] and rto is not None:
        code, out, err = result(["recovery", ckpt, "--json", "--cores", CORES,
                                 "--rto", f"{rto}s"])
        if code == 0:
            data = _json(out)
            judged["recovery"] = data["rto"]["meets"] if data.get("rto") else None
            truth = data["high_s"] <= rto
            if judged["recovery"] is not truth:
                found.append(f"recovery says meets={judged['recovery']} for RTO {rto} s with "
                             f"a range up to {data['high_s']} s (the rule: {truth})")
            keys["recovery-rto"] = data["assessment"]["loaded"]["keys"]
        code, out, err = result(["recovery", ckpt, "--cores", CORES, "--rto", f"{rto}s"])
        flat = " ".join(out.split())
        word = {True: "meets the RTO", False: "MISSES the RTO"}.get(judged.get("recovery"))
        if word and word not in flat:
            found.append(f"recovery's text does not say {word!r}: {flat[:300]}")
    metrics_args = ["metrics", ckpt, "--cores", CORES] + (
        ["--rto", f"{rto}s"] if rto is not None else [])
    metric_problems, metric_keys, metric_meets = _metrics(result(metrics_args), doctor)
    found += metric_problems
    judged["metrics"] = metric_meets
    recovery = assessments.get("recovery")
    if doctor["restarts"] and recovery is not None and metric_keys is not None:
        # per store: the loaded version's keys, and no series for a store whose keys are
        # unknown
        wanted = {(s["operator_id"], s["store"]): s["keys"]
                  for s in recovery["loaded"]["stores"] if s["keys"] is not None}
        if metric_keys != wanted:
            found.append(f"metrics' keys per store {metric_keys}, the assessment's {wanted}")
    tui_problems, tui_keys, tui_meets = _tui_model(ckpt, doctor, rto)
    found += tui_problems
    if tui_keys != "unreadable":
        keys["tui"] = tui_keys
        judged["tui"] = tui_meets
    if doctor["restarts"] and len(set(map(str, keys.values()))) > 1:
        found.append(f"the loaded version's keys differ between surfaces: {keys}")
    if rto is not None and "recovery" in judged and len(set(judged.values())) > 1:
        found.append(f"the RTO judgement of {rto} s differs between surfaces: {judged}")
    return found + _unchanged(ckpt, before)


def _decoded_surface(name: str, result: tuple[int, str, str], doctor: dict
                     ) -> tuple[list[str], dict | None]:
    code, out, err = result
    fails = doctor["exit_code"] if doctor["exit_code"] in (11, 12) else 0
    expected = {"report": (fails,), "recovery": (fails,), "growth": (0, 10),
                "batches": (0,)}[name]
    if code not in expected:
        if name == "growth" and fails and err.count("\n") == 1:
            return [], None  # no history to show where the restart fails: its one-line error
        return [f"{name} exits {code} ({err.strip()[:200]}), the doctor "
                f"{doctor['exit_code']}"], None
    data = _json(out)
    assessment = data.get("assessment")
    if assessment is None:
        return [f"{name} --json has no assessment"], None
    problems = []
    said = assessment["restart"]["verdict"]
    if said != doctor["verdict"] or data["restart"]["verdict"] != said:
        problems.append(f"{name} says {said!r}, the doctor {doctor['verdict']!r}")
    if assessment["restart"].get("outcome") != doctor["outcome"]:
        problems.append(f"{name} says the restart ends {assessment['restart'].get('outcome')!r}"
                        f", the doctor {doctor['outcome']!r}")
    if assessment["restart"]["restart_version"] != doctor["restart_version"]:
        problems.append(f"{name} loads version {assessment['restart']['restart_version']}, "
                        f"the doctor {doctor['restart_version']}")
    if name == "recovery":
        if doctor["restarts"] != bool(data.get("applies")):
            problems.append(f"recovery: estimate applies={data.get('applies')} where the "
                            f"doctor says {doctor['verdict']!r}")
        if not doctor["restarts"] and data.get("estimate_s") is not None:
            problems.append("recovery shows a restart estimate for a checkpoint that will "
                            "not restart")
        if doctor["restarts"] and data.get("version") != doctor["restart_version"]:
            problems.append(f"recovery estimates loading version {data.get('version')}, the "
                            f"doctor's restart loads {doctor['restart_version']}")
    if name == "report" and data.get("verification") and not doctor["restarts"] and \
            not data["verification"]["damaged"] and \
            any(p["code"] == "damaged-file" for p in doctor["problems"]):
        problems.append("report's decode finds nothing damaged where the doctor does")
    return problems, assessment


def _listed_surface(result: tuple[int, str, str], listed: dict) -> list[str]:
    """``--no-decode``: *not checked* unless the listing alone finds a fatal problem."""
    code, out, err = result
    if code not in (0, 11, 12):
        return [f"report --no-decode exits {code} ({err.strip()[:200]})"]
    said = _json(out)["assessment"]["restart"]["verdict"]
    wanted = "will not restart" if not listed["restarts"] else "not checked"
    return [] if said == wanted else [f"report --no-decode says {said!r}, not {wanted!r}"]


def _restart_line(name: str, result: tuple[int, str, str], doctor: dict) -> list[str]:
    code, out, err = result
    if code not in (0, 10, 11, 12):
        if name == "growth-text" and not doctor["restarts"] and err.count("\n") == 1:
            return []  # as growth --json
        return [f"{name} exits {code} ({err.strip()[:200]})"]
    flat = " ".join(out.split())
    line = f"restart: {doctor['verdict']}"
    if line not in flat:
        return [f"{name} does not print {line!r}"]
    for other in ("restarts", "will not restart", "not checked"):
        if other != doctor["verdict"] and re.search(rf"restart: {other}(?! with)", flat):
            return [f"{name} prints 'restart: {other}' beside the doctor's {line!r}"]
    return []


def _growth_text_keys(result: tuple[int, str, str], keys: int | None) -> list[str]:
    _code, out, _err = result
    flat = " ".join(out.split())
    if keys is not None and f": {keys:,} keys" not in flat:
        return [f"growth's restart line does not say {keys:,} keys"]
    return []


def _rto_between(recovery: dict | None) -> float | None:
    """An RTO between the estimate and the high end of its range (where a rule judging the
    middle and one judging the high end disagree), or just above the high end when the range
    is a point."""
    if recovery is None or recovery.get("estimate") is None:
        return None
    estimate = recovery["estimate"]
    low, high = estimate["estimate_s"], estimate["high_s"]
    rto = (low + high) / 2 if high > low else high + 0.5
    return round(max(rto, 0.001), 6)


_SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')


def _metrics(result: tuple[int, str, str], doctor: dict
             ) -> tuple[list[str], dict[tuple[int, str], int] | None, bool | None]:
    """Problems, the keys per (operator, store) and the RTO judgement metrics export."""
    code, out, err = result
    if code != 0:
        return [f"metrics exits {code}: {err.strip()[:200]}"], None, None
    samples = [m.groups() for line in out.splitlines() if (m := _SAMPLE.match(line))]
    up = [float(v) for name, _l, v in samples if name == "statekit_checkpoint_up"]
    if up != [1.0]:
        return [f"metrics: statekit_checkpoint_up {up} on a checkpoint the doctor reads"], \
            None, None
    verdicts = [labels for name, labels, value in samples
                if name == "statekit_restart_verdict" and float(value) == 1.0]
    wanted = doctor["verdict"].replace(" ", "-")
    problems = []
    if len(verdicts) != 1 or f'verdict="{wanted}"' not in verdicts[0]:
        problems.append(f"metrics' restart verdict {verdicts}, the doctor {wanted!r}")
    outcomes = sorted(re.sub(r'.*outcome="([^"]*)".*', r"\1", labels)
                      for name, labels, value in samples
                      if name == "statekit_restart_outcome" and float(value) == 1.0)
    expected = [] if doctor["outcomes"] is None else sorted(doctor["outcomes"] or ["same"])
    if outcomes != expected:
        problems.append(f"metrics' restart outcome {outcomes}, the doctor {expected}")
    estimates = [v for name, _l, v in samples if name == "statekit_recovery_estimate_seconds"]
    if not doctor["restarts"] and estimates:
        problems.append("metrics export a restart estimate for a checkpoint that will not "
                        "restart")
    label = re.compile(r'(\w+)="([^"]*)"')
    keys = {(int(dict(label.findall(labels))["operator"]), dict(label.findall(labels))["store"]):
            int(float(v)) for name, labels, v in samples if name == "statekit_state_keys"}
    meets = [float(v) for name, _l, v in samples if name == "statekit_recovery_meets_rto"]
    return problems, keys, (meets[0] == 1.0) if meets else None


def _tui_model(ckpt: Path, doctor: dict, rto: float | None
               ) -> tuple[list[str], int | str | None, bool | None]:
    """The TUI's snapshot: the assessment its screens render."""
    from statekit.support.errors import StatekitError
    from statekit.tui.model import load_snapshot

    try:
        snapshot = load_snapshot(str(ckpt))
    except StatekitError as error:
        return [f"the TUI cannot load a checkpoint the doctor reads ({error})"], "unreadable", \
            None
    assessment = snapshot.assessment(CORES, rto)
    problems = []
    if assessment.verdict != doctor["verdict"]:
        problems.append(f"the TUI says {assessment.verdict!r}, the doctor "
                        f"{doctor['verdict']!r}")
    if assessment.outcome != doctor["outcome"]:
        problems.append(f"the TUI says the restart ends {assessment.outcome!r}, the doctor "
                        f"{doctor['outcome']!r}")
    from statekit.fleet.readings import row_of

    row = row_of(str(ckpt), assessment, 0.0)
    if (row.health, row.outcome) != (doctor["verdict"], doctor["outcome"]):
        problems.append(f"the fleet row says {row.health!r}, {row.outcome!r}, the doctor "
                        f"{doctor['verdict']!r}, {doctor['outcome']!r}")
    if snapshot.health().verdict != doctor["verdict"]:
        problems.append(f"the TUI's Fix tab says {snapshot.health().verdict!r}, the doctor "
                        f"{doctor['verdict']!r}")
    if not doctor["restarts"]:
        if assessment.estimate is not None:
            problems.append("the TUI computes a restart estimate for a checkpoint that will "
                            "not restart")
        try:
            snapshot.recovery(CORES, rto)
            problems.append("the TUI's Recovery tab shows an estimate for a checkpoint that "
                            "will not restart")
        except StatekitError:
            pass
    meets = assessment.rto.meets if assessment.rto is not None else None
    return problems, assessment.loaded.keys, meets


def _unchanged(ckpt: Path, before: dict[str, str]) -> list[str]:
    after = tree_hash(ckpt)
    if after == before:
        return []
    changed = sorted(set(after.items()) ^ set(before.items()))
    return [f"a read-only command changed the checkpoint: {changed[:3]}"]
