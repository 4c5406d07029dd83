"""``statekit recovery``: how long a restart takes until its first batch completes, what-ifs,
and whether the loaded state fits in memory.

Reads listings, a handful of files (to measure bytes per record) and, with ``--calibrate``, a
sample of state files to time the filesystem: no JVM. ``--measure`` is the one exception,
and says so: it starts Spark to time loading the slowest partitions on the user's master.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from statekit.cli.assessment_view import print_assessment
from statekit.cli.options import (
    checkpoint_options,
    cores_option,
    decode_option,
    executor_options,
    file_sink_option,
    json_option,
    min_deltas_option,
    open_from_cli,
    parse_storage_options,
    print_json,
    progress_log_option,
    read_progress_text,
    refuse_remote,
    rto_option,
    spark_options,
    spark_runner,
    start_spark_for,
)
from statekit.cli.render import console, status
from statekit.support.machine import usable_cpus
from statekit.support.presentation import human_bytes, human_duration

if TYPE_CHECKING:
    from statekit.assess.assessment import Assessment
    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.location import Location
    from statekit.checkpoint.progress_log import BatchTiming
    from statekit.recovery.cost_model import CostModel
    from statekit.recovery.scaling import Calibration, Measurement


def _speed_setting(ctx: click.Context, param: click.Parameter, value: str | None
                   ) -> str | None:
    """The option checked before any work (a bad value is a usage error); the probe itself
    runs only where the estimate uses it (not with ``--measure``)."""
    from statekit.recovery.machine_speed import parse_speed

    if value is not None:
        try:
            parse_speed(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


@click.command("recovery")
@checkpoint_options
@cores_option
@executor_options
@progress_log_option
@file_sink_option
@rto_option
@min_deltas_option
@click.option("--calibrate", is_flag=True,
              help="Time reading a sample of this checkpoint's files through its filesystem "
                   "(no JVM) and use the slower of the measured and the default latency and "
                   "bandwidth.")
@click.option("--measure", is_flag=True,
              help="Start Spark (a JVM) on --master, time its state reader loading the two "
                   "slowest partitions (after a warm-up read) and scale the model to what it "
                   "measured.")
@click.option("--machine-speed", "speed_setting", metavar="probe|reference|FACTOR",
              callback=_speed_setting,
              help="Scale the model's constants to this machine. By default: the speed "
                   "Spark's own state load showed here (kept by --measure on a local "
                   "master), else the Python probe (a small load in Python, cached, re-run "
                   "daily); probe forces the Python probe; reference keeps the benchmark "
                   "machine's seconds; a number is the factor (seconds here ÷ seconds "
                   "there). Default from $STATEKIT_MACHINE_SPEED. Spark on other machines: "
                   "use --measure.")
@click.option("--event-log", "event_logs", multiple=True, metavar="PATH",
              help="Spark's event log of the query's runs (a file, an eventlog_v2_ folder or "
                   "a folder of them; plain or zstd; repeatable): with --progress-log, each "
                   "past restart's slowest partition is timed from its tasks and the "
                   "slowest partition today is scaled to what they measured.")
@click.option("--explain", is_flag=True,
              help="Also print the cost model's constants (per file, byte, record, task) "
                   "behind the estimate.")
@decode_option
@spark_options
@json_option
def recovery_command(checkpoint: str, storage_option: tuple[str, ...], cores: int | None,
                     executors: int, executor_memory: float | None,
                     progress_log: str | None, file_sink: str | None,
                     rto: float | None, min_deltas: int | None, calibrate: bool,
                     measure: bool, speed_setting: str | None, event_logs: tuple[str, ...],
                     explain: bool, decode: bool,
                     master: str | None, confs: tuple[str, ...], as_json: bool) -> None:
    """Estimate how long a restart takes: range, what dominates it, memory.

    No JVM unless --measure. The estimate is the time from the restart until its first batch
    completes, beyond what that batch costs on an empty checkpoint: the state load (per store
    instance, the files Spark loads at the restart's version, costed per file, byte, record
    and task, scheduled over cores x executors slots) and the first batch running on it; plus
    re-running uncommitted batches. The range comes from the model's held-out benchmark
    errors. The output shows what dominates, the slowest partitions, the memory the loaded
    state needs per executor (HDFS on the heap, RocksDB off it; judged against
    --executor-memory), and a what-if table over minDeltasForSnapshot (worst case with its
    range, typical case, snapshot bytes written per batch). RocksDB without changelog
    checkpointing has no what-if table: it uploads a zip every batch.

    An uncommitted batch is re-run first, costed as one batch after a cold start (from
    --progress-log, else the median gap between batch starts). If the file sink already
    committed it (--file-sink, or the sink the progress log names, has its _spark_metadata
    entry) it is skipped instead.

    With --progress-log, the query's own restarts in it (each a new runId) calibrate the
    model: each one's first batch over its run's steady batches of similar input, less what
    the query's first start cost (a cold start without state), against what the model says
    for the state it loaded; the model is scaled to them, the restarts most like today's
    weighing most, and the output lists each with the uncalibrated model's error. --event-log
    adds Spark's own task times: each restart's slowest partition beside the model's, and
    today's slowest partition scaled to them. Without a usable restart the output says the
    estimate is uncalibrated and how to calibrate it.

    The model's constants are seconds on the benchmark machine, scaled by this machine's
    speed: what Spark's own state load measured here with --measure on a local master
    (kept per machine, Spark version, provider and fit of the constants), else a
    JVM-free Python probe (about 0.3 s, cached, re-run daily; see --machine-speed). On object
    stores or other machines, --calibrate (time this checkpoint's files) or --measure (time
    Spark itself) make it fit. --measure fetches the files into a local copy first when Spark
    cannot reach the store; a partition Spark cannot load fails in one line naming the
    damaged file.

    The output says the restart verdict first (statekit doctor's, with the files a restart
    loads decoded; --no-decode: listed only), then the estimate and, with --rto, whether it
    meets it: yes only when the high end of the range does (the rule every surface uses).
    Estimates whose range stays under a second read "about a second or less", with how much
    a cold first batch varies (measured on three or more of the query's restarts, else the
    benchmark's second). Memory is counted in the rows and bytes of
    the version the restart loads, per executor. --explain adds the cost model's constants.
    A checkpoint that will not restart has no estimate: the command prints "does not apply",
    the doctor's fatal problems and fix, and exits 11 or 12. --json: the estimate
    ("estimate_s", "low_s", "high_s", "stages", "what_if", "recommendation", "memory",
    "learning", …),
    "rto", "calibration", "measurement", "applies", "restart" and "assessment".

    Examples:

    \b
        statekit recovery demo/checkpoint --rto 30s
        statekit recovery demo/checkpoint --file-sink demo/output
        statekit recovery demo/checkpoint --executor-memory 4g --executors 10
        statekit recovery s3://bucket/ckpt --calibrate --cores 4 --json
        statekit recovery s3://bucket/ckpt --measure --master spark://head:7077
    """
    from statekit.assess.assessment import EstimateOptions, assess
    from statekit.checkpoint.location import SINK_FOLDER, resolve, resolve_folder
    from statekit.checkpoint.progress_log import parse_timings
    from statekit.doctor import diagnose
    from statekit.recovery.cost_model import DEFAULT_MODELS, default_model, local_model
    from statekit.recovery.machine_speed import machine_speed
    from statekit.recovery.scaling import calibrate as run_calibration
    from statekit.support.errors import StatekitError

    if measure:
        refuse_remote("recovery --measure",
                      "it times Spark's state load inside a JVM statekit starts; give --master "
                      "(or run it where the server runs), or --progress-log to learn from the "
                      "query's own restarts")
    options = parse_storage_options(storage_option)
    ckpt = open_from_cli(checkpoint, storage_option, allow_missing_metadata=True)
    sink_location: Location | None = resolve_folder(
        file_sink, options, what=SINK_FOLDER) if file_sink else None
    timings: list[BatchTiming] | None = None
    tasks = None
    if event_logs:
        from statekit.checkpoint.event_log import read_event_logs, stateful_tasks

        tasks = stateful_tasks(read_event_logs(event_logs, options))
    if progress_log:
        timings, logged_sink = parse_timings(read_progress_text(progress_log, storage_option),
                                             shown=progress_log)
        timings = timings or None
        if sink_location is None and logged_sink:
            try:  # the log's sink may be on a store this machine cannot reach: then unknown
                sink_location = resolve(logged_sink, options)
            except StatekitError:
                sink_location = None
    with status(not as_json, "reading the files a restart loads…" if decode else
                "checking that the checkpoint restarts…") as on_progress:
        runner = spark_runner(ckpt, "statekit-verify", master, confs, on_progress) \
            if decode else None
        diagnosis = diagnose(ckpt, decode=decode, progress=on_progress, runner=runner,
                             file_sink=sink_location)
    if not diagnosis.restarts:  # no restart, so no restart time: the estimate does not apply
        assessment = assess(ckpt, shown=checkpoint, diagnosis=diagnosis, growth=False,
                            rto_s=rto)
        if as_json:
            print_json({"applies": False, "estimate_s": None,
                        "restart": assessment.restart_dict(),
                        "assessment": assessment.to_dict()})
        else:
            console().print("[bold]restart estimate[/]: [bold red]does not apply[/] — the "
                            "checkpoint will not restart, so no restart time can meet an RTO")
            print_assessment(assessment)
        raise click.exceptions.Exit(assessment.exit_code)
    slots = (cores or usable_cpus()) * executors
    # --measure scales the benchmark machine's seconds by Spark's own timing: it replaces the
    # machine-speed probe rather than multiplying it
    model = default_model(ckpt) if measure else local_model(
        ckpt, machine_speed(speed_setting, provider=default_model(ckpt).provider))
    measured: Calibration | None = None
    if calibrate:
        model, measured = run_calibration(ckpt, model)
    measurement: Measurement | None = None
    if measure:
        model, measurement = _measure(ckpt, model, slots, timings, sink_location, master,
                                      confs, not as_json)
    with status(not as_json, "replaying the state history…") as on_progress:
        assessment = assess(
            ckpt, shown=checkpoint, diagnosis=diagnosis, rto_s=rto, progress=on_progress,
            estimate=EstimateOptions(
                cores=slots, model=model, timings=timings, sink=sink_location,
                current_min_deltas=min_deltas, executors=executors,
                memory_limit=int(executor_memory) if executor_memory else None,
                tasks=tasks))
    estimate = assessment.estimate
    if estimate is None:  # the checkpoint restarts, but its files could not be costed
        raise StatekitError(assessment.estimate_error or "no estimate",
                            path=ckpt.location.url)
    verified = diagnosis.verification
    if as_json:
        data = estimate.to_dict()
        data["explanation"] = estimate.explanation
        data["calibration"] = measured.__dict__ if measured else None
        data["measurement"] = _measurement_dict(measurement)
        data["defaults"] = {k: v.__dict__ for k, v in DEFAULT_MODELS.items()}
        data["verification"] = verified.to_dict() if verified is not None else None
        data["memory"] = estimate.memory.to_dict() if estimate.memory else None
        data["applies"] = True
        data["rto"] = assessment.rto.to_dict() if assessment.rto else None
        data["restart"] = assessment.restart_dict()
        data["assessment"] = assessment.to_dict()
        print_json(data)
        return
    _render(assessment, measured, measurement, explain)
    out = console()
    if verified is not None:
        out.print(f"verified: {verified.files} files a restart reads "
                  f"({human_bytes(verified.bytes)}) load as Spark reads them (checked in "
                  f"{verified.elapsed_s:.2f} s)")
    else:
        out.print("[dim]state files not decoded (--no-decode): this estimate assumes they "
                  "load[/]")


def _measure(ckpt: Checkpoint, model: CostModel, slots: int,
             timings: list[BatchTiming] | None, sink: Location | None, master: str | None,
             confs: tuple[str, ...], show: bool) -> tuple[CostModel, Measurement]:
    """Time Spark loading the slowest partitions; the model scaled to it."""
    from statekit.recovery.estimate import estimate_recovery
    from statekit.recovery.scaling import measure_targets, scale_to_measurement
    from statekit.support.errors import BadInput

    plain = estimate_recovery(ckpt, cores=slots, model=model, timings=timings, sink=sink)
    targets = measure_targets(plain)
    if not targets:
        raise BadInput("--measure: no store instance loads anything from files (nothing to "
                       "time)", path=ckpt.location.url)
    broken = [w for w in plain.instances if not w.loadable]
    if broken:
        first = broken[0]
        raise BadInput(f"--measure: operator {first.operator_id} store {first.store} "
                       f"partition {first.partition} cannot be loaded at version "
                       f"{first.version} (missing snapshot or change files; `statekit "
                       "report` lists them)", path=ckpt.location.url)
    with status(show, "--measure: starting Spark (a JVM, ~10 s) …") as say:
        from statekit.jobs.recovery_measure import time_loads

        spark = start_spark_for(ckpt, "statekit-recovery-measure", master, confs)
        loads, empty_job_s, fetch_s = time_loads(spark, ckpt, targets, say)
    scaled, measurement = scale_to_measurement(model, targets, loads, empty_job_s, fetch_s)
    if (master or "local").startswith("local") and ckpt.location.is_local \
            and not measurement.fetch_s:
        # Spark's own speed on this machine: later JVM-free estimates here use it
        from statekit.recovery.machine_speed import record_spark_speed

        record_spark_speed(model.provider, measurement.factor)
    return scaled, measurement


def _measurement_dict(measurement: Measurement | None) -> dict[str, object] | None:
    if measurement is None:
        return None
    from dataclasses import asdict

    return asdict(measurement)


def _per_mb(seconds_per_byte: float) -> str:
    return f"{seconds_per_byte * 1e9:.2f} ms/MB"


def _render(assessment: Assessment, measured: Calibration | None,
            measurement: Measurement | None, explain: bool) -> None:
    from statekit.assess.words import duration_words, learning_lines, range_words, rto_words

    estimate = assessment.estimate
    assert estimate is not None
    rto = assessment.rto_s
    out = console()
    out.print(f"[bold]checkpoint[/] {escape(assessment.checkpoint)}")
    print_assessment(assessment, detail=False, with_estimate=False)
    judged = ""
    if assessment.rto is not None:
        colour = "green" if assessment.rto.meets else "bold red"
        judged = f" — [{colour}]{escape(rto_words(assessment.rto))}[/]"
    out.print(f"[bold]estimated recovery: {escape(range_words(estimate))}[/]{judged}")
    out.print(f"[dim]the time from the restart until its first batch completes, beyond what "
              f"that batch costs on an empty checkpoint · provider {estimate.provider} · "
              f"{estimate.cores} task slots · version {estimate.version}[/]")
    if estimate.high_s >= 1.0:
        out.print(f"first batch {duration_words(estimate.restart_s)}, Spark's state load "
                  f"{duration_words(estimate.state_load_s)}, re-runs "
                  f"{duration_words(estimate.rerun_s) if estimate.rerun_s else 'none'}")
        out.print(f"where the time goes (the busiest core): {escape(estimate.explanation)}")
    _render_memory(assessment)
    for line in learning_lines(estimate):
        out.print(escape(line))
    model = estimate.model
    speed = f", {model.machine.describe()}" if model.machine else ""
    if explain:
        out.print(
            f"cost model ({model.source}{speed}): {model.per_task_s * 1000:.1f} ms/instance, "
            f"{model.base_file_s * 1000:.2f} ms per snapshot/zip/SST file, "
            f"{model.change_file_s * 1000:.2f} ms per delta/changelog, "
            f"{_per_mb(model.base_byte_s)} of snapshot/SST, "
            f"{_per_mb(model.change_byte_s)} of delta/changelog, "
            f"{model.record_s * 1e6:.2f} µs/record; "
            f"first-wave warm-up {model.first_wave_s * 1000:.0f} ms "
            f"({model.first_wave_base_s * 1000:.0f} ms from a snapshot/zip) "
            f"+ {model.first_wave_record_s * 1e6:.2f} µs/record in the first wave; the "
            f"first batch: load × {model.load_factor:.2f} (its bases × "
            f"{model.base_factor:.2f}) + {model.row_s * 1e6:.2f} µs per "
            f"row held + {model.gc_row_s * 1e6:.3f} µs per row per million on the heap "
            f"{model.wave_s * 1000:+.0f} ms per task on the busiest core "
            f"({model.base_wave_s * 1000:+.0f} ms more per task opening a base) "
            f"{model.restart_s * 1000:+.0f} ms; range × {model.low:.2f} – × "
            f"{model.high:.2f} (held-out benchmark errors)")
    else:
        out.print(f"[dim]cost model: {model.source}{speed} (--explain prints its "
                  "constants)[/]")
    if measured:
        bandwidth = f"{measured.bytes_per_s / 1e6:.0f} MB/s" if measured.bytes_per_s else \
            "bandwidth: too few bytes to tell"
        out.print(f"calibration: {measured.files} files, {human_bytes(measured.bytes)}: "
                  f"{measured.per_file_s * 1000:.2f} ms/file, {bandwidth}, Python decode "
                  f"{measured.python_records_per_s / 1e3:.0f}k records/s")
    if measurement:
        timed = ", ".join(f"operator {t.operator_id} partition {t.partition} "
                          f"{human_duration(t.seconds)}" for t in measurement.timings)
        fetched = f" + {human_duration(measurement.fetch_s)} fetching their files" \
            if measurement.fetch_s else ""
        out.print(f"measured (Spark): {timed} (a job loading nothing: "
                  f"{human_duration(measurement.empty_job_s)}){fetched}; the model predicted "
                  f"{human_duration(measurement.predicted_s)} for those reads: costs × "
                  f"{measurement.factor:.2f}")
    for note in estimate.notes:
        out.print(f"[yellow]• {escape(note)}[/]")
    for rerun in estimate.reruns:
        out.print(f"batch {rerun.batch}: {rerun.action} {human_duration(rerun.seconds)} "
                  f"({escape(rerun.source)})")
    for stage in estimate.stages:
        warming = stage.warmup_s + stage.first_wave_replay_s
        warm = f", incl. {human_duration(warming)} warm-up" if warming else ""
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
        return
    table = Table(title="what if minDeltasForSnapshot were …", title_justify="left")
    for name in ("minDeltas", "worst case", "worst-case range", "typical",
                 "snapshot bytes written per batch"):
        table.add_column(name, justify="right")
    for w in estimate.what_if:
        mark = " ←" if w.min_deltas == estimate.recommendation else ""
        table.add_row(f"{w.min_deltas}{mark}", human_duration(w.worst_s),
                      f"{human_duration(w.worst_low_s)} – {human_duration(w.worst_high_s)}",
                      human_duration(w.typical_s), human_bytes(int(w.snapshot_bytes_per_batch)))
    out.print(table)
    if rto:
        if estimate.recommendation:
            out.print(f"{objective}: the largest minDeltasForSnapshot that meets it even at "
                      f"the top of its range is [bold]{estimate.recommendation}[/]")
        else:
            out.print(f"[red]{objective}: no minDeltasForSnapshot value meets it[/]")


def _render_memory(assessment: Assessment) -> None:
    estimate = assessment.estimate
    memory = estimate.memory if estimate is not None else None
    if estimate is None or memory is None:
        return
    where = "heap" if memory.on_heap else "native memory (off the heap)"
    per = f"per executor (of {estimate.executors})" if estimate.executors > 1 else \
        "on the executor"
    counted = "" if assessment.loaded.keys is not None else \
        " (estimated from the files' records: the history was not replayed)"
    loaded = assessment.loaded.bytes
    held = loaded / max(1, estimate.executors) if loaded is not None else \
        memory.rows * memory.row_bytes
    line = (f"memory {per}: version {estimate.version}'s {memory.rows:,.0f} rows{counted}, "
            f"{human_bytes(int(held))} of keys and values "
            f"(≈ {memory.row_bytes:.0f} B each): about {human_bytes(int(memory.bytes))} of "
            f"{where}")
    if memory.peak_bytes > memory.bytes:
        line += f", up to {human_bytes(int(memory.peak_bytes))} with the versions kept"
    usable = memory.usable_bytes
    if usable is not None and memory.on_heap:
        word = {"fits": "[green]fits[/]", "tight": "[yellow]tight[/]",
                "exceeds": "[bold red]does not fit[/]"}[memory.verdict]
        line += f" — {word} in {human_bytes(int(usable))} usable"
    elif memory.on_heap:
        line += " (give --executor-memory to check it fits)"
    console().print(line)
