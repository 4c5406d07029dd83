"""``statekit tui … --web``: the real server (textual-serve) in a subprocess, spoken to as a
browser speaks to it — the page over HTTP, then the app's terminal stream over its websocket,
keys sent back — without a JVM. The fleet list arrives, Enter opens a checkpoint."""

from __future__ import annotations

import asyncio
import time

import pytest

from statekit.cli.tui_web import served_argv, web_address
from statekit.cli.web_address import is_loopback
from statekit.support.errors import BadInput
from tests.support.web import GOLDEN, served_tui, terminal_text


def test_web_address_binds_locally_unless_told():
    assert web_address("8000") == ("127.0.0.1", 8000)
    assert web_address(":8000") == ("127.0.0.1", 8000)
    assert web_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert web_address("[::1]:9000") == ("::1", 9000)
    assert web_address("1") == ("127.0.0.1", 1) and web_address("65535")[1] == 65535
    for bad in ("", "web", "host:", "70000", "0", "65536", "99999", "abc", "::1:8000",
                "-1", "a b:80", "８０００"):
        with pytest.raises(BadInput):
            web_address(bad)


def test_only_loopback_addresses_go_without_a_token():
    for local in ("127.0.0.1", "127.1.2.3", "::1", "localhost", "LOCALHOST"):
        assert is_loopback(local), local
    for reachable in ("0.0.0.0", "::", "10.0.0.7", "my-host", "localhost.example.com"):
        assert not is_loopback(reachable), reachable


def test_the_served_command_is_this_one_without_the_server_options():
    """exec'd as a list (no shell): an argument with a space stays one argument; the token
    never reaches the app's command line."""
    argv = served_argv(["tui", "a b", "--web", "8000", "--allow-write", "--web=1",
                        "--web-token", "s3cret-s3cret-s3cret", "--web-token=x"])
    assert argv[1:] == ["-m", "statekit", "tui", "a b", "--allow-write"]


def _screen_text(chunks: list[bytes]) -> str:
    return terminal_text(b"".join(chunks).decode("utf-8", "replace"))


async def _session(port: int, urls: list[str]) -> tuple[str, str, str]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/") as page:
            html = await page.text()
            assert page.status == 200
        chunks: list[bytes] = []
        async with http.ws_connect(f"http://127.0.0.1:{port}/ws?width=160&height=40") as ws:

            async def read_until(pattern: str | tuple[str, ...], timeout: float) -> str:
                patterns = (pattern,) if isinstance(pattern, str) else pattern
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    try:
                        message = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
                    except asyncio.TimeoutError:
                        break
                    if message.type == aiohttp.WSMsgType.BINARY:
                        chunks.append(message.data)
                        if any(p in _screen_text(chunks) for p in patterns):
                            return _screen_text(chunks)
                    elif message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        break
                raise AssertionError(f"never saw {pattern!r}: {_screen_text(chunks)[-2000:]}")

            try:
                await ws.send_json(["resize", {"width": 160, "height": 40}])
                fleet = await read_until("complete in", 60)
                chunks.clear()
                await ws.send_json(["stdin", "\r"])  # Enter: the first row's checkpoint
                # the Overview's restart line, whichever checkpoint the first row is
                opened = await read_until(("restart: restarts", "WILL NOT RESTART:"), 120)
            finally:  # the app ends with its session, also when the test failed
                await ws.send_json(["stdin", "q"])
    return html, fleet, opened


def test_the_app_served_to_a_browser_lists_the_fleet_and_opens_a_checkpoint(tmp_path):
    """The browser's text says what the CLI says: a copy with its newest state file cut in half
    WILL NOT RESTART (statekit doctor's verdict, the file decoded), the others restart, and
    the opened checkpoint's Overview shows the restart line."""
    import shutil

    from tests.oracle.campaign import statekit

    damaged = tmp_path / "cut-delta"
    shutil.copytree(GOLDEN[0], damaged)
    # partition 1's newest version: its snapshot and its delta (Spark repairs a damaged
    # snapshot from the deltas before it)
    version = max(int(p.stem) for p in (damaged / "state/0/1").glob("*.delta"))
    for newest in (damaged / "state/0/1").glob(f"{version}.*[ta]"):
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    assert statekit(["doctor", damaged])[0] in (11, 12)
    urls = [str(p) for p in GOLDEN[:3]] + [str(damaged)]
    with served_tui(urls) as (port, said):
        assert f"serving http://127.0.0.1:{port}" in said and "this machine only" in said
        assert "read-only" in said
        html, fleet, opened = asyncio.run(_session(port, urls))
    assert "statekit" in html and "/ws" in html
    assert "4 checkpoints" in fleet and "aggregation_hdfs" in fleet and "restarts" in fleet
    assert "WILL NOT RESTART" in fleet and "cut-delta" in fleet
    assert "restart: restarts" in opened or "WILL NOT RESTART:" in opened
    assert "Operators" in opened and "Recovery" in opened
