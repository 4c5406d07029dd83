"""``statekit evict``: the source's state minus the selected rows, in a NEW checkpoint.

Thin: the selection, refusals and plan come from :mod:`statekit.repartition.evict` (no JVM:
a refused request never starts Spark); the rows, the write, the verification and the
publish from :mod:`statekit.jobs.evict`. ``--dry-run`` counts and shows the rows that would
go and writes nothing. The source is only ever read.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.options import (
    checkpoint_options,
    json_option,
    open_from_cli,
    operator_option,
    parse_storage_options,
    print_json,
    spark_conf,
    spark_options,
    stale_after_option,
    where_option,
    write_options,
)
from statekit.cli.render import command_line, console, print_next, status

if TYPE_CHECKING:
    from statekit.jobs.evict import EvictResult


@click.command("evict")
@checkpoint_options
@where_option
@stale_after_option
@click.option("--expired", is_flag=True,
              help="(flat)MapGroupsWithState / applyInPandasWithState: remove rows whose "
                   "event-time timeout is behind the next batch's watermark.")
@click.option("--no-timeout", is_flag=True,
              help="... and/or rows that carry no timeout at all (they never expire).")
@operator_option
@write_options(file_sink=False)
@spark_options
@json_option
def evict_command(checkpoint: str, storage_option: tuple[str, ...], target: str,
                  where: str | None, stale_after: int | None, expired: bool,
                  no_timeout: bool, operator: int | None, dry_run: bool, verify: bool,
                  allow_uncommitted: bool, force: bool, master: str | None,
                  confs: tuple[str, ...], as_json: bool) -> None:
    """Remove selected state rows of CKPT, in a new checkpoint DST.

    The conditions narrow each other; --expired and --no-timeout together select either.

    Example: statekit evict demo/checkpoint --stale-after 10 --out demo/checkpoint-evicted
    """
    from statekit.checkpoint.location import resolve
    from statekit.jobs.evict_action import prepare, run
    from statekit.repartition.evict import Selection

    options = parse_storage_options(storage_option)
    prepared = prepare(open_from_cli(checkpoint, storage_option, "state"),
                       resolve(target, options),
                       Selection(where, stale_after, expired, no_timeout, operator),
                       storage_options=options, allow_uncommitted=allow_uncommitted,
                       force=force, dry_run=dry_run)
    from statekit.jobs.session import build_session

    with status(not as_json, "planning…") as progress:
        progress("starting Spark…")
        spark = build_session("statekit-evict", master, spark_conf(master, confs))
        result = run(spark, prepared, dry_run=dry_run, verify=verify, progress=progress)
    if as_json:
        print_json(result.to_dict())
        return
    _render(result)
    if dry_run:
        print_next(command_line(without=("--dry-run",)), "write it for real")


def _render(result: EvictResult) -> None:
    out = console()
    plan = result.plan
    base = plan.base
    out.print(f"[bold]evict[/] {escape(plan.source)} → {escape(plan.target)}: "
              f"{escape(plan.selection.describe())}")
    out.print(f"last committed batch {base.last_committed}; the target gets batch "
              f"{base.repartition_batch} and state version {base.state_version} in all "
              f"{base.to_partitions} partitions ({base.provider})"
              + (f"; watermark {plan.watermark_ms} ms" if plan.watermark_ms is not None else "")
              + (f"; stale: last changed at version ≤ {plan.stale_before}"
                 if plan.stale_before is not None else ""))
    for note in base.notes:
        out.print(f"[yellow]• {escape(note)}[/]")
    table = Table(title="rows to remove" if result.written is None else "rows removed",
                  title_justify="left")
    for name in ("operator", "store", "removed", "per partition", "predicate"):
        table.add_column(name, justify="right" if name == "removed" else "left")
    for s in plan.stores:
        counts = plan.removed.get(f"{s.operator_id}/{s.store}", [])
        table.add_row(f"{s.operator_id} {escape(s.operator_name)}", escape(s.store),
                      f"{sum(counts):,}", " ".join(map(str, counts)),
                      escape(s.predicate if s.touched else f"untouched: {s.why_untouched}"))
    out.print(table)
    for key, rows in plan.sample.items():
        out.print(f"sample of operator/store {key}:")
        for row in rows:
            out.print("  " + escape(json.dumps(row, default=str)))
    if result.written is None:
        out.print("[yellow]dry run: nothing written[/]")
        return
    if result.checks is None:
        out.print("[yellow]not verified (--no-verify)[/]")
    else:
        for c in result.checks:
            out.print(f"verified operator {c.operator_id} store {c.store}: {c.source_rows:,} "
                      f"source rows − {c.removed_rows:,} removed = {c.target_rows:,} target "
                      "rows, identical as multisets, all in their hash partition")
    out.print(f"[bold green]published[/] {escape(plan.target)} in {result.seconds:.1f} s")
