"""``statekit doctor``: will this checkpoint restart, and if not, which command fixes it.

Pure Python, read-only: the logs, listings and every state file the restart loads are read
(in parallel worker processes) without a JVM. The exit code is the answer for automation:
0 restarts cleanly, 9 restarts with warnings, 11 will not restart and the printed command
fixes it, 12 will not restart and statekit has no command for it.
"""

from __future__ import annotations

import click
from rich.markup import escape

from statekit.cli.options import (
    checkpoint_options,
    decode_option,
    file_sink_option,
    json_option,
    open_from_cli,
    parse_storage_options,
    print_json,
    progress_log_option,
)
from statekit.cli.render import console, status
from statekit.support.presentation import human_bytes

_STYLE = {"fatal": "bold red", "warning": "yellow", "info": "cyan"}


@click.command("doctor")
@checkpoint_options
@file_sink_option
@progress_log_option
@decode_option
@json_option
def doctor_command(checkpoint: str, storage_option: tuple[str, ...], file_sink: str | None,
                   progress_log: str | None, decode: bool, as_json: bool) -> None:
    """Will CKPT restart? Each problem, what Spark does on it, and the safest fix.

    No JVM, read-only. The doctor models Spark's restart: it reads the files Spark reads on
    the way, each as Spark reads it (logs, metadata, every state file the restart loads with
    its checksum files, unless --no-decode), and for every problem says what Spark does on
    restart (the error it fails with, or that it runs and what it then does) and a remedy. The
    fix is a statekit rollback into a new checkpoint, to the newest committed batch whose
    whole restart is sound, printed in full (with --file-sink when the sink's log goes past
    it, --new-query-id when the query id is lost). Where no statekit command helps, it says
    what is lost and prints no command.

    A restart that runs has an outcome too: the same state and output as the checkpoint
    Spark wrote, or it loses (keys, partitions, a sink's batches), repeats (batches reach
    the sink again; only the file sink is exactly once) or differs (other state: a log
    entry or a state file that decodes but is another version's). Each problem says which
    outcome and what it touches; what no witness could check is listed as unverified.

    Without --file-sink it warns, before anything is written, when the fix needs the file
    sink's path. --progress-log tells it how many stateful operators the query runs, which no
    checkpoint file records (a deleted highest-numbered operator folder is found only so),
    and which sink the query writes to. report, recovery, growth, metrics and the TUI show
    the same verdict and outcome.

    Exit codes:

    \b
    - 0: restarts
    - 9: restarts, with warnings; same state and output
    - 14: restarts, but loses, repeats or differs (the outcome says what)
    - 11: will not restart; the printed command fixes it
    - 12: will not restart; no statekit command fixes it (the remedy says
      what to do by hand)
    - 3, 4, 5: CKPT cannot be read at all, as for every command

    --json: "verdict", "exit_code", "outcome" ("same", or e.g. "loses, repeats"; null when
    it will not restart), "outcomes", "unverified", "sink", "problems" (each with "code",
    "severity", "path", "what", "spark", "spark_error", "remedy", "lost", "outcome",
    "affects"), "fix_command", "fix_reruns", "last_committed" and "restart_batch".

    Examples:

    \b
        statekit doctor demo/checkpoint --file-sink demo/output
        statekit doctor s3://bucket/ckpt --json
    """
    from statekit.checkpoint.location import SINK_FOLDER, resolve_folder
    from statekit.doctor import diagnose

    ckpt = open_from_cli(checkpoint, storage_option, allow_missing_metadata=True)
    sink = resolve_folder(file_sink, parse_storage_options(storage_option),
                          what=SINK_FOLDER) if file_sink else None
    operators = query_sink = records = None
    if progress_log is not None:
        from statekit.checkpoint.progress_log import (
            batch_records,
            read_text,
            sink_kind,
            stateful_operator_count,
        )

        text = read_text(progress_log, parse_storage_options(storage_option))
        operators = stateful_operator_count(text, shown=progress_log)
        query_sink = sink_kind(text, shown=progress_log)
        records = batch_records(text, shown=progress_log)
    with status(not as_json, "reading the checkpoint…") as progress:
        diagnosis = diagnose(ckpt, file_sink=sink, decode=decode, progress=progress,
                             query_operators=operators, sink=query_sink,
                             progress_records=records)
    if as_json:
        print_json(diagnosis.to_dict())
    else:
        out = console()
        colour = {0: "green", 9: "yellow"}.get(diagnosis.exit_code, "bold red")
        if diagnosis.verdict == "not checked":
            colour = "yellow"
        outcome = "" if diagnosis.outcome is None else \
            f" · outcome: [{'green' if diagnosis.outcome == 'same' else 'bold red'}]" \
            f"{diagnosis.outcome}[/]"
        out.print(f"[bold]doctor[/] {escape(diagnosis.checkpoint)}: [{colour}]"
                  f"{diagnosis.verdict}[/]{outcome}")
        restart = (f"restart runs batch {diagnosis.restart_batch} on state version "
                   f"{diagnosis.restart_version}" if diagnosis.restart_batch is not None
                   else "no batch planned yet")
        committed = "none" if diagnosis.last_committed is None else diagnosis.last_committed
        out.print(f"last committed batch: {committed} · {restart} · read "
                  f"{diagnosis.files_read} state files ({human_bytes(diagnosis.bytes_read)}) "
                  f"in {diagnosis.elapsed_s:.2f} s")
        for problem in diagnosis.problems:
            out.print()
            style = _STYLE[problem.severity]
            out.print(f"[{style}]{problem.severity}[/] ({problem.code}) "
                      f"{escape(problem.path)}: {escape(problem.what)}")
            error = f" — fails with {escape(problem.spark_error)}" if problem.spark_error \
                else ""
            out.print(f"  on restart: {escape(problem.spark)}{error}")
            if problem.outcome and not diagnosis.fatal:
                out.print(f"  [bold]outcome[/]: {problem.outcome}"
                          + (f" — {escape(problem.affects)}" if problem.affects else ""))
            if problem.remedy:
                out.print(f"  remedy: {escape(problem.remedy)}")
            if problem.lost:
                out.print(f"  [bold]lost for good[/]: {escape(problem.lost)}")
        out.print()
        if not diagnosis.decoded:
            out.print("[dim]state files listed, not decoded (--no-decode): damage inside them "
                      "is not seen[/]")
        for part in diagnosis.unverified:
            out.print(f"[dim]not verified: {escape(part)}[/]")
        for note in diagnosis.notes:
            out.print(f"[yellow]before you run the fix[/]: {escape(note)}")
        if diagnosis.fix_command:
            out.print("[bold]fix[/] (writes a new checkpoint; the source stays as it is):")
            out.print(f"  {escape(diagnosis.fix_command)}", soft_wrap=True)
            if diagnosis.fix_reruns:
                out.print(f"  the new checkpoint plans {diagnosis.fix_reruns} again from the "
                          "sources")
        elif diagnosis.fatal:
            out.print("[bold red]no statekit command repairs this[/]: see the remedies above")
        elif not diagnosis.problems:
            out.print("[green]nothing found: the restart loads every file cleanly[/]")
    if diagnosis.exit_code:
        raise click.exceptions.Exit(diagnosis.exit_code)
