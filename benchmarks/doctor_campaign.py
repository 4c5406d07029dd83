"""The doctor campaign: every generated fault of every checkpoint kind, judged by Spark.

For each kind of ``tests/oracle/kinds.py`` (operators × providers × formats × sinks) a real
query writes a checkpoint; ``tests/oracle/fault_space.py`` enumerates its faults (every file
and folder a restart reads or writes next × every fault family, plus conf and
operator-metadata edits, rewritten logs and the file sink's log); for each one ``statekit
doctor`` predicts the restart and its outcome, its printed fix is run as printed, and Spark
restarts both the damaged checkpoint and the fix's result (``tests/oracle/campaign.py``).

Two tables: per family × kind, how many faults were tried, how often the doctor agreed with
Spark on whether the query restarts, and how many fixes restarted into the healthy state;
then, per family, the *outcome* of the restarts that ran — how often the doctor's outcome
(same / loses / repeats / differs) agreed with the one measured, how many restarts silently
ended elsewhere than the healthy restart, how many of those the doctor called the same, and
how many of their fixes restarted into the healthy state.

Run (about two hours for the whole space on 2 cores)::

    .venv/bin/python benchmarks/doctor_campaign.py [--kinds agg-hdfs,join-hdfs]
        [--select SUBSTRING] [--sample N --seed S] [--pristine] [--out results.jsonl]
        [--resume] [--docs docs/doctor-campaign.md]

``--report-only`` turns an existing results file into the table without running anything;
``--rejudge RESULTS`` holds today's doctor to the restarts recorded in RESULTS (on the
pristine checkpoints that run left in ``--work``), restarting only fixes that changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _session():
    from statekit.jobs.session import build_session

    return build_session("statekit-doctor-campaign", conf={
        "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
        "spark.sql.streaming.stateStore.maintenanceInterval": "200ms"})


def run(args: argparse.Namespace) -> list[dict]:
    from tests.oracle.campaign import KindCampaign
    from tests.oracle.fault_space import pristine_fault, sample_faults
    from tests.oracle.kinds import KINDS

    kinds = args.kinds.split(",") if args.kinds else list(KINDS)
    out = Path(args.out)
    done: dict[str, dict] = {}
    if args.resume and out.exists():
        for line in out.read_text().splitlines():
            record = upgraded(json.loads(line))
            done[record["id"]] = record
    redo: set[str] | None = None
    if args.redo_from:  # judge again only what went wrong in an earlier run
        for line in Path(args.redo_from).read_text().splitlines():
            record = upgraded(json.loads(line))
            if record["agrees"] and record["fix_ok"] is not False \
                    and record.get("outcome_agrees") is not False:
                done[record["id"]] = record
        redo = set()
        kinds = [k for k in kinds if any(r.startswith(f"{k}:") for r in _bad_ids(
            Path(args.redo_from)))]
    spark = _session()
    work = Path(args.work)
    campaigns = {}
    for name in kinds:
        started = time.perf_counter()
        campaigns[name] = KindCampaign(spark, name, work / name, reuse=args.reuse)
        print(f"{name}: checkpoint written in {time.perf_counter() - started:.1f} s",
              flush=True)
    results = list(done.values())
    with out.open("a" if args.resume else "w") as sink:
        if redo is not None:
            for record in done.values():
                sink.write(json.dumps(record) + "\n")
        for index, (name, campaign) in enumerate(campaigns.items()):
            other = campaigns[kinds[(index + 1) % len(kinds)]].pristine / "checkpoint" \
                if len(kinds) > 1 else None
            wanted = args.select.split("|")
            faults = [f for f in campaign.faults(other) if any(w in f.id for w in wanted)]
            if redo is not None:
                faults = [f for f in faults if f.id not in done]
            if args.sample:
                faults = sample_faults(faults, args.sample, args.seed)
            if args.pristine:
                faults.insert(0, pristine_fault(name))
            print(f"{name}: {len(faults)} faults", flush=True)
            for number, fault in enumerate(faults, 1):
                if fault.id in done:
                    continue
                verdict = campaign.judge(fault)
                record = verdict.to_dict()
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                results.append(record)
                bad = not record["agrees"] or record["fix_ok"] is False
                mark = "BAD" if bad else "out" if record["outcome_agrees"] is False else "ok "
                fix = record["fix"]
                print(f"  [{number}/{len(faults)}] {mark} "
                      f"{record['seconds']:5.1f}s {fault.id}: doctor {record['doctor_exit']} "
                      f"{record['doctor_codes']} {_doctor_outcome(record)} spark "
                      f"{spark_outcome(record)}"
                      + (f" | fix exit {fix['exit_code']} restarted {fix['restarted']} "
                         f"same {fix['same_state']} {fix['stderr'][:200]} "
                         f"{fix['error_line'] or ''}" if fix else ""), flush=True)
    return results


def rejudge(args: argparse.Namespace) -> list[dict]:
    """Today's doctor on every fault of a results file, against the restarts recorded there
    (the pristine checkpoints that run left in ``--work`` are reused: the same faults)."""
    from tests.oracle.campaign import KindCampaign, Verdict

    recorded = {r["id"]: Verdict.from_dict(r) for r in
                (json.loads(line) for line in Path(args.rejudge).read_text().splitlines())}
    # --kinds: the recording run's order (each kind's "other query" is the next one's)
    kinds = args.kinds.split(",") if args.kinds else sorted({v.kind for v in recorded.values()})
    spark = _session()
    results = []
    with Path(args.out).open("w") as sink:
        for index, name in enumerate(kinds):
            if not any(v.kind == name for v in recorded.values()):
                continue
            campaign = KindCampaign(spark, name, Path(args.work) / name, reuse=True)
            other = Path(args.work) / kinds[(index + 1) % len(kinds)] / "pristine" / \
                "checkpoint" if len(kinds) > 1 else None
            faults = {f.id: f for f in campaign.faults(other, restart_first=False)}
            wanted = [v for v in recorded.values() if v.kind == name]
            missing = [v.id for v in wanted if v.id not in faults]
            print(f"{name}: {len(wanted)} recorded faults, {len(missing)} not in today's "
                  "space" + (f" (first {missing[0]})" if missing else ""), flush=True)
            for verdict in wanted:
                if verdict.id not in faults:
                    continue
                before = verdict.to_dict()
                record = campaign.rejudge(faults[verdict.id], verdict).to_dict()
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                results.append(record)
                if (before["agrees"], before.get("outcome_agrees"), before["fix_ok"]) != (
                        record["agrees"], record.get("outcome_agrees"), record["fix_ok"]):
                    print(f"  changed {verdict.id}: agrees {before['agrees']}->"
                          f"{record['agrees']} outcome {before.get('outcome_agrees')}->"
                          f"{record.get('outcome_agrees')} fix {before['fix_ok']}->"
                          f"{record['fix_ok']}: doctor {record['doctor_exit']} "
                          f"{record['doctor_codes']} {_doctor_outcome(record)} spark "
                          f"{spark_outcome(record)}", flush=True)
    return results


def spark_outcome(record: dict) -> str:
    """What Spark did, in a few words."""
    if not record["spark_restarted"]:
        return str(record["spark_error"])[:160]
    outcomes = record.get("spark_outcomes")
    detail = _detail(record)
    if outcomes:
        return f"restarts, {','.join(outcomes)}" + (f" ({detail})" if detail else "")
    if record.get("spark_state_error"):
        return f"restarts, but its state does not read back: {record['spark_state_error'][:120]}"
    if record.get("restart_state_same") is False:
        return "restarts into another state than the healthy restart's"
    return "restarts, same" if outcomes == [] else "restarts"


def _detail(record: dict) -> str:
    """The measured differences, in counts."""
    parts = []
    for name, key in (("loaded", "loaded_state_diff"), ("end", "end_state_diff")):
        diff = record.get(key) or {}
        found = [f"{k.replace('_keys', '').replace('_values', '')} {v}"
                 for k, v in diff.items() if v]
        if found:
            parts.append(f"{name} state: {', '.join(found)}")
    sink = record.get("sink_diff") or {}
    found = [f"{k} {v}" for k, v in sink.items() if v]
    if found:
        parts.append(f"sink rows: {', '.join(found)}")
    if record.get("rerun_batches"):
        parts.append(f"re-ran {record['rerun_batches']}")
    for key in ("loaded_state_error", "spark_state_error", "sink_error"):
        if record.get(key):
            parts.append(f"{key.replace('_', ' ')}: {record[key][:100]}")
    return "; ".join(parts)


def _doctor_outcome(record: dict) -> str:
    expects = record.get("doctor_expects")
    if expects is None:
        return "-"
    return ",".join(expects) or "same"


def upgraded(record: dict) -> dict:
    """A record of an earlier run judged by today's rules (the oracle's rules change as
    Spark teaches us; the recorded outcomes do not)."""
    from tests.oracle.campaign import Verdict

    return Verdict.from_dict(record).to_dict()


def _bad_ids(path: Path) -> set[str]:
    """Faults an earlier run got wrong: the restart verdict, a fix, or the outcome."""
    records = [upgraded(json.loads(line)) for line in path.read_text().splitlines()]
    return {r["id"] for r in records if not r["agrees"] or r["fix_ok"] is False
            or r.get("outcome_agrees") is False}


# ------------------------------------------------------------------------------ the table
def table(results: list[dict]) -> str:
    """The campaign's table: per family × kind, faults / doctor agrees / fixes that worked."""
    kinds = sorted({r["kind"] for r in results})
    families = sorted({r["family"] for r in results})
    cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in results:
        cells[(record["family"], record["kind"])].append(record)
    lines = ["| family | " + " | ".join(kinds) + " | all |",
             "|---|" + "---:|" * (len(kinds) + 1)]
    for family in families:
        row = [_cell(cells[(family, kind)]) for kind in kinds]
        every = [r for r in results if r["family"] == family]
        lines.append(f"| {family} | " + " | ".join(row) + f" | {_cell(every)} |")
    lines.append("| **all** | " + " | ".join(
        _cell([r for r in results if r["kind"] == k]) for k in kinds) + f" | {_cell(results)} |")
    return "\n".join(lines)


def _cell(records: list[dict]) -> str:
    """``faults · agreed% · fixes ok/printed`` (— for an empty cell)."""
    if not records:
        return "—"
    agree = sum(r["agrees"] for r in records)
    fixes = [r for r in records if r["fix"] is not None]
    ok = sum(bool(r["fix_ok"]) for r in fixes)
    text = f"{len(records)} · {100 * agree / len(records):.0f}%"
    return text + (f" · {ok}/{len(fixes)}" if fixes else "")


def outcome_table(results: list[dict], by: str = "family") -> str:
    """The outcome axis, per family (or kind): of the faults whose restart ran, how often the
    doctor's outcome agreed with Spark's (same or not), also on the kind of harm (a category
    in common), and exactly; the silent ones (Spark's outcome not the same), the unwarned
    ones (silent, the doctor said the same), and the silent ones' fixes that restarted into
    the healthy state."""
    groups = sorted({r[by] for r in results})
    lines = [f"| {by} | ran | outcome agrees | kind of harm | exact | silent | unwarned | "
             "silent fixed |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for group in groups:
        lines.append(f"| {group} | " + _outcome_cells([r for r in results if r[by] == group])
                     + " |")
    lines.append("| **all** | " + _outcome_cells(results) + " |")
    return "\n".join(lines)


def _outcome_cells(records: list[dict]) -> str:
    ran = [r for r in records if r["spark_restarted"]]
    measured = [r for r in ran if r.get("outcome_agrees") is not None]
    agree = sum(bool(r["outcome_agrees"]) for r in measured)
    category = sum(bool(r.get("outcome_category_agrees")) for r in measured)
    exact = sum(bool(r.get("outcome_exact")) for r in measured)
    silent = [r for r in ran if r["spark_outcome"] == "changed"]
    unwarned = sum(r["unwarned_change"] for r in silent)
    fixes = [r for r in silent if r["fix"] is not None]
    fixed = sum(bool(r["fix_ok"]) for r in fixes)
    if not measured:
        return f"{len(ran)} | — | — | — | {len(silent)} | {unwarned} | {fixed}/{len(fixes)}"
    return (f"{len(ran)} | {100 * agree / len(measured):.0f}% | "
            f"{100 * category / len(measured):.0f}% | "
            f"{100 * exact / len(measured):.0f}% | {len(silent)} | {unwarned} | "
            f"{fixed}/{len(fixes)}")


def summary(results: list[dict]) -> str:
    total = len(results)
    agree = sum(r["agrees"] for r in results)
    fixes = [r for r in results if r["fix"] is not None]
    fixed = sum(bool(r["fix_ok"]) for r in fixes)
    fails = sum(r["spark_outcome"] == "fails" for r in results)
    ran = [r for r in results if r["spark_restarted"]]
    measured = [r for r in ran if r.get("outcome_agrees") is not None]
    outcome_agree = sum(bool(r["outcome_agrees"]) for r in measured)
    silent = [r for r in results if r["spark_outcome"] == "changed"]
    unwarned = sum(r["unwarned_change"] for r in results)
    silent_fixes = [r for r in silent if r["fix"] is not None]
    silent_fixed = sum(bool(r["fix_ok"]) for r in silent_fixes)
    seconds = sum(r["seconds"] for r in results)
    return (f"{total} faults over {len({r['kind'] for r in results})} checkpoint kinds and "
            f"{len({r['family'] for r in results})} families: Spark refused to restart on "
            f"{fails}; the doctor agreed with Spark on {agree} "
            f"({100 * agree / max(total, 1):.1f} %); "
            f"{len(fixes)} fixes printed, {fixed} restarted into the healthy restart's state; "
            f"of the {len(ran)} restarts that ran, the doctor's outcome agreed with Spark's on "
            f"{outcome_agree} of {len(measured)} measured "
            f"({100 * outcome_agree / max(len(measured), 1):.1f} %); "
            f"{len(silent)} ended in another state or output than the healthy restart "
            f"(silent loss, repeats or changes), {unwarned} of them on a checkpoint the "
            f"doctor said restarts the same, {silent_fixed} of {len(silent_fixes)} of their "
            f"printed fixes restarted into the healthy state; "
            f"{seconds / 60:.1f} min of judging.")


def disagreements(results: list[dict]) -> list[str]:
    return [f"{r['id']}: doctor {r['doctor_exit']} {r['doctor_codes']}, Spark "
            + spark_outcome(r)
            + (f", fix {r['fix']}" if r["fix_ok"] is False else "")
            for r in results if not r["agrees"] or r["fix_ok"] is False]


def outcome_disagreements(results: list[dict]) -> list[str]:
    return [f"{r['id']}: doctor {r['doctor_exit']} {_doctor_outcome(r)} "
            f"{r.get('doctor_problem_outcomes') or ''}, Spark {spark_outcome(r)}"
            for r in results if r["agrees"] and r.get("outcome_agrees") is False]


def unwarned(results: list[dict]) -> list[str]:
    return [f"{r['id']}: the doctor said the same; Spark {spark_outcome(r)}"
            for r in results if r["unwarned_change"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--select", default="",
                        help="only faults whose id contains this (A|B: either)")
    parser.add_argument("--sample", type=int, default=0, help="faults per kind (0: all)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="doctor-campaign.jsonl")
    parser.add_argument("--work", default="/tmp/statekit-doctor-campaign")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--reuse", action="store_true",
                        help="judge on the pristine checkpoints an earlier run left in --work "
                             "(the faults it recorded) instead of writing new ones")
    parser.add_argument("--redo-from", default="", metavar="RESULTS",
                        help="judge again the faults that went wrong in RESULTS (a results "
                             "file of an earlier run); --out gets all of them")
    parser.add_argument("--pristine", action="store_true",
                        help="judge each kind's undamaged checkpoint first (fault 'none': "
                             "Spark's outcome must be the same, the doctor's too)")
    parser.add_argument("--rejudge", default="", metavar="RESULTS",
                        help="today's doctor on every fault of RESULTS against the restarts "
                             "recorded there, on the pristine checkpoints left in --work "
                             "(a changed fix is run and restarted again)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--docs", default="", help="write the table into this markdown file")
    args = parser.parse_args()
    if args.report_only:
        results = [upgraded(json.loads(line)) for line in Path(args.out).read_text().splitlines()]
    elif args.rejudge:
        results = rejudge(args)
    else:
        results = run(args)
    print()
    print(table(results))
    print()
    print(outcome_table(results))
    print()
    print(outcome_table(results, by="kind"))
    print()
    print(summary(results))
    for line in disagreements(results):
        print("  disagreement:", line)
    for line in outcome_disagreements(results):
        print("  outcome disagreement:", line)
    for line in unwarned(results):
        print("  unwarned change:", line)
    if args.docs:
        write_docs(Path(args.docs), results)


def write_docs(path: Path, results: list[dict]) -> None:
    """Replace the table between the campaign markers of ``path``."""
    start, end = "<!-- campaign-table -->", "<!-- /campaign-table -->"
    text = path.read_text() if path.exists() else f"{start}\n{end}\n"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    block = (f"{start}\n{summary(results)}\n\n{table(results)}\n\n"
             f"{outcome_table(results)}\n{end}")
    path.write_text(head + block + tail)


if __name__ == "__main__":
    main()
