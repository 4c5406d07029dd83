"""Turn Spark's exceptions into statekit's one-line errors.

Spark errors arrive as long JVM stack traces wrapped in Python exceptions. A person needs the
error class and the first line of its message; the rest belongs in logs.
"""

from __future__ import annotations

import re

from statekit.support.errors import JobFailed

_PY_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failed|Input|File|"
                       r"Format|Operation|Problem)\b(.*:|$)")


TRACEBACK = "Traceback (most recent call last):"
_JVM_CLASSES = ("org.", "java.", "javax.", "scala.", "py4j.")


def python_raised(text: str) -> str | None:
    """``Type: message`` of the exception a Spark Python worker raised: the last unindented
    line after its traceback that names one (JVM classes of the stack around it left out);
    None when ``text`` holds no Python traceback."""
    at = text.find(TRACEBACK)
    if at < 0:
        return None
    raised = [line.strip() for line in text[at:].splitlines()[1:]
              if line[:1] not in (" ", "\t") and _PY_ERROR.match(line.strip())
              and not line.startswith(_JVM_CLASSES)]
    return raised[-1] if raised else None


def is_spark_error(error: BaseException) -> bool:
    """A failure Spark raised (through py4j from a local JVM, or from a Connect server)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return isinstance(error, (Py4JJavaError, PySparkException))


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
        raised = python_raised(text)
        if raised:
            return f"{lines[0].removesuffix(TRACEBACK).rstrip()} {raised}"
    return lines[0]


def job_failed(what: str, exc: BaseException) -> JobFailed:
    """A ``JobFailed`` whose message says what was running and Spark's first line."""
    return JobFailed(f"{what} failed: {first_line(exc)}")
