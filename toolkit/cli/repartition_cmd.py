"""``statekit repartition`` and ``statekit migrate``: the source's state in a NEW checkpoint,
with another partition count and/or another state store provider.

Thin: the refusals, the plan, the Spark run, the verification and the file sink's entry all
come from :mod:`statekit.jobs.repartition_action`, the same steps the TUI runs (no JVM before
the plan is accepted: a refused request never starts Spark). The source is only ever read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.options import (
    changelog_option,
    checkpoint_options,
    json_option,
    open_from_cli,
    parse_storage_options,
    partitions_option,
    print_json,
    spark_conf,
    spark_options,
    write_options,
)
from statekit.cli.render import command_line, console, print_next, status
from statekit.presentation import human_bytes

if TYPE_CHECKING:
    from statekit.jobs.repartition import RepartitionResult
    from statekit.repartition.plan import RepartitionPlan


F = TypeVar("F", bound=Callable[..., Any])


def _common_options(command: F) -> F:
    for decorator in reversed([checkpoint_options, write_options(), spark_options,
                               json_option]):
        command = decorator(command)
    return command


@click.command("repartition")
@partitions_option(required=True)
@_common_options
def repartition_command(checkpoint: str, storage_option: tuple[str, ...], partitions: int,
                        **options: Any) -> None:
    """Repartition the state of CKPT into a new checkpoint DST (the source is never written).

    Example: statekit repartition demo/checkpoint --partitions 4 --out demo/checkpoint-4
    """
    _run(checkpoint, storage_option, partitions, **options)


@click.command("migrate")
@click.option("--to", "to_provider", type=click.Choice(["rocksdb", "hdfs"]), required=True,
              help="The state store provider of the new checkpoint.")
@partitions_option()
@changelog_option
@_common_options
def migrate_command(checkpoint: str, storage_option: tuple[str, ...], to_provider: str,
                    partitions: int | None, changelog: bool, **options: Any) -> None:
    """Move the state of CKPT to another state store provider, in a new checkpoint DST.

    Example: statekit migrate demo/checkpoint --to rocksdb --out demo/checkpoint-rocksdb
    """
    _run(checkpoint, storage_option, partitions, to_provider=to_provider, changelog=changelog,
         **options)


def _run(checkpoint: str, storage_option: tuple[str, ...], partitions: int | None, *,
         target: str, dry_run: bool, verify: bool, allow_uncommitted: bool, force: bool,
         file_sink: str | None, master: str | None, confs: tuple[str, ...], as_json: bool,
         to_provider: str | None = None, changelog: bool = False) -> None:
    from statekit.checkpoint.location import resolve
    from statekit.jobs.repartition_action import prepare, run

    options = parse_storage_options(storage_option)
    prepared = prepare(open_from_cli(checkpoint, storage_option, "state"), resolve(target, options),
                       partitions, to_provider=to_provider, changelog=changelog,
                       storage_options=options,
                       file_sink=resolve(file_sink, options) if file_sink else None,
                       allow_uncommitted=allow_uncommitted, force=force, dry_run=dry_run)
    from statekit.jobs.session import build_session

    with status(not as_json, "planning…") as progress:
        progress("starting Spark…")
        spark = build_session("statekit-migrate" if to_provider else "statekit-repartition",
                              master, spark_conf(master, confs))
        outcome = run(spark, prepared, dry_run=dry_run, verify=verify, progress=progress)
    if as_json:
        print_json(outcome.to_dict())
        return
    _render_plan(outcome.plan, verify)
    if outcome.result is not None:
        _render_result(outcome.result)
    if outcome.file_sink_entry:
        verb = "would write" if outcome.dry_run else "wrote"
        console().print(f"file sink: {verb} {escape(outcome.file_sink_entry)} — restart only "
                        "the new checkpoint against this sink from now on")
    if outcome.dry_run:
        print_next(command_line(without=("--dry-run",)), "write it for real")


def _render_plan(plan: RepartitionPlan, verify: bool) -> None:
    out = console()
    verb = "migrate" if plan.migrates else "repartition"
    provider = (f"{plan.provider} → {plan.target_provider}" if plan.migrates
                else plan.provider) + (" (changelog)" if plan.changelog else "")
    out.print(f"[bold]{verb}[/] {escape(plan.source)} → {escape(plan.target)}: "
              f"{plan.from_partitions} → {plan.to_partitions} partitions · provider "
              f"{provider} · codec {plan.codec}")
    out.print(f"last committed batch {plan.last_committed}; the target gets repartition batch "
              f"{plan.repartition_batch} and state version {plan.state_version} in every new "
              f"partition; {len(plan.copied_logs)} log/metadata files copied")
    for note in plan.notes:
        out.print(f"[yellow]• {escape(note)}[/]")
    table = Table(title="stores", title_justify="left")
    for name in ("operator", "store", "partitions", "files read", "bytes read", "keys"):
        table.add_column(name, justify="left" if name in ("operator", "store") else "right")
    for s in plan.stores:
        table.add_row(f"{s.operator_id} {escape(s.operator_name)}", escape(s.store),
                      str(s.partitions), str(s.files), human_bytes(s.bytes),
                      "-" if s.keys is None else f"{s.keys:,}")
    out.print(table)
    estimate = plan.estimate(verify)
    seconds = estimate["seconds"]
    out.print(f"to write: {plan.files_to_write} files, about {human_bytes(plan.read_bytes)} of "
              "state (the live state is at most what the source loads)"
              + (f"; estimated {seconds:.0f} s" if seconds is not None else ""))
    sizes = plan.bytes_per_partition()
    for key, counts in plan.keys_per_partition.items():
        total = sum(counts)
        mean = total / len(counts) if counts else 0
        skew = max(counts) / mean if mean else 0
        table = Table(title=f"operator/store {key}: {total:,} keys in {len(counts)} new "
                            f"partitions, max/mean {skew:.2f}", title_justify="left")
        for name in ("new partition", "keys", "≈ bytes"):
            table.add_column(name, justify="right")
        for p, count in enumerate(counts):
            size = sizes.get(key, [])
            table.add_row(str(p), f"{count:,}", human_bytes(size[p]) if size else "-")
        out.print(table)


def _render_result(result: RepartitionResult) -> None:
    out = console()
    for key, parts in result.written.items():
        out.print(f"operator/store {key}: wrote {len(parts)} partitions "
                  f"({result.plan.target_provider}), "
                  f"{sum(p.keys for p in parts):,} keys, "
                  f"{human_bytes(sum(p.bytes for p in parts))}")
    check = result.verification
    if check is not None:
        for s in check.stores:
            out.print(f"verified operator {s.operator_id} store {s.store}: {s.target_rows:,} "
                      f"rows, identical to the source; all in pmod(hash(key), "
                      f"{result.plan.to_partitions}); state-metadata reports "
                      f"{sorted(set(check.metadata_partitions))} partitions")
    else:
        out.print("[yellow]not verified (--no-verify)[/]")
    out.print(f"[bold green]published[/] {escape(result.target)} in {result.seconds:.1f} s")
