"""The ``next:`` line a dry run ends with: the command that writes for real.

A person copies that line, so it must be the run they asked for, minus ``--dry-run``, and a
run statekit will then carry out:

- every option they gave is kept — the real run needs all of them, ``--file-sink`` above
  all (without it the sink's log and the new checkpoint disagree). The line is rebuilt from
  the arguments as typed, not from click's parsed values: an option declared
  ``expose_value=False`` (``--env-archive``) has no parsed value to rebuild it from. The
  command's own declarations tell which words are options, which take a value and which
  are flags, so ``--dry-run`` is dropped as an option, never as a string that happens to
  be some option's value; a deprecated spelling is written as its current one;
- ``--out`` is never the folder the dry run just said the real run will refuse (not empty,
  or inside the source): it becomes a sibling that does not exist (``DST-2``, ``DST-3``…),
  or, where no sibling would do (inside the source, or the store cannot say), the
  placeholder ``<NEW_DST>`` — left unquoted, so a shell refuses the line until it is
  replaced — and the line's comment says so.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from statekit.cli.lazy import ARGV_KEY
from statekit.cli.options import _RenamedOption
from statekit.cli.render import print_next

if TYPE_CHECKING:
    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.location import Location

PLACEHOLDER = "<NEW_DST>"
"""Where no fresh ``--out`` can be proposed: the user must name one."""
SIBLINGS = 20
"""Fresh names tried: ``DST-2`` to ``DST-21``."""
DRY_RUN, TARGET = "dry_run", "target"
"""The parameters (click names) of ``--dry-run`` and ``--out``."""


@dataclass(frozen=True)
class Word:
    """One argument as typed: an option with its value (``("--out", "x")``,
    ``("--out=x",)``, ``("-n4",)``), a flag, or a positional argument (``option`` None)."""

    typed: tuple[str, ...]
    option: click.Option | None = None

    def value_replaced(self, value: str) -> tuple[str, ...]:
        name = self.typed[0].split("=", 1)[0] if self.typed[0].startswith("--") else \
            self.typed[0][:2]
        return (name, value)

    def spelled_now(self) -> tuple[str, ...]:
        """The words with a deprecated option's current spelling."""
        if not isinstance(self.option, _RenamedOption):
            return self.typed
        first, *rest = self.typed
        old = next(o for o in self.option.opts if first == o or first.startswith(o + "="))
        return (self.option.new + first[len(old):], *rest)


def _takes_value(option: click.Option) -> bool:
    return not (option.is_flag or option.count)


def words(command: click.Command, args: Sequence[str]) -> list[Word]:
    """``args`` (what follows the command's name) grouped the way click parses them."""
    options = {name: p for p in command.params if isinstance(p, click.Option)
               for name in (*p.opts, *p.secondary_opts)}
    found: list[Word] = []
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word == "--":  # the rest is positional
            found.append(Word(("--", *rest)))
            break
        if word.startswith("--"):
            option = options.get(word.split("=", 1)[0])
            attached = "=" in word
        elif word.startswith("-") and len(word) > 1:
            option = options.get(word[:2])
            attached = len(word) > 2
        else:
            found.append(Word((word,)))
            continue
        if option is None:  # not the command's own (click accepted it): kept as typed
            found.append(Word((word,)))
            continue
        if _takes_value(option) and not attached:
            found.append(Word((word, *rest[:option.nargs]), option))
            del rest[:option.nargs]
        else:
            found.append(Word((word,), option))
    return found


def real_run(command: click.Command, path: Sequence[str], args: Sequence[str], *,
             out: str | None = None) -> str:
    """``path`` (``statekit rollback``) and ``args`` without ``--dry-run``, ``--out``'s
    value replaced by ``out`` when given (:data:`PLACEHOLDER` is written unquoted)."""
    line: list[str] = []
    for word in words(command, args):
        name = word.option.name if word.option is not None else None
        if name == DRY_RUN:
            continue
        typed = word.value_replaced(out) if name == TARGET and out is not None else \
            word.spelled_now()
        line.extend(typed)
    return " ".join(w if w == PLACEHOLDER else shlex.quote(w) for w in [*path, *line])


def current_real_run(*, out: str | None = None) -> str | None:
    """:func:`real_run` of the command being run (None outside the ``statekit`` group)."""
    context = click.get_current_context(silent=True)
    argv = context.meta.get(ARGV_KEY) if context is not None else None
    if context is None or argv is None:
        return None
    names: list[str] = []  # the sub-command's names as typed after ``statekit``
    parent: click.Context | None = context
    while parent is not None and parent.parent is not None:
        names.insert(0, parent.info_name or "")
        parent = parent.parent
    if list(argv[:len(names)]) != names:
        return None
    return real_run(context.command, ["statekit", *names], argv[len(names):], out=out)


def fresh_sibling(ckpt: Checkpoint, refused: Location,
                  storage_options: Mapping[str, Any]) -> str | None:
    """The first ``<refused>-N`` that does not exist and that the real run would accept;
    None if there is none (inside the source, every sibling is too) or the store cannot
    say."""
    from statekit.checkpoint.location import resolve
    from statekit.writes.repartition_plan import target_refusal

    base = refused.url.rstrip("/")
    for n in range(2, 2 + SIBLINGS):
        candidate = f"{base}-{n}"
        try:
            location = resolve(candidate, storage_options)
            if location.fs.exists(location.root):
                continue
        except Exception:  # unreachable, no permission…: propose nothing rather than guess
            return None
        return None if target_refusal(ckpt, location, dry_run=True) else candidate
    return None


def print_real_run(ckpt: Checkpoint, target: Location,
                   storage_options: Mapping[str, Any]) -> None:
    """End a dry run with its real run (see the module docstring)."""
    from statekit.writes.repartition_plan import target_refusal

    if not target_refusal(ckpt, target, dry_run=True):
        print_next(current_real_run(), "write it for real")
        return
    fresh = fresh_sibling(ckpt, target, storage_options)
    if fresh is not None:
        print_next(current_real_run(out=fresh),
                   f"write it for real, into a new folder: {target.url} is refused")
        return
    print_next(current_real_run(out=PLACEHOLDER),
               f"write it for real: replace {PLACEHOLDER} with a new folder "
               f"({target.url} is refused)")
