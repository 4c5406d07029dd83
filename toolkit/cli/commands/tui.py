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
    checkpoints_from_option,
    cores_option,
    executor_options,
    fleet_options,
    progress_log_option,
    rto_option,
    storage_option,
    timeout_option,
)
from statekit.cli.web_token import TOKEN_ENV


@click.command("tui")
@click.argument("checkpoints", nargs=-1, metavar="CKPT...")
@checkpoints_from_option
@storage_option
@click.option("--watch", type=click.FloatRange(min=0.5), metavar="SECONDS",
              help="Re-read the checkpoint (or the fleet list) every SECONDS, at least 0.5: "
                   "a running query's new batches.")
@cores_option
@executor_options
@click.option("--allow-write", is_flag=True,
              help="Allow the Repartition and Fix tabs to write a new checkpoint "
                   "(repartition, migrate, rollback, evict), each after a y/n confirmation. "
                   "The source is never written.")
@progress_log_option
@rto_option
@timeout_option
@click.option("--web", "web", default=None, metavar="[HOST:]PORT",
              help="Serve the app to browsers (textual-serve, one app per browser tab) "
                   "instead of this terminal: 8000 listens on 127.0.0.1:8000, HOST:8000 on "
                   "HOST; off loopback every request needs a token (the URL it prints "
                   "carries one). Writes still need --allow-write. SIGINT/SIGTERM stop the "
                   "server and every app within seconds.")
@click.option("--web-token", "web_token", default=None, envvar=TOKEN_ENV,
              show_envvar=True, metavar="TOKEN",
              help="With --web: the token browsers must present (?token=TOKEN once, then a "
                   "cookie; or Authorization: Bearer TOKEN), at least 16 URL-safe "
                   "characters, also on 127.0.0.1. Default: none on loopback, a random one "
                   "elsewhere. Prefer the environment variable: a command line is visible "
                   "to every local user.")
def tui_command(checkpoints: tuple[str, ...], listing: Any, storage_option: tuple[str, ...],
                watch: float | None, cores: int | None, executors: int,
                executor_memory: float | None, allow_write: bool,
                progress_log: str | None, rto: float | None, timeout: float,
                web: str | None, web_token: str | None) -> None:
    """Browse checkpoints in the terminal (or a browser): the Textual app.

    Read-only unless --allow-write. The JVM starts only when the State, Repartition or Fix tab
    needs it; the rest reads files like the CLI (any path or URL). Tabs:

    \b
    - 1 Overview: the query, last batch, watermark, one row per store (keys,
      bytes, growth verdict, snapshot lag), the restart estimate vs --rto
      and every finding of statekit report
    - 2 Operators: operator → partitions → files → decoded records (Enter)
    - 3 Batches, 4 Growth, 5 Recovery: as the commands of those names
    - 6 State: Spark's statestore rows, a page of 100 at a time
    - 7 Repartition: plan, and with --allow-write run, a repartition or a
      provider migration
    - 8 Query (with --progress-log): Spark's streaming UI charts per batch
    - 9 Fix: statekit doctor's verdict; plan and (--allow-write) write its
      rollback, or an evict

    One CKPT opens on its tabs; several (or --checkpoints-from) on a fleet list: one row per
    checkpoint with the doctor's and the growth verdict, the restart estimate against --rto,
    the last batch's age, keys, bytes and snapshot lag; s sorts (S reverses), / filters,
    Enter opens one, Esc returns. A write (x) asks for a y/n confirmation and goes through
    the same steps as the commands (staging, verification, publish); on the Fix tab c
    cancels it. Keys: ? every key, / filter, r refresh, Esc back, ctrl+p command palette,
    q quit.

    Examples:

    \b
        statekit tui demo/checkpoint --progress-log demo/progress.jsonl --rto 30s
        statekit tui demo/checkpoint --watch 5
        statekit tui --checkpoints-from ours.txt --rto 30s --web 8000
    """
    from statekit.checkpoint import open_checkpoint
    from statekit.support.gc_pause import long_running_process

    long_running_process()  # refreshes for hours: no process-wide collector pause
    per_url = fleet_options(checkpoints, listing, storage_option)
    urls = list(per_url)
    options = per_url[urls[0]]
    if progress_log and len(urls) > 1:
        raise click.UsageError("--progress-log belongs to one checkpoint: name one")
    context = click.get_current_context()
    if web_token is not None and web is None and \
            context.get_parameter_source("web_token") is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("--web-token belongs to --web: add --web [HOST:]PORT")
    if web is not None:
        from statekit.cli.lazy import ARGV_KEY
        from statekit.cli.tui_web import checked_token, serve, served_argv, web_address

        host, port = web_address(web)  # a port that is no port: one line, before any work
        token = checked_token(web_token)
        if len(urls) == 1:  # a wrong path is a one-line error here, not in every browser
            open_checkpoint(urls[0], options, allow_missing_metadata=True)
        argv = context.meta.get(ARGV_KEY) or ["tui", *urls]
        serve(served_argv(list(argv)), host, port, token=token, allow_write=allow_write,
              checkpoints=len(urls))
        return
    first = None
    if len(urls) == 1:
        from statekit.tui.model import snapshot_in_background

        # a wrong path is a one-line error now, not an app showing nothing
        opened = open_checkpoint(urls[0], options, allow_missing_metadata=True)
        if progress_log:  # a wrong path or a file that is no progress log: one line, now
            from statekit.checkpoint.progress_log import parse_query
            from statekit.cli.options import read_progress_text

            parse_query(read_progress_text(progress_log, storage_option), shown=progress_log)
        first = snapshot_in_background(urls[0], options, opened=opened)  # while Textual loads
    from statekit.state.memory import ExecutorSizing
    from statekit.tui.app import run_tui

    run_tui(urls[0], storage_options=options, watch=watch, cores=cores,
            sizing=ExecutorSizing(executors, int(executor_memory) if executor_memory else None),
            allow_write=allow_write, first=first, progress=progress_log, rto_s=rto,
            fleet=urls if len(urls) > 1 else None, fleet_options=per_url, timeout_s=timeout)
