"""Run a click command the way every statekit entry point must: errors as one line.

click's standalone mode prints usage errors nicely but lets every other exception escape as a
traceback. This runner is the single place where library errors become a one-line message on
stderr and the documented exit code (``statekit.support.errors``). Set ``STATEKIT_DEBUG=1`` to
get the
traceback of an internal error instead.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from statekit.support.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    StatekitError,
)
from statekit.support.gc_pause import one_shot_process
from statekit.support.presentation import printable


def fail(message: str, code: int) -> int:
    """Print ``statekit: error: <message>`` (one line) to stderr and return ``code``."""
    one_line = " ".join(printable(str(message)).split())
    click.echo(f"statekit: error: {one_line}", err=True)
    return code


def run_cli(command: click.Command, prog_name: str, args: list[str] | None = None) -> int:
    """Invoke ``command`` and translate every failure into an exit code; never raises."""
    try:
        # non-standalone click *returns* the code of ``ctx.exit(n)`` / ``raise Exit(n)``
        result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
        if isinstance(result, int) and not isinstance(result, bool):
            return result
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as usage:
        if type(usage).__name__ == "NoArgsIsHelpError" and usage.ctx is not None:
            click.echo(usage.ctx.get_help())  # `statekit` alone: the help, as click does
            return EXIT_USAGE
        hint = f" (see '{usage.ctx.command_path} --help')" if usage.ctx is not None else ""
        return fail(usage.format_message() + hint, EXIT_USAGE)
    except click.ClickException as problem:  # e.g. click.FileError: a path it cannot open
        return fail(problem.format_message(),
                    EXIT_BAD_INPUT if problem.exit_code == 1 else problem.exit_code)
    except click.Abort:
        return fail("interrupted", EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except StatekitError as error:
        return fail(str(error), error.exit_code)
    except BrokenPipeError:
        # `statekit … | head`: the reader went away; not an error worth a message.
        return 0
    except Exception as bug:  # the last line of defence against tracebacks
        from statekit.checkpoint.storage_errors import user_error

        known = user_error(bug)  # no credentials, an endpoint down, a file for a folder…
        if known is not None:
            return fail(str(known), known.exit_code)
        if os.environ.get("STATEKIT_DEBUG"):
            traceback.print_exc()
        return fail(
            f"internal error: {type(bug).__name__}: {bug} "
            "(rerun with STATEKIT_DEBUG=1 for the traceback and please report it)",
            EXIT_INTERNAL,
        )
    return 0


def exit_with(command: click.Command, prog_name: str) -> None:
    """Console-script helper: run and exit the interpreter with the resulting code."""
    one_shot_process()  # the TUI command says otherwise for itself
    sys.exit(run_cli(command, prog_name))
