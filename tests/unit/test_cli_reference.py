"""The CLI reference (docs/reference/cli.md) is the commands' own help, and it is complete.

The options are documented in one place only, their ``help=`` text, and mkdocs-click renders
the page from it. This holds only while every command, sub-command and option has a help
text, and while mkdocs-click reaches every command: the top-level group loads its commands
lazily, and a group it does not enumerate would silently drop out of the page. So the page is
rendered here as the docs build renders it (its own ``::: mkdocs-click`` block, through
mkdocs-click's processor) and checked against the click tree, command by command and option
by option. JVM-free: it imports the command modules, never Spark.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from mkdocs_click._docs import make_command_docs
from mkdocs_click._extension import replace_command_docs
from mkdocs_click._processing import replace_blocks

from statekit.cli.lazy import LazyGroup
from statekit.cli.main import COMMANDS
from tests.support.cli import HELP_WIDTH, CommandTree, command_tree

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"


def documented_options(command: click.Command, ctx: click.Context) -> Iterator[click.Option]:
    """The options a user sees: not hidden (a deprecated spelling), not click's --help."""
    help_option = command.get_help_option(ctx)
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden and param is not help_option:
            yield param


def rendered_page() -> str:
    """docs/reference/cli.md as Markdown after mkdocs-click's preprocessor (the site enables
    attr_list, so headings carry the full command path)."""
    lines = PAGE.read_text().splitlines()
    return "\n".join(replace_blocks(lines, title="mkdocs-click", replace=lambda **options:
                                    replace_command_docs(has_attr_list=True, **options)))


def sections(markdown: str) -> dict[str, str]:
    """Command path → the Markdown under its heading, up to the next heading."""
    found: dict[str, str] = {}
    heading = re.compile(r"^#+ (statekit[\w -]*?) \{ #", re.M)
    marks = list(heading.finditer(markdown))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following else len(markdown)
        found[mark.group(1)] = markdown[mark.end():end]
    return found


def explained(name: str, ctx: click.Context | None) -> bool:
    """Whether the help of the command or of a group above it names ``name`` (``statekit
    --help`` says what CKPT is for every command)."""
    while ctx is not None:
        if name in (ctx.command.help or ""):
            return True
        ctx = ctx.parent
    return False


def missing_help(tree: CommandTree) -> list[str]:
    """Commands without a description, options without help, arguments that neither the
    command's help nor its group's names."""
    missing = []
    for path, (command, ctx) in tree.items():
        if not (command.help or "").strip():
            missing.append(f"{path}: no help text")
        for option in documented_options(command, ctx):
            if not (option.help or "").strip():
                missing.append(f"{path} {option.opts[0]}: no help text")
        for argument in (p for p in command.params if isinstance(p, click.Argument)):
            name = argument.make_metavar(ctx).strip("[].")
            if not explained(name, ctx):
                missing.append(f"{path}: the help never explains {name}")
    return missing


def unrendered(tree: CommandTree, markdown: str) -> list[str]:
    """Commands without a section of their own in the page, and options missing from their
    command's section."""
    by_path = sections(markdown)
    missing = []
    for path, (command, ctx) in tree.items():
        section = by_path.get(path)
        if section is None:
            missing.append(f"{path}: no section")
            continue
        first_line = (command.help or "").strip().splitlines()[0]
        if first_line not in section:
            missing.append(f"{path}: its description is not shown")
        if f"\n{path} [OPTIONS]" not in section:
            missing.append(f"{path}: no usage line")
        for option in documented_options(command, ctx):
            for flag in (*option.opts, *option.secondary_opts):
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", section):
                    missing.append(f"{path} {flag}: not in its section")
    return missing


TREE = command_tree()


def test_the_tree_holds_every_command_and_the_nested_groups():
    assert {"statekit state show", "statekit state export", "statekit pipeline run",
            "statekit pipeline generate", "statekit repartition", "statekit tui"} <= set(TREE)
    assert {f"statekit {name}" for name in COMMANDS} <= set(TREE)


def test_every_command_option_and_argument_has_help():
    assert not missing_help(TREE), "\n".join(missing_help(TREE))


def test_the_reference_shows_every_command_and_every_option():
    problems = unrendered(TREE, rendered_page())
    assert not problems, "docs/reference/cli.md, as mkdocs-click renders it:\n" + \
        "\n".join(problems)


def test_mkdocs_click_sees_every_lazy_command_whatever_is_loaded_already():
    """mkdocs-click takes ``group.commands`` as the whole list when it is not empty: with only
    some commands imported (by an earlier page, a plugin, a test) it must still see all."""
    group = LazyGroup(name="statekit", lazy_commands=COMMANDS)  # nothing imported through it
    group.get_command(click.Context(group), "report")
    markdown = "\n".join(make_command_docs("statekit", group, depth=1, has_attr_list=True))
    assert set(sections(markdown)) >= {f"statekit {name}" for name in COMMANDS}


def test_a_command_keeps_the_name_it_is_mounted_under():
    """mkdocs-click titles a sub-command by its own ``name``, not the group's key for it."""
    for path, (command, ctx) in TREE.items():
        assert command.name == ctx.info_name or path == "statekit", path


@pytest.mark.parametrize("path", sorted(TREE))
def test_help_fits_an_80_column_terminal(path):
    command, ctx = TREE[path]
    text = command.get_help(ctx)
    wide = [line for line in text.splitlines() if len(line) > HELP_WIDTH]
    assert not wide, f"{path} --help has lines wider than {HELP_WIDTH} columns:\n" + "\n".join(wide)
    listing = text.partition("\nCommands:\n")[2]
    cut = [line for line in listing.splitlines() if line.endswith("...")]
    assert not cut, f"{path} --help cuts a command's first sentence:\n" + "\n".join(cut)


def test_the_help_narrates_no_history():
    page = rendered_page()
    stale = re.findall(r"\b(?:used to|previously|formerly|no longer|deprecated)\b.{0,60}",
                       page, re.I)
    assert not stale, stale


# -- the checks catch what they are for --------------------------------------------------------

@click.group("demo")
def _demo() -> None:
    """A group to break on purpose."""


@_demo.command("ok")
@click.argument("thing", metavar="THING")
@click.option("--fine", help="Has help.")
def _ok(thing: str, fine: str | None) -> None:
    """Explains THING and has help."""


@_demo.command("bad")
@click.argument("src", metavar="SRC")
@click.option("--bare")
@click.option("--old", hidden=True)
def _bad(src: str, bare: str | None, old: str | None) -> None:
    """No word about the argument."""


def test_missing_help_catches_an_option_and_an_argument_without_help():
    assert missing_help(command_tree(_demo, "demo")) == [
        "demo bad --bare: no help text", "demo bad: the help never explains SRC"]


def test_unrendered_catches_a_missing_command_and_a_missing_option():
    tree = dict(TREE)
    show, ctx = tree["statekit state show"]
    extra = click.Command("show", help=show.help, params=[
        *show.params, click.Option(["--not-rendered"], help="Missing from the page.")])
    tree["statekit state show"] = (extra, ctx)
    tree["statekit state vanished"] = (click.Command("vanished", help="Gone."), ctx)
    assert unrendered(tree, rendered_page()) == [
        "statekit state show --not-rendered: not in its section",
        "statekit state vanished: no section"]
