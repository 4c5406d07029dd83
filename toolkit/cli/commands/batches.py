"""``statekit batches``: the retained batch timeline as a table or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.assessment_view import print_assessment
from statekit.cli.options import (
    checkpoint_options,
    decode_option,
    json_option,
    open_from_cli,
    print_json,
)
from statekit.cli.render import console, status
from statekit.support.presentation import dash, human_duration, iso_ms

if TYPE_CHECKING:
    from rich.console import JustifyMethod

_COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("batch", "right"), ("committed", "center"), ("watermark", "left"), ("planned at", "left"),
    ("interval", "right"), ("partitions", "right"), ("source offsets", "left"))


@click.command("batches")
@checkpoint_options
@decode_option
@json_option
def batches_command(checkpoint: str, storage_option: tuple[str, ...], decode: bool,
                    as_json: bool) -> None:
    """One row per retained batch: committed, watermark, timing, partitions, offsets.

    No JVM. Each batch of offsets/ and commits/: committed or not (damaged when its log entry
    does not parse: Spark would not take it as committed either), the event-time watermark,
    when it was planned, the interval since the previous batch, the pinned partition count,
    and each source's offset in brief (logOffset=36; Kafka: topic, partitions and the sum of
    their offsets). The ledger's problems (see statekit report) follow the table, then the
    restart line every command shows (statekit doctor's verdict, the batch a restart runs and
    the state version it loads). Exits 0 on a damaged ledger: the table is the answer.
    --json: "batches" (one object per batch), "last_committed", "problems", "restart" and
    "assessment".

    Example:

    \b
        statekit batches demo/checkpoint
    """
    from statekit.assess.assessment import assess
    from statekit.report.batches import batch_timeline

    ckpt = open_from_cli(checkpoint, storage_option, allow_missing_metadata=True)
    timeline = batch_timeline(ckpt)
    with status(decode and not as_json, "reading the files a restart loads…") as on_progress:
        assessment = assess(ckpt, shown=checkpoint, decode=decode, growth=False,
                            progress=on_progress)
    if as_json:
        print_json({**timeline.to_dict(), "restart": assessment.restart_dict(),
                    "assessment": assessment.to_dict()})
        return
    table = Table(title=f"{len(timeline.rows)} retained batches", title_justify="left")
    for name, justify in _COLUMNS:
        table.add_column(name, justify=justify)
    for row in timeline.rows:
        committed = "yes" if row.committed else "[bold yellow]NO[/]"
        if row.problem:
            committed = "[bold red]damaged[/]"
        table.add_row(str(row.batch_id), committed, iso_ms(row.watermark_ms),
                      iso_ms(row.timestamp_ms),
                      human_duration(row.interval_ms / 1000 if row.interval_ms is not None
                                     else None),
                      dash(row.shuffle_partitions), escape("; ".join(row.sources)))
    out = console()
    out.print(table)
    for severity, line in timeline.problems:
        style = "bold red" if severity == "error" else "yellow"
        out.print(f"[{style}]{severity}[/] {escape(line)}")
    out.print()
    print_assessment(assessment)
