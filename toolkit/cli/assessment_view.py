"""The assessment's lines in the terminal: the restart line every command ends with.

``report``, ``recovery``, ``growth`` and ``batches`` each show their own tables, and all of
them end with the same :func:`statekit.assess.words.restart_line` of the same
:class:`~statekit.assess.assessment.Assessment` — coloured here, worded in the core — and,
when the checkpoint will not restart, the doctor's fatal problems and fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from statekit.cli.render import console

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment

_COLOUR = {"restarts": "green", "restarts with warnings": "yellow", "not checked": "yellow"}


def coloured_verdict(verdict: str) -> str:
    return f"[{_COLOUR.get(verdict, 'bold red')}]{escape(verdict)}[/]"


def print_assessment(assessment: Assessment, *, detail: bool = True,
                     with_estimate: bool = True) -> None:
    """The restart line and, when it will not restart, each fatal problem and the fix
    (``with_estimate``: the line carries the estimate — not where a headline shows it)."""
    from statekit.assess.words import restart_line

    out = console()
    line = escape(restart_line(assessment, with_estimate=with_estimate)).replace(
        f"restart: {escape(assessment.verdict)}",
        f"[bold]restart[/]: {coloured_verdict(assessment.verdict)}", 1)
    if assessment.verdict == "not checked":
        line += " [dim](state files listed, not decoded: --decode reads them)[/]"
    out.print(line, soft_wrap=True)
    diagnosis = assessment.diagnosis
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
