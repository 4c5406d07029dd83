"""Every surface that answers "will it restart?" must give the doctor's answer.

``report``, ``recovery``, ``growth``, ``metrics`` and the TUI's model each run on a damaged
checkpoint and are held to ``statekit doctor``'s verdict (pyspark 4.3 judged the doctor; the
campaign proves that part). The surfaces that do not decode state files unless asked
(``report`` without ``--decode``, ``recovery``, ``growth``, ``metrics``, the TUI) go by the
doctor's listing-level verdict; with ``--decode`` they must match the decoding one. No
surface may show a restart estimate for a checkpoint that will not restart, print a
traceback, or write to the checkpoint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.oracle.campaign import statekit
from tests.support.trees import tree_hash


def _json(text: str) -> dict:
    def refuse(constant: str) -> object:
        raise AssertionError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def contradictions(ckpt: Path, ran: dict[tuple[str, ...], tuple[int, str, str]] | None = None
                   ) -> list[str]:
    """Where a surface disagrees with the doctor on ``ckpt`` ([] when none does).
    ``ran``: what commands already printed on this very checkpoint, by their arguments (as
    strings) — those are not run again."""
    before = tree_hash(ckpt)
    found: list[str] = []
    ran = ran or {}

    def result(args: list) -> tuple[int, str, str]:
        key = tuple(str(a) for a in args)
        return ran[key] if key in ran else statekit(args)

    results = {name: result(args) for name, args in {
        "doctor": ["doctor", ckpt, "--json"],
        "doctor-listed": ["doctor", ckpt, "--json", "--no-decode"],
        "report": ["report", ckpt, "--json"],
        "report-verify": ["report", ckpt, "--decode", "--json"],
        "recovery": ["recovery", ckpt, "--json"],
        "recovery-verify": ["recovery", ckpt, "--decode", "--json"],
        "growth": ["growth", ckpt, "--json"],
        "metrics": ["metrics", ckpt],
    }.items()}
    for name, (_code, _out, err) in results.items():
        if "Traceback" in err or "internal error" in err:
            found.append(f"{name}: {err.strip()[:300]}")
        if err and err.count("\n") > 1:
            found.append(f"{name}: more than one stderr line: {err[:300]!r}")
    code, out, err = results["doctor"]
    if code not in (0, 9, 11, 12):  # the checkpoint cannot be read at all
        for name, (other, _o, _e) in results.items():
            if name != "metrics" and other in (0, 9):
                found.append(f"{name} exits {other} where the doctor cannot read it ({err})")
        return found + _unchanged(ckpt, before)
    decoded = _json(out)
    listed_code, listed_out, _ = results["doctor-listed"]
    listed = _json(listed_out)
    found += _verdict("report-verify", results["report-verify"], decoded)
    found += _verdict("report", results["report"], listed)
    found += _estimate("recovery", results["recovery"], listed)
    found += _estimate("recovery-verify", results["recovery-verify"], decoded)
    g_code, g_out, g_err = results["growth"]
    if g_code not in (0, 10):
        if listed_code not in (11, 12):
            found.append(f"growth exits {g_code} ({g_err.strip()[:200]}) on a checkpoint "
                         "that restarts")
    elif _json(g_out)["restart"]["verdict"] != listed["verdict"]:
        found.append(f"growth says {_json(g_out)['restart']['verdict']!r}, the doctor "
                     f"{listed['verdict']!r}")
    found += _metrics(results["metrics"], listed)
    found += _tui_model(ckpt, listed)
    return found + _unchanged(ckpt, before)


def _verdict(name: str, result: tuple[int, str, str], doctor: dict) -> list[str]:
    code, out, err = result
    expected = doctor["exit_code"] if doctor["exit_code"] in (11, 12) else 0
    if code != expected:
        return [f"{name} exits {code} ({err.strip()[:200]}), the doctor {doctor['exit_code']}"]
    data = _json(out)
    said = data["restart"]["verdict"]
    problems = []
    if said != doctor["verdict"]:
        problems.append(f"{name} says {said!r}, the doctor {doctor['verdict']!r}")
    verification = data.get("verification")
    if verification and not doctor["restarts"] and "all decode cleanly" in out:
        problems.append(f"{name} says the files decode cleanly on a checkpoint that will not "
                        "restart")
    return problems


def _estimate(name: str, result: tuple[int, str, str], doctor: dict) -> list[str]:
    code, out, err = result
    if doctor["restarts"]:
        if code != 0:
            return [f"{name} exits {code} ({err.strip()[:200]}) on a checkpoint that restarts"]
        data = _json(out)
        return [] if data.get("applies") else [f"{name} says its estimate does not apply"]
    if code != doctor["exit_code"]:
        return [f"{name} exits {code} ({err.strip()[:200]}), the doctor {doctor['exit_code']}"]
    data = _json(out)
    if data.get("applies") or data.get("estimate_s") is not None:
        return [f"{name} shows a restart estimate for a checkpoint that will not restart"]
    return []


_SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')


def _metrics(result: tuple[int, str, str], doctor: dict) -> list[str]:
    code, out, err = result
    if code != 0:
        return [f"metrics exits {code}: {err.strip()[:200]}"]
    samples = [m.groups() for line in out.splitlines() if (m := _SAMPLE.match(line))]
    up = [float(v) for name, _l, v in samples if name == "statekit_checkpoint_up"]
    if up != [1.0]:
        return [f"metrics: statekit_checkpoint_up {up} on a checkpoint the doctor reads"]
    verdicts = [labels for name, labels, value in samples
                if name == "statekit_restart_verdict" and float(value) == 1.0]
    wanted = doctor["verdict"].replace(" ", "-")
    problems = []
    if not verdicts or f'verdict="{wanted}"' not in verdicts[0]:
        problems.append(f"metrics' restart verdict {verdicts}, the doctor {wanted!r}")
    estimates = [v for name, _l, v in samples if name == "statekit_recovery_estimate_seconds"]
    if not doctor["restarts"] and estimates:
        problems.append("metrics export a restart estimate for a checkpoint that will not "
                        "restart")
    return problems


def _tui_model(ckpt: Path, doctor: dict) -> list[str]:
    """The TUI's model: the verdict the Overview shows, and no estimate when no restart."""
    from statekit.support.errors import StatekitError
    from statekit.tui.model import load_snapshot

    try:
        snapshot = load_snapshot(str(ckpt))
    except StatekitError as error:
        return [f"the TUI cannot load a checkpoint the doctor reads ({error})"]
    health = snapshot.health()
    problems = []
    if health.verdict != doctor["verdict"]:
        problems.append(f"the TUI says {health.verdict!r}, the doctor {doctor['verdict']!r}")
    if not health.restarts:
        try:
            snapshot.recovery(2, 30.0)
            problems.append("the TUI computes a restart estimate for a checkpoint that will "
                            "not restart")
        except StatekitError:
            pass
    return problems


def _unchanged(ckpt: Path, before: dict[str, str]) -> list[str]:
    after = tree_hash(ckpt)
    if after == before:
        return []
    changed = sorted(set(after.items()) ^ set(before.items()))
    return [f"a read-only command changed the checkpoint: {changed[:3]}"]
