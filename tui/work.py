"""The one way the TUI runs slow work: :meth:`Asks.ask` a question, get the answer later.

Every screen's slow step — the first listing, a growth replay, a file's decode, starting
Spark, a dry run — goes through :meth:`Asks.ask`. It starts a thread worker (one group per
kind of question, ``exclusive``: a new question of the same kind cancels the old worker,
``exit_on_error=False``: a bug in one screen never takes the app down) that posts typed
messages (:mod:`statekit.tui.messages`) back to the node that asked. On the UI thread:

- a result is handed to the request's ``on_result`` only while the request is still the
  current one of its kind; an answer to a question the user has already left (they opened
  another file, went back, refreshed) is dropped and a :class:`WorkIgnored` posted instead;
- a failure is rendered in one place, the node's :meth:`show_error` — statekit's own
  one-line message, or Spark's first line, never a stack;
- progress lines go to :meth:`show_progress`.

Jobs get a ``progress(text)`` callable; calling it in a cancelled worker stops the job.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from textual.worker import get_current_worker

from statekit.tui.messages import (
    Request,
    WorkDone,
    WorkFailed,
    WorkIgnored,
    WorkProgress,
    WorkStarted,
)

T = TypeVar("T")
Progress = Callable[[str], None]


class Cancelled(Exception):
    """Raised by ``progress()`` inside a worker whose request was superseded."""


def error_line(error: BaseException) -> str:
    """One line for a failed job: statekit's message, or Spark's first line."""
    from statekit.support.errors import StatekitError

    if isinstance(error, StatekitError):
        return str(error)
    module = type(error).__module__ or ""
    if module.startswith(("pyspark", "py4j")):
        from statekit.jobs.errors import first_line

        return f"Spark: {first_line(error)}"
    return f"{type(error).__name__}: {error}".splitlines()[0]


class Asks:
    """Mixin for a Textual App or Widget that asks workers questions (see module doc)."""

    # provided by textual's MessagePump / DOMNode
    post_message: Callable[..., bool]
    run_worker: Callable[..., Any]

    @property
    def _current(self) -> dict[str, Request]:
        current: dict[str, Request] | None = self.__dict__.get("_current_requests")
        if current is None:
            current = self.__dict__["_current_requests"] = {}
        return current

    def ask(self, kind: str, job: Callable[[Progress], T], on_result: Callable[[T], None],
            describe: str = "") -> Request:
        """Run ``job(progress)`` in a worker; ``on_result(result)`` on the UI thread if this
        is still the current request of ``kind`` when it finishes."""
        request = Request(kind, describe, on_result)
        self._current[kind] = request
        self.post_message(WorkStarted(request))
        self.run_worker(partial(self._answer, request, job), thread=True, group=kind,
                        exclusive=True, exit_on_error=False, name=f"{kind}: {describe}")
        return request

    def forget(self, kind: str) -> None:
        """The user left the screen that asked: a late answer of ``kind`` is dropped."""
        self._current.pop(kind, None)

    def asking(self, kind: str) -> bool:
        """Whether a request of ``kind`` is running and still wanted."""
        return kind in self._current

    def _answer(self, request: Request, job: Callable[[Progress], Any]) -> None:
        worker = get_current_worker()

        def progress(text: str) -> None:
            if worker.is_cancelled:
                raise Cancelled
            self.post_message(WorkProgress(request, text))

        try:
            result = job(progress)
        except Cancelled:
            self.post_message(WorkFailed(request, "cancelled", cancelled=True))
        except Exception as error:  # every failure becomes one line, shown in place
            # a cancelled job may end in the error its interrupted Spark job raised
            self.post_message(WorkFailed(request, error_line(error),
                                         cancelled=worker.is_cancelled))
        else:
            self.post_message(WorkDone(request, result))

    def _is_current(self, request: Request) -> bool:
        if self._current.get(request.kind) is request:
            return True
        self.post_message(WorkIgnored(request))
        return False

    def on_work_done(self, message: WorkDone) -> None:
        message.stop()
        if self._is_current(message.request):
            del self._current[message.request.kind]
            message.request.on_result(message.result)

    def on_work_failed(self, message: WorkFailed) -> None:
        message.stop()
        if self._is_current(message.request):
            del self._current[message.request.kind]
            if message.cancelled:
                self.show_cancelled(message.request)
            else:
                self.show_error(message.text)

    def on_work_progress(self, message: WorkProgress) -> None:
        message.stop()
        if self._current.get(message.request.kind) is message.request:
            self.show_progress(message.text)

    def show_error(self, message: str) -> None:
        """Render a failure (the one place a screen shows errors)."""
        raise NotImplementedError

    def show_cancelled(self, request: Request) -> None:
        """A request the user cancelled has ended (its job stopped): nothing to show unless
        a screen says so."""

    def show_progress(self, text: str) -> None:
        """Render a progress line."""
