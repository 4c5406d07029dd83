"""A dry run's ``next:`` line read back: its command and comment, what the command's own
parser makes of it, and a file sink's output to give a dry run (for the JVM-free tests of
the line and the Spark test that runs a repartition dry run whole)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from statekit.cli.options import ENV_ARCHIVE_KEY

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "spark-4.1.4"


def parsed(command: click.Command, args: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``command`` makes of ``args``: its parameters, and what options that keep no
    parameter (``--env-archive``) left in the context."""
    with command.make_context(command.name or "", list(args)) as ctx:
        return dict(ctx.params), {k: v for k, v in ctx.meta.items() if k == ENV_ARCHIVE_KEY}


def the_same_run_for_real(command: click.Command, dry: list[str], line: str) -> dict[str, Any]:
    """Assert ``line`` (``statekit <name> …``) parses as the dry run ``dry`` without
    ``--dry-run`` and with another ``--out``; return its parameters."""
    words = shlex.split(line)
    assert words[:2] == ["statekit", command.name], line
    assert "--dry-run" not in words
    before, before_meta = parsed(command, dry)
    after, after_meta = parsed(command, words[2:])
    assert before["dry_run"] and not after["dry_run"]
    assert after["target"] != before["target"]
    assert {k: v for k, v in after.items() if k not in ("dry_run", "target")} == \
        {k: v for k, v in before.items() if k not in ("dry_run", "target")}
    assert after_meta == before_meta
    return after


def file_sink(folder: Path, batches: int) -> Path:
    """A file sink's output: one data file and one log entry per batch."""
    log = folder / "_spark_metadata"
    log.mkdir(parents=True)
    for batch in range(batches):
        (folder / f"part-{batch}.parquet").write_bytes(b"")
        entry = {"path": f"file://{folder}/part-{batch}.parquet", "size": 0, "isDir": False,
                 "modificationTime": 1, "blockReplication": 1, "blockSize": 1,
                 "action": "add"}
        (log / str(batch)).write_text("v1\n" + json.dumps(entry))
    return folder


def next_line(out: str) -> tuple[str, str]:
    """The command and the comment of the ``next:`` line of ``out``."""
    (line,) = [line for line in out.splitlines() if line.startswith("next: ")]
    command, _, why = line.removeprefix("next: ").partition("  # ")
    return command, why
