"""``statekit recovery``: how long a restart would spend loading state, and what-ifs.

Reads listings, a handful of files (to measure bytes per record) and, with ``--calibrate``, a
sample of state files to time the filesystem. Never starts a JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.options import (
    checkpoint_options,
    json_option,
    open_from_cli,
    parse_storage_options,
    print_json,
    read_progress_text,
)
from statekit.cli.params import DURATION
from statekit.cli.render import console
from statekit.machine import usable_cpus
from statekit.presentation import human_bytes, human_duration

if TYPE_CHECKING:
    from statekit.checkpoint.location import Location
    from statekit.progress_log import BatchTiming
    from statekit.recovery import Calibration, RecoveryEstimate


@click.command("recovery")
@checkpoint_options
@click.option("--cores", type=click.IntRange(min=1),
              help="Task slots per executor (default: this machine's cores).")
@click.option("--executors", type=click.IntRange(min=1), default=1, show_default=True,
              help="Executors; the restart runs cores × executors tasks at once.")
@click.option("--progress", "progress_log", metavar="FILE",
              help="StreamingQueryProgress JSON: batch durations for re-running uncommitted "
                   "batches, and the file sink's path.")
@click.option("--sink", metavar="PATH",
              help="The query's file sink folder: an uncommitted batch it already committed "
                   "(_spark_metadata/<batch>) is skipped on restart, not re-run.")
@click.option("--rto", type=DURATION,
              help="Recovery-time objective (e.g. 30s): recommend the largest "
                   "minDeltasForSnapshot whose worst case meets it.")
@click.option("--min-deltas", type=click.IntRange(min=1),
              help="minDeltasForSnapshot the query runs with (added to the what-if table).")
@click.option("--calibrate", is_flag=True,
              help="Time reading a sample of this checkpoint's files through its filesystem "
                   "and use the measured latency and bandwidth.")
@json_option
def recovery_command(checkpoint: str, storage_option: tuple[str, ...], cores: int | None,
                     executors: int, progress_log: str | None, sink: str | None,
                     rto: float | None, min_deltas: int | None, calibrate: bool,
                     as_json: bool) -> None:
    """Estimate how long a restart spends loading state (and re-running uncommitted batches).

    Example: statekit recovery demo/checkpoint --rto 30s
    """
    from statekit.checkpoint.location import resolve
    from statekit.errors import StatekitError
    from statekit.progress_log import parse_timings
    from statekit.recovery import DEFAULT_MODELS, default_model, estimate_recovery
    from statekit.recovery import calibrate as run_calibration

    options = parse_storage_options(storage_option)
    ckpt = open_from_cli(checkpoint, storage_option)
    slots = (cores or usable_cpus()) * executors
    sink_location: Location | None = resolve(sink, options) if sink else None
    timings: list[BatchTiming] | None = None
    if progress_log:
        timings, logged_sink = parse_timings(read_progress_text(progress_log, storage_option),
                                             shown=progress_log)
        timings = timings or None
        if sink_location is None and logged_sink:
            try:  # the log's sink may be on a store this machine cannot reach: then unknown
                sink_location = resolve(logged_sink, options)
            except StatekitError:
                sink_location = None
    model = default_model(ckpt)
    measured: Calibration | None = None
    if calibrate:
        model, measured = run_calibration(ckpt, model)
    estimate = estimate_recovery(ckpt, cores=slots, model=model, timings=timings,
                                 sink=sink_location, rto_s=rto,
                                 current_min_deltas=min_deltas)
    if as_json:
        data = estimate.to_dict()
        data["calibration"] = measured.__dict__ if measured else None
        data["defaults"] = {k: v.__dict__ for k, v in DEFAULT_MODELS.items()}
        print_json(data)
        return
    _render(estimate, measured, rto)


def _render(estimate: RecoveryEstimate, measured: Calibration | None, rto: float | None
            ) -> None:
    out = console()
    out.print(f"[bold]checkpoint[/] {escape(estimate.checkpoint)}")
    out.print(f"[bold]estimated recovery: {human_duration(estimate.estimate_s)}[/] "
              f"(state load {human_duration(estimate.state_load_s)} + re-run "
              f"{human_duration(estimate.rerun_s)}) · provider {estimate.provider} · "
              f"{estimate.cores} task slots · loading version {estimate.version}")
    model = estimate.model
    out.print(f"cost model ({model.source}): {model.per_instance_s * 1000:.1f} ms/instance, "
              f"{model.base_file_s * 1000:.2f} ms per snapshot/zip/SST file, "
              f"{model.change_file_s * 1000:.2f} ms per delta/changelog, "
              f"{model.record_s * 1e6:.1f} µs/record, {model.bytes_per_s / 1e6:.0f} MB/s; "
              f"first-wave warm-up {model.first_wave_s * 1000:.0f} ms "
              f"({model.first_wave_base_s * 1000:.0f} ms from a snapshot/zip)")
    if measured:
        out.print(f"calibration: {measured.files} files, {human_bytes(measured.bytes)}: "
                  f"{measured.per_file_s * 1000:.2f} ms/file, "
                  f"{measured.bytes_per_s / 1e6:.0f} MB/s, Python decode "
                  f"{measured.python_records_per_s / 1e3:.0f}k records/s")
    for note in estimate.notes:
        out.print(f"[yellow]• {escape(note)}[/]")
    for rerun in estimate.reruns:
        out.print(f"batch {rerun.batch}: {rerun.action} {human_duration(rerun.seconds)} "
                  f"({escape(rerun.source)})")
    for stage in estimate.stages:
        warm = f", incl. {human_duration(stage.warmup_s)} warm-up" if stage.warmup_s else ""
        table = Table(title=f"operator {stage.operator_id}: {stage.tasks} tasks in "
                            f"{stage.waves} wave(s), {human_duration(stage.seconds)}{warm} — "
                            "slowest partitions", title_justify="left")
        for name in ("partition", "store", "base", "files", "bytes", "records", "changes",
                     "seconds"):
            table.add_column(name, justify="left" if name == "store" else "right")
        for work in stage.critical[:8]:
            table.add_row(str(work.partition), escape(work.store), str(work.base_version or "-"),
                          str(work.files), human_bytes(work.bytes), f"{work.records:,.0f}",
                          str(work.changes), f"{work.seconds:.3f}")
        out.print(table)
    objective = f"RTO {human_duration(rto)}" if rto else ""
    if not estimate.what_if:
        if rto:
            meets = estimate.estimate_s <= rto
            out.print(f"{objective}: the estimate {'meets' if meets else '[red]misses[/]'} it")
        return
    table = Table(title="what if minDeltasForSnapshot were …", title_justify="left")
    for name in ("minDeltas", "worst case", "typical", "snapshot bytes written per batch"):
        table.add_column(name, justify="right")
    for w in estimate.what_if:
        mark = " ←" if w.min_deltas == estimate.recommendation else ""
        table.add_row(f"{w.min_deltas}{mark}", human_duration(w.worst_s),
                      human_duration(w.typical_s), human_bytes(int(w.snapshot_bytes_per_batch)))
    out.print(table)
    if rto:
        if estimate.recommendation:
            out.print(f"{objective}: the largest minDeltasForSnapshot that meets it is "
                      f"[bold]{estimate.recommendation}[/]")
        else:
            out.print(f"[red]{objective}: no minDeltasForSnapshot value meets it[/]")
