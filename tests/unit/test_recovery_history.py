"""The estimate learns its scale from the query's own restarts in its progress log (no JVM).

The logs are real: ``tests/data/restarts/logs/hdfs-1m.jsonl`` is the benchmark's (a million
keys, a run from batch 0 then three restarts, each a fresh JVM), and
``tests/data/restarts/hdfs`` a small query's checkpoint with the progress log of its runs
(``tests/data/restarts/record.py``). The expected numbers are computed here from the JSON
itself, not from statekit's parse.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from statistics import median

import pytest

from statekit.assess.words import learning_lines, range_words
from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.progress_log import BatchTiming, parse_timings
from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.recovery.cost_model import local_model
from statekit.recovery.estimate import estimate_recovery, load_work, restart_at
from statekit.recovery.history import (
    COLD_NOISE_S,
    ObservedRestart,
    RestartHistory,
    learn,
    observed_restarts,
)
from statekit.support.errors import EXIT_BAD_INPUT
from statekit.support.presentation import human_duration

DATA = Path(__file__).resolve().parents[1] / "data" / "restarts"
MILLION = DATA / "logs" / "hdfs-1m.jsonl"
FIXTURE = DATA / "hdfs"


def _runs_from_json(path: Path) -> list[list[dict]]:
    runs: list[list[dict]] = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if not runs or runs[-1][-1]["runId"] != event["runId"]:
            runs.append([])
        runs[-1].append(event)
    return runs


def _expected_cost(run: list[dict]) -> float:
    """The first batch over the median of the run's batches after its second (similar
    input: every batch of these runs reads one file of the same size)."""
    trigger = [e["durationMs"]["triggerExecution"] / 1000 for e in run]
    steady = trigger[2:] if len(trigger) >= 4 else trigger[1:]
    return trigger[0] - median(steady)


def _timings(path: Path) -> list[BatchTiming]:
    return parse_timings(path.read_text(), shown=str(path))[0]


def test_every_start_in_a_real_log_is_found_and_measured():
    runs = _runs_from_json(MILLION)
    history = observed_restarts(_timings(MILLION))
    assert history.first_start is not None and history.first_start.batch == 0
    assert history.cold_start_s == pytest.approx(_expected_cost(runs[0]))
    assert [r.batch for r in history.restarts] == [run[0]["batchId"] for run in runs[1:]]
    by_batch = {e["batchId"]: e for run in runs for e in run}
    for restart, run in zip(history.restarts, runs[1:], strict=True):
        assert restart.run_id == run[0]["runId"]
        assert restart.cost_s == pytest.approx(_expected_cost(run))
        before = by_batch[restart.batch - 1]["stateOperators"][0]["numRowsTotal"]
        assert restart.state_rows == before  # the rows the restart loaded
        assert restart.input_rows == run[0]["numInputRows"]


def _restart(batch: int, first: float, steady: float, rows: int | None) -> ObservedRestart:
    return ObservedRestart(batch, f"run-{batch}", first, steady, (batch + 2, batch + 3,
                                                                  batch + 4), 100_000, rows)


def _weight(m: float, today: float) -> float:
    return 1 / (1 + math.log(m / today) ** 2)


def test_restarts_of_similar_state_teach_a_fixed_part_beside_the_models_own_growth():
    cold = _restart(0, 4.0, 1.0, None)  # a cold first batch costs 3 s without state
    restarts = (_restart(10, 9.0, 1.0, 1_000_000), _restart(20, 11.0, 1.0, 2_000_000))
    history = RestartHistory(restarts, cold)
    modelled = {10: 2.0, 20: 4.0}  # 2 s apart: too close to tell a scale from the noise
    learning = learn(history, lambda r: modelled[r.batch], today_s=3.0, today_rows=1.5e6)
    states = {10: 9.0 - 1.0 - 3.0, 20: 11.0 - 1.0 - 3.0}  # measured less the cold start
    weights = {b: _weight(modelled[b], 3.0) for b in modelled}
    assert [u.weight for u in learning.used] == pytest.approx([weights[10], weights[20]])
    assert learning.scale == 1.0 and not learning.scale_fitted
    assert learning.fixed_s == pytest.approx(
        sum(weights[b] * (states[b] - modelled[b]) for b in modelled) / sum(weights.values()))
    assert learning.cold_start_s == pytest.approx(3.0)
    assert learning.state_s(3.0) == pytest.approx(3.0 + learning.fixed_s)
    assert learning.first_batch_s(2.0) == pytest.approx(5.0)
    # each restart beside the uncalibrated model: (modelled − measured) ÷ max(measured, 1 s)
    assert learning.error(learning.used[0]) == pytest.approx((2.0 - 5.0) / 5.0)
    assert learning.notes == ()


def test_restarts_far_apart_in_state_fit_a_scale_and_a_fixed_part():
    cold = _restart(0, 4.0, 1.0, None)
    restarts = (_restart(10, 6.0, 1.0, 1_000_000), _restart(20, 20.0, 1.0, 4_000_000),
                _restart(30, 13.0, 1.0, 2_500_000))
    modelled = {10: 1.5, 20: 9.0, 30: 5.0}  # 6× and 7.5 s apart
    learning = learn(RestartHistory(restarts, cold), lambda r: modelled[r.batch],
                     today_s=6.0, today_rows=3e6)
    y = {b: r.cost_s - 3.0 for b, r in zip(modelled, restarts, strict=True)}
    w = {b: _weight(modelled[b], 6.0) for b in modelled}
    total = sum(w.values())
    mean_m = sum(w[b] * modelled[b] for b in w) / total
    mean_y = sum(w[b] * y[b] for b in w) / total
    slope = sum(w[b] * (modelled[b] - mean_m) * (y[b] - mean_y) for b in w) / \
        sum(w[b] * (modelled[b] - mean_m) ** 2 for b in w)
    assert learning.scale_fitted
    assert learning.scale == pytest.approx(slope)
    assert learning.fixed_s == pytest.approx(mean_y - slope * mean_m)
    residuals = [y[b] - slope * modelled[b] - learning.fixed_s for b in w]
    assert learning.noise_s == pytest.approx(1.4826 * median(abs(r) for r in residuals))


def test_a_restart_whose_files_are_gone_is_scaled_from_today_by_its_rows_at_half_weight():
    history = RestartHistory((_restart(5, 6.0, 1.0, 500_000), _restart(9, 6.0, 1.0, None)),
                             None)
    learning = learn(history, lambda r: None, today_s=4.0, today_rows=1_000_000)
    (used,) = learning.used
    assert used.modelled_s == pytest.approx(2.0) and "its rows (500,000 of 1,000,000)" in used.basis
    assert used.weight == pytest.approx(0.5 / (1 + math.log(2.0 / 4.0) ** 2))
    assert learning.skipped == ((9, "its version's files are gone and the log has no row "
                                    "count to scale today's by"),)
    # without the query's first start, the cold start is inside the fixed part, and it says so
    assert learning.scale == 1.0 and learning.fixed_s == pytest.approx(5.0 - 2.0)
    assert learning.cold_start_s is None and "first start" in learning.notes[0]


def test_restarts_too_small_to_tell_from_noise_leave_the_model_uncalibrated():
    cold = _restart(0, 4.0, 1.0, None)
    history = RestartHistory(tuple(_restart(b, 3.0 + d, 0.5, 1000) for b, d in
                                   ((5, 0.3), (10, -0.2), (15, 0.1))), cold)
    learning = learn(history, lambda r: 0.05, today_s=0.05, today_rows=1000)
    assert learning.scale is None and "too little state" in learning.why_uncalibrated
    assert len(learning.used) == 3
    # three restarts measure how much a cold first batch varies: their spread
    residuals = [3.0 + d - 0.5 - 3.0 - 0.05 for d in (0.3, -0.2, 0.1)]
    assert learning.noise_s == pytest.approx(1.4826 * median(abs(r) for r in residuals))
    assert learning.noise_basis.startswith("measured")


def test_runs_that_cannot_be_measured_say_why():
    def batch(n: int, run: str, seconds: float, rows: int) -> BatchTiming:
        return BatchTiming(n, seconds, seconds / 2, run, rows, 1000 * n, None)

    timings = [batch(0, "a", 5.0, 100), batch(1, "a", 1.0, 100), batch(2, "a", 1.0, 100),
               batch(3, "b", 6.0, 100),  # a run of one batch
               batch(4, "c", 7.0, 10_000), batch(5, "c", 1.0, 100), batch(6, "c", 1.0, 100)]
    history = observed_restarts(timings)
    assert history.restarts == ()
    assert history.first_start is not None and history.cold_start_s == pytest.approx(4.0)
    reasons = dict(history.skipped)
    assert "one batch" in reasons[3]
    assert "read 10,000 rows" in reasons[4] and "no batch of similar input" in reasons[4]
    learning = learn(history, lambda r: 1.0, 1.0, 1000)
    assert learning.scale is None and "no restart" in learning.why_uncalibrated
    # a log without runIds holds no start at all
    assert observed_restarts([replace(t, run_id=None) for t in timings]) == \
        RestartHistory((), None, ())


def test_the_estimate_is_the_model_scaled_by_what_it_learned():
    """The small query's restarts, each made 4 s slower than recorded (a slower cluster):
    the estimate is the uncalibrated one under the model × the learned scale."""
    ckpt = open_checkpoint(str(FIXTURE / "checkpoint"))
    timings = _timings(FIXTURE / "progress.jsonl")
    starts = {t.batch_id for t in timings if t.batch_id > 0 and t.run_id != next(
        (u.run_id for u in timings if u.batch_id == t.batch_id - 1), None)}
    assert len(starts) == 3
    slower = [replace(t, trigger_s=t.trigger_s + 4.0) if t.batch_id in starts else t
              for t in timings]
    # without its fixed part (a restart this small costs less than a new query's first
    # batch: nothing), the model costs each past restart's state above zero
    model = replace(local_model(ckpt), restart_s=0.0)
    learned = estimate_recovery(ckpt, cores=2, model=model, timings=slower)
    learning = learned.learning
    assert learning is not None and learning.scale is not None
    assert [u.restart.batch for u in learning.used] == sorted(starts)
    for used in learning.used:  # each past restart costed from the files of its version
        assert used.basis == f"the files of version {used.restart.batch}"
        works = load_work(ckpt, used.restart.batch, model)[1]
        assert used.modelled_s == pytest.approx(restart_at(works, model, 2, 1))
    from statekit.recovery.history import fit_restarts

    scale, fixed, _ = fit_restarts([(u.modelled_s, u.restart.cost_s - learning.cold_start_s,
                                     u.weight) for u in learning.used])
    assert (learning.scale, learning.fixed_s) == (pytest.approx(scale), pytest.approx(fixed))
    scaled = model.scaled(learning.scale, "learned")
    plain = estimate_recovery(ckpt, cores=2, model=replace(
        scaled, restart_s=scaled.restart_s + learning.fixed_s))
    assert learned.restart_s == pytest.approx(plain.restart_s)
    assert learned.estimate_s == pytest.approx(plain.estimate_s)
    assert learned.model.source == "learned"
    lines = learning_lines(learned)
    assert lines[0].startswith("learned from 3 restart(s) of this query in its progress "
                               "log: the model")
    assert sum(line.startswith("  batch ") for line in lines) == 3


def _run(args: list[str], capsys) -> tuple[int, str]:
    code = run_cli(cli, "statekit", args)
    return code, capsys.readouterr().out


def test_recovery_json_and_text_on_a_recorded_query(capsys):
    args = ["recovery", str(FIXTURE / "checkpoint"), "--progress-log",
            str(FIXTURE / "progress.jsonl"), "--cores", "2"]
    code, out = _run([*args, "--json"], capsys)
    assert code == 0, out
    data = json.loads(out)
    learning = data["learning"]
    runs = _runs_from_json(FIXTURE / "progress.jsonl")
    assert [u["batch"] for u in learning["used"]] == [run[0]["batchId"] for run in runs[1:]]
    for used, run in zip(learning["used"], runs[1:], strict=True):
        assert used["cost_s"] == pytest.approx(_expected_cost(run))
        assert used["basis"] == f"the files of version {used['batch']}"
    assert learning["cold_start_s"] == pytest.approx(_expected_cost(runs[0]))
    # uncalibrated exactly when every restart's state is within a cold start's noise
    small = all(u["modelled_s"] < 0.5 and abs(u["cost_s"] - learning["cold_start_s"]) < 1.0
                for u in learning["used"])
    assert (learning["scale"] is None) == small
    # three restarts measure how much a cold first batch varies: their spread around the fit
    residuals = [u["cost_s"] - learning["cold_start_s"] - (learning["scale"] or 1.0)
                 * u["modelled_s"] - learning["fixed_s"] for u in learning["used"]]
    assert learning["noise_s"] == pytest.approx(1.4826 * median(abs(r) for r in residuals))
    code, text = _run(args, capsys)
    if data["high_s"] < 1.0:  # this small state: a band with that noise, not a figure
        assert f"about a second or less (a cold first batch varies by ±" \
               f"{human_duration(learning['noise_s'])})" in text
    if small:
        assert "uncalibrated: the restarts in the log loaded too little state" in text
    else:
        assert "learned from 3 restart(s) of this query in its progress log" in text
    # without a progress log the estimate says it is uncalibrated and how to calibrate it
    code, plain = _run(["recovery", str(FIXTURE / "checkpoint"), "--cores", "2"], capsys)
    assert "uncalibrated (" in plain and "--progress-log LOG" in plain


def test_sub_second_estimates_read_as_a_band_with_the_measured_noise():
    ckpt = open_checkpoint(str(FIXTURE / "checkpoint"))
    estimate = estimate_recovery(ckpt, cores=2)
    assert estimate.high_s < 1.0 and estimate.learning is None
    assert estimate.cold_noise_s == COLD_NOISE_S
    assert range_words(estimate) == "about a second or less (a cold first batch varies by " \
                                    "±1.0 s)"


EVENTS = FIXTURE / "eventlog"


def _event_tasks_from_json() -> dict[tuple[int, int], float]:
    """(batch, partition) → seconds of the stateful stage's task, read here from the
    recorded zstd logs with pyarrow, independently of statekit's reader."""
    import pyarrow as pa

    out: dict[tuple[int, int], float] = {}
    for file in sorted(EVENTS.rglob("events_*")):
        with pa.CompressedInputStream(pa.OSFile(str(file)), "zstd") as stream:
            events = [json.loads(line) for line in stream.read().decode().splitlines()]
        batch_of = {}
        for e in events:
            if e["Event"] == "SparkListenerJobStart" and \
                    "streaming.sql.batchId" in e["Properties"]:
                for stage in e["Stage IDs"]:
                    batch_of[stage] = int(e["Properties"]["streaming.sql.batchId"])
        stateful = {e["Stage Info"]["Stage ID"] for e in events
                    if e["Event"] == "SparkListenerStageCompleted"
                    and any(a["Name"] == "number of total state rows"
                            for a in e["Stage Info"]["Accumulables"])}
        for e in events:
            if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] in stateful:
                info = e["Task Info"]
                out[(batch_of[e["Stage ID"]], info["Index"])] = \
                    (info["Finish Time"] - info["Launch Time"]) / 1000
    return out


def test_the_event_log_gives_every_stateful_task_of_every_batch():
    from statekit.checkpoint.event_log import read_event_logs, stateful_tasks

    tasks = stateful_tasks(read_event_logs([str(EVENTS)]))
    expected = _event_tasks_from_json()
    assert {(t.batch, t.partition): t.seconds for t in tasks} == pytest.approx(expected)
    batches = {t.batch for t in tasks}
    assert batches == set(range(max(batches) + 1))  # every batch of every run
    assert all(t.stage_order == 0 for t in tasks)  # one stateful stage: the aggregation
    runs = {e["runId"] for line in (FIXTURE / "progress.jsonl").read_text().splitlines()
            for e in [json.loads(line)]}
    assert {t.run_id for t in tasks} == runs


def test_each_restarts_slowest_partition_is_measured_against_its_steady_tasks():
    from statekit.checkpoint.event_log import read_event_logs, stateful_tasks
    from statekit.recovery.history import partition_checks

    tasks = stateful_tasks(read_event_logs([str(EVENTS)]))
    history = observed_restarts(_timings(FIXTURE / "progress.jsonl"))
    timed = _event_tasks_from_json()
    for restart in history.restarts:
        modelled = {(0, p): 0.1 * (p + 1) for p in range(4)}
        (check,) = partition_checks(tasks, restart, modelled)
        extra = {p: timed[(restart.batch, p)]
                 - median(timed[(b, p)] for b in restart.steady_ids) for p in range(4)}
        slowest = max(extra, key=lambda p: extra[p])
        assert (check.partition, check.measured_s) == (slowest, pytest.approx(extra[slowest]))
        assert check.modelled_s == pytest.approx(0.1 * (slowest + 1))
        assert check.model_slowest == 3


def test_recovery_with_the_event_log_names_each_restarts_slowest_partition(capsys):
    code, out = _run(["recovery", str(FIXTURE / "checkpoint"), "--progress-log",
                      str(FIXTURE / "progress.jsonl"), "--event-log", str(EVENTS),
                      "--cores", "2", "--json"], capsys)
    assert code == 0, out
    learning = json.loads(out)["learning"]
    assert [c["batch"] for c in learning["partitions"]] == \
        [u["batch"] for u in learning["used"]]
    # partitions this small restart within a task's own cold start: no partition scale
    assert learning["partition_scale"] is None
    code = run_cli(cli, "statekit", ["recovery", str(FIXTURE / "checkpoint"), "--event-log",
                                     str(FIXTURE / "nowhere"), "--cores", "2"])
    error = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and "nowhere: no such file or folder" in error
    assert "Traceback" not in error


def test_an_unreadable_event_log_is_one_line_naming_it(tmp_path):
    from statekit.checkpoint.event_log import read_event_logs, stateful_tasks
    from statekit.support.errors import BadInput, CorruptFile

    lz4 = tmp_path / "events_1_app.lz4"
    lz4.write_bytes(b"\x00" * 10)
    with pytest.raises(BadInput, match="compressed with lz4"):
        read_event_logs([str(lz4)])
    broken = tmp_path / "events_1_app.zstd"
    broken.write_bytes(b"not zstd at all")
    with pytest.raises(CorruptFile, match="not a readable zstd event log"):
        read_event_logs([str(broken)])
    bad = tmp_path / "app-1"
    bad.write_text('{"Event": "SparkListenerLogStart"}\n{not json\n{"Event": "x"}\n')
    with pytest.raises(CorruptFile, match="line 2 is not valid JSON"):
        stateful_tasks(read_event_logs([str(bad)]))
    # a log still being written ends mid-line: what came before counts
    growing = tmp_path / "app-2"
    growing.write_text('{"Event": "SparkListenerLogStart"}\n{"Event": "Spark')
    assert stateful_tasks(read_event_logs([str(growing)])) == []
