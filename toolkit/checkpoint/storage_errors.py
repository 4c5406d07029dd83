"""What a failure below statekit means to the person who ran it: one line, a code, a reason.

A checkpoint on an object store fails in ways no checkpoint format explains: no credentials,
credentials refused, an endpoint that refuses connections or never answers, no network. The
clients raise their own exception families (botocore's, aiohttp's, the socket's), none of
them a :class:`~statekit.support.errors.StatekitError`, so without this module they reached
the user as "internal error: NoCredentialsError … please report it". :func:`user_error`
turns each into the error a user can act on, and :func:`reason_of` gives every error the
one-word reason the services label a failed checkpoint with (``statekit_checkpoint_up 0``'s
``reason``, the fleet row).

Exceptions are recognised by their class names along the MRO, not by importing the client
libraries: an optional package that is not installed cannot fail the classification.
"""

from __future__ import annotations

import asyncio
import socket

from statekit.support.errors import (
    BadInput,
    CorruptFile,
    EnvironmentProblem,
    NotACheckpoint,
    StatekitError,
    StorageUnreachable,
    UnsafeOperation,
    UnsupportedFormat,
)

REASONS = ("timeout", "unreachable", "credentials", "denied", "missing", "not-checkpoint",
           "corrupt", "unsupported", "environment", "invalid", "error")
"""Every reason label a failed checkpoint can carry, from the most to the least specific."""

_NO_CREDENTIALS = {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                   "NoAuthTokenError", "UnauthorizedSSOTokenError", "SSOTokenLoadError",
                   "ProfileNotFound", "DefaultCredentialsError", "ClientAuthenticationError"}
_REFUSED_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
                        "InvalidToken", "TokenRefreshRequired", "InvalidClientTokenId"}
_REFUSED_CREDENTIALS_WORDS = ("Access Key Id you provided does not exist",
                              "signature we calculated does not match",
                              "security token included in the request is",
                              "provided token has expired", "token is expired")
"""How S3 words a refused key when a client passes on only the message (s3fs turns
``InvalidAccessKeyId`` into a ``PermissionError`` with its message)."""
_UNREACHABLE = {"EndpointConnectionError", "ConnectionClosedError", "ProxyConnectionError",
                "ClientConnectorError", "ServerDisconnectedError", "ClientOSError",
                "ServerConnectionError", "SSLError", "ClientConnectorSSLError",
                "ClientConnectorCertificateError", "HTTPClientError"}
_TIMED_OUT = {"ConnectTimeoutError", "ReadTimeoutError", "ServerTimeoutError",
              "FSTimeoutError", "ConnectionTimeoutError", "SocketTimeoutError"}


def _names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] or type(error).__name__


def _client_code(error: BaseException) -> str:
    """The service's error code of a botocore ``ClientError`` (``InvalidAccessKeyId``…)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


def user_error(error: BaseException, shown: str | None = None) -> StatekitError | None:
    """The :class:`StatekitError` a storage or network failure stands for (``shown``: the
    path or URL it concerns), or ``None`` when ``error`` is not one — a bug stays a bug."""
    if isinstance(error, StatekitError):
        return error
    names = _names(error)
    code = _client_code(error)
    if names & _NO_CREDENTIALS:
        return BadInput(f"no credentials for this store: {_first_line(error)} (set them in the "
                        "environment, e.g. AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                        "AWS_PROFILE, or give --storage-option key=… secret=…)",
                        path=shown, reason="credentials")
    text = str(error)
    if code in _REFUSED_CREDENTIALS or (isinstance(error, PermissionError) and any(
            word.lower() in text.lower()
            for word in (*_REFUSED_CREDENTIALS, *_REFUSED_CREDENTIALS_WORDS))):
        return BadInput(f"the store refused the credentials: {_first_line(error)}",
                        path=shown, reason="credentials")
    if names & _TIMED_OUT or isinstance(error, (TimeoutError, socket.timeout,
                                                asyncio.TimeoutError)):
        return StorageUnreachable(f"the store did not answer in time: {_first_line(error)}",
                                  path=shown, reason="timeout")
    if names & _UNREACHABLE or isinstance(error, (ConnectionError, socket.gaierror)):
        return StorageUnreachable(f"cannot reach the store: {_first_line(error)}",
                                  path=shown, reason="unreachable")
    if isinstance(error, NotADirectoryError):
        return BadInput("is a file, expected a folder", path=shown or error.filename,
                        reason="invalid")
    if isinstance(error, PermissionError):
        return BadInput("permission denied", path=shown or error.filename, reason="denied")
    if isinstance(error, FileNotFoundError):
        return BadInput("no such file or folder", path=shown or error.filename,
                        reason="missing")
    if isinstance(error, OSError) and getattr(error, "errno", None) is not None:
        return BadInput(f"cannot read: {error.strerror or error}",
                        path=shown or error.filename, reason="invalid")
    return None


def deadline_error(url: str, timeout_s: float | None, *,
                   still_running: bool = False) -> StorageUnreachable:
    """The error of a reading that outlived its deadline (``still_running``: not started,
    because an earlier one abandoned at its deadline still runs) — the fleet list's row and
    the exporter's ``up 0`` say the same."""
    limit = f"--timeout {timeout_s:g} s" if timeout_s is not None else "its deadline"
    more = (" (an earlier reading still runs: the store never answered)" if still_running
            else "")
    return StorageUnreachable(f"reading took longer than {limit}{more}", path=url,
                              reason="timeout")


def reason_of(error: StatekitError) -> str:
    """The one-word reason of an error, one of :data:`REASONS`."""
    given = error.reason
    if given is not None and given in REASONS:
        return given
    if isinstance(error, StorageUnreachable):
        return "unreachable"
    if isinstance(error, NotACheckpoint):
        return "not-checkpoint"
    if isinstance(error, CorruptFile):
        return "corrupt"
    if isinstance(error, UnsupportedFormat):
        return "unsupported"
    if isinstance(error, EnvironmentProblem):
        return "environment"
    if isinstance(error, (BadInput, UnsafeOperation)):
        text = str(error)
        if "permission denied" in text:
            return "denied"
        if "disappeared" in text or "does not exist" in text or "no such" in text.lower():
            return "missing"
        return "invalid"
    return "error"
