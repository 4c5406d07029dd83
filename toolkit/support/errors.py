"""The one exception family of statekit, and the exit code each one maps to.

Every failure a user can cause (a path that is not a checkpoint, a corrupt file, an
unsupported codec, an unsafe write, a missing Java) is raised as a ``StatekitError`` subclass
carrying a one-line message that names the file and what is wrong. The CLI turns them into
``statekit: error: …`` on stderr and the exit code below, in a single place
(``statekit.cli.runner``), so no traceback ever reaches a user for bad input.

Exit codes (documented in the README):

====  =====================================================================
0     success
1     internal error (a bug: please report it)
2     usage error (bad option or argument)
3     bad input: missing path, not a checkpoint / landing folder, wrong config
4     corrupt or truncated file, invalid JSON
5     unsupported format, codec, operator or provider
6     refused as unsafe (would modify a source, target not empty, query live)
7     environment problem (Java missing or too old)
8     a Spark job or streaming query failed
10    ``statekit growth --fail-on …``: the state grows (an alert, not an error)
13    storage unreachable: the endpoint refuses or does not answer, no network, or the
      reading outlived its ``--timeout``
130   interrupted (Ctrl-C)
====  =====================================================================
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_CORRUPT = 4
EXIT_UNSUPPORTED = 5
EXIT_UNSAFE = 6
EXIT_ENVIRONMENT = 7
EXIT_JOB_FAILED = 8
EXIT_GROWTH = 10
EXIT_UNREACHABLE = 13
EXIT_INTERRUPTED = 130


class StatekitError(Exception):
    """Base of every error statekit reports to a person; ``str()`` is the one-line message."""

    exit_code: int = EXIT_INTERNAL
    reason: str | None = None
    """A one-word reason where the raiser knows it better than the class does (``denied``,
    ``credentials``, ``timeout``…): the label a service shows for a failed checkpoint
    (:func:`statekit.checkpoint.storage_errors.reason_of`)."""

    def __init__(self, message: str, *, path: str | None = None,
                 reason: str | None = None) -> None:
        self.message = message
        self.path = path
        if reason is not None:
            self.reason = reason
        super().__init__(f"{path}: {message}" if path else message)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the path kept apart from the message (an error a worker process or a
        Spark task raised reaches the driver as it was raised)."""
        return (_restore, (type(self), str(self), self.__dict__))


def _restore(cls: type[StatekitError], text: str, state: dict[str, Any]) -> StatekitError:
    error = cls.__new__(cls)
    Exception.__init__(error, text)
    error.__dict__.update(state)
    return error


class BadInput(StatekitError):
    """A path, folder or option that cannot be used as given."""

    exit_code = EXIT_BAD_INPUT


class NotACheckpoint(BadInput):
    """The folder lacks what every Structured Streaming checkpoint has."""


class CorruptFile(StatekitError):
    """A file is truncated, fails a checksum, or does not parse."""

    exit_code = EXIT_CORRUPT

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None,
                 reason: str | None = None):
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{message}{where}", path=path, reason=reason)


class UnsupportedFormat(StatekitError):
    """A format, codec, operator or provider statekit does not (yet) read or write."""

    exit_code = EXIT_UNSUPPORTED


class UnsafeOperation(StatekitError):
    """A write refused because it could lose or corrupt data."""

    exit_code = EXIT_UNSAFE


class EnvironmentProblem(StatekitError):
    """The machine lacks something statekit needs (for example Java 17+ for Spark)."""

    exit_code = EXIT_ENVIRONMENT


class StorageUnreachable(StatekitError):
    """The storage behind a path cannot be reached now: an endpoint that refuses or never
    answers, no network, or a reading that outlived its deadline. Nothing is wrong with the
    checkpoint itself; the same command may work later."""

    exit_code = EXIT_UNREACHABLE


class JobFailed(StatekitError):
    """A Spark job or streaming query failed; the message is Spark's first line."""

    exit_code = EXIT_JOB_FAILED


def error_for(exit_code: int, message: str, *, path: str | None = None) -> StatekitError:
    """The error a problem recorded only by its exit code stands for (a report finding, a
    ledger problem, a damaged file): its class where one has that code, else a
    ``StatekitError`` carrying the code."""
    classes: dict[int, type[StatekitError]] = {
        EXIT_BAD_INPUT: BadInput, EXIT_CORRUPT: CorruptFile,
        EXIT_UNSUPPORTED: UnsupportedFormat, EXIT_UNSAFE: UnsafeOperation,
        EXIT_ENVIRONMENT: EnvironmentProblem, EXIT_JOB_FAILED: JobFailed,
        EXIT_UNREACHABLE: StorageUnreachable}
    cls = classes.get(exit_code)
    if cls is not None:
        return cls(message, path=path)
    error = StatekitError(message, path=path)
    error.exit_code = exit_code
    return error
