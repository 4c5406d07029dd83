"""``statekit state …``: state rows through Spark's state data source.

Every sub-command validates its request against the pure-Python checkpoint model first (so a
typo costs milliseconds, not a JVM start), then starts Spark once, sets the confs Spark's
reader needs for this checkpoint, runs, and renders.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.options import (
    F,
    batch_option,
    checkpoint_options,
    json_option,
    limit_option,
    open_from_cli,
    operator_option,
    out_option,
    partition_option,
    print_json,
    renamed_option,
    spark_options,
    start_spark_for,
    store_option,
    to_batch_option,
    where_option,
)
from statekit.cli.render import console
from statekit.support.errors import UnsafeOperation
from statekit.support.presentation import human_bytes, iso_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.jobs.state_analysis import OperatorRow


SHOW_ROWS = 20
"""Rows ``state show`` prints without ``--limit``."""


def target_options(command: F) -> F:
    for option in reversed([
        operator_option,
        store_option,
        click.option("--join-side", type=click.Choice(["left", "right"]),
                     help="Stream-stream joins: read one side's rows (or name a --store)."),
        click.option("--state-var", metavar="NAME",
                     help="transformWithState: the state variable to read (value, list or "
                          "map state)."),
        click.option("--timers", is_flag=True,
                     help="transformWithState: read the registered timers instead of a "
                          "state variable."),
    ]):
        command = option(command)
    return command


class _Context:
    """The checkpoint, the validated target, and a Spark session started on first use."""

    def __init__(self, checkpoint: str, storage_option: tuple[str, ...], master: str | None,
                 confs: tuple[str, ...], batch: int | None = None, *, operator: int | None,
                 store: str | None, join_side: str | None, state_var: str | None,
                 timers: bool) -> None:
        from statekit.jobs.state_reader import resolve_target

        self.ckpt = open_from_cli(checkpoint, storage_option, "state")
        click.get_current_context().meta[_CKPT_META] = self.ckpt
        self.target = resolve_target(self.ckpt, batch=batch, operator=operator, store=store,
                                     join_side=join_side, state_var=state_var, timers=timers)
        self.master, self.confs = master, confs

    def spark(self) -> SparkSession:
        return start_spark_for(self.ckpt, "statekit-state", self.master, self.confs)

    @property
    def batch(self) -> int:
        from statekit.jobs.state_reader import target_batch

        return target_batch(self.ckpt, self.target)


_CKPT_META = "statekit.state.checkpoint"


class _StateGroup(click.Group):
    """Every ``state`` command: a Spark load failure is traced to the damaged file."""

    def invoke(self, ctx: click.Context) -> Any:
        from statekit.jobs.state_reader import StateLoadFailed, name_damaged_file

        try:
            return super().invoke(ctx)
        except StateLoadFailed as failed:
            ckpt = ctx.meta.get(_CKPT_META)
            if ckpt is None:
                raise
            raise name_damaged_file(ckpt, failed) from failed


@click.group("state", cls=_StateGroup)
def state_group() -> None:
    """State rows through Spark's own state data source (starts a JVM).

    The rows are exactly what Spark would load on restart, read with its statestore,
    readChangeFeed and state-metadata readers. Each request is first checked against the
    checkpoint without a JVM: an unknown operator, a join without --join-side or --store, a
    transformWithState operator without --state-var or --timers fail at once (exit 3), naming
    what exists. Then Spark starts once, with the session confs its reader cannot infer
    (checkpoint format v2, RocksDB changelog checkpointing) set from the files. When Spark
    cannot load the state, the one-line error names the damaged file.
    """


@state_group.command("show")
@checkpoint_options
@target_options
@batch_option
@partition_option()
@where_option
@limit_option
@spark_options
@json_option
def show_command(checkpoint: str, storage_option: tuple[str, ...], operator: int | None,
                 store: str | None, join_side: str | None, state_var: str | None, timers: bool,
                 batch: int | None, partition: int | None, where: str | None,
                 limit: int | None,
                 master: str | None, confs: tuple[str, ...], as_json: bool) -> None:
    """State rows as a table, one column per key and value field.

    --where filters with Spark SQL on the key and value structs before flattening; --limit
    caps the rows (default 20). --json: "target", "batch_id" and "rows" (one object per row).

    Examples:

    \b
        statekit state show demo/checkpoint --limit 5 \\
            --where "value.groupState.phase = 'Flagged'"
        statekit state show path/to/join-ckpt --join-side left
        statekit state show path/to/tws-ckpt --state-var count
    """
    if limit == 0:  # the shared --limit allows 0 (dump); a table of no rows shows nothing
        raise click.BadParameter("state show needs at least 1 row", param_hint="'--limit'")
    from statekit.jobs.state_reader import collect, flatten, read_state, to_arrow

    ctx = _Context(checkpoint, storage_option, master, confs, batch, operator=operator,
                   store=store, join_side=join_side, state_var=state_var, timers=timers)
    spark = ctx.spark()
    df = read_state(spark, ctx.target)
    if partition is not None:
        df = df.where(df.partition_id == partition)
    if where:  # on the key/value structs, before flattening: key.user_id resolves as written
        df = collect(lambda: df.where(where), f"applying --where {where!r}")
    limit = SHOW_ROWS if limit is None else limit
    table = to_arrow(flatten(df), limit)
    rows = table.to_pylist()
    if as_json:
        print_json({"target": ctx.target.label, "batch_id": ctx.batch, "rows": rows})
        return
    out = console()
    view = Table(title=f"{ctx.target.label} · batch {ctx.batch}", title_justify="left")
    for name in table.column_names:
        view.add_column(escape(name), overflow="fold")
    for row in rows:
        view.add_row(*[escape(_cell(v)) for v in row.values()])
    out.print(view)
    out.print(f"{len(rows)} rows shown (--limit {limit})")


def _cell(value: object) -> str:
    from statekit.formats.values import render_value

    return render_value(value, max_len=120)


@state_group.command("export")
@checkpoint_options
@target_options
@batch_option
@out_option(dest="out")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "csv"]),
              default="parquet", show_default=True,
              help="Output format (CSV writes nested values as JSON text).")
@spark_options
@json_option
def export_command(checkpoint: str, storage_option: tuple[str, ...], operator: int | None,
                   store: str | None, join_side: str | None, state_var: str | None,
                   timers: bool, batch: int | None, out: str, fmt: str, master: str | None,
                   confs: tuple[str, ...], as_json: bool) -> None:
    """Write every state row to Parquet, JSON lines or CSV files.

    Each row with its key and value fields, partition_id and batch_id. Spark writes them
    (nothing is collected to the driver: state larger than memory is fine); a progress bar
    shows finished tasks. --out must be a new or empty folder (exit 6). --json: "rows",
    "out", "format" and "seconds".

    Example:

    \b
        statekit state export demo/checkpoint --out /tmp/state --format jsonl
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from statekit.jobs.state_analysis import export_rows

    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise UnsafeOperation("output exists and is not empty; choose a new folder", path=out)
    ctx = _Context(checkpoint, storage_option, master, confs, batch, operator=operator,
                   store=store, join_side=join_side, state_var=state_var, timers=timers)
    spark = ctx.spark()
    with Progress(TextColumn("exporting"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total} tasks"), TimeElapsedColumn(), console=console(),
                  transient=True, disable=as_json) as progress:
        task = progress.add_task("export", total=None)
        result = export_rows(spark, ctx.target, ctx.batch, out, fmt,
                             lambda done, total: progress.update(task, completed=done,
                                                                 total=total or None))
    if as_json:
        print_json({"target": ctx.target.label, "batch_id": ctx.batch, "out": result.out,
                    "format": result.format, "rows": result.rows, "seconds": result.seconds})
        return
    rate = result.rows / result.seconds if result.seconds else 0
    console().print(f"exported {result.rows} rows of {ctx.target.label} at batch {ctx.batch} "
                    f"to {out} ({fmt}) in {result.seconds:.1f} s ({rate:,.0f} rows/s)")


@state_group.command("changes")
@checkpoint_options
@target_options
@click.option("--from-batch", "start", type=click.IntRange(min=0), default=None, metavar="B",
              help="First batch of the feed (required).")
@renamed_option("--from", "--from-batch", "start", type=int)
@to_batch_option("end")
@renamed_option("--to", "--to-batch", "end", type=int)
@click.option("--rows", "show_rows", type=click.IntRange(min=0), default=0, metavar="N",
              help="Also show the first N changed rows, by batch and partition (default: "
                   "none).")
@spark_options
@json_option
def changes_command(checkpoint: str, storage_option: tuple[str, ...], operator: int | None,
                    store: str | None, join_side: str | None, state_var: str | None,
                    timers: bool, start: int | None, end: int | None, show_rows: int,
                    master: str | None, confs: tuple[str, ...], as_json: bool) -> None:
    """Upserts and deletes per batch, from Spark's change feed.

    Reads Spark's readChangeFeed from --from-batch to --to-batch (default: the last
    committed); --rows also shows the changed rows themselves. --json: "batches" (batch_id,
    upserts, deletes) and "rows".

    Example:

    \b
        statekit state changes demo/checkpoint --from-batch 30 --rows 10
    """
    from statekit.jobs.state_analysis import summarize_changes
    from statekit.jobs.state_reader import flatten, read_changes, to_arrow

    if start is None:
        raise click.UsageError("give the feed's first batch: --from-batch B")
    ctx = _Context(checkpoint, storage_option, master, confs, operator=operator, store=store,
                   join_side=join_side, state_var=state_var, timers=timers)
    spark = ctx.spark()
    feed = read_changes(spark, ctx.target, start, end)
    summary = summarize_changes(feed)
    rows = (to_arrow(flatten(feed).orderBy("batch_id", "partition_id"), show_rows).to_pylist()
            if show_rows else [])
    if as_json:
        print_json({"target": ctx.target.label,
                    "batches": [vars(b) for b in summary], "rows": rows})
        return
    view = Table(title=f"change feed of {ctx.target.label}", title_justify="left")
    for name in ("batch", "upserts", "deletes"):
        view.add_column(name, justify="right")
    for b in summary:
        view.add_row(str(b.batch_id), str(b.upserts), str(b.deletes))
    out = console()
    out.print(view)
    if rows:
        detail = Table(title="changed rows", title_justify="left")
        for name in rows[0]:
            detail.add_column(escape(name), overflow="fold")
        for row in rows:
            detail.add_row(*[escape(_cell(v)) for v in row.values()])
        out.print(detail)


@state_group.command("stats")
@checkpoint_options
@target_options
@batch_option
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many of the largest values to list, with their keys.")
@spark_options
@json_option
def stats_command(checkpoint: str, storage_option: tuple[str, ...], operator: int | None,
                  store: str | None, join_side: str | None, state_var: str | None,
                  timers: bool, batch: int | None, top: int, master: str | None,
                  confs: tuple[str, ...], as_json: bool) -> None:
    """Rows per partition, skew, value sizes, timeouts.

    Rows per partition and their skew (max/mean); value size percentiles (of the value as
    JSON) and the --top largest values with their keys. For flatMapGroupsWithState and
    applyInPandasWithState also the share of keys without a timeout (100 % for NoTimeout
    queries) and timeout − watermark percentiles. --json: the same as one object.

    Example:

    \b
        statekit state stats demo/checkpoint --top 5
    """
    from statekit.jobs.state_analysis import state_stats

    ctx = _Context(checkpoint, storage_option, master, confs, batch, operator=operator,
                   store=store, join_side=join_side, state_var=state_var, timers=timers)
    stats = state_stats(ctx.spark(), ctx.ckpt, ctx.target, top)
    if as_json:
        print_json(stats.to_dict())
        return
    out = console()
    out.print(f"[bold]{stats.target}[/] · batch {stats.batch_id} · {stats.rows} rows · "
              f"skew (max/mean rows) {stats.skew}")
    parts = Table(title="rows per partition", title_justify="left")
    parts.add_column("partition", justify="right")
    parts.add_column("rows", justify="right")
    for part, count in stats.rows_per_partition.items():
        parts.add_row(str(part), str(count))
    out.print(parts)
    sizes = stats.value_bytes
    out.print("value size (as JSON): " + ", ".join(
        f"{k} {human_bytes(int(v)) if v is not None else '-'}" for k, v in sizes.items()))
    largest = Table(title=f"{len(stats.largest)} largest values", title_justify="left")
    largest.add_column("key", overflow="fold")
    largest.add_column("size", justify="right")
    for row in stats.largest:
        largest.add_row(escape(row["key"]), human_bytes(row["size"]))
    out.print(largest)
    if stats.no_timeout_share is not None:
        rel = stats.timeout_minus_watermark_s or {}
        out.print(f"keys without a timeout: {stats.no_timeout_share:.1%} · watermark "
                  f"{iso_ms(stats.watermark_ms)} · timeout − watermark (s): " + ", ".join(
                      f"{k} {v:.0f}" if v is not None else f"{k} -" for k, v in rel.items()))


@state_group.command("operators")
@checkpoint_options
@spark_options
@json_option
def operators_command(checkpoint: str, storage_option: tuple[str, ...], master: str | None,
                      confs: tuple[str, ...], as_json: bool) -> None:
    """Spark's state-metadata beside statekit's own reading.

    One row per operator/store: name, partitions and batches, as Spark's state-metadata
    reader reports them and as statekit reads the operator metadata and logs. Any
    disagreement is shown in red
    ("agree": false in --json, one object per row).

    Example:

    \b
        statekit state operators demo/checkpoint
    """
    from statekit.jobs.state_analysis import compare_operators
    from statekit.jobs.state_reader import spark_path

    ckpt = open_from_cli(checkpoint, storage_option, "state")
    rows = compare_operators(start_spark_for(ckpt, "statekit-state", master, confs), ckpt,
                             spark_path(ckpt))
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    view = Table(title="operators: Spark's state-metadata vs statekit", title_justify="left")
    for name in ("operator", "store", "name", "partitions", "batches", "agree"):
        view.add_column(name)
    for r in rows:
        def both(key: str, r: OperatorRow = r) -> str:
            a = (r.spark or {}).get(key)
            b = (r.statekit or {}).get(key)
            return str(a) if a == b else f"[red]Spark {a} / statekit {b}[/]"
        seen = r.spark or r.statekit
        assert seen is not None  # every row comes from Spark's side, statekit's or both
        batches = f"{seen['min_batch_id']}..{seen['max_batch_id']}"
        view.add_row(str(r.operator_id), escape(r.store), both("operator_name"),
                     both("num_partitions"), batches,
                     "yes" if r.agree else "[bold red]NO[/]")
    out = console()
    out.print(view)
    if not all(r.agree for r in rows):
        out.print("[bold red]Spark and statekit disagree[/]: " + json.dumps(
            [r.to_dict() for r in rows if not r.agree], default=str))
