"""``statekit tui``: the Textual app over one checkpoint (read-only unless --allow-write).

The checkpoint is opened here first, so a wrong path is a one-line error with an exit code
rather than an app showing nothing; its first snapshot is then built in a thread while
Textual is imported and the app starts.
"""

from __future__ import annotations

import click

from statekit.cli.options import checkpoint_options, open_from_cli, parse_storage_options


@click.command("tui")
@checkpoint_options
@click.option("--watch", type=click.FloatRange(min=0.5), metavar="SECONDS",
              help="Re-read the checkpoint every SECONDS (a running query's new batches).")
@click.option("--cores", type=click.IntRange(min=1),
              help="Task slots the Recovery screen assumes (default: this machine's cores).")
@click.option("--allow-write", is_flag=True,
              help="Allow actions that write (executing a repartition into a new checkpoint).")
def tui_command(checkpoint: str, storage_option: tuple[str, ...], watch: float | None,
                cores: int | None, allow_write: bool) -> None:
    """Browse CKPT: overview, operators → partitions → files → records, batches, growth,
    recovery. Keys: ? help, / filter, r refresh, q quit, ctrl+p command palette.

    Example: statekit tui demo/checkpoint --watch 5
    """
    from statekit.gc_pause import long_running_process
    from statekit.tui.model import snapshot_in_background

    long_running_process()  # refreshes for hours: each pause's cycles must be collected
    options = parse_storage_options(storage_option)
    opened = open_from_cli(checkpoint, storage_option)
    first = snapshot_in_background(checkpoint, options, opened=opened)  # while Textual loads
    from statekit.tui.app import run_tui

    run_tui(checkpoint, storage_options=options, watch=watch, cores=cores,
            allow_write=allow_write, first=first)
