"""``statekit repartition`` and ``statekit migrate``: the source's state in a NEW checkpoint,
with another partition count and/or another state store provider.

Thin: the refusals, the plan, the Spark run, the verification and the file sink's entry all
come from :mod:`statekit.jobs.actions.repartition`, the same steps the TUI runs (no JVM before
the plan is accepted: a refused request never starts Spark). The source is only ever read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.next_step import print_real_run
from statekit.cli.options import (
    changelog_option,
    checkpoint_options,
    command_session,
    json_option,
    open_from_cli,
    parse_storage_options,
    partitions_option,
    print_json,
    refuse_jvm_writer,
    spark_options,
    write_options,
)
from statekit.cli.render import console, status
from statekit.support.presentation import human_bytes

if TYPE_CHECKING:
    from statekit.jobs.repartition import RepartitionResult
    from statekit.writes.repartition_plan import RepartitionPlan


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
    """Write CKPT's state with another partition count into a new checkpoint DST.

    Starts a JVM. CKPT is only read. DST gets what a restart needs, following Spark's own
    repartition: metadata, sources, offsets and commits up to the last committed batch N and
    the schema files; a repartition batch N+1 (offsets/N+1 pins the new
    spark.sql.shuffle.partitions); state version N+2 in every new partition; operator metadata
    with the new count. Each row goes to pmod(hash(key), P), the key being what Spark
    partitions the operator's input by (session windows: without sessionStartTime; joins: the
    join key in all four stores). HDFS state is replayed in executor tasks and written as
    .snapshot files, bytes as Spark wrote them; RocksDB (and transformWithState, every column
    family) through Spark's own state rewriter.

    DST is built in a staging folder beside it (.DST.statekit-staging), verified, and
    published with one rename: a crash leaves no DST. The verification reads both through
    Spark's statestore reader: the same (key, value) rows per operator and store, every row in
    its hash partition, and state-metadata reporting P partitions (exit 8 otherwise, nothing
    published).

    Refused with nothing written (exit 6): the same partition count, an uncommitted last
    batch (unless --allow-uncommitted), a non-empty DST, a query that looks live (unless
    --force). Exit 5: a provider, codec (lz4 and zstd are supported) or operator statekit
    cannot write. Supported: aggregation, dropDuplicates(WithinWatermark),
    flatMapGroupsWithState, applyInPandasWithState, session windows, stream-stream joins,
    transformWithState (RocksDB). A checkpoint without operator metadata (Spark 3.5, or never
    restarted on 4.x) gets it derived from its stores and schema files; an operator that
    cannot be derived is refused with the reason.

    --dry-run prints the plan: the stores, keys per new partition (counted through Spark with
    the same hash) and their skew, the files and bytes to write and an estimated time. A file
    sink's compaction fails on the repartition batch's missing log entry: --file-sink adds it.
    --json: the plan, and after a write the rows written and verified.

    Examples:

    \b
        statekit repartition demo/checkpoint -n 4 --out demo/ckpt-4 --dry-run
        statekit repartition demo/checkpoint -n 4 --out demo/ckpt-4 \\
            --file-sink demo/output
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
    """Move CKPT's state to the other state store provider, in a new checkpoint DST.

    Starts a JVM. Spark pins the provider in the offset log; DST's offsets/N+1 pins the new
    spark.sql.streaming.stateStore.providerClass (and, with --partitions, the new partition
    count), so the unchanged query restarted on DST uses it. The rows move as bytes: every
    state row is the same UnsafeRow key and value for both providers. Into RocksDB Spark's
    state rewriter writes the zip and SSTs; into HDFS executor tasks write .snapshot files.
    Same plan, staging folder, verification, refusals, --dry-run and --file-sink as statekit
    repartition.

    --changelog writes a RocksDB target with changelog checkpointing on; Spark does not pin
    that setting, so restart the query with
    spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true. An HDFS
    target is checkpoint format v1: restart it with checkpointFormatVersion 1 (the default).
    Refused as well: nothing to change, --changelog into HDFS, transformWithState into HDFS
    (its column families need RocksDB).

    Examples:

    \b
        statekit migrate demo/checkpoint --to rocksdb --out demo/rocks --dry-run
        statekit migrate demo/checkpoint --to rocksdb -n 8 --out demo/rocks
        statekit migrate demo/rocks --to hdfs --out demo/hdfs
    """
    _run(checkpoint, storage_option, partitions, to_provider=to_provider, changelog=changelog,
         **options)


def _run(checkpoint: str, storage_option: tuple[str, ...], partitions: int | None, *,
         target: str, dry_run: bool, verify: bool, allow_uncommitted: bool, force: bool,
         file_sink: str | None, master: str | None, confs: tuple[str, ...], as_json: bool,
         to_provider: str | None = None, changelog: bool = False) -> None:
    from statekit.checkpoint.location import resolve
    from statekit.jobs.actions.repartition import prepare, run

    options = parse_storage_options(storage_option)
    ckpt = open_from_cli(checkpoint, storage_option, "state")
    destination = resolve(target, options)
    prepared = prepare(ckpt, destination, partitions, to_provider=to_provider,
                       changelog=changelog, storage_options=options,
                       file_sink=resolve(file_sink, options) if file_sink else None,
                       allow_uncommitted=allow_uncommitted, force=force, dry_run=dry_run)
    if not dry_run:
        refuse_jvm_writer("migrate" if to_provider else "repartition",
                          prepared.plan.jvm_writer)
    with status(not as_json, "planning…") as progress:
        progress("starting Spark…")
        spark = command_session("statekit-migrate" if to_provider else "statekit-repartition",
                                master, confs)
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
        print_real_run(ckpt, destination, options)


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
