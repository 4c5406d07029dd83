"""The TUI's tab keys read the same everywhere a user can learn them.

The app numbers its tabs from ``TABS`` (its ``1``…``9`` bindings and the ``?`` help screen
enumerate that tuple); ``statekit tui --help`` and the key table of the TUI's docs page spell
the numbers out by hand. A tab added, dropped or reordered in one place and not the others
sends a user to the wrong screen, so all three are compared here. JVM-free: Textual is
imported, the app is never run.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from textual.binding import Binding

from statekit.cli.main import cli
from statekit.tui.app import TABS, StatekitApp

TUI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "tui.md"
EXPECTED = [(n, title) for n, (_, title, _) in enumerate(TABS, 1)]


def help_tabs(text: str) -> list[tuple[int, str]]:
    """The numbered tabs of ``statekit tui --help``: every ``N Title`` before the colon of a
    ``- `` item of its ``Tabs:`` list (``- 3 Batches, 4 Growth, 5 Recovery: …``)."""
    listed = text.split("Tabs:", 1)[1]
    tabs = []
    for line in listed.splitlines():
        item = line.strip()
        if not item:
            if tabs:
                break  # the blank line after the list
            continue
        if not item.startswith("- "):
            continue  # an item's continuation line
        names = item[2:].split(":", 1)[0]
        for part in names.split(", "):
            match = re.match(r"(\d+) (\w+)", part)
            assert match, f"not a numbered tab: {part!r} in {item!r}"
            tabs.append((int(match[1]), match[2]))
    return tabs


def docs_tabs(text: str) -> list[tuple[int, str]]:
    """The tab row of the key table on the TUI's docs page: ``| `1`–`9` | Overview, … |``."""
    rows = re.findall(r"^\| `(\d+)`–`(\d+)` \| ([^|]+) \|$", text, re.M)
    assert len(rows) == 1, f"expected one tab row in the key table, found {rows}"
    first, last, titles = rows[0]
    names = [name.strip() for name in titles.split(",")]
    assert int(last) - int(first) + 1 == len(names), rows[0]
    return list(enumerate(names, int(first)))


def test_the_help_of_statekit_tui_numbers_the_tabs_as_the_app_does():
    result = CliRunner().invoke(cli, ["tui", "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert help_tabs(result.output) == EXPECTED
    assert (9, "Fix") in help_tabs(result.output)


def test_the_fix_tab_is_nine():
    assert EXPECTED[8] == (9, "Fix")
    assert len(EXPECTED) == 9


def test_the_app_binds_each_number_to_its_tab():
    bound = {binding.key: binding.action for binding in StatekitApp.BINDINGS
             if isinstance(binding, Binding) and binding.action.startswith("show_tab")}
    assert bound == {str(n): f"show_tab('{tab}')" for n, (tab, _, _) in enumerate(TABS, 1)}


def test_the_docs_key_table_numbers_the_tabs_as_the_app_does():
    assert docs_tabs(TUI_PAGE.read_text()) == EXPECTED


def test_the_parsers_read_what_they_mean():
    text = ("Tabs:\n\n  - 1 Overview: the query,\n    and more\n  - 2 Batches, 3 Growth: as"
            " the commands\n  - 4 Query (with --progress-log): charts\n\n  One CKPT: x\n")
    assert help_tabs(text) == [(1, "Overview"), (2, "Batches"), (3, "Growth"), (4, "Query")]
    table = "| key | does |\n|---|---|\n| `1`–`3` | Overview, Batches, Fix |\n| `q` | quit |\n"
    assert docs_tabs(table) == [(1, "Overview"), (2, "Batches"), (3, "Fix")]
