"""Running the ``statekit`` CLI in-process and reading what it printed.

Lives here rather than in a test module because the fault corpus, golden checkpoint, live
read, migrate, rollback, doctor and source-offset tests all drive the CLI the same way:
``run`` (exit code, stdout, stderr, with a guard against a command that hangs on a FIFO),
``strict_json`` (standard JSON only: no NaN or Infinity), ``statekit_cli`` (the click group,
imported on first use) and ``statekit_json`` (a forced ``--json`` run that must exit 0); and
``command_tree``, every command of the CLI with its context (the reference and docs tests).
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
from collections.abc import Iterator

import click

from statekit.cli.main import cli
from statekit.cli.runner import run_cli

HANG_LIMIT_S = 60
HELP_WIDTH = 80
"""Columns of the terminal the help must read well in."""

CommandTree = dict[str, tuple[click.Command, click.Context]]


def command_tree(root: click.Command = cli, name: str = "statekit") -> CommandTree:
    """Every command path (``"statekit state show"``) → its command and a context with its
    parents (as ``statekit state show --help`` builds it), lazy commands loaded."""
    tree: CommandTree = {}

    def walk(command: click.Command, ctx: click.Context) -> None:
        tree[ctx.command_path] = (command, ctx)
        if isinstance(command, click.Group):
            for sub_name in command.list_commands(ctx):
                sub = command.get_command(ctx, sub_name)
                assert sub is not None, f"{ctx.command_path} {sub_name} does not load"
                walk(sub, click.Context(sub, info_name=sub_name, parent=ctx,
                                        terminal_width=HELP_WIDTH))

    walk(root, click.Context(root, info_name=name, terminal_width=HELP_WIDTH))
    return tree


@contextlib.contextmanager
def _no_hang(what: str) -> Iterator[None]:
    def expired(*_: object) -> None:
        raise TimeoutError(f"{what} did not finish in {HANG_LIMIT_S} s (blocked on a FIFO?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(HANG_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with _no_hang(" ".join(args[:1])), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = run_cli(cli, "statekit", [str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def statekit_cli():
    from statekit.cli.main import cli

    return cli


def statekit_json(*args: str) -> dict:
    import io
    from contextlib import redirect_stdout

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = run_cli(statekit_cli(), "statekit", [*args, "--force", "--json"])
    assert code == 0, buffer.getvalue()
    return json.loads(buffer.getvalue())
