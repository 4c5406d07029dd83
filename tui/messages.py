"""Every Textual message the TUI posts, in one place.

Slow work (the first listing, a growth replay, a file's decode, Spark) runs in thread
workers started by :mod:`statekit.tui.work`. A worker never touches a widget: it posts these
messages to the node that asked, and that node handles them on the UI thread. Each message
carries the :class:`Request` it answers, so a node can tell the answer to its current
question from a late answer to a question the user has already left (a slow decode of file
A arriving after file B was opened is dropped, not shown). Tests wait on these messages
(``App.run_test(message_hook=…)``) instead of polling the workers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

_serial = itertools.count(1)


@dataclass(frozen=True, eq=False)
class Request:
    """One question asked of a worker: what kind (one answer per kind is current at a time),
    a serial number, and what to do with its result on the UI thread."""

    kind: str
    """``snapshot``, ``analysis``, ``records``, ``keys:0/default``, ``state`` …"""
    describe: str = ""
    """What is being worked on, for progress lines and tests."""
    on_result: Callable[[Any], None] = field(default=lambda _result: None, repr=False)
    serial: int = field(default_factory=lambda: next(_serial))


class WorkStarted(Message, bubble=False):
    """A request's worker was started."""

    def __init__(self, request: Request) -> None:
        super().__init__()
        self.request = request


class WorkProgress(Message):
    """A step of a running request (shown on the asking pane's status line)."""

    def __init__(self, request: Request, text: str) -> None:
        super().__init__()
        self.request = request
        self.text = text


class WorkDone(Message):
    """A request's result (handled only while the request is still current)."""

    def __init__(self, request: Request, result: Any) -> None:
        super().__init__()
        self.request = request
        self.result = result


class WorkFailed(Message):
    """A request failed with a one-line message (or was cancelled)."""

    def __init__(self, request: Request, text: str, *, cancelled: bool = False) -> None:
        super().__init__()
        self.request = request
        self.text = text
        self.cancelled = cancelled


class WorkIgnored(Message, bubble=False):
    """A result or failure arrived for a request that is no longer current and was dropped
    (posted so tests can see that the stale answer came back and was not shown)."""

    def __init__(self, request: Request) -> None:
        super().__init__()
        self.request = request


ENDED = (WorkDone, WorkFailed)
"""The messages that end a request: exactly one of them is posted for each started one."""
