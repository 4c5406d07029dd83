"""Running the ``statekit`` CLI in-process and reading what it printed.

Lives here rather than in a test module because the fault corpus, golden checkpoint, live
read, migrate, rollback, doctor and source-offset tests all drive the CLI the same way:
``run`` (exit code, stdout, stderr, with a guard against a command that hangs on a FIFO),
``strict_json`` (standard JSON only: no NaN or Infinity), ``statekit_cli`` (the click group,
imported on first use) and ``statekit_json`` (a forced ``--json`` run that must exit 0).
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
from collections.abc import Iterator

from statekit.cli.main import cli
from statekit.cli.runner import run_cli

HANG_LIMIT_S = 60


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
