"""Turn Spark's exceptions into statekit's one-line errors.

Spark errors arrive as long JVM stack traces wrapped in Python exceptions. A person needs the
error class and the first line of its message; the rest belongs in logs.
"""

from __future__ import annotations

import re

from statekit.support.errors import JobFailed

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
