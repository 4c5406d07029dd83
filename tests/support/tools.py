"""External programs some tests need: required where they can be installed, skipped elsewhere.

``make test`` installs Debian's ``prometheus`` (the server and promtool) and ``chromium``
where apt-get and root are available. A test that then skipped because the program was
missing would turn a failed install into a green run that never ran it. So under ``CI=true``
(the CI entry point) or ``STATEKIT_REQUIRE_TOOLS=1`` a missing program *fails* the test with
one line naming the Debian package; on a developer's machine without it, the test skips with
the same line (``pytest -ra`` lists it). ``STATEKIT_REQUIRE_TOOLS=0`` turns the requirement
off even in CI (for a run on another operating system, say).

A tool is looked up on PATH (``shutil.which``) by every test that needs it, before that test's
fixtures are set up. ``unavailable`` applies the same rule to other things a test needs from
the machine (a library's exported symbol, say).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import NoReturn

import pytest


@dataclass(frozen=True)
class Tool:
    """A program a test needs and the Debian package that brings it."""

    commands: tuple[str, ...]
    """Names to look for on PATH, the first found wins."""
    package: str
    """The Debian package that installs it."""
    purpose: str
    """What needs it, for the message."""


PROMETHEUS = Tool(("prometheus",), "prometheus", "the Prometheus server tests")
PROMTOOL = Tool(("promtool",), "prometheus", "the promtool checks of the exposition and rules")
CHROMIUM = Tool(("chromium", "chromium-browser"), "chromium", "the browser test of tui --web")
TMUX = Tool(("tmux",), "tmux", "the soak test (statekit tui --watch in a terminal)")
SETPRIV = Tool(("setpriv",), "util-linux",
               "the permission tests (root gives up reading everything through setpriv)")


def tools_required() -> bool:
    """True when a missing tool must fail the test (CI, or asked for)."""
    setting = os.environ.get("STATEKIT_REQUIRE_TOOLS", "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def find(tool: Tool) -> str | None:
    """The tool's path, or None."""
    return next((path for name in tool.commands if (path := shutil.which(name))), None)


def missing_message(tool: Tool) -> str:
    return (f"{tool.commands[0]} not found: install Debian's {tool.package} package "
            f"(apt-get install {tool.package}; make test does where apt-get and root are "
            f"available) for {tool.purpose}")


def unavailable(message: str) -> NoReturn:
    """Stop the test for something the machine lacks: fail (CI, or asked for) or skip
    (elsewhere), with ``message`` as its one line."""
    if tools_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def require(tool: Tool) -> str:
    """The tool's path; otherwise fail (CI) or skip (elsewhere) with one line naming the
    package. Call it inside a test or fixture."""
    path = find(tool)
    if path is None:
        unavailable(missing_message(tool))
    return path


def needs(*tools: Tool) -> pytest.MarkDecorator:
    """A marker for a test or module (``needs_tools``): checked by tests/conftest.py before
    any fixture is set up (no Spark run for a test that cannot run), failing in CI and
    skipping elsewhere — see ``require``."""
    return pytest.mark.needs_tools(*tools)


def check_marked(item: pytest.Item) -> None:
    """``require`` every tool the item's ``needs_tools`` markers name."""
    for mark in item.iter_markers("needs_tools"):
        for tool in mark.args:
            require(tool)


ROOT_NEEDS_SETPRIV = needs(SETPRIV) if os.geteuid() == 0 else needs()
"""Permission tests: as root they give up reading everything through setpriv; a user needs
nothing."""
