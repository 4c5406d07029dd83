"""The doctor campaign: every generated fault of every checkpoint kind, judged by Spark.

For each kind of ``tests/oracle/kinds.py`` (operators × providers × formats) a real query
writes a checkpoint; ``tests/oracle/fault_space.py`` enumerates its faults (every file and
folder a restart reads or writes next × every fault family, plus conf and operator-metadata
edits); for each one ``statekit doctor`` predicts the restart, its printed fix is run as
printed, and Spark restarts both the damaged checkpoint and the fix's result
(``tests/oracle/campaign.py``). The table says, per family × kind, how many faults were tried,
how often the doctor agreed with Spark, how many fixes restarted into the healthy state, and
the time it took.

Run (about an hour for the whole space on 2 cores)::

    .venv/bin/python benchmarks/doctor_campaign.py [--kinds agg-hdfs,join-hdfs]
        [--select SUBSTRING] [--sample N --seed S] [--out results.jsonl] [--resume]
        [--docs docs/doctor-campaign.md]

``--report-only`` turns an existing results file into the table without running anything.
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
    from tests.oracle.fault_space import sample_faults
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
            if record["agrees"] and record["fix_ok"] is not False:
                done[record["id"]] = record
        redo = set()
        kinds = [k for k in kinds if any(r.startswith(f"{k}:") for r in _bad_ids(
            Path(args.redo_from)))]
    spark = _session()
    work = Path(args.work)
    campaigns = {}
    for name in kinds:
        started = time.perf_counter()
        campaigns[name] = KindCampaign(spark, name, work / name)
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
            faults = [f for f in campaign.faults(other) if args.select in f.id]
            if redo is not None:
                faults = [f for f in faults if f.id not in done]
            if args.sample:
                faults = sample_faults(faults, args.sample, args.seed)
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
                fix = record["fix"]
                print(f"  [{number}/{len(faults)}] {'BAD' if bad else 'ok '} "
                      f"{record['seconds']:5.1f}s {fault.id}: doctor {record['doctor_exit']} "
                      f"{record['doctor_codes']} spark "
                      f"{spark_outcome(record)}"
                      + (f" | fix exit {fix['exit_code']} restarted {fix['restarted']} "
                         f"same {fix['same_state']} {fix['stderr'][:200]} "
                         f"{fix['error_line'] or ''}" if fix else ""), flush=True)
    return results


def spark_outcome(record: dict) -> str:
    """What Spark did, in a few words."""
    if not record["spark_restarted"]:
        return str(record["spark_error"])[:160]
    if record.get("spark_state_error"):
        return f"restarts, but its state does not read back: {record['spark_state_error'][:120]}"
    if record.get("restart_state_same") is False:
        return "restarts into another state than the healthy restart's"
    return "restarts"


def upgraded(record: dict) -> dict:
    """A record of an earlier run judged by today's rules (the oracle's rules change as
    Spark teaches us; the recorded outcomes do not)."""
    from tests.oracle.campaign import Verdict

    return Verdict.from_dict(record).to_dict()


def _bad_ids(path: Path) -> set[str]:
    records = [upgraded(json.loads(line)) for line in path.read_text().splitlines()]
    return {r["id"] for r in records if not r["agrees"] or r["fix_ok"] is False}


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


def summary(results: list[dict]) -> str:
    total = len(results)
    agree = sum(r["agrees"] for r in results)
    fixes = [r for r in results if r["fix"] is not None]
    fixed = sum(bool(r["fix_ok"]) for r in fixes)
    fails = sum(r["spark_outcome"] == "fails" for r in results)
    silent = sum(r["spark_outcome"] == "changed" for r in results)
    unwarned = sum(r["unwarned_change"] for r in results)
    seconds = sum(r["seconds"] for r in results)
    return (f"{total} faults over {len({r['kind'] for r in results})} checkpoint kinds and "
            f"{len({r['family'] for r in results})} families: Spark refused to restart on "
            f"{fails}; the doctor agreed with Spark on {agree} "
            f"({100 * agree / max(total, 1):.1f} %); "
            f"{len(fixes)} fixes printed, {fixed} restarted into the healthy restart's state; "
            f"{silent} restarts ran but ended in another state than the healthy restart "
            f"(silent loss or duplicates), {unwarned} of them on a checkpoint the doctor "
            f"called healthy; {seconds / 60:.1f} min of judging.")


def disagreements(results: list[dict]) -> list[str]:
    return [f"{r['id']}: doctor {r['doctor_exit']} {r['doctor_codes']}, Spark "
            + spark_outcome(r)
            + (f", fix {r['fix']}" if r["fix_ok"] is False else "")
            for r in results if not r["agrees"] or r["fix_ok"] is False]


def unwarned(results: list[dict]) -> list[str]:
    return [f"{r['id']}: the doctor saw nothing; Spark {spark_outcome(r)}"
            for r in results if r["unwarned_change"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--select", default="", help="only faults whose id contains this")
    parser.add_argument("--sample", type=int, default=0, help="faults per kind (0: all)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="doctor-campaign.jsonl")
    parser.add_argument("--work", default="/tmp/statekit-doctor-campaign")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--redo-from", default="", metavar="RESULTS",
                        help="judge again the faults that went wrong in RESULTS (a results "
                             "file of an earlier run); --out gets all of them")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--docs", default="", help="write the table into this markdown file")
    args = parser.parse_args()
    if args.report_only:
        results = [upgraded(json.loads(line)) for line in Path(args.out).read_text().splitlines()]
    else:
        results = run(args)
    print()
    print(table(results))
    print()
    print(summary(results))
    for line in disagreements(results):
        print("  disagreement:", line)
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
    block = f"{start}\n{summary(results)}\n\n{table(results)}\n{end}"
    path.write_text(head + block + tail)


if __name__ == "__main__":
    main()
