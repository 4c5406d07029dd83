"""``statekit rollback``: the checkpoint as it was after an earlier batch, in a NEW
checkpoint, so the unchanged query reprocesses every later batch.

``--list`` and ``--dry-run`` never start a JVM; ``--no-verify`` copies without one. With
verification Spark's state readers must find the same rows in the target as in the source
at that batch before anything is published. The source is only ever read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.next_step import print_real_run
from statekit.cli.options import (
    checkpoint_options,
    command_session,
    json_option,
    open_from_cli,
    parse_storage_options,
    print_json,
    spark_options,
    to_batch_option,
    write_options,
)
from statekit.cli.render import console, status
from statekit.support.presentation import human_bytes

if TYPE_CHECKING:
    from statekit.writes.rollback import RollbackPlan


@click.command("rollback")
@checkpoint_options
@to_batch_option("batch")
@click.option("--list", "list_only", is_flag=True,
              help="List the committed batches, newest first, and whether each is possible "
                   "as B (no JVM; writes nothing).")
@write_options(out_required=False, allow_uncommitted=False)
@click.option("--new-query-id", is_flag=True,
              help="Write a new query id into DST's metadata file instead of copying the "
                   "source's (required when the source's metadata file is lost: Spark does "
                   "not restart without it).")
@click.option("--set-offset", "set_offsets", multiple=True, metavar="[SRC/]KEY=N",
              help="Set where a source resumes in DST to N. KEY: TOPIC:PARTITION or TOPIC "
                   "(every partition) for Kafka, not below 0 (statekit cannot ask the broker "
                   "for its earliest offset); logOffset for the file source, an index into "
                   "sources/ID/ (-1 up to the newest entry DST keeps); offset (rows) or "
                   "timestamp for rate-micro-batch; * (every integer) or a field path for "
                   "any other source. SRC/ picks a source by its id (a v1 offsets entry: its "
                   "position from 0; v2: its sourceId) when the key matches several. "
                   "Repeatable.")
@click.option("--shift-by", "shifts", multiple=True, metavar="[SRC/]KEY=±N",
              help="Move a source's resume point by N: negative replays input, positive "
                   "skips it. Same KEY and SRC/ as --set-offset. Repeatable.")
@spark_options
@json_option
def rollback_command(checkpoint: str, storage_option: tuple[str, ...], batch: int | None,
                     target: str | None, list_only: bool, dry_run: bool, verify: bool,
                     force: bool, file_sink: str | None, new_query_id: bool,
                     set_offsets: tuple[str, ...], shifts: tuple[str, ...],
                     master: str | None,
                     confs: tuple[str, ...], as_json: bool) -> None:
    """Roll CKPT back to committed batch B, in a new checkpoint DST.

    The unchanged query restarted on DST runs every batch after B again (after a bad deploy, a
    poisoned input, a sink that lost data). CKPT is only read; DST holds copies of its files,
    nothing rewritten: metadata, the offsets, commits and source logs up to B, the schema and
    operator metadata, and the state files that load version B+1. commits/B is published
    last, through a staging folder as with statekit repartition. --verify (the default) has
    Spark's statestore reader find the same rows at B in DST as in CKPT before publishing;
    --no-verify copies without a JVM. --list and --dry-run start no JVM either.

    --list names every committed batch, newest first, and why a batch is impossible: Spark
    purged the state files that rebuild it (minBatchesToRetain), offsets/B, offsets/B-1 or
    commits/B is missing or does not parse, or the file source compacted its log after it.
    Damage after B is what a rollback repairs, so a broken newest log entry is no obstacle.
    Refused with nothing written: a batch not committed or not possible (exit 3), a query that
    looks live or a non-empty DST (exit 6).

    Sinks. A file sink skips every batch its _spark_metadata log already holds without running
    it, so a stateful query then fails to load its state: pass --file-sink PATH, and the log
    entries after B move into PATH/_statekit_sink_log_backup/ (never deleted) so the re-run
    batches write their output again; from then on the sink belongs to DST. Other sinks
    (foreachBatch, Kafka) receive the re-run batches again: duplicates unless the sink is
    idempotent per batch id.

    Source offsets. --set-offset and --shift-by change where each source resumes in DST: back
    to replay input, forward to skip it (as Kafka Streams' reset tool does). Without
    --to-batch the batch is the last committed one and only the offsets change. State is kept
    as of B: replayed input is counted again by aggregations (dropped by deduplication);
    skipped input never reaches the state. Both options repeat and apply in order; only the
    edited sources change, and offsets/B-1 is lowered with them where Spark would otherwise
    fail its start ≤ end check. --dry-run prints the diff. Exit 3: a key that matches no
    source, or several without SRC/; a negative result; a file offset past the log.

    --json: --list gives one object per batch ("batch", "possible", "reason"); otherwise the
    plan, and after a write the result and where the sink's log entries went.

    Examples:

    \b
        statekit rollback demo/checkpoint --list
        statekit rollback demo/checkpoint --to-batch 5 --out demo/at-5 --dry-run
        statekit rollback demo/checkpoint --to-batch 5 --out demo/at-5 \\
            --file-sink demo/output
        statekit rollback CKPT --out CKPT-replay --shift-by orders=-5000 --dry-run
        statekit rollback CKPT --out CKPT-skip --set-offset orders:3=1200000
    """
    from statekit.writes.rollback import rollback_choices
    from statekit.writes.source_offsets import parse_edit

    edits = ([parse_edit(text, shift=False) for text in set_offsets]
             + [parse_edit(text, shift=True) for text in shifts])

    # a damaged ledger after the chosen batch is what a rollback repairs: the batches it
    # keeps are checked by plan_rollback (and shown by --list)
    ckpt = open_from_cli(checkpoint, storage_option, allow_missing_metadata=True)
    if list_only:
        choices = rollback_choices(ckpt)
        if as_json:
            print_json([{"batch": c.batch, "possible": c.possible, "reason": c.reason}
                        for c in choices])
            return
        table = Table(title=f"rollback targets of {escape(ckpt.location.url)}",
                      title_justify="left")
        for name in ("batch", "possible", "why not"):
            table.add_column(name, justify="right" if name == "batch" else "left")
        for c in choices:
            table.add_row(str(c.batch), "yes" if c.possible else "[red]no[/]",
                          escape(c.reason))
        console().print(table)
        return
    if batch is None and edits and ckpt.committed_batches:
        batch = max(ckpt.committed_batches)  # only the offsets change
    if batch is None or target is None:
        raise click.UsageError("--to-batch and --out are required (or pass --list)")
    from statekit.checkpoint.location import resolve
    from statekit.jobs.actions.rollback import prepare, run

    options = parse_storage_options(storage_option)
    destination = resolve(target, options)
    prepared = prepare(ckpt, destination, batch, force=force,
                       new_query_id=new_query_id,
                       file_sink=resolve(file_sink, options) if file_sink else None,
                       offset_edits=edits, dry_run=dry_run)
    plan = prepared.plan
    if not as_json:  # what the rollback means (sinks included) before anything is written
        _render_plan(plan)
    spark = None
    with status(not as_json and not dry_run, "planning…") as progress:
        if verify and not dry_run:
            progress("starting Spark…")
            spark = command_session("statekit-rollback", master, confs)
        outcome = run(spark, prepared, dry_run=dry_run, progress=progress)
    if as_json:
        print_json(outcome.to_dict())
        return
    if outcome.result is None:
        print_real_run(ckpt, destination, options)
        return
    result, backup = outcome.result, outcome.sink_log_backup
    verdict = ("verified: the same rows in every store at batch "
               f"{plan.batch}" if result.checks is not None else "not verified (--no-verify)")
    console().print(f"[green]published[/] {escape(plan.target)} in {result.seconds:.1f} s; "
                    f"{verdict}")
    if backup is not None:
        console().print(f"file sink: moved {len(plan.sink_entries)} log entries after batch "
                        f"{plan.batch} to {escape(backup)} — restart only the new checkpoint "
                        "against this sink from now on")


def _render_plan(plan: RollbackPlan) -> None:
    out = console()
    out.print(f"[bold]rollback[/] {escape(plan.source)} → {escape(plan.target)}: last "
              f"committed batch {plan.last_committed} → {plan.batch}")
    for note in plan.notes:
        out.print(f"[yellow]• {escape(note)}[/]")
    if plan.offset_changes:
        table = Table(title=f"source offsets of batch {plan.batch} (where the restart "
                            "resumes)", title_justify="left")
        for name in ("source", "kind", "key", "before", "after", "change", "effect"):
            table.add_column(name, justify="right" if name in ("before", "after", "change")
                             else "left")
        for c in plan.offset_changes:
            table.add_row(c.source, c.kind, escape(c.key), str(c.before), str(c.after),
                          f"{c.delta:+d}", escape(c.effect))
        out.print(table)
        if plan.offsets_lowered:
            b = plan.batch
            out.print(f"offsets/{b - 1} lowered to match (Spark calls getBatch(offsets/{b - 1}"
                      f", offsets/{b}) on restart; V1 sources such as the file source require "
                      "start ≤ end): " + ", ".join(
                          f"{c.source}/{escape(c.key)} {c.before} → {c.after}"
                          for c in plan.offsets_lowered))
        out.print("[yellow]• state is kept as of batch "
                  f"{plan.batch}: replayed input is counted again by aggregations (dropped "
                  "by deduplication); skipped input never reaches the state[/]")
    out.print(f"{len(plan.copied)} files copied ({human_bytes(plan.state_bytes)} of state, "
              f"version {plan.batch + 1}); {plan.reruns}")
    if plan.file_sink:
        out.print(f"file sink {escape(plan.file_sink)}: {len(plan.sink_entries)} log entries "
                  f"after batch {plan.batch} move out of its _spark_metadata, so the rerun "
                  "batches write their output again")
    else:
        out.print("[yellow]• sinks: a file sink skips the batches its _spark_metadata log "
                  "already has without running them, so a stateful query writes no state "
                  "for them and then fails to load it: pass --file-sink PATH. Other sinks "
                  "receive the rerun batches again (duplicates unless they are idempotent "
                  "per batch id)[/]")
