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
from click.core import ParameterSource

from statekit.support.errors import BadInput
from statekit.support.presentation import printable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.checkpoint import Checkpoint
    from statekit.checkpoint.progress_log import OperatorProgress
    from statekit.state.workers import GroupRunner

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
        help="An fsspec option for the checkpoint's filesystem, e.g. "
             "endpoint_url=http://127.0.0.1:9000, profile=prod or anon=true (s3fs); a value "
             "that parses as JSON is taken as JSON. Repeatable; each wins over the same key "
             f"in ${STORAGE_OPTIONS_ENV} (a JSON object).")(command)


def checkpoint_options(command: F) -> F:
    """Add the CKPT argument and ``--storage-option``."""
    return click.argument("checkpoint", metavar="CKPT")(storage_option(command))


ENV_ARCHIVE_KEY = "statekit.env_archive"
"""Where ``--env-archive`` keeps its file (``ctx.meta``) until :func:`spark_conf` reads it."""


def _remember_env_archive(ctx: click.Context, _param: click.Parameter,
                          value: str | None) -> None:
    if value is not None:
        if "://" not in value and not os.path.isfile(value):
            raise BadInput(f"{value}: no such archive (build one with statekit pack)")
        ctx.meta[ENV_ARCHIVE_KEY] = value


REMOTE_KEY = "statekit.remote"
MASTER_KEY = "statekit.master"
"""Where ``--remote`` (or ``$SPARK_REMOTE``) keeps its URL (``ctx.meta``) until
:func:`command_session` reads it."""


def _remember_remote(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if not value:
        return
    from statekit.jobs.connect import remote_url

    from_env = ctx.get_parameter_source(param.name or "remote") is ParameterSource.ENVIRONMENT
    url = remote_url(value, "$SPARK_REMOTE" if from_env else "--remote")
    ctx.meta[REMOTE_KEY] = url
    ctx.meta[REMOTE_KEY + ".env"] = from_env
    _one_way_to_spark(ctx)


def _remember_master(ctx: click.Context, _param: click.Parameter,
                     value: str | None) -> str | None:
    ctx.meta[MASTER_KEY] = value
    _one_way_to_spark(ctx)
    return value


def _one_way_to_spark(ctx: click.Context) -> None:
    """``--master`` and ``--remote`` together are a usage error; ``--master`` beside
    ``$SPARK_REMOTE`` wins (the command line over the environment)."""
    if ctx.meta.get(MASTER_KEY) and ctx.meta.get(REMOTE_KEY):
        if ctx.meta.get(REMOTE_KEY + ".env"):
            del ctx.meta[REMOTE_KEY]
        else:
            raise click.UsageError("--master and --remote are two ways to reach Spark; give "
                                   "one", ctx=ctx)


def remote_given() -> str | None:
    """The Spark Connect URL this command was given (``--remote`` or ``$SPARK_REMOTE``)."""
    context = click.get_current_context(silent=True)
    return context.meta.get(REMOTE_KEY) if context is not None else None


def refuse_remote(what: str, instead: str) -> None:
    """One line, exit 7, before any work, when this command was given a Connect URL and
    ``what`` has no Connect path; ``instead`` says what to use."""
    if remote_given():
        from statekit.jobs.connect import NotOverConnect

        raise NotOverConnect(f"{what} cannot run over Spark Connect: {instead}")


def refuse_jvm_writer(what: str, writer: str | None) -> None:
    """:func:`refuse_remote` for a write whose state ``writer`` (a part of Spark reached
    through py4j, or None) needs a JVM in this process."""
    if writer is not None:
        refuse_remote(what, f"it writes RocksDB state with {writer}, which statekit drives "
                            "through py4j in a JVM it starts; run it without --remote where "
                            "Java and the checkpoint are at hand, or with --master (HDFS "
                            "targets are written over --remote)")


def command_session(app_name: str, master: str | None, confs: tuple[str, ...],
                    extra: dict[str, str] | None = None) -> SparkSession:
    """The Spark session of one command: a Spark Connect session when it was given
    ``--remote``, else a JVM on ``master`` (``extra``: settings of the command's own, under
    ``--conf``'s)."""
    from statekit.jobs.session import build_session

    remote = remote_given()
    conf = {**(extra or {}), **spark_conf(None if remote else master, confs)}
    return build_session(app_name, master, conf, remote=remote)


def spark_options(command: F) -> F:
    """Add ``--master``, ``--remote``, ``--conf KEY=VALUE`` and ``--env-archive FILE`` for
    commands that start Spark (read them back with :func:`command_session`)."""
    command = click.option(
        "--remote", metavar="sc://HOST:PORT", envvar="SPARK_REMOTE", expose_value=False,
        callback=_remember_remote, is_eager=False,
        help="Reach Spark through Spark Connect at this URL instead of starting a JVM here "
             "(default: $SPARK_REMOTE). The checkpoint path is then the server's: the "
             "server must reach it. Commands that need a JVM in this process refuse it "
             "(exit 7).")(command)
    command = click.option(
        "--env-archive", metavar="FILE", expose_value=False, callback=_remember_env_archive,
        help="An archive built by statekit pack (a path or URL) for the executors of a "
             "cluster master: sets spark.archives and spark.pyspark.python. Refused with a "
             "local master.")(command)
    command = click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
                           help="A Spark setting for the session statekit starts; wins over "
                                "statekit's own. Repeatable.")(command)
    return click.option("--master", default=None, metavar="URL", callback=_remember_master,
                        help="Spark master URL: spark://HOST:PORT, yarn, k8s://… "
                             "(default: local[*], this machine).")(command)


def checkpoints_from_option(command: F) -> F:
    """``--checkpoints-from FILE``: more checkpoint URLs, one per line (# comments)."""
    return click.option("--checkpoints-from", "listing", type=click.File("r"), default=None,
                        metavar="FILE",
                        help="Also read checkpoint paths or URLs from FILE, one per line, "
                             "each optionally followed by its own storage options as "
                             "KEY=VALUE words (over --storage-option's); # starts a comment; "
                             "- reads standard input."
                        )(command)


def checkpoint_urls(checkpoints: tuple[str, ...], listing: Any) -> list[str]:
    """The checkpoints named as arguments and in ``--checkpoints-from``, each once."""
    return list(fleet_options(checkpoints, listing, ()))


def fleet_options(checkpoints: tuple[str, ...], listing: Any,
                  storage_option: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each checkpoint named as an argument or in ``--checkpoints-from`` (in that order,
    each once) with its storage options: ``--storage-option``'s, and for a line of the file
    its own ``KEY=VALUE`` words on top (:mod:`statekit.fleet.fleet_file`)."""
    from statekit.fleet.fleet_file import FleetEntry, options_for, parse_fleet_file

    entries = [FleetEntry(url) for url in checkpoints]
    entries += parse_fleet_file(listing.read()) if listing else []
    if not entries:
        raise click.UsageError("name at least one checkpoint (or --checkpoints-from FILE)")
    return options_for(entries, parse_storage_options(storage_option))


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print JSON instead of tables (standard JSON: NaN and infinity "
                             "as null).")(command)


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
        from statekit.checkpoint.soundness import raise_if_unsound

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
    from statekit.checkpoint.progress_log import parse_progress

    return parse_progress(read_progress_text(path, storage_option), shown=path)


def read_progress_text(path: str, storage_option: tuple[str, ...]) -> str:
    """The text of a ``--progress`` file (any fsspec URL); one-line errors."""
    from statekit.checkpoint.progress_log import read_text

    return read_text(path, parse_storage_options(storage_option))


def spark_conf(master: str | None, confs: tuple[str, ...]) -> dict[str, str]:
    """The Spark settings a command was given: ``--conf`` pairs, and what ``--env-archive``
    stands for (refused on a local master)."""
    from statekit.jobs.session import parse_conf_pairs

    conf = parse_conf_pairs(confs)
    context = click.get_current_context(silent=True)
    archive = context.meta.get(ENV_ARCHIVE_KEY) if context is not None else None
    if archive:
        from statekit.jobs.env_archive import env_archive_conf

        conf = env_archive_conf(archive, master, conf)
    return conf


def spark_runner(ckpt: Checkpoint, app_name: str, master: str | None,
                 confs: tuple[str, ...], on_progress: Callable[[str], None]
                 ) -> GroupRunner | None:
    """With ``--master`` or ``--remote``: a runner that hands a whole-state pass's groups to
    Spark as tasks (:mod:`statekit.jobs.distributed`); without either ``None`` (the pass runs
    locally)."""
    remote = remote_given()
    if master is None and remote is None:
        return None
    from statekit.jobs.distributed import SparkGroupRunner

    on_progress(f"starting Spark ({master or remote})…")
    return SparkGroupRunner(start_spark_for(ckpt, app_name, master, confs))


def start_spark_for(ckpt: Checkpoint, app_name: str, master: str | None,
                    confs: tuple[str, ...]) -> SparkSession:
    """Spark for one command, with the reader confs ``ckpt`` needs set for this command only
    (a notebook or test may share the session; the confs are restored when it ends)."""
    from statekit.jobs.state_reader import reader_confs, session_confs

    spark = command_session(app_name, master, confs)
    click.get_current_context().with_resource(session_confs(spark, reader_confs(ckpt)))
    return spark


# -- the option vocabulary ---------------------------------------------------------------------
# Every option more than one command takes is declared here, once: one name, one type, one
# default, one help. ``tests/unit/test_cli_options.py`` walks every command and fails when two
# declare the same name differently. A command-specific nuance goes in the command's own help.

class _RenamedOption(click.Option):
    """The old spelling of ``new`` (parameter ``dest``): refused beside the new one, whatever
    their order on the command line (click would keep whichever it processed last)."""

    def __init__(self, *args: Any, new: str, dest: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new, self.dest = new, dest

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> Any:
        if opts.get(self.name) is not None and opts.get(self.dest) is not None:
            raise click.UsageError(f"{self.opts[0]} is the deprecated spelling of {self.new}; "
                                   f"give {self.new} only", ctx=ctx)
        return super().handle_parse_result(ctx, opts, args)


def renamed_option(old: str, new: str, dest: str, *, flag: bool = False,
                   type: Any = None) -> Callable[[F], F]:
    """A hidden spelling kept for one release: its value goes to ``dest`` (the new option's)
    with a one-line note on stderr; both spellings at once are a usage error."""

    def moved(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None or value is False:
            return value
        click.echo(f"statekit: {old} is deprecated and will be removed in the next release; "
                   f"use {new}", err=True)
        ctx.params[dest] = value
        return value

    attrs: dict[str, Any] = {"is_flag": True, "default": None} if flag else {"default": None}
    if type is not None:
        attrs["type"] = type
    return click.option(old, f"_deprecated_{dest}", hidden=True, expose_value=False,
                        callback=moved, cls=_RenamedOption, new=new, dest=dest, **attrs)


def _apply(command: F, *decorators: Callable[[F], F]) -> F:
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def operator_option(command: F) -> F:
    """``--operator ID``."""
    return click.option(
        "--operator", type=click.IntRange(min=0), default=None, metavar="ID",
        help="Operator id, the number of its folder under state/ (default: every operator; "
             "commands that read one operator's rows take the first). Exit 3 when the "
             "checkpoint has no such operator.")(command)


def partition_option(required: bool = False) -> Callable[[F], F]:
    """``--partition P``: one partition, an index (``--partitions`` is a count)."""
    return click.option(
        "--partition", type=click.IntRange(min=0), default=None, required=required,
        metavar="P", help="One partition id, from 0 (--partitions is a count). report and "
                          "ls: exit 3 when the checkpoint has no such partition.")


def partitions_option(required: bool = False) -> Callable[[F], F]:
    """``--partitions/-n N``: a number of shuffle partitions."""
    return click.option(
        "--partitions", "-n", type=click.IntRange(min=1), default=None, required=required,
        metavar="N", help="Number of shuffle partitions (= state partitions) to write: "
                          "repartition's target, migrate's (default: keep the source's), "
                          "pipeline run's (default 8, pinned at the first run).")


def store_option(command: F) -> F:
    """``--store NAME``."""
    return click.option(
        "--store", default=None, metavar="NAME",
        help="State store of the operator, needed where it has several: a stream-stream "
             "join has left-keyToNumValues, left-keyWithIndexToValue, right-keyToNumValues "
             "and right-keyWithIndexToValue; other operators one, default.")(command)


def batch_option(command: F) -> F:
    """``--batch B``: a committed batch id."""
    return click.option("--batch", type=click.IntRange(min=0), default=None, metavar="B",
                        help="Read the state as of this committed batch id (default: the "
                             "last committed).")(command)


def cores_option(command: F) -> F:
    """``--cores N``: what a restart estimate assumes."""
    return click.option(
        "--cores", type=click.IntRange(min=1), default=None, metavar="N",
        help="Task slots per executor the restart estimate assumes (default: this "
             "machine's cores).")(command)


def executor_options(command: F) -> F:
    """``--executors N`` and ``--executor-memory SIZE``: the cluster the state lives on —
    what a restart's loaded state must fit into, and what growing state fills."""
    from statekit.cli.params import JVM_SIZE

    command = click.option(
        "--executor-memory", "executor_memory", type=JVM_SIZE, metavar="SIZE",
        help="Each executor's memory for the state, as Spark writes spark.executor.memory "
             "(local masters: the driver's): 4g, 512m, or a plain number of MiB. HDFS state "
             "lives on this heap; for RocksDB give the memory its block cache may use "
             "(boundedMemoryUsage). Says whether the loaded state fits and when growing "
             "state fills it.")(command)
    return click.option(
        "--executors", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
        help="Executors the query runs on: the state's partitions spread over them (the "
             "busiest holds the largest), and a restart runs --cores × N tasks at once."
    )(command)


def limit_option(command: F) -> F:
    """``--limit N``."""
    return click.option(
        "--limit", type=click.IntRange(min=0), default=None, metavar="N",
        help="Show at most this many rows (default: state show 20; dump every "
             "record).")(command)


def min_deltas_option(command: F) -> F:
    """``--min-deltas N``."""
    return click.option(
        "--min-deltas", type=click.IntRange(min=1), default=None, metavar="N",
        help="The query's stateStore.minDeltasForSnapshot, which the checkpoint does not "
             "record (default: Spark's 10). report: the no-snapshot and snapshot-lag "
             "thresholds; recovery: one more row of the what-if table.")(command)


def file_sink_option(command: F) -> F:
    """``--file-sink PATH`` (``--sink`` before)."""
    return _apply(command, click.option(
        "--file-sink", "file_sink", default=None, metavar="PATH",
        help="The query's file sink output folder, the one holding _spark_metadata (a path "
             "or URL): read to tell what a restart re-runs or skips; write commands keep "
             "its log in step with DST, which then owns the sink."),
        renamed_option("--sink", "--file-sink", "file_sink"))


def progress_log_option(command: F) -> F:
    """``--progress-log FILE`` (``--progress`` before)."""
    return _apply(command, click.option(
        "--progress-log", "progress_log", default=None, metavar="FILE",
        help="The query's StreamingQueryProgress log, a path or URL: one JSON object per "
             "line (a listener writing event.progress.json) or a JSON array. Gives history "
             "beyond the retained batches, batch durations and the operators; pipeline run "
             "appends to it."),
        renamed_option("--progress", "--progress-log", "progress_log"))


def rto_option(command: F) -> F:
    """``--rto DURATION``."""
    from statekit.cli.params import DURATION

    return click.option(
        "--rto", type=DURATION, default=None, metavar="DURATION",
        help="Recovery-time objective: 30s, 2m, 500ms, 1h or plain seconds. The restart "
             "estimate is judged against it, with the largest minDeltasForSnapshot that "
             "meets it.")(command)


def timeout_option(command: F) -> F:
    """``--timeout DURATION``: each checkpoint's own deadline in a service."""
    from statekit.cli.params import DURATION

    return click.option(
        "--timeout", "timeout", type=DURATION, default=60.0, show_default="60s",
        metavar="DURATION",
        help="Each checkpoint's reading has this long (30s, 2m or seconds); one that takes "
             "longer, hangs or fails shows as down with its reason while every other "
             "checkpoint goes on. A store that never answers holds one reading, never "
             "more.")(command)


def stale_after_option(command: F) -> F:
    """``--stale-after K``."""
    return click.option(
        "--stale-after", type=click.IntRange(min=1), default=None, metavar="K",
        help="State versions without a change after which a key counts as stale (growth "
             "reports them, default a third of the history within 2..10; evict removes "
             "them).")(command)


def where_option(command: F) -> F:
    """``--where SQL``."""
    return click.option(
        "--where", default=None, metavar="SQL",
        help="Spark SQL predicate over the key and value structs (key.FIELD, value.FIELD, "
             "as state show prints them), e.g. \"key.user_id = 'u42'\" (state show: the "
             "rows shown; evict: the rows removed). Exit 3 when Spark cannot evaluate "
             "it.")(command)


def out_option(required: bool = True, dest: str = "target") -> Callable[[F], F]:
    """``--out DST``: where a command writes."""
    return click.option("--out", dest, default=None, required=required, metavar="DST",
                        help="The new folder to write, a path or URL (must not exist, or be "
                             "empty; exit 6 otherwise).")


def to_batch_option(dest: str) -> Callable[[F], F]:
    """``--to-batch B``: the last batch of what a command produces."""
    return click.option(
        "--to-batch", dest, type=click.IntRange(min=0), default=None, metavar="B",
        help="Last batch id: rollback's new last committed batch (the query then runs "
             "B + 1 and later again); state changes' feed end. Default: the last "
             "committed.")


def decode_option(command: F) -> F:
    """``--decode``: the Python-side check of every file a restart loads (``--verify`` on
    report/recovery/metrics before; ``--verify`` now means only the write commands' Spark
    read-back)."""
    return _apply(command, click.option(
        "--decode/--no-decode", default=True, show_default=True,
        help="Read and decode every state file a restart loads and check it against its "
             ".crc files (no JVM; with --master as Spark tasks), as the restart verdict "
             "needs: a truncated or corrupt file becomes the problem naming it. Decoded "
             "files are remembered by path, size and modification time (statekit's cache "
             "folder), so a second run reads only new files. --no-decode: the listing "
             "only; the verdict is then 'not checked' unless the listing alone shows a "
             "fatal problem."),
        renamed_option("--verify", "--decode", "decode", flag=True))


def changelog_option(command: F) -> F:
    """``--changelog``."""
    return click.option(
        "--changelog", is_flag=True, default=False,
        help="RocksDB with changelog checkpointing on (migrate: the target is written so; "
             "restart the query with it on as well).")(command)


def write_options(*, out_required: bool = True, allow_uncommitted: bool = True,
                  file_sink: bool = True) -> Callable[[F], F]:
    """What the commands that write a new checkpoint take: ``--out``, ``--dry-run``,
    ``--verify/--no-verify``, ``--allow-uncommitted`` (not rollback: it picks a committed
    batch), ``--force`` and ``--file-sink`` (not evict: it leaves the batch ledger as it is)."""
    decorators: list[Callable[[F], F]] = [
        out_option(required=out_required),
        click.option("--dry-run", is_flag=True, default=False,
                     help="Print the plan (evict: the rows each operator and partition "
                          "would lose) and write nothing."),
        click.option("--verify/--no-verify", default=True, show_default=True,
                     help="Read the target back through Spark's state reader and compare "
                          "it with the source before publishing (--no-verify: no JVM for "
                          "that step)."),
        click.option("--force", is_flag=True, default=False,
                     help="Proceed although the query looks live (a batch started within 3 "
                          "trigger intervals, at least 2 minutes): only for a stopped "
                          "query.")]
    if allow_uncommitted:
        decorators.append(click.option(
            "--allow-uncommitted", is_flag=True, default=False,
            help="Use the last committed batch although a newer one was planned: the "
                 "target drops the planned batch, so the restarted query reads its input "
                 "again (a sink that already wrote it gets that output twice)."))
    if file_sink:
        decorators.append(file_sink_option)

    def apply(command: F) -> F:
        return _apply(command, *decorators)

    return apply
