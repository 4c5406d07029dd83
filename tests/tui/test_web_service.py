"""``statekit tui … --web`` as a service left running for weeks: the real server in a
subprocess (``python -m statekit tui CKPT --web …``, as a user starts it), spoken to as a
browser speaks to it — the page over HTTP, the app over its websocket — and its processes read
from /proc.

- off loopback, nothing without the token: no page, no static file, no websocket, no app;
- SIGTERM with three browser sessions open: the server and every app are gone within 5 s;
- a browser that goes away takes its app, and whatever the app started, along;
- sessions come and go without the server's file handles, threads or children growing;
- a port it cannot have and a port that is no port are one line and an exit code.

Each test copies its checkpoint into its own ``tmp_path``: that path on a command line tells
this test's processes from those of tests running alongside (pytest-xdist)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statekit.support.errors import EXIT_BAD_INPUT, EXIT_USAGE
from tests.support.ports import free_port
from tests.support.web import (
    DEMO,
    GOLDEN,
    Served,
    Terminal,
    apps,
    members,
    resources,
    statekit_processes,
    wait_until,
    web_server,
)

STOP_BOUND = 5.0
"""Seconds within which SIGTERM must have ended the server and every app (the spec's)."""


def _checkpoint(tmp_path: Path, source: Path = DEMO, name: str = "ckpt") -> str:
    copy = tmp_path / name
    shutil.copytree(source, copy)
    return str(copy)


def _fleet(tmp_path: Path) -> list[str]:
    return [_checkpoint(tmp_path, source, source.parent.name) for source in GOLDEN[:3]]


async def _session(served: Served, http, **headers: str) -> Terminal:
    ws = await http.ws_connect(f"{served.base}/ws?width=160&height=40", headers=headers)
    terminal = Terminal(ws)
    await terminal.resize(160, 40)
    return terminal


def _no_apps(served: Served, marker: str) -> bool:
    return not apps(served, marker)


def test_off_loopback_every_request_needs_the_token(tmp_path):
    """Bound to 0.0.0.0 the server prints a URL with a token and refuses (403) the page,
    its static files and the websocket handshake without it — no app process starts for a
    refused websocket. The token in the URL sets an HttpOnly, SameSite=Strict cookie with
    which the page's static files and websocket pass, and an app starts; a Bearer header
    passes too. A wrong token is refused like none."""
    import aiohttp

    marker = str(tmp_path)
    ckpt = _checkpoint(tmp_path)
    port = free_port()
    with web_server([ckpt, "--web", f"0.0.0.0:{port}"], port=port) as served:
        token = served.token
        assert token and len(token) >= 32, served.said
        assert f":{port}/?token={token}" in served.said and "only with this URL's token" \
            in served.said

        async def browse() -> tuple[str, str]:
            async with aiohttp.ClientSession() as stranger:
                for path in ("/", "/static/js/textual.js", "/static/css/xterm.css",
                             f"/?token={token[:-1]}", "/download/anything"):
                    async with stranger.get(served.base + path) as refused:
                        assert refused.status == 403, path
                async with stranger.get(served.base + "/", headers={
                        "Authorization": f"Bearer {token}x"}) as refused:
                    assert refused.status == 403
                with pytest.raises(aiohttp.WSServerHandshakeError) as handshake:
                    await stranger.ws_connect(f"{served.base}/ws?width=80&height=24")
                assert handshake.value.status == 403
                await asyncio.sleep(1)  # had it started an app, it would be there now
                assert _no_apps(served, marker), apps(served, marker)
            jar = aiohttp.CookieJar(unsafe=True)  # cookies of an IP-address host
            async with aiohttp.ClientSession(cookie_jar=jar) as browser:
                async with browser.get(f"{served.base}/?token={token}") as page:
                    assert page.status == 200
                    html = await page.text()
                    cookie = page.headers["Set-Cookie"]
                assert token in cookie and "HttpOnly" in cookie and \
                    "SameSite=Strict" in cookie, cookie
                async with browser.get(served.base + "/static/js/textual.js") as script:
                    assert script.status == 200  # the cookie, no token in the URL
                terminal = await _session(served, browser)
                try:
                    screen = await terminal.until("Overview", 90)
                    assert len(apps(served, marker)) == 1
                finally:
                    await terminal.send_keys("q")
                    await terminal.ws.close()
            async with aiohttp.ClientSession() as script, script.get(
                    served.base + "/", headers={"Authorization": f"Bearer {token}"}) as page:
                assert page.status == 200
            return html, screen

        html, screen = asyncio.run(browse())
    assert "textual.js" in html and "fonts.googleapis" not in html
    assert "Operators" in screen


def test_a_token_given_guards_loopback_too_and_is_never_printed(tmp_path):
    """STATEKIT_WEB_TOKEN on a 127.0.0.1 server: required, and kept out of the output."""
    import aiohttp

    token = "given-token-for-this-test-0123456789"
    with web_server([_checkpoint(tmp_path)], env={"STATEKIT_WEB_TOKEN": token}) as served:
        assert token not in "".join(served.lines)
        assert "STATEKIT_WEB_TOKEN" in served.said and "this machine only" in served.said

        async def ask() -> tuple[int, int]:
            async with aiohttp.ClientSession() as http:
                async with http.get(served.base + "/") as without:
                    pass
                async with http.get(served.base + "/",
                                    headers={"Authorization": f"Bearer {token}"}) as with_:
                    pass
            return without.status, with_.status

        assert asyncio.run(ask()) == (403, 200)


@pytest.mark.parametrize(("signum", "shown"), [(signal.SIGTERM, True), (signal.SIGINT, False),
                                               (signal.SIGHUP, True)],
                         ids=["SIGTERM-apps-showing", "SIGINT-apps-starting",
                              "SIGHUP-apps-showing"])
def test_a_signal_with_three_sessions_open_leaves_no_process_within_5_seconds(
        tmp_path, signum, shown):
    """Three browser sessions, each with its app showing (or still starting: the "quit" it
    is sent waits in a pipe nobody reads yet); SIGTERM (or Ctrl+C's SIGINT, or the SIGHUP
    of a closed terminal) to the server:
    its websockets close, and within 5 s the server has exited (0) and neither an app nor
    anything an app started is left."""
    import aiohttp

    marker = str(tmp_path)
    with web_server([_checkpoint(tmp_path)]) as served:

        async def three_then_signal() -> tuple[list, float, list[bool]]:
            async with aiohttp.ClientSession() as http:
                terminals = [await _session(served, http) for _ in range(3)]
                if shown:
                    for terminal in terminals:
                        await terminal.until("Overview", 90)
                    await terminals[0].send_keys("2")  # a key, as a user would
                # the handshake is answered first, then the app starts
                assert wait_until(lambda: len(apps(served, marker)) == 3, 30)
                running = apps(served, marker)
                sessions = {app.pid for app in running}
                assert all(app.sid == app.pid for app in running), running
                started = time.monotonic()
                served.process.send_signal(signum)
                closed = await asyncio.gather(*(t.closed(STOP_BOUND) for t in terminals))
                while served.process.poll() is None and \
                        time.monotonic() - started < STOP_BOUND:
                    await asyncio.sleep(0.05)
                left = members(sessions) + statekit_processes(marker)
                while left and time.monotonic() - started < STOP_BOUND:
                    await asyncio.sleep(0.05)
                    left = members(sessions) + statekit_processes(marker)
                return left, time.monotonic() - started, closed

        left, took, closed = asyncio.run(three_then_signal())
        assert served.process.poll() == 0, "".join(served.lines)
    assert not left, f"still running {took:.1f} s after {signum!r}: {left}"
    assert all(closed)
    assert "stopped" in served.lines[-1] and "Traceback" not in "".join(served.lines)


def test_a_browser_that_goes_away_takes_its_app_and_its_group_along(tmp_path):
    """A session on a fleet (worker threads reading every checkpoint) that pressed keys —
    Enter opened a checkpoint, 3 its Batches tab — then the browser vanishes without quitting
    (its websocket closed): the app and every process of its group are gone, while the
    server runs on and serves the next browser."""
    import aiohttp

    marker = str(tmp_path)
    with web_server(_fleet(tmp_path)) as served:

        async def visit() -> set[int]:
            async with aiohttp.ClientSession() as http:
                terminal = await _session(served, http)
                await terminal.until("complete in", 90)
                await terminal.send_keys("\r")
                await terminal.until(("restart: restarts", "WILL NOT RESTART:"), 120)
                await terminal.send_keys("3")
                sessions = {app.pid for app in apps(served, marker)}
                await terminal.ws.close()
            return sessions

        sessions = asyncio.run(visit())
        assert len(sessions) == 1
        assert wait_until(lambda: not members(sessions), 10), members(sessions)
        assert served.process.poll() is None

        async def next_browser() -> str:
            async with aiohttp.ClientSession() as http:
                terminal = await _session(served, http)
                try:
                    return await terminal.until("complete in", 90)
                finally:
                    await terminal.send_keys("q")
                    assert await terminal.closed(30)  # q: the app ends, its session too

        assert "3 checkpoints" in asyncio.run(next_browser())
        assert wait_until(lambda: _no_apps(served, marker), 10)


def test_sessions_come_and_go_without_the_server_growing(tmp_path):
    """Four browser sessions one after the other, each until its app showed, each closed by
    the browser: after the last, the server holds no more file handles, threads or child
    processes than after the first."""
    import aiohttp

    marker = str(tmp_path)
    with web_server([_checkpoint(tmp_path)]) as served:
        pid = served.process.pid

        async def one_session() -> None:
            async with aiohttp.ClientSession() as http:
                async with http.get(served.base + "/") as page:
                    await page.text()
                terminal = await _session(served, http)
                await terminal.until("Overview", 90)
                await terminal.send_keys("2")
                await terminal.ws.close()

        asyncio.run(one_session())
        assert wait_until(lambda: _no_apps(served, marker), 10)
        time.sleep(0.5)
        first = resources(pid)
        for _ in range(3):
            asyncio.run(one_session())
            assert wait_until(lambda: _no_apps(served, marker), 10)

        def no_more() -> bool:
            return all(now <= then for now, then in zip(resources(pid), first, strict=True))

        assert wait_until(no_more, 10), \
            f"(fds, threads, children) after the first session {first}, now {resources(pid)}"
        assert resources(pid)[2] == 0


def _statekit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "STATEKIT_DEBUG": ""})


def test_a_port_in_use_is_one_line_and_exit_3_before_serving_anything():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _statekit("tui", str(DEMO), "--web", str(port))
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert done.stderr.splitlines() == [
        f"statekit: error: cannot listen on 127.0.0.1:{port}: address already in use"]
    assert "serving" not in done.stdout + done.stderr


@pytest.mark.parametrize("value", ["99999", "abc", "0", "127.0.0.1:", "::1:8000"])
def test_a_port_that_is_no_port_is_one_line_and_exit_3(value):
    """As documented (docs/reference/exit-codes.md: a port that is invalid, exit 3), before
    any work."""
    done = _statekit("tui", str(DEMO), "--web", value)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"statekit: error: --web {value!r}: ")
    assert "serving" not in done.stdout + done.stderr


def test_a_host_that_does_not_resolve_is_one_line_and_exit_3():
    done = _statekit("tui", str(DEMO), "--web", "no-such-host.invalid:8000")
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("statekit: error: cannot listen on no-such-host.invalid:8000: ")


def test_a_weak_token_is_one_line_and_exit_3_but_only_for_the_server():
    done = _statekit("tui", str(DEMO), "--web", "8000", "--web-token", "short")
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    [line] = done.stderr.splitlines()
    assert "--web-token" in line and "16 characters" in line
    alone = _statekit("tui", str(DEMO), "--web-token", "a-token-without-a-server")
    assert alone.returncode == EXIT_USAGE and "--web-token belongs to --web" in alone.stderr
