"""``statekit tui``: the Textual app over one checkpoint (read-only unless --allow-write).

The checkpoint is opened here first, so a wrong path is a one-line error with an exit code
rather than an app showing nothing; its first snapshot is then built in a thread while
Textual is imported and the app starts.
"""

from __future__ import annotations

import click

from statekit.cli.options import (
    checkpoint_options,
    cores_option,
    open_from_cli,
    parse_storage_options,
    progress_log_option,
    rto_option,
)


@click.command("tui")
@checkpoint_options
@click.option("--watch", type=click.FloatRange(min=0.5), metavar="SECONDS",
              help="Re-read the checkpoint every SECONDS (a running query's new batches).")
@cores_option
@click.option("--allow-write", is_flag=True,
              help="Allow actions that write a new checkpoint (Repartition and Fix tabs: "
                   "repartition, migrate, rollback, evict).")
@progress_log_option
@rto_option
def tui_command(checkpoint: str, storage_option: tuple[str, ...], watch: float | None,
                cores: int | None, allow_write: bool, progress_log: str | None,
                rto: float | None) -> None:
    """Browse CKPT: a dashboard, operators → partitions → files → records, batches, growth,
    recovery, state rows, repartition, and with --progress-log Spark's query charts. Keys: ? help,
    / filter, r refresh, q quit, ctrl+p command palette.

    Example: statekit tui demo/checkpoint --progress-log demo/progress.jsonl --rto 30s --watch 5
    """
    from statekit.gc_pause import long_running_process
    from statekit.tui.model import snapshot_in_background

    long_running_process()  # refreshes for hours: each pause's cycles must be collected
    options = parse_storage_options(storage_option)
    opened = open_from_cli(checkpoint, storage_option, allow_missing_metadata=True)
    if progress_log:  # a wrong path or a file that is no progress log: one line, now
        from statekit.cli.options import read_progress_text
        from statekit.progress_log import parse_query

        parse_query(read_progress_text(progress_log, storage_option), shown=progress_log)
    first = snapshot_in_background(checkpoint, options, opened=opened)  # while Textual loads
    from statekit.tui.app import run_tui

    run_tui(checkpoint, storage_options=options, watch=watch, cores=cores,
            allow_write=allow_write, first=first, progress=progress_log, rto_s=rto)
