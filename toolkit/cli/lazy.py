"""A click group that imports a sub-command's module only when that command runs.

``statekit report`` must answer in well under a second and never import pyspark (or pandas,
which the pipeline commands need). Importing every command module up front would cost that
much before any work starts, so commands are registered by import path with their one-line
help, and ``statekit --help`` lists them without importing any of them.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

ARGV_KEY = "statekit.argv"
"""Where the top-level group keeps the arguments it was given (``ctx.meta``)."""


class LazyGroup(click.Group):
    """``lazy_commands`` maps a command name to ``("package.module:attr", "short help")``."""

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep the command line as given: a dry run prints it back without ``--dry-run``
        as the next step (:func:`statekit.cli.render.command_line`)."""
        ctx.meta.setdefault(ARGV_KEY, list(args))
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            target, _ = self.lazy_commands[cmd_name]
            module_name, attr = target.split(":")
            command: click.Command = getattr(importlib.import_module(module_name), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands and name not in self.commands:
                rows.append((name, self.lazy_commands[name][1]))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
