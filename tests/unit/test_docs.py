"""The README and the docs site say what the code does, and only that.

Docs drift in three ways, each caught here without a JVM: a command line in a page names an
option the command does not have (renamed, removed, misspelt); a page documents options by
hand beside the generated CLI reference, and the two disagree a release later; a page narrates
how the project got here or quotes a count or a timing of one run, which is stale the next
day. Plus the README's own limits (its length, its exit-code table, its links) and the
samples the guides include.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.support.cli import command_tree

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md"))
ALL = [README, *PAGES]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


# -- command lines name real options -----------------------------------------------------------

TREE: dict[tuple[str, ...], click.Command] = {
    tuple(path.split()[1:]): command for path, (command, _) in command_tree().items()}
"""Every command path (``("state", "show")``) → its click command, lazy ones loaded."""


def options_of(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


STATEKIT_CALL = re.compile(r"(?:^|[\s`(|;&$])statekit((?:\s+[^\s`|;&#>]+)*)")
"""``statekit`` followed by its words, up to the end of the code span, a pipe, a list
separator, a redirection or a comment."""


def command_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, words after ``statekit``) of every statekit invocation in a page: in
    fenced blocks (continuation lines joined, ``$ `` prompts dropped) and in inline code."""
    fenced, pending, start = False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            if not pending:
                start = number
            pending += " " + line.strip().removeprefix("$ ").rstrip("\\")
            if line.rstrip().endswith("\\"):
                continue
            spans, pending = [pending], ""
        else:
            start = number
            spans = re.findall(r"`([^`]*statekit[^`]*)`", line)
        for span in spans:
            for match in STATEKIT_CALL.finditer(span):
                yield start, match.group(1)


def resolve(words: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The longest command path the words start with, and the rest."""
    path: tuple[str, ...] = ()
    while words and (*path, words[0]) in TREE:
        path = (*path, words.pop(0))
    return path, words


def invocations() -> list[tuple[str, int, str]]:
    return [(rel(path), number, words) for path in ALL for number, words in command_lines(path)]


def test_the_pages_do_call_statekit():
    # the scanner must find the invocations it checks: an empty list would pass anything
    found = invocations()
    assert len(found) > 40
    assert any("recovery" in words and "--rto" in words for _, _, words in found)


def test_every_option_named_in_a_command_line_exists():
    wrong = []
    for page, number, text in invocations():
        path, rest = resolve(text.split())
        if not path:
            continue  # prose like "statekit itself" or "statekit's"
        known = options_of(TREE[path])
        for word in rest:
            option = word.split("=", 1)[0].rstrip(",.)")
            if re.fullmatch(r"--?[a-z][a-z0-9-]*", option) and option not in known:
                wrong.append(f"{page}:{number}: statekit {' '.join(path)} has no {option}")
    assert not wrong, "\n".join(wrong)


def test_the_option_scanner_catches_an_unknown_option(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Run `statekit recovery CKPT --rto 30s --no-such-flag`.\n\n```bash\n"
                    "statekit state show CKPT \\\n    --limit 5 --bogus\n```\n")
    found = [resolve(words.split()) for _, words in command_lines(page)]
    assert [(path, [w for w in rest if w.startswith("--")]) for path, rest in found] == [
        (("recovery",), ["--rto", "--no-such-flag"]), (("state", "show"), ["--limit", "--bogus"])]
    assert "--no-such-flag" not in options_of(TREE[("recovery",)])


# -- no options documented by hand -------------------------------------------------------------

HAND_REFERENCE = [
    (re.compile(r"^\s*\|\s*`?--[a-z]"), "a table row documenting an option"),
    (re.compile(r"^\s*[-*]\s+`--[a-z][^`]*`\s*(\([^)]*\))?\s*[:—–-]"),
     "a list item documenting an option"),
    (re.compile(r"^#+\s.*`statekit [a-z-]+ [^`]*\[--"), "a hand-written usage synopsis"),
]


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_no_page_documents_options_by_hand(path):
    found = [f"{rel(path)}:{number}: {why}: {line.strip()[:80]}"
             for number, line in prose_lines(path.read_text())
             for pattern, why in HAND_REFERENCE if pattern.search(line)]
    assert not found, "the CLI reference is generated from the commands' help; " \
        "say what an option is for in its help= text:\n" + "\n".join(found)


def test_the_hand_reference_patterns_match_what_they_mean():
    samples = {"| `--rto 30s` | the objective |": 0, "- `--stale-after K`: keys unchanged": 1,
               "#### `statekit doctor CKPT [--file-sink PATH]`": 2}
    for line, index in samples.items():
        assert HAND_REFERENCE[index][0].search(line), line
    for line in ("- `statekit doctor CKPT`: will it restart?", "| `report` | counts |",
                 "Pass `--file-sink` when the query writes files."):
        assert not any(pattern.search(line) for pattern, _ in HAND_REFERENCE), line


def pasted_twice(text: str) -> list[str]:
    """Headings that occur twice on one page, and rows that occur twice in one table
    (outside code): a section or a row pasted twice."""
    headings: set[str] = set()
    rows: set[str] = set()  # of the table being read
    repeated = []
    for _, line in prose_lines(text):
        line = line.strip()
        if not line.startswith("|"):
            rows = set()
        elif set(line) <= set("|-: "):  # a table's separator row
            continue
        elif line in rows:
            repeated.append(line)
        else:
            rows.add(line)
        if line.startswith("#") and line.lstrip("#").startswith(" "):
            if line in headings:
                repeated.append(line)
            headings.add(line)
    return repeated


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_no_page_repeats_a_section(path):
    assert not pasted_twice(path.read_text()), rel(path)


def test_a_section_pasted_twice_is_seen():
    page = "# T\n\n## Memory\ntext\n```\n## not a heading\n```\n## Grid\n\n## Memory\n"
    assert pasted_twice(page) == ["## Memory"]
    assert pasted_twice(page.replace("## Memory\n", "## Memory, again\n", 1)) == []


def test_a_table_row_pasted_twice_is_seen():
    table = "| a | b |\n|---|---|\n| x | 1 |\n| y | 2 |\n"
    assert pasted_twice(table + "| x | 1 |\n") == ["| x | 1 |"]
    # the same row in two tables, or two tables' separators, are not a paste
    assert pasted_twice(table + "\ntext\n\n" + table) == []


# -- no history, no stale counts ---------------------------------------------------------------

STALE = [
    r"\bused to\b", r"\bpreviously\b", r"\bformerly\b",
    r"\bnow (computes|uses|reads|writes|shows|takes|checks|runs|prints|returns|counts)\b",
    r"\b(after|before|since) this (issue|change|stop|commit|release)\b",
    r"\b(stop|issue|session) #?\d+\b", r"\bwe (added|changed|fixed|removed|rewrote|moved)\b",
    r"\b\d[\d,]* (tests|test cases) (pass|passed|run|ran)\b", r"\b\d[\d,]* passed\b",
    r"\b\d+:\d\d (min|minutes)\b", r"\bsuite (takes|took|runs in|ran in)\b",
    r"\((before|after)\)",
]
STALE_PATTERN = re.compile("|".join(STALE), re.IGNORECASE)


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_no_page_narrates_history_or_quotes_stale_counts(path):
    found = [f"{rel(path)}:{number}: {match.group(0)!r} in: {line.strip()[:90]}"
             for number, line in prose_lines(path.read_text())
             for match in [STALE_PATTERN.search(line)] if match]
    assert not found, "README and docs describe the product as it is; history, counts and " \
        "timings of runs belong in closing notes:\n" + "\n".join(found)


def test_the_stale_patterns_catch_history():
    for line in ("The report used to list files one by one.", "1479 tests passed in 24:45 min",
                 "after this change the listing is concurrent", "| report (before) | (after) |",
                 "It now computes the lag per partition.", "Fixed in stop 48."):
        assert STALE_PATTERN.search(line), line
    for line in ("The report lists every folder concurrently.", "version N + 1 after batch N",
                 "restarts now, or never"):
        assert not STALE_PATTERN.search(line), line


# -- the README --------------------------------------------------------------------------------

def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= 250


def test_readme_links_resolve():
    missing = [target for target in re.findall(r"\]\(([^)#\s]+)", README.read_text())
               if not target.startswith(("http://", "https://")) and not (ROOT / target).exists()]
    assert not missing


def documented_codes(path: Path) -> set[int]:
    return {int(code) for code in re.findall(r"^\|\s*(\d+)\s*\|", path.read_text(), re.M)}


def test_exit_code_tables_list_exactly_the_codes_statekit_uses():
    from statekit.doctor import problems
    from statekit.support import errors

    codes = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    codes |= {value for name, value in vars(problems).items()
              if name.startswith("EXIT_DOCTOR_")}
    assert documented_codes(README) == codes
    assert documented_codes(DOCS / "reference" / "exit-codes.md") == codes
    # and `statekit --help`, which lists them in its own words
    listed = re.search(r"exit code:(.*?)Environment:", TREE[()].help or "", re.S)
    assert listed and {int(c) for c in re.findall(r"(?:^\s*- |; |, )(\d+)\b", listed[1], re.M)} \
        == codes


def test_every_command_is_in_the_readme_index():
    index = {line.split("`")[1] for line in README.read_text().splitlines()
             if re.match(r"^\| `[a-z]+` \|", line)}
    assert index == {path[0] for path in TREE if len(path) == 1}


# -- samples -----------------------------------------------------------------------------------

SNIPPET = re.compile(r'--8<--\s+"([^"]+)"')


def test_every_included_sample_exists_and_every_sample_is_shown():
    included = {match for page in PAGES for match in SNIPPET.findall(page.read_text())}
    assert included, "no page includes a sample"
    missing = [name for name in included if not (DOCS / name).is_file()]
    assert not missing
    stored = {f"samples/{p.name}" for p in (DOCS / "samples").glob("*.txt")}
    assert stored <= included, f"samples no page shows: {sorted(stored - included)}"
