"""One answer to "will it restart?" on every command: the doctor's.

``report``, ``recovery`` and ``growth`` each compute their own numbers, but whether the
query comes back is one question with one model (:mod:`statekit.doctor`). Each command asks
it here and shows the same line; ``report`` and ``recovery`` exit with the doctor's code
when the answer is no.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from statekit.cli.render import console

if TYPE_CHECKING:
    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.location import Location
    from statekit.doctor import Diagnosis
    from statekit.state.verify import Progress
    from statekit.state.workers import GroupRunner

_COLOUR = {0: "green", 9: "yellow"}


def restart_health(ckpt: Checkpoint, *, decode: bool, fix: bool = True,
                   progress: Progress | None = None, runner: GroupRunner | None = None,
                   file_sink: Location | None = None) -> Diagnosis:
    """The doctor's diagnosis (``decode``: also read every state file the restart loads;
    ``fix``: search the rollback that fixes a checkpoint that will not restart)."""
    from statekit.doctor import diagnose

    return diagnose(ckpt, decode=decode, fix=fix, progress=progress, runner=runner,
                    file_sink=file_sink)


def health_summary(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis in brief, for ``--json`` of the other commands."""
    return {"verdict": diagnosis.verdict, "restarts": diagnosis.restarts,
            "exit_code": diagnosis.exit_code, "headline": diagnosis.headline,
            "codes": diagnosis.codes, "fix_command": diagnosis.fix_command,
            "decoded": diagnosis.decoded,
            "fatal": [{"code": p.code, "path": p.path, "what": p.what,
                       "spark_error": p.spark_error, "lost": p.lost}
                      for p in diagnosis.fatal]}


def print_health(diagnosis: Diagnosis, *, detail: bool = True) -> None:
    """``restart: …`` and, when it will not restart, each fatal problem and the fix."""
    out = console()
    colour = _COLOUR.get(diagnosis.exit_code, "bold red")
    scope = "" if diagnosis.decoded else " [dim](state files listed, not decoded)[/]"
    out.print(f"[bold]restart[/]: [{colour}]{diagnosis.verdict}[/]{scope}")
    if not detail or not diagnosis.fatal:
        return
    for problem in diagnosis.fatal:
        error = f" — Spark fails with {escape(problem.spark_error)}" if problem.spark_error \
            else ""
        out.print(f"  [bold red]{escape(problem.code)}[/] {escape(problem.path)}: "
                  f"{escape(problem.what)}{error}")
        if problem.lost:
            out.print(f"    lost for good: {escape(problem.lost)}")
    for note in diagnosis.notes:
        out.print(f"  [yellow]before you run the fix[/]: {escape(note)}")
    if diagnosis.fix_command:
        out.print(f"  fix: {escape(diagnosis.fix_command)}", soft_wrap=True)
    elif not diagnosis.fix_searched:
        out.print("  statekit doctor looks for the fix")
    else:
        out.print("  no statekit command repairs this (statekit doctor says what can be done "
                  "by hand)")
