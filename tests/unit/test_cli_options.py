"""One option vocabulary: every option name means one thing in every command (one type, one
default, one help), and the spellings it replaced keep working for a release with a note."""

from __future__ import annotations

from collections import defaultdict

import click
import pytest

from statekit.cli.main import cli


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    found: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, f"{path} {name}".strip())
        else:
            found.append((path, command))

    walk(cli, "")
    return found


def _signature(option: click.Option) -> tuple:
    kind = option.type
    bounds = tuple(getattr(kind, attr, None) for attr in ("min", "max", "choices"))
    return (type(kind).__name__, bounds, option.is_flag, option.multiple,
            repr(option.default), option.help, tuple(option.opts), tuple(option.secondary_opts))


def test_every_option_name_means_one_thing_in_every_command():
    declared: dict[str, dict[tuple, list[str]]] = defaultdict(lambda: defaultdict(list))
    commands = _commands()
    assert len(commands) >= 17
    for path, command in commands:
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for name in (*param.opts, *param.secondary_opts):
                    declared[name][_signature(param)].append(path)
    clashes = {name: dict(variants) for name, variants in declared.items() if len(variants) > 1}
    assert not clashes, "\n".join(
        f"{name}: " + " | ".join(f"{paths} → {sig[0]} default={sig[4]} help={sig[5]!r}"
                                  for sig, paths in variants.items())
        for name, variants in clashes.items())
    shared = [name for name, variants in declared.items()
              if sum(len(p) for p in variants.values()) > 1]
    assert {"--operator", "--file-sink", "--progress-log", "--decode", "--out",
            "--dry-run", "--verify", "--partition", "--partitions", "--cores"} <= set(shared)


def _parse(path: str, args: list[str]) -> dict:
    command = dict(_commands())[path]
    with command.make_context(path, args) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize(("path", "old", "new", "dest", "value"), [
    ("recovery", ["--sink", "out/"], ["--file-sink", "out/"], "file_sink", "out/"),
    ("recovery", ["--progress", "p.jsonl"], ["--progress-log", "p.jsonl"], "progress_log",
     "p.jsonl"),
    ("growth", ["--progress", "p.jsonl"], ["--progress-log", "p.jsonl"], "progress_log",
     "p.jsonl"),
    ("report", ["--verify"], ["--decode"], "decode", True),
    ("recovery", ["--verify"], ["--decode"], "decode", True),
    ("metrics", ["--verify"], ["--decode"], "decode", True),
    ("state changes", ["--from", "3"], ["--from-batch", "3"], "start", 3),
    ("state changes", ["--to", "7"], ["--to-batch", "7"], "end", 7),
])
def test_an_old_spelling_still_works_with_a_one_line_note(capsys, path, old, new, dest,
                                                           value):
    ckpt = [] if path == "growth" else ["ckpt"]
    assert _parse(path, [*ckpt, *new])[dest] == value
    assert capsys.readouterr().err == ""
    assert _parse(path, [*ckpt, *old])[dest] == value
    note = capsys.readouterr().err.strip().splitlines()
    assert note == [f"statekit: {old[0]} is deprecated and will be removed in the next "
                    f"release; use {new[0]}"]


@pytest.mark.parametrize("order", ["old first", "new first"])
def test_old_and_new_spelling_together_are_refused(capsys, order):
    """Click keeps whichever of two options it processed last: both at once would silently
    depend on their order, so they are a usage error (exit 2) in either order."""
    from statekit.cli.runner import run_cli

    both = [["--sink", "a/"], ["--file-sink", "b/"]]
    if order == "new first":
        both.reverse()
    args = ["recovery", "no-such-ckpt", *both[0], *both[1]]
    assert run_cli(cli, "statekit", args) == 2
    err = capsys.readouterr().err
    assert "--sink is the deprecated spelling of --file-sink; give --file-sink only" in err


def test_without_the_option_the_default_stays():
    assert _parse("recovery", ["ckpt"])["file_sink"] is None
    # every command that gives the restart verdict decodes by default: one verdict
    for command in ("report", "recovery", "growth", "batches", "metrics", "doctor"):
        assert _parse(command, ["ckpt"])["decode"] is True, command
        assert _parse(command, ["ckpt", "--no-decode"])["decode"] is False, command
    assert _parse("doctor", ["ckpt", "--decode"])["decode"] is True  # still accepted


def test_state_show_still_needs_a_row(capsys):
    """The shared --limit allows 0 (dump's); state show refuses it before any JVM starts."""
    from statekit.cli.runner import run_cli

    assert run_cli(cli, "statekit", ["state", "show", "no-such-ckpt", "--limit", "0"]) == 2
    assert "--limit" in capsys.readouterr().err
