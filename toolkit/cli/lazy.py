"""A click group that imports a sub-command's module only when that command is looked up.

``statekit report`` must answer in well under a second and never import pyspark (or pandas,
which the pipeline commands need). Importing every command module up front would cost that
much before any work starts, so commands are registered by import path with their one-line
help, and ``statekit --help`` lists them without importing any of them. Whatever asks for a
command object (``get_command``, or ``group.commands[name]`` / ``.values()`` as sqlite-utils'
help test and mkdocs-click's reference do) gets it imported then.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

ARGV_KEY = "statekit.argv"
"""Where the top-level group keeps the arguments it was given (``ctx.meta``)."""


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name: the loaded ones, and the lazy ones, each imported the first
    time it is looked up. Names, ``in`` and ``len`` never import anything."""

    def __init__(self, lazy: dict[str, tuple[str, str]],
                 loaded: MutableMapping[str, click.Command]) -> None:
        self._lazy = lazy
        self._loaded: dict[str, click.Command] = dict(loaded)

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            target, _ = self._lazy[name]  # KeyError: no such command
            module_name, attr = target.split(":")
            self._loaded[name] = getattr(importlib.import_module(module_name), attr)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._loaded, *self._lazy]))

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._lazy.keys())


class LazyGroup(click.Group):
    """``lazy_commands`` maps a command name to ``("package.module:attr", "short help")``."""

    commands: LazyCommands

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.commands = LazyCommands(self.lazy_commands, self.commands)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep the command line as given: a dry run prints it back without ``--dry-run``
        as the next step (:func:`statekit.cli.render.command_line`)."""
        ctx.meta.setdefault(ARGV_KEY, list(args))
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if not self.commands.is_loaded(name):
                rows.append((name, self.lazy_commands[name][1]))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
