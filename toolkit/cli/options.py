"""Options every checkpoint-reading command shares, and the one place URLs become models.

Following sqlite-utils, shared options are decorators so every command spells them the same
way; following fsspec, a location string is resolved once — here — into a ``Checkpoint``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from statekit.errors import BadInput
from statekit.presentation import printable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.checkpoint import Checkpoint
    from statekit.partition_workers import GroupRunner
    from statekit.progress_log import OperatorProgress

STORAGE_OPTIONS_ENV = "STATEKIT_STORAGE_OPTIONS"

F = TypeVar("F", bound=Callable[..., Any])
"""A command function (or command) that an option decorator returns as it was given."""


def parse_storage_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` pairs (values parsed as JSON when they are JSON) over the JSON object in
    ``$STATEKIT_STORAGE_OPTIONS``; e.g. ``--storage-option endpoint_url=http://127.0.0.1:9000``
    or ``--storage-option anon=true`` for s3fs."""
    options: dict[str, Any] = {}
    env = os.environ.get(STORAGE_OPTIONS_ENV)
    if env:
        try:
            loaded = json.loads(env)
        except json.JSONDecodeError as bad:
            raise BadInput(f"${STORAGE_OPTIONS_ENV} is not JSON: {bad.msg}") from bad
        if not isinstance(loaded, dict):
            raise BadInput(f"${STORAGE_OPTIONS_ENV} must be a JSON object")
        options.update(loaded)
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise BadInput(f"--storage-option expects KEY=VALUE, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def storage_option(command: F) -> F:
    """Add ``--storage-option KEY=VALUE`` (repeatable)."""
    return click.option(
        "--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
        help="fsspec storage option for object stores (repeatable; JSON values allowed), "
             f"merged over ${STORAGE_OPTIONS_ENV}.")(command)


def checkpoint_options(command: F) -> F:
    """Add the CKPT argument and ``--storage-option``."""
    return click.argument("checkpoint", metavar="CKPT")(storage_option(command))


def spark_options(command: F) -> F:
    """Add ``--master`` and ``--conf KEY=VALUE`` for commands that start Spark."""
    command = click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
                           help="Extra Spark settings, repeatable.")(command)
    return click.option("--master", default=None,
                        help="Spark master URL (default local[*]).")(command)


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print JSON for machines instead of tables.")(command)


def open_from_cli(checkpoint: str, storage_option: tuple[str, ...],
                  require: str | None = None, *,
                  allow_missing_metadata: bool = False) -> Checkpoint:
    """Open the checkpoint a command was given (imports the model lazily).

    ``require``: ``"ledger"`` stops (one line, the file named) when the offsets/commit logs
    are damaged the way a restart would fail on; ``"state"`` also when the state a restart
    loads is incomplete (lost partitions, missing change files). Commands that inspect a
    damaged checkpoint (report, batches, schema, dump, the TUI) require nothing.
    """
    from statekit.checkpoint import open_checkpoint

    ckpt = open_checkpoint(checkpoint, parse_storage_options(storage_option),
                           allow_missing_metadata=allow_missing_metadata)
    if require == "ledger":
        ckpt.require_sound_ledger()
    elif require == "state":
        from statekit.report import raise_if_unsound

        raise_if_unsound(ckpt)
    return ckpt


def standard_json(data: Any) -> Any:
    """``data`` with every NaN or infinite float replaced by ``null``: Python's ``json`` would
    write ``NaN``/``Infinity``, which no standard JSON parser (``jq``, browsers) accepts; and
    strings that are not valid Unicode (a path's undecodable bytes) made printable."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, str):
        return printable(data)
    if isinstance(data, dict):
        return {printable(str(key)) if isinstance(key, str) else key: standard_json(value)
                for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [standard_json(value) for value in data]
    return data


def dumps_json(data: Any, **kwargs: Any) -> str:
    """Standard JSON only (see :func:`standard_json`); ``kwargs`` go to ``json.dumps``."""
    return json.dumps(standard_json(data), allow_nan=False, default=str, **kwargs)


def print_json(data: Any) -> None:
    click.echo(dumps_json(data, indent=2, sort_keys=False))


def read_progress_log(path: str, storage_option: tuple[str, ...]
                      ) -> list[OperatorProgress]:
    """A StreamingQueryProgress log (``--progress``) parsed per operator; one-line errors."""
    from statekit.progress_log import parse_progress

    return parse_progress(read_progress_text(path, storage_option), shown=path)


def read_progress_text(path: str, storage_option: tuple[str, ...]) -> str:
    """The text of a ``--progress`` file (any fsspec URL); one-line errors."""
    from statekit.progress_log import read_text

    return read_text(path, parse_storage_options(storage_option))


def spark_runner(ckpt: Checkpoint, app_name: str, master: str | None,
                 confs: tuple[str, ...], on_progress: Callable[[str], None]
                 ) -> GroupRunner | None:
    """With ``--master``: a runner that hands a whole-state pass's groups to Spark as tasks
    (:mod:`statekit.jobs.distributed`); without it ``None`` (the pass runs locally)."""
    if master is None:
        return None
    from statekit.jobs.distributed import SparkGroupRunner

    on_progress(f"starting Spark ({master})…")
    return SparkGroupRunner(start_spark_for(ckpt, app_name, master, confs))


def start_spark_for(ckpt: Checkpoint, app_name: str, master: str | None,
                    confs: tuple[str, ...]) -> SparkSession:
    """Spark for one command, with the reader confs ``ckpt`` needs set for this command only
    (a notebook or test may share the session; the confs are restored when it ends)."""
    from statekit.jobs.session import build_session, parse_conf_pairs
    from statekit.jobs.state_reader import reader_confs, session_confs

    spark = build_session(app_name, master, parse_conf_pairs(confs))
    click.get_current_context().with_resource(session_confs(spark, reader_confs(ckpt)))
    return spark
