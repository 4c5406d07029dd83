"""``statekit growth``: is the state growing without bound? Verdict, evidence, projection.

Exit codes make it an alert: with ``--fail-on growing`` the command exits with
``EXIT_GROWTH`` (10) when any store (or the progress log) grows or accelerates — or
saturates at a plateau above ``--max-keys``/``--max-bytes`` (a finite population levelling
off below them is a warm-up, not a page); with ``--fail-on accelerating`` only when it
accelerates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.assessment_view import print_assessment
from statekit.cli.options import (
    decode_option,
    executor_options,
    json_option,
    open_from_cli,
    operator_option,
    print_json,
    progress_log_option,
    read_progress_log,
    refuse_remote,
    spark_options,
    spark_runner,
    stale_after_option,
    start_spark_for,
    storage_option,
)
from statekit.cli.params import COUNT, SIZE
from statekit.cli.render import console, print_next, status
from statekit.formats.values import shorten
from statekit.support.errors import EXIT_GROWTH
from statekit.support.presentation import human_bytes, sparkline

if TYPE_CHECKING:
    from statekit.checkpoint import Checkpoint
    from statekit.growth.analysis import GrowthReport, StoreGrowth
    from statekit.jobs.growth_deep import DeepCheck

_STYLE = {"bounded": "bold green", "saturating": "bold yellow", "growing": "bold red",
          "accelerating": "bold red reverse",
          "insufficient-history": "bold yellow"}
@click.command("growth")
@click.argument("checkpoint", metavar="[CKPT]", required=False)
@storage_option
@operator_option
@progress_log_option
@click.option("--max-keys", type=COUNT, metavar="N",
              help="Project when the state reaches this many keys (a positive number, e.g. "
                   "5e6).")
@click.option("--max-bytes", type=SIZE, metavar="SIZE",
              help="Project when the state's key and value bytes reach this size: 50GiB, "
                   "500MB (GiB: powers of 1024, GB: of 1000), or plain bytes.")
@executor_options
@stale_after_option
@click.option("--fail-on", type=click.Choice(["growing", "accelerating"]),
              help="Exit with code 10 when the verdict is at least this bad (growing: also "
                   "a saturating state whose plateau exceeds --max-keys or --max-bytes).")
@click.option("--deep", is_flag=True,
              help="Also cross-check the files with Spark's own reader (starts a JVM): the "
                   "change feed's upserts and deletes per batch, or (RocksDB without "
                   "changelogs) the row count at every retained batch.")
@decode_option
@spark_options
@click.option("--history", "show_history", is_flag=True,
              help="Also print the per-version table of every store (--json always has "
                   "it).")
@json_option
def growth_command(checkpoint: str | None, storage_option: tuple[str, ...],
                   operator: int | None, progress_log: str | None, max_keys: float | None,
                   max_bytes: float | None, executors: int, executor_memory: float | None,
                   stale_after: int | None, fail_on: str | None,
                   deep: bool, decode: bool, master: str | None, confs: tuple[str, ...],
                   show_history: bool, as_json: bool) -> None:
    """Is the state growing without bound? Verdict per store, evidence, projection.

    No JVM (unless --deep). Replays the retained state files once, forward, over all
    partitions (HDFS: the oldest usable snapshot and every delta; RocksDB with changelogs: the
    oldest usable zip and every changelog; RocksDB without: each zip's numKeys and SST bytes)
    and records per version the live keys, key and value bytes, inserts, updates, deletes,
    value sizes, key ages and, for (flat)MapGroupsWithState and applyInPandasWithState, the
    keys without a timeout. Memory is bounded by the live keys (a 64-bit digest each). With
    --master URL the replay runs as Spark tasks, one per store instance (same results).

    Verdicts, per store and overall:

    \b
    - bounded: no significant rise, or keys that turn over (expire)
    - saturating: a finite population still being discovered; the evidence
      gives its plateau, the share seen and when it gets near it
    - growing: a significant rise of keys that no finite population explains
      (a leak: its rate in keys per batch and per day, beside the population
      it leaks from), or of value sizes
    - accelerating: the newest third rises at least 2x as fast as the oldest
    - insufficient-history: fewer than 6 versions, or a rise too early to
      tell a finite population from a leak (the evidence says how many more
      batches would)

    A store's verdict is the worse of its keys' and its value sizes'; the line
    above its evidence names both. With --progress-log, an operator both the
    state files and the log cover gets one verdict (the files', unless their
    history is too short or damaged) and the output says why the other differs.

    The outlook projects keys and memory on the busiest executor in 1, 7 and 30
    days at the recent pace of batch time (--executors spreads the partitions;
    memory per key: HDFS the heap a loaded row takes, RocksDB key and value
    bytes), and with --executor-memory when the state fills it.

    The evidence: keys per batch and per hour of batch time, whether new keys or growing
    values drive it, the share of keys untouched for --stale-after versions, the share without
    a timeout, hot partitions, and the least recently changed live keys, decoded. --max-keys
    and --max-bytes project when the state gets there. --progress-log adds history beyond the
    retained batches (numRowsTotal, memoryUsedBytes per operator); CKPT may then be omitted.

    A damaged or missing change file ends a store's history there (marked DAMAGED); damaged
    offsets or commits that a restart fails on stop the command with one line naming the
    file. The output ends with the restart line every command shows: the doctor's verdict
    (the files a restart loads decoded; --no-decode: listed only) and the keys of the
    version a restart loads, from this very history. --json: "verdict", "stores" (each with
    its history), "progress", "sources", "projections", "outlook", "summary", "restart",
    "assessment" and "next"; --deep adds "deep".

    Exit 10 with --fail-on growing when any store grows or accelerates, or saturates at a
    plateau above --max-keys/--max-bytes; with --fail-on accelerating only when one
    accelerates: an alert for cron or CI.

    Examples:

    \b
        statekit growth demo/checkpoint --history
        statekit growth demo/checkpoint --max-keys 5e6 --max-bytes 20GiB
        statekit growth demo/checkpoint --executor-memory 4g --executors 10
        statekit growth demo/checkpoint --progress-log demo/progress.jsonl
        statekit growth s3://bucket/ckpt --fail-on growing --json > growth.json
    """
    from statekit.assess.assessment import assess
    from statekit.doctor import diagnose
    from statekit.growth.analysis import analyse

    if checkpoint is None and progress_log is None:
        raise click.UsageError("give a checkpoint (CKPT), a --progress-log log, or both")
    if deep and checkpoint is None:
        raise click.UsageError("--deep needs a checkpoint")
    ckpt = (open_from_cli(checkpoint, storage_option, allow_missing_metadata=True)
            if checkpoint is not None else None)
    with status(decode and ckpt is not None and not as_json,
                "reading the files a restart loads…") as on_progress:
        health = diagnose(ckpt, decode=decode, fix=False, progress=on_progress) \
            if ckpt is not None else None
    if ckpt is not None and health is not None and not health.restarts:
        # a ledger the restart fails on gives no versions to trust: stop on its first
        # error, as the doctor names it; damaged state still has a history to show
        ckpt.require_sound_ledger()
    if deep:
        refuse_remote("growth --deep", "its check reads state through Spark's internals in a "
                      "JVM statekit starts; run it without --remote, or drop --deep (the "
                      "pass itself runs over Connect)")
    if ckpt is not None:
        from statekit.checkpoint.checkpoint import check_selection

        check_selection(ckpt, operator)
    progress = read_progress_log(progress_log, storage_option) if progress_log else ()
    with status(not as_json, "reading state files…") as on_progress:
        runner = (spark_runner(ckpt, "statekit-growth", master, confs, on_progress)
                  if ckpt is not None else None)
        report = analyse(ckpt, operator=operator, progress=progress, max_keys=max_keys,
                         max_bytes=max_bytes, stale_after=stale_after,
                         on_progress=on_progress, runner=runner, executors=executors,
                         executor_memory=executor_memory)
        checks = (_deep(ckpt, report, master, confs, on_progress)
                  if deep and ckpt is not None else [])
    step = _next_step(checkpoint, report)
    assessment = assess(ckpt, shown=checkpoint, diagnosis=health, growth_report=report) \
        if ckpt is not None and health is not None and checkpoint is not None else None
    if as_json:
        data = report.to_dict(with_history=True)
        if deep:
            data["deep"] = [c.to_dict() for c in checks]
        data["restart"] = assessment.restart_dict() if assessment is not None else None
        data["assessment"] = assessment.to_dict() if assessment is not None else None
        data["next"] = step
        print_json(data)
    else:
        _render(report, checks, show_history)
        if assessment is not None:
            console().print()
            print_assessment(assessment)
        print_next(step, "see which keys would go before removing them")
    fires = report.is_growth and (fail_on == "growing" or report.verdict == "accelerating")
    if fail_on == "growing" and report.exceeds(max_keys, max_bytes):
        fires = True  # saturating, but levelling off above a limit
    if fail_on and fires:
        raise click.exceptions.Exit(EXIT_GROWTH)


def _next_step(checkpoint: str | None, report: GrowthReport) -> str | None:
    """Growing state: the evict dry run that shows what removing its stale keys removes."""
    growing = [s for s in report.stores if s.verdict in ("growing", "accelerating")]
    if checkpoint is None or not growing:
        return None
    import shlex

    operators = {s.history.operator_id for s in growing}
    only = f" --operator {operators.pop()}" if len(operators) == 1 else ""
    stale = max(s.history.stale_after for s in growing) or 1
    target = checkpoint.rstrip("/") + "-evicted"
    return (f"statekit evict {shlex.quote(checkpoint)} --stale-after {stale}{only} "
            f"--out {shlex.quote(target)} --dry-run")


def _deep(ckpt: Checkpoint, report: GrowthReport, master: str | None, confs: tuple[str, ...],
          on_progress: Callable[[str], None]) -> list[DeepCheck]:
    from statekit.jobs.growth_deep import deep_check

    on_progress("starting Spark…")
    spark = start_spark_for(ckpt, "statekit-growth", master, confs)
    return [deep_check(spark, ckpt, s.history, on_progress) for s in report.stores]


def _verdict(verdict: str) -> str:
    return f"[{_STYLE.get(verdict, 'bold')}]{verdict.upper()}[/]"


def _render(report: GrowthReport, checks: Sequence[DeepCheck], show_history: bool) -> None:
    out = console()
    if report.checkpoint:
        out.print(f"[bold]checkpoint[/] {escape(report.checkpoint)}")
    out.print(f"verdict: {_verdict(report.verdict)}")
    for line in report.summary:
        out.print(escape(line))
    if report.stores:
        out.print()
        out.print(_stores_table(report))
    for store in report.stores:
        out.print()
        keys = store.history.series("keys")
        parts = f"keys {store.key_verdict}" + (
            f", values {store.value_verdict}" if store.value_verdict else "")
        out.print(f"[bold]{escape(store.label)}[/] {_verdict(store.verdict)} ({parts}) "
                  f"· {store.method} · keys {sparkline(keys)}"
                  + (" · [bold red]DAMAGED[/]" if store.history.damaged else ""))
        if store.history.damaged:
            out.print(f"  • damaged: {escape(store.history.damaged)}")
        for line in store.evidence:
            out.print(f"  • {escape(line)}")
        if store.verdict in ("growing", "accelerating") and store.history.oldest_keys:
            out.print(_oldest_table(store))
        if show_history:
            out.print(_history_table(store))
    judged = {a.label: a for a in report.sources}
    for p in report.progress:
        out.print()
        agreement = judged.get(p.label)
        whose = "the state files'" if agreement is not None and \
            agreement.source == "state files" else "this log's"
        stands = "" if agreement is None else (
            " · agrees with the state files" if agreement.agree else
            f" · {whose} verdict {agreement.verdict.upper()} stands (see above)")
        out.print(f"[bold]progress log {escape(p.label)}[/] {_verdict(p.verdict)} · "
                  f"{p.batches} batches · rows {sparkline(p.rows_total)}{stands}")
        for line in p.evidence:
            out.print(f"  • {escape(line)}")
    for check in checks:
        out.print()
        name = f"operator {check.operator_id} {check.store}"
        if check.method == "skipped":
            out.print(f"[bold]deep check {escape(name)}[/]: skipped ({escape(check.note or '')})")
            continue
        state = "[green]agrees[/]" if check.agree else \
            f"[red]{len(check.mismatches)} batch(es) differ[/]"
        out.print(f"[bold]deep check {escape(name)}[/] ({check.method}, "
                  f"{len(check.batches)} batches): {state}")
        for b in check.mismatches[:10]:
            out.print(f"  batch {b.batch_id}: files {b.files} · spark {b.spark}")


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:,.2f}"


def _stores_table(report: GrowthReport) -> Table:
    table = Table(title="stores", title_justify="left")
    for name in ("operator/store", "method", "versions", "keys", "keys/batch", "keys/hour",
                 "MK p", "value B (mean)", "turnover", "untouched", "no timeout",
                 "plateau/leak", "verdict"):
        table.add_column(name, justify="left" if name in ("operator/store", "method",
                                                            "verdict") else "right")
    for s in report.stores:
        versions = s.history.versions
        span = f"{versions[0].version}–{versions[-1].version}" if versions else "-"
        keys = f"{_num(versions[0].keys)} → {_num(versions[-1].keys)}" if versions else "-"
        value = (f"{_num(versions[0].value_mean)} → {_num(versions[-1].value_mean)}"
                 if versions and versions[-1].value_mean is not None else "-")
        table.add_row(
            escape(s.label), s.method, span, keys, _num(s.keys.slope),
            _num(s.keys.slope_per_hour),
            "-" if s.keys.p_value is None else f"{s.keys.p_value:.2g}", value,
            "-" if s.turnover is None else f"{s.turnover:.0%}",
            "-" if s.untouched_share is None else f"{s.untouched_share:.0%}",
            "-" if s.no_timeout_share is None else f"{s.no_timeout_share:.0%}",
            _plateau_cell(s), _verdict(s.verdict))
    return table


def _plateau_cell(store: StoreGrowth) -> str:
    """A saturating store's plateau, or a leak's rate."""
    if store.leak_keys_per_batch is not None:
        return f"leak +{_num(store.leak_keys_per_batch)}/batch"
    sat = store.saturation
    if store.key_verdict != "saturating" or sat is None or sat.plateau is None:
        return "-"
    return f"{_num(sat.plateau)} ({sat.fraction_seen or 0:.0%} seen)"


def _oldest_table(store: StoreGrowth) -> Table:
    table = Table(title="least recently changed live keys", title_justify="left")
    for name in ("partition", "last changed", "age (versions)", "key", "value"):
        table.add_column(name)
    bound = "≥ " if store.history.history_starts_at is not None else ""
    for k in store.history.oldest_keys:
        value = "" if k.value is None else str(k.value)
        table.add_row(str(k.partition), str(k.last_changed), f"{bound}{k.age}",
                      escape(str(k.key) if k.key is not None else k.key_hex),
                      escape(shorten(value, 81)))
    return table


def _history_table(store: StoreGrowth) -> Table:
    table = Table(title=f"history of {store.label}", title_justify="left")
    for name in ("version", "keys", "bytes", "inserts", "updates", "deletes", "value mean",
                 "p99", "oldest age", "untouched", "no timeout"):
        table.add_column(name, justify="right")
    for v in store.history.versions:
        size = v.bytes if v.bytes is not None else v.disk_bytes
        table.add_row(str(v.version), _num(v.keys), human_bytes(size), _num(v.inserts),
                      _num(v.updates), _num(v.deletes), _num(v.value_mean), _num(v.value_p99),
                      _num(v.oldest_age), _num(v.untouched), _num(v.no_timeout))
    return table
