"""``statekit tui``: the Textual app over one checkpoint or a fleet of them (read-only unless
--allow-write).

One checkpoint is opened here first, so a wrong path is a one-line error with an exit code
rather than an app showing nothing; its first snapshot is then built in a thread while
Textual is imported and the app starts. Several open on the fleet list, where a checkpoint
that cannot be read shows its error in its own row.
"""

from __future__ import annotations

from typing import Any

import click

from statekit.cli.options import (
    checkpoint_urls,
    checkpoints_from_option,
    cores_option,
    open_from_cli,
    parse_storage_options,
    progress_log_option,
    rto_option,
    storage_option,
)


@click.command("tui")
@click.argument("checkpoints", nargs=-1, metavar="CKPT...")
@checkpoints_from_option
@storage_option
@click.option("--watch", type=click.FloatRange(min=0.5), metavar="SECONDS",
              help="Re-read the checkpoint every SECONDS (a running query's new batches).")
@cores_option
@click.option("--allow-write", is_flag=True,
              help="Allow actions that write a new checkpoint (Repartition and Fix tabs: "
                   "repartition, migrate, rollback, evict).")
@progress_log_option
@rto_option
@click.option("--web", "web", default=None, metavar="[HOST:]PORT",
              help="Serve the app to browsers (textual-serve) instead of this terminal; "
                   "binds to 127.0.0.1 unless HOST is given; writes still need "
                   "--allow-write.")
def tui_command(checkpoints: tuple[str, ...], listing: Any, storage_option: tuple[str, ...],
                watch: float | None, cores: int | None, allow_write: bool,
                progress_log: str | None, rto: float | None, web: str | None) -> None:
    """Browse CKPT: a dashboard, operators → partitions → files → records, batches, growth,
    recovery, state rows, repartition, and with --progress-log Spark's query charts. Several
    checkpoints (or --checkpoints-from) open on a fleet list: one row per checkpoint, Enter
    opens one, Esc returns. Keys: ? help, / filter, r refresh, q quit, ctrl+p command palette.

    Example: statekit tui demo/checkpoint --progress-log demo/progress.jsonl --rto 30s --watch 5
    (--web 8000: the same app at http://127.0.0.1:8000)
    """
    from statekit.gc_pause import long_running_process

    long_running_process()  # refreshes for hours: each pause's cycles must be collected
    urls = checkpoint_urls(checkpoints, listing)
    options = parse_storage_options(storage_option)
    if progress_log and len(urls) > 1:
        raise click.UsageError("--progress-log belongs to one checkpoint: name one")
    if web is not None:
        from statekit.cli.lazy import ARGV_KEY
        from statekit.cli.tui_web import serve, served_command, web_address

        host, port = web_address(web)
        if len(urls) == 1:  # a wrong path is a one-line error here, not in every browser
            open_from_cli(urls[0], storage_option, allow_missing_metadata=True)
        argv = click.get_current_context().meta.get(ARGV_KEY) or ["tui", *urls]
        serve(served_command(list(argv)), host, port, allow_write=allow_write,
              checkpoints=len(urls))
        return
    first = None
    if len(urls) == 1:
        from statekit.tui.model import snapshot_in_background

        # a wrong path is a one-line error now, not an app showing nothing
        opened = open_from_cli(urls[0], storage_option, allow_missing_metadata=True)
        if progress_log:  # a wrong path or a file that is no progress log: one line, now
            from statekit.cli.options import read_progress_text
            from statekit.progress_log import parse_query

            parse_query(read_progress_text(progress_log, storage_option), shown=progress_log)
        first = snapshot_in_background(urls[0], options, opened=opened)  # while Textual loads
    from statekit.tui.app import run_tui

    run_tui(urls[0], storage_options=options, watch=watch, cores=cores,
            allow_write=allow_write, first=first, progress=progress_log, rto_s=rto,
            fleet=urls if len(urls) > 1 else None)
