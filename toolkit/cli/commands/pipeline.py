"""``statekit pipeline …``: generate events, run the reference query, print the labels.

Thin on purpose: options become a ``GeneratorConfig`` or ``RunOptions`` and one call into
:mod:`statekit.reference_pipeline`; the summary is rendered with rich. Spark is imported only
by ``run``. The pipeline itself knows nothing of click: this is its front end.
"""

from __future__ import annotations

import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from statekit.cli.options import (
    changelog_option,
    command_session,
    json_option,
    partitions_option,
    print_json,
    progress_log_option,
    renamed_option,
    spark_options,
)
from statekit.reference_pipeline.generator import GeneratorConfig, generate, read_manifest
from statekit.reference_pipeline.pipeline import PROVIDERS, RunOptions, RunResult, local_path
from statekit.reference_pipeline.truth import fraud_labels
from statekit.support.errors import BadInput

if TYPE_CHECKING:
    from statekit.checkpoint import Checkpoint

DEFAULTS = GeneratorConfig()


@click.group("pipeline", context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """The reference fraud/session pipeline: a realistic stateful query to inspect.

    generate writes deterministic transaction batches into a landing folder; run processes
    them with applyInPandasWithState (keyed by user_id, event-time timeouts, a 5-minute
    watermark, a file source reading one file per batch, Parquet output); labels prints what
    the generator made fraudulent. Also runs as python -m statekit pipeline ….

    Examples:

    \b
        statekit pipeline generate --landing /tmp/landing --batches 20
        statekit pipeline run --landing /tmp/landing --checkpoint /tmp/ckpt \\
            --output /tmp/out
    """


_landing_option = click.option(
    "--landing", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="Landing folder (a local path), written by generate: events/batch-NNNNNN.jsonl "
         "(one file = one micro-batch, read by the query), truth/batch-NNNNNN.json (every "
         "session generated, with its pattern) and generator.json (config and batch count).")


@cli.command("generate")
@_landing_option
@click.option("--batches", default=20, show_default=True, type=click.IntRange(min=1),
              help="Batch files to write (one file = one micro-batch).")
@click.option("--append", is_flag=True,
              help="Add batches to an existing landing folder, continuing its numbering "
                   "and its stream with the folder's config (a different option is "
                   "refused).")
@click.option("--seed", default=DEFAULTS.seed, show_default=True, type=int,
              help="Random seed: the same seed and options give byte-identical files.")
@click.option("--users", default=DEFAULTS.users, show_default=True, type=click.IntRange(min=1),
              help="Users existing before the first batch.")
@click.option("--new-users-per-batch", default=DEFAULTS.new_users_per_batch, show_default=True,
              type=click.IntRange(min=0),
              help="Brand-new users in every later batch (an open population).")
@click.option("--events-per-batch", default=DEFAULTS.events_per_batch, show_default=True,
              type=click.IntRange(min=1), help="Target events per batch file.")
@click.option("--batch-minutes", default=DEFAULTS.batch_minutes, show_default=True,
              type=click.IntRange(1, 60),
              help="Event time covered by one batch file, in minutes.")
@click.option("--fraud-per-batch", default=DEFAULTS.fraud_per_batch, show_default=True,
              type=click.FloatRange(min=0),
              help="Expected fraud incidents per batch (Poisson).")
@click.option("--near-miss-per-batch", default=DEFAULTS.near_miss_per_batch, show_default=True,
              type=click.FloatRange(min=0),
              help="Expected harmless bursts per batch: cleared by auth_ok, or never "
                   "confirmed.")
@click.option("--late-per-batch", default=DEFAULTS.late_per_batch, show_default=True,
              type=click.IntRange(min=0),
              help="Transactions per batch arriving more than an hour late, behind the "
                   "watermark (Spark drops them).")
@click.option("--out-of-order", default=DEFAULTS.out_of_order, show_default=True,
              type=click.FloatRange(0, 1),
              help="Share of normal transactions from a batch's last 2 minutes delivered "
                   "one file late (still ahead of the watermark).")
@click.option("--start", default=DEFAULTS.start, show_default=True,
              help="Event time of the first batch (ISO 8601, with an offset).")
@click.option("--burstiness", default=DEFAULTS.burstiness, show_default=True,
              type=click.FloatRange(0, 2),
              help="Lognormal sigma of per-batch traffic: 0 steady, 0.6 frequent 2-3x bursts "
                   "and quiet batches (a bounded state under bursty load).")
@json_option
def generate_cmd(landing: Path, batches: int, append: bool, as_json: bool,
                 **options: Any) -> None:
    """Write deterministic transaction batches and their ground truth.

    Into the --landing folder. The same seed and options give byte-identical files; generate
    6 then --append 6 equals generate 12. Events: event_id, event_type (txn, auth_ok,
    case_closed), user_id, card_id, amount, currency, merchant_category, country,
    event_time. Session patterns: normal (1–4 everyday purchases), fraud (a velocity burst
    of 5–7 purchases or 2–3 large ones of at least 5,000 within minutes, a purchase from
    another country within 2 minutes, a case_closed 20–40 minutes later), burst_cleared (a
    burst, then auth_ok within 90 s) and burst_unconfirmed. A user's sessions are more than
    30 minutes apart. --json: the batches and events written, the fraud incidents and the
    config.

    Examples:

    \b
        statekit pipeline generate --landing /tmp/landing --batches 20 --seed 7
        statekit pipeline generate --landing /tmp/landing --batches 10 --append
        statekit pipeline generate --landing /tmp/big --users 200000 \\
            --events-per-batch 40000 --batches 50
    """
    ctx = click.get_current_context()
    manifest = _manifest(landing)
    if manifest is not None and not append:
        raise BadInput(f"already holds {manifest[1]} generated batches; pass --append to add more",
                       path=str(landing))
    if manifest is not None:
        config = manifest[0]
        given = {k: v for k, v in options.items()
                 if ctx.get_parameter_source(k) is not click.core.ParameterSource.DEFAULT}
        clashes = {k: (getattr(config, k), v) for k, v in given.items() if getattr(config, k) != v}
        if clashes:
            detail = ", ".join(f"{k}={new} (folder has {old})" for k, (old, new) in clashes.items())
            raise BadInput(f"--append must keep the folder's config: {detail}", path=str(landing))
    else:
        config = GeneratorConfig(**{f.name: options[f.name] for f in fields(GeneratorConfig)})
    started = time.perf_counter()
    try:
        result = generate(landing, config, batches)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    except OSError as exc:
        raise BadInput(f"cannot write: {exc.strerror}", path=str(exc.filename or landing)) from exc
    elapsed = time.perf_counter() - started
    summary = {
        "landing": str(landing), "first_batch": result.first_batch,
        "batches_written": result.batches_written, "total_batches": result.total_batches,
        "events_written": result.events_written, "fraud_incidents": result.fraud_incidents,
        "seconds": round(elapsed, 3), "config": asdict(config),
    }
    if as_json:
        print_json(summary)
        return
    click.echo(
        f"wrote batches {result.first_batch}..{result.total_batches - 1} "
        f"({result.events_written} events, {result.fraud_incidents} fraud incidents) "
        f"to {landing}/events in {elapsed:.2f}s"
    )


def _manifest(landing: Path) -> tuple[GeneratorConfig, int] | None:
    try:
        return read_manifest(landing)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc


@cli.command("labels")
@_landing_option
def labels_cmd(landing: Path) -> None:
    """Print the users the generator made fraudulent (JSON).

    One key per user, with the ids of its fraud sessions: the ground truth to compare the
    query's alerts with.

    Example:

    \b
        statekit pipeline labels --landing /tmp/landing
    """
    if _manifest(landing) is None:
        raise BadInput("not a landing folder (no generator.json)", path=str(landing))
    print_json(dict(sorted(fraud_labels(landing).items())))


def _duration_ms(text: str) -> str:
    """Accept '1s', '500ms', '2m' or a plain number of milliseconds; return Spark's form."""
    text = text.strip()
    if text.isdigit():
        return f"{text}ms"
    for suffix in ("ms", "s", "m", "min", "h"):
        number = text.removesuffix(suffix)
        if text.endswith(suffix) and number.strip().replace(".", "", 1).isdigit():
            return text.replace(" ", "")
    raise click.BadParameter(f"{text!r} is not a duration like 500ms, 1s or 2m")


@cli.command("run")
@_landing_option
@click.option("--checkpoint", required=True, metavar="PATH",
              help="The query's checkpoint folder (a path or URL): new, or one an earlier run "
                   "wrote, which it continues.")
@click.option("--output", required=True, metavar="PATH",
              help="The Parquet file sink folder for alerts and sessions (a path or URL).")
@click.option("--provider", type=click.Choice(sorted(PROVIDERS)), default="hdfs",
              show_default=True,
              help="State store provider (pinned by the checkpoint at its first run).")
@partitions_option()
@click.option("--min-deltas-for-snapshot", type=click.IntRange(min=1), default=None,
              metavar="N",
              help="spark.sql.streaming.stateStore.minDeltasForSnapshot: deltas after which "
                   "the maintenance task writes a snapshot (default: Spark's 10).")
@click.option("--maintenance-interval", default=None, metavar="DURATION",
              help="spark.sql.streaming.stateStore.maintenanceInterval: 500ms, 1s, 2m or "
                   "plain milliseconds (default: Spark's 60s). HDFS snapshots are written "
                   "only by this background task.")
@changelog_option
@click.option("--no-changelog", "_no_changelog", is_flag=True, hidden=True, expose_value=False,
              help="The default (kept so that scripts that spelled it out still run).")
@click.option("--watermark-delay", default="5 minutes", show_default=True,
              help="Event-time watermark delay, a Spark interval such as '5 minutes'; "
                   "events behind the watermark are dropped.")
@click.option("--leaky", is_flag=True,
              help="Run the leaky variant: no timeout, never remove(), every transaction "
                   "kept in state, so the state grows every batch.")
@click.option("--trigger", type=click.Choice(["available-now", "processing-time"]),
              default="available-now", show_default=True,
              help="available-now: drain the landing folder and stop; processing-time: live.")
@click.option("--interval", default="10 seconds", show_default=True,
              help="Trigger interval of --trigger processing-time, a Spark interval such "
                   "as '10 seconds'.")
@click.option("--stop-after", "timeout_s", type=click.FloatRange(min=0), default=None,
              metavar="SECONDS",
              help="Stop a live run after this many seconds (default: run until Ctrl-C).")
@renamed_option("--timeout", "--stop-after", "timeout_s", type=click.FloatRange(min=0))
@progress_log_option
@spark_options
@json_option
def run_cmd(landing: Path, checkpoint: str, output: str, master: str | None,
            confs: tuple[str, ...], as_json: bool, **options: Any) -> None:
    """Run the fraud/session query over the landing folder (JVM).

    Prints each batch as it completes (events, state keys, watermark) and a summary: alerts
    and sessions written, the fraud the generator injected, state keys, state files by kind.
    The checkpoint pins the provider and the partition count at its first run: a different
    --provider or --partitions later is ignored by Spark, and run says so. HDFS snapshots are
    written only by the maintenance task (--maintenance-interval), after minDeltasForSnapshot
    deltas.

    Output (Parquet, exactly-once file sink): kind (alert or session), user_id, event_ms,
    session_start_ms, last_event_ms, txn_count, total_amount, phase, reason, detail (JSON),
    event_time, session_start. --leaky runs the same detector written the way not to: no
    timeout, never remove(), every transaction kept in state, auth_ok and case_closed
    ignored; its state grows every batch. --json: the summary.

    Examples:

    \b
        statekit pipeline run --landing /tmp/landing --checkpoint /tmp/ckpt \\
            --output /tmp/out
        statekit pipeline run --landing /tmp/landing --checkpoint /tmp/rocks \\
            --output /tmp/rocks-out --provider rocksdb --changelog -n 16
        statekit pipeline run --landing /tmp/landing --checkpoint /tmp/live \\
            --output /tmp/live-out --trigger processing-time --stop-after 600
    """
    from statekit.reference_pipeline.pipeline import MAINTENANCE_CONF, run

    if _manifest(landing) is None:
        raise BadInput("not a landing folder (run `generate` first)", path=str(landing))
    if options["partitions"] is None:
        del options["partitions"]  # RunOptions' default
    if options["progress_log"]:
        options["progress_log"] = Path(options["progress_log"])
    if options["maintenance_interval"]:
        options["maintenance_interval"] = _duration_ms(options["maintenance_interval"])
    opts = RunOptions(landing=landing, checkpoint=checkpoint, output=output, **options)
    session_confs = dict(opts.sql_confs())
    if opts.maintenance_interval:
        # The maintenance task starts with the first state store: set it on the session.
        session_confs[MAINTENANCE_CONF] = opts.maintenance_interval
    console = Console(stderr=True, quiet=as_json)
    for note in _pinned_notes(checkpoint, opts):
        console.print(f"[yellow]note:[/] {note}")
    started = time.perf_counter()
    with console.status("starting Spark…"):
        spark = command_session("statekit-reference-pipeline", master, confs,
                                extra=session_confs)
    jvm_s = time.perf_counter() - started

    def on_batch(progress: dict[str, Any]) -> None:
        ops = progress.get("stateOperators") or [{}]
        console.print(
            f"batch {progress['batchId']:>4}: {progress.get('numInputRows', 0):>6} events, "
            f"{ops[0].get('numRowsTotal', 0):>6} state keys, "
            f"watermark {progress.get('eventTime', {}).get('watermark', '-')}"
        )

    result = run(spark, opts, on_batch=on_batch)
    elapsed = time.perf_counter() - started
    summary = _summary(opts, result, elapsed, jvm_s)
    if as_json:
        print_json(summary)
    else:
        _print_summary(Console(), summary)


def _existing(checkpoint: str) -> Checkpoint | None:
    """The checkpoint a previous run left (read through statekit's own model), or None for a
    first run or a folder that is not one yet."""
    from statekit.checkpoint import open_checkpoint
    from statekit.support.errors import StatekitError

    try:
        return open_checkpoint(checkpoint, allow_missing_metadata=True)
    except StatekitError:
        return None


def _pinned_notes(checkpoint: str, opts: RunOptions) -> list[str]:
    """Warn when the checkpoint already pins settings that differ from the options."""
    from statekit.reference_pipeline.pipeline import PARTITIONS_CONF, PROVIDER_CONF

    ckpt = _existing(checkpoint)
    conf = ckpt.conf if ckpt is not None else {}
    notes = []
    pinned_parts = conf.get(PARTITIONS_CONF)
    if pinned_parts and pinned_parts != str(opts.partitions):
        notes.append(f"the checkpoint pins {pinned_parts} partitions; --partitions "
                     f"{opts.partitions} is ignored by Spark")
    pinned_provider = conf.get(PROVIDER_CONF)
    if pinned_provider and pinned_provider != PROVIDERS[opts.provider]:
        notes.append(f"the checkpoint pins provider {pinned_provider.rsplit('.', 1)[-1]}; "
                     f"--provider {opts.provider} is ignored by Spark")
    return notes


STATE_FILE_KINDS = ("delta", "snapshot", "zip", "changelog", "sst")


def _state_files(checkpoint: str) -> dict[str, int]:
    """State files by kind, from statekit's inventory (``statekit report`` has the rest)."""
    counts = dict.fromkeys((f".{kind}" for kind in STATE_FILE_KINDS), 0)
    ckpt = _existing(checkpoint)
    if ckpt is None:
        return counts
    for instance in ckpt.inventory.instances.values():
        for kind, (count, _bytes) in instance.kind_totals.items():
            if f".{kind}" in counts:
                counts[f".{kind}"] += count
    return counts


def _display_path(location: str) -> str:
    """Absolute path for local locations (what a person pastes next), URLs unchanged."""
    local = local_path(location)
    return location if local is None else str(local.resolve())


def _summary(opts: RunOptions, result: RunResult, elapsed: float, jvm_s: float
             ) -> dict[str, Any]:
    return {
        "checkpoint": _display_path(opts.checkpoint),
        "output": _display_path(opts.output),
        "provider": opts.provider,
        "variant": "leaky" if opts.leaky else "normal",
        "batches_run": len(result.batches),
        "batch_ids": [min(result.batches), max(result.batches)] if result.batches else [],
        "input_rows": result.input_rows,
        "state_keys": result.state_keys(),
        "alerts_total": result.alerts_total,
        "fraud_incidents_injected": sum(len(v) for v in fraud_labels(opts.landing).values()),
        "sessions_closed_total": result.sessions_total,
        "state_files": _state_files(opts.checkpoint),
        "seconds": round(elapsed, 1),
        "spark_start_seconds": round(jvm_s, 1),
    }


def _print_summary(console: Console, summary: dict[str, Any]) -> None:
    table = Table(title="reference pipeline run", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    ids = summary["batch_ids"]
    table.add_row("variant / provider", f"{summary['variant']} / {summary['provider']}")
    table.add_row("batches run", f"{summary['batches_run']}" + (f" (ids {ids[0]}..{ids[1]})"
                                                                 if ids else " (input drained)"))
    table.add_row("events read", str(summary["input_rows"]))
    table.add_row("alerts raised (sink total)",
                  f"{summary['alerts_total']} (fraud injected by the generator: "
                  f"{summary['fraud_incidents_injected']})")
    table.add_row("sessions closed (sink total)", str(summary["sessions_closed_total"]))
    table.add_row("state keys now", str(summary["state_keys"]))
    files = ", ".join(f"{n} {kind}" for kind, n in summary["state_files"].items() if n)
    table.add_row("state files", files or "-")
    table.add_row("checkpoint", summary["checkpoint"])
    table.add_row("output", summary["output"])
    table.add_row("time", f"{summary['seconds']}s (Spark start {summary['spark_start_seconds']}s)")
    console.print(table)
    if summary["provider"] == "hdfs" and summary["state_files"][".snapshot"] == 0:
        console.print("[yellow]note:[/] no .snapshot files yet — HDFS snapshots come from the "
                      "maintenance task after minDeltasForSnapshot deltas (see README)")
