"""One browser session's app: textual-serve's ``AppService``, started and ended safely.

textual-serve (1.1.3) starts the app through ``/bin/sh`` and ends it by sending "quit" and
waiting for its output to end — forever, if the app does not exit. Here the app is exec'd in
a process group of its own and ended by :func:`statekit.cli.web_processes.end_group` (quit,
SIGTERM, SIGKILL, reaped) at most once however many callers ask (the session's handler and
the server's shutdown both do). The token that guards the server stays out of the app's
environment, and a write to a browser that has gone away is dropped, not raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from asyncio.subprocess import Process
from collections.abc import Awaitable, Callable, Sequence

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from statekit.cli.web_processes import end_group, kill_group, start_group
from statekit.cli.web_token import TOKEN_ENV

log = logging.getLogger("statekit.web")

READER_GRACE = 1.0
"""Seconds the output reader has to finish once the app's group is gone."""


class AppProcess(AppService):
    """The app of one browser session, as a process group."""

    def __init__(self, argv: Sequence[str], *, write_bytes: Callable[[bytes], Awaitable[None]],
                 write_str: Callable[[str], Awaitable[None]],
                 close: Callable[[], Awaitable[None]],
                 download_manager: DownloadManager) -> None:
        super().__init__(shlex.join(argv), write_bytes=write_bytes, write_str=write_str,
                         close=close, download_manager=download_manager)
        self.argv = list(argv)
        self._stopping: asyncio.Future[None] | None = None
        self._closed = False
        self._starting = asyncio.Lock()
        """Held while the process starts: a stop waits for it, a start after a stop does
        nothing (a server stopping as a browser connects leaves no app behind)."""

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width=width, height=height)
        environment.pop(TOKEN_ENV, None)
        return environment

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        process = await start_group(self.argv, self._build_environment(width, height))
        self._process = process
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def start(self, width: int, height: int) -> None:
        async with self._starting:
            if not self._closed:
                await super().start(width, height)

    async def run(self) -> None:
        """Relay the app's output until it ends; an app that ended by itself (q, a crash)
        closes its browser session."""
        await super().run()
        if self._stopping is None:
            with contextlib.suppress(Exception):
                await self.remote_close()

    async def on_data(self, payload: bytes) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):  # the browser went away
            await self.remote_write_bytes(payload)

    async def stop(self) -> None:
        """End the app and its group (once; later calls wait for the first)."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        self._closed = True
        async with self._starting:
            await self._end()

    async def _end(self) -> None:
        with contextlib.suppress(Exception):
            await self._download_manager.cancel_app_downloads(
                app_service_id=self.app_service_id)
        process = self._process
        if process is None:
            return
        try:
            if process.returncode is None:
                with contextlib.suppress(asyncio.TimeoutError):  # a full pipe: no reader
                    await asyncio.wait_for(self.send_meta({"type": "quit"}), 0.5)
            await end_group(process)
        except asyncio.CancelledError:
            kill_group(process.pid)
            raise
        finally:
            if self._stdin is not None:
                self._stdin.close()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(task, READER_GRACE)
            except asyncio.TimeoutError:  # a pipe some escaped process still holds open
                pass
            except Exception as error:  # one line in the server's log, no traceback
                log.warning("a session's output reader failed: %s: %s",
                            type(error).__name__, error)
