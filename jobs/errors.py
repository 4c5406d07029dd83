"""Turn Spark's exceptions into statekit's one-line errors.

Spark errors arrive as long JVM stack traces wrapped in Python exceptions. A person needs the
error class and the first line of its message; the rest belongs in logs.
"""

from __future__ import annotations

from toolkit.errors import JobFailed


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (Spark's error class included)."""
    for attr in ("desc", "_message"):
        text = getattr(exc, attr, None)
        if isinstance(text, str) and text.strip():
            break
    else:
        text = str(exc)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("==="):
            return line
    return type(exc).__name__


def job_failed(what: str, exc: BaseException) -> JobFailed:
    """A ``JobFailed`` whose message says what was running and Spark's first line."""
    return JobFailed(f"{what} failed: {first_line(exc)}")
