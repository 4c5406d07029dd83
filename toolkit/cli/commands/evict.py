"""``statekit evict``: the source's state minus the selected rows, in a NEW checkpoint.

Thin: the selection, refusals and plan come from :mod:`statekit.writes.evict` (no JVM:
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
    command_session,
    json_option,
    open_from_cli,
    operator_option,
    parse_storage_options,
    print_json,
    refuse_jvm_writer,
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
              help="(flat)MapGroupsWithState, applyInPandasWithState: remove the rows whose "
                   "event-time timeout is behind the next batch's watermark "
                   "(commits/N's nextBatchWatermarkMs): Spark would fire them at the next "
                   "batch; evicting them skips the timeout call.")
@click.option("--no-timeout", is_flag=True,
              help="(flat)MapGroupsWithState, applyInPandasWithState: remove the rows that "
                   "carry no timeout at all, which never expire (every row of a NoTimeout "
                   "query).")
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

    Starts a JVM. For leaked keys, poison keys, timeouts that never fired. CKPT is only read.
    Like statekit repartition, DST gets a batch N+1 (N's offsets, the same partition count)
    and state version N+2 in every partition, built in a staging folder, verified and
    published with one rename. The rows are rebuilt from the files in executor tasks; Spark
    evaluates the selection, and the kept rows' bytes, never re-encoded, become DST's state
    (HDFS: .snapshot files; RocksDB: Spark's state rewriter). The verification reads both
    through Spark: the source's rows minus the removed ones equal DST's, every row in its hash
    partition, and (without --stale-after) no row of DST still matches.

    The selection: --where, --stale-after, --expired, --no-timeout. The conditions narrow each
    other (AND); --expired and --no-timeout together select either. A store the selection
    cannot apply to is copied unchanged; --operator limits the selection to one operator.
    --stale-after counts key age as statekit growth --stale-after does (RocksDB without
    changelogs: unchanged since the oldest retained zip).

    What an evicted row means: an aggregation's key starts counting again; the next duplicate
    of a deduplicated key passes once; a session window's session is gone; a
    (flat)MapGroupsWithState or applyInPandasWithState group starts with no state. A
    stream-stream join is refused (exit 5: its stores must agree); use --operator for another
    operator. transformWithState (RocksDB) loses whole grouping keys in every column family:
    --where sees key.FIELD only (value is exit 3), --stale-after is exit 5, --expired does
    not apply.

    Exit 3: a predicate Spark cannot evaluate (Spark's message), or nothing selected. Exit 5:
    --expired without a timeout operator. Exit 6: a non-empty DST or a query that looks live.
    --dry-run counts the rows each operator and partition would lose and shows a decoded
    sample. --json: "plan" (with "removed" per store and partition, and "sample"),
    "written" and "verification".

    Examples:

    \b
        statekit evict demo/checkpoint --out demo/evicted --stale-after 10
        statekit evict demo/checkpoint --out demo/evicted --expired --no-timeout
        statekit evict demo/checkpoint --out demo/evicted --dry-run \\
            --where "key.user_id IN ('u0042')"
    """
    from statekit.checkpoint.location import resolve
    from statekit.jobs.actions.evict import prepare, run
    from statekit.writes.evict import Selection

    options = parse_storage_options(storage_option)
    prepared = prepare(open_from_cli(checkpoint, storage_option, "state"),
                       resolve(target, options),
                       Selection(where, stale_after, expired, no_timeout, operator),
                       storage_options=options, allow_uncommitted=allow_uncommitted,
                       force=force, dry_run=dry_run)
    if not dry_run:
        refuse_jvm_writer("evict", prepared.plan.jvm_writer)
    with status(not as_json, "planning…") as progress:
        progress("starting Spark…")
        spark = command_session("statekit-evict", master, confs)
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
