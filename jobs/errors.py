"""Turn Spark's exceptions into statekit's one-line errors.

Spark errors arrive as long JVM stack traces wrapped in Python exceptions. A person needs the
error class and the first line of its message; the rest belongs in logs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from statekit.errors import JobFailed, StatekitError

if TYPE_CHECKING:
    from statekit.checkpoint import Checkpoint

_PY_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failed|Input|File|"
                       r"Format|Operation|Problem)\b(.*:|$)")


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (Spark's error class included)."""
    for attr in ("desc", "_message"):
        text = getattr(exc, attr, None)
        if isinstance(text, str) and text.strip():
            break
    else:
        text = str(exc)
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("===")]
    if not lines:
        return type(exc).__name__
    if "thrown from the Python worker" in lines[0]:
        # the worker's own error is the last line of its traceback ("ValueError: …")
        raised = [line for line in lines[1:] if _PY_ERROR.match(line)]
        if raised:
            return f"{lines[0]} {raised[-1]}"
    return lines[0]


def job_failed(what: str, exc: BaseException) -> JobFailed:
    """A ``JobFailed`` whose message says what was running and Spark's first line."""
    return JobFailed(f"{what} failed: {first_line(exc)}")


def spark_failure(what: str, exc: BaseException, ckpt: Checkpoint) -> StatekitError:
    """A Spark failure while working on ``ckpt`` as one line: a state load failure names the
    damaged file (statekit reads the restart path itself), anything else is ``JobFailed``."""
    from statekit.jobs.state_reader import StateLoadFailed, name_damaged_file, translate

    translated = translate(what, exc)
    if isinstance(translated, StateLoadFailed):
        return name_damaged_file(ckpt, translated)
    return translated  # else JobFailed, BadInput… with Spark's most telling line
