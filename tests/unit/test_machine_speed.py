"""The machine-speed probe scales the estimate's constants; settings and its cache (no JVM)."""

from __future__ import annotations

import gc
import json
import struct
import time
from dataclasses import fields
from types import SimpleNamespace

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.recovery import machine_speed as speed_module
from statekit.recovery.cost_model import default_model, local_model
from statekit.recovery.estimate import estimate_recovery
from statekit.recovery.machine_speed import MachineSpeed, machine_speed, parse_speed, probe_seconds
from statekit.support.errors import EnvironmentProblem
from tests.unit.checkpoint_builder import write_checkpoint


@pytest.fixture
def fresh_probe(tmp_path, monkeypatch):
    """An empty cache folder, the probe not yet run in this process, no setting."""
    monkeypatch.setenv("STATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STATEKIT_MACHINE_SPEED", raising=False)
    speed_module._probed.cache_clear()
    yield tmp_path / "cache" / "machine-speed.json"
    speed_module._probed.cache_clear()


def test_settings_are_read_as_documented():
    assert parse_speed("probe") is None and parse_speed("") is None
    assert parse_speed("reference") == MachineSpeed(1.0, "reference")
    assert parse_speed(" 0.5 ") == MachineSpeed(0.5, "given")
    for bad in ("fast", "0", "-2", "nan", "inf"):
        with pytest.raises(ValueError):
            parse_speed(bad)


def test_a_bad_variable_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv("STATEKIT_MACHINE_SPEED", "quick")
    with pytest.raises(EnvironmentProblem, match="STATEKIT_MACHINE_SPEED: expected probe, "
                       "reference or a positive number, not 'quick'"):
        machine_speed()
    assert machine_speed("2") == MachineSpeed(2.0, "given")  # an explicit setting wins


def test_the_probe_runs_once_a_day_and_the_fastest_counts(fresh_probe, monkeypatch):
    # scripted probe results: which probe counts must not depend on this machine's moods
    results = iter([0.030, 0.025, 0.028, 0.040, 0.035])
    monkeypatch.setattr(speed_module, "probe_seconds",
                        lambda repeats=speed_module.PROBE_REPEATS: next(results))
    first = machine_speed()
    assert first.source == "probe" and first.probe_s == 0.030
    assert first.factor == pytest.approx(
        min(5.0, max(0.2, first.probe_s / speed_module.REFERENCE_PROBE_S)))
    (entry,) = json.loads(fresh_probe.read_text()).values()
    assert [seconds for _, seconds in entry["probes"]] == [first.probe_s]
    # until SETTLED_PROBES are cached, each new process probes again: one probe taken on a
    # busy machine must not set the factor for a day
    for count in range(2, speed_module.SETTLED_PROBES + 1):
        speed_module._probed.cache_clear()
        assert machine_speed().source == "probe"
        (entry,) = json.loads(fresh_probe.read_text()).values()
        assert len(entry["probes"]) == count
    settled = min(seconds for _, seconds in entry["probes"])
    assert settled == 0.025
    # then another process (a new lru cache) the same day reads the file instead of probing
    speed_module._probed.cache_clear()
    again = machine_speed()
    assert again.source == "cached probe" and again.probe_s == settled

    def rewrite(probes):
        fresh_probe.write_text(json.dumps({key: {"probes": probes} for key in
                                           json.loads(fresh_probe.read_text())}))
        speed_module._probed.cache_clear()

    # a day later it probes again; the fastest of the kept probes is the machine's speed
    now = time.time()
    rewrite([[now - 2 * 86400 - i, first.probe_s / 10] for i in range(3)])
    later = machine_speed()
    assert later.source == "probe" and later.probe_s == pytest.approx(first.probe_s / 10)
    (entry,) = json.loads(fresh_probe.read_text()).values()
    assert len(entry["probes"]) == 4 and entry["probes"][-1][1] == 0.040
    # probes older than CACHE_DAYS no longer count, at most KEPT_PROBES are kept
    rewrite([[now - (speed_module.CACHE_DAYS + 1) * 86400, 1e-6]]
            + [[now - 3600 - i, 0.5] for i in range(9)])
    kept = machine_speed()
    assert kept.source == "cached probe" and kept.probe_s == 0.5
    # an unreadable cache is only a cache: probed again and rewritten
    fresh_probe.write_text("{not json")
    speed_module._probed.cache_clear()
    assert machine_speed() == MachineSpeed(0.035 / speed_module.REFERENCE_PROBE_S, "probe",
                                           0.035)
    assert json.loads(fresh_probe.read_text())
    assert next(results, None) is None  # five probes ran, no more


def test_the_real_probe_is_measured_and_stored(fresh_probe):
    first = machine_speed()
    assert first.source == "probe" and first.probe_s and first.probe_s > 0
    assert first.factor == pytest.approx(
        min(5.0, max(0.2, first.probe_s / speed_module.REFERENCE_PROBE_S)))
    (entry,) = json.loads(fresh_probe.read_text()).values()
    assert [seconds for _, seconds in entry["probes"]] == [first.probe_s]


def test_the_probe_is_a_fixed_amount_of_work_proportional_to_its_rows(monkeypatch):
    """The probe measures work, not the machine's moods: every load decodes and sorts each of
    ``PROBE_ROWS`` rows (counted, not timed), so three times the rows are three times the
    work, and the same rows the same work on any machine."""
    decoded: list[int] = []
    sorted_keys: list[int] = []

    def unpack_from(fmt, data, offset=0):
        decoded.append(offset)
        return struct.unpack_from(fmt, data, offset)

    def counting_sorted(keys):
        sorted_keys.append(len(keys))
        return sorted(keys)

    monkeypatch.setattr(speed_module, "struct",
                        SimpleNamespace(pack=struct.pack, unpack_from=unpack_from))
    monkeypatch.setattr(speed_module, "sorted", counting_sorted, raising=False)
    rows = speed_module.PROBE_ROWS
    work = []
    for scale in (1, 3):
        monkeypatch.setattr(speed_module, "PROBE_ROWS", scale * rows)
        decoded.clear()
        sorted_keys.clear()
        assert probe_seconds(2) >= 0
        # two loads, each decoding every row into a key of its own and sorting them all
        assert sorted_keys == [scale * rows] * 2
        work.append(len(decoded))
    assert work == [2 * rows, 2 * 3 * rows]


def test_the_probe_is_the_fastest_of_its_repeats_without_the_garbage_collector(
        fresh_probe, monkeypatch):
    """A slower machine takes longer per load, and the probe keeps the fastest load: with a
    scripted CPU clock, the answer is the shortest of the scripted loads."""
    ticks = iter([0.0, 0.05, 1.0, 1.02, 2.0, 2.03])  # loads of 50 ms, 20 ms and 30 ms
    collecting: list[bool] = []

    def thread_time() -> float:
        collecting.append(gc.isenabled())
        return next(ticks)

    monkeypatch.setattr(speed_module, "time",
                        SimpleNamespace(thread_time=thread_time, time=time.time))
    assert gc.isenabled()
    assert probe_seconds(3) == pytest.approx(0.02)
    assert next(ticks, None) is None and collecting == [False] * 6  # three loads, gc off
    assert gc.isenabled()  # and on again after
    # a probe twice the benchmark machine's seconds: twice the model's constants
    monkeypatch.setattr(speed_module, "probe_seconds",
                        lambda repeats=3: 2 * speed_module.REFERENCE_PROBE_S)
    assert machine_speed().factor == pytest.approx(2.0)


def test_every_cost_of_the_model_is_scaled_and_the_estimate_with_it(tmp_path):
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=12, committed=12,
                     partitions=4, snapshots=[4], snapshot_bytes=2_000_000)
    ckpt = open_checkpoint(str(root))
    reference = local_model(ckpt, MachineSpeed(1.0, "reference"))
    slower = local_model(ckpt, MachineSpeed(2.0, "given"))
    assert slower.machine == MachineSpeed(2.0, "given") and slower.source == "default"
    for field in fields(reference):
        if field.name.endswith("_s"):
            assert getattr(slower, field.name) == pytest.approx(
                2 * getattr(default_model(ckpt), field.name))
    base = estimate_recovery(ckpt, cores=2, model=reference)
    doubled = estimate_recovery(ckpt, cores=2, model=slower)
    assert base.estimate_s > 0
    assert doubled.state_load_s == pytest.approx(2 * base.state_load_s)
    assert doubled.estimate_s == pytest.approx(2 * base.estimate_s)


def test_cli_setting_and_its_errors(tmp_path, capsys, monkeypatch):
    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=10, committed=10,
                     snapshots=[5])
    # placeholder state files: the estimate from the listing
    args = ["recovery", str(root), "--json", "--cores", "2", "--no-decode"]
    assert run_cli(cli, "statekit", [*args, "--machine-speed", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["machine"] == {"factor": 3.0, "source": "given", "probe_s": None,
                                      "detail": ""}
    assert data["model"]["record_s"] == pytest.approx(3 * data["defaults"]["hdfs"]["record_s"])
    assert run_cli(cli, "statekit", [*args, "--machine-speed", "soon"]) == 2
    assert "Invalid value for '--machine-speed': expected probe, reference or a positive " \
        "number, not 'soon'" in capsys.readouterr().err
    monkeypatch.setenv("STATEKIT_MACHINE_SPEED", "soon")
    assert run_cli(cli, "statekit", args) == 7
    err = capsys.readouterr().err
    assert "STATEKIT_MACHINE_SPEED: expected" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_threads_asking_at_once_share_one_probe(fresh_probe, monkeypatch):
    """The fleet estimates its checkpoints on threads: the first probes, the rest wait."""
    import threading

    asking = 8
    arrived = threading.Semaphore(0)
    calls = []

    class WatchedLock:
        """The probe's lock, counting the threads that came to take it."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def __enter__(self) -> None:
            arrived.release()
            self._lock.acquire()

        def __exit__(self, *_: object) -> None:
            self._lock.release()

    def counted(repeats: int = speed_module.PROBE_REPEATS) -> float:
        calls.append(threading.get_ident())
        for _ in range(asking):  # every thread has come to the lock while this one probes
            assert arrived.acquire(timeout=120), "a thread never asked"  # only a hang
        return 0.02

    monkeypatch.setattr(speed_module, "_PROBING", WatchedLock())
    monkeypatch.setattr(speed_module, "probe_seconds", counted)
    answers: list[MachineSpeed] = []
    threads = [threading.Thread(target=lambda: answers.append(machine_speed()))
               for _ in range(asking)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)  # only catches a hang
    assert not any(thread.is_alive() for thread in threads)
    assert len(calls) == 1 and len(answers) == asking and len(set(answers)) == 1


def test_what_spark_measured_here_is_the_speed_of_later_estimates(fresh_probe, monkeypatch):
    """``recovery --measure`` on a local master keeps its factor per machine, Spark version
    and provider; a later JVM-free estimate of that provider uses it instead of the Python
    probe, and says so."""
    monkeypatch.setattr(speed_module, "probe_seconds",
                        lambda repeats=speed_module.PROBE_REPEATS: 0.030)
    assert machine_speed(provider="hdfs").source == "probe"  # nothing measured yet
    now = time.time()
    speed_module.record_spark_speed("hdfs", 0.61, now=now - 3 * 86400)
    speed_module.record_spark_speed("hdfs", 0.57, now=now)
    measured = machine_speed(provider="hdfs")
    assert measured.source == "spark" and measured.factor == 0.57  # the newest counts
    version = speed_module.spark_version()
    assert f"Spark {version}" in measured.describe() and "hdfs" in measured.describe()
    assert "within a day" in measured.describe()
    # another provider, or an explicit probe or number, does not use it
    assert machine_speed(provider="rocksdb").source in ("probe", "cached probe")
    assert machine_speed("probe", provider="hdfs").source in ("probe", "cached probe")
    monkeypatch.setenv("STATEKIT_MACHINE_SPEED", "probe")
    assert machine_speed(provider="hdfs").source in ("probe", "cached probe")
    monkeypatch.delenv("STATEKIT_MACHINE_SPEED")
    assert machine_speed("2", provider="hdfs") == MachineSpeed(2.0, "given")
    # the Python probe says it is the fallback
    assert "fallback" in machine_speed(provider="rocksdb").describe()
    # kept per Spark version: another Spark has measured nothing here
    installed = speed_module.spark_version
    monkeypatch.setattr(speed_module, "spark_version", lambda: "0.0-other")
    assert machine_speed(provider="hdfs").source in ("probe", "cached probe")
    monkeypatch.setattr(speed_module, "spark_version", installed)
    # kept per fit of the constants: a refit model has measured nothing here yet
    fitted = speed_module.MODEL_FIT
    monkeypatch.setattr(speed_module, "MODEL_FIT", "another fit")
    assert machine_speed(provider="hdfs").source in ("probe", "cached probe")
    monkeypatch.setattr(speed_module, "MODEL_FIT", fitted)
    # a measurement older than CACHE_DAYS no longer counts; a broken one is clamped
    cache = fresh_probe.parent / speed_module.SPARK_CACHE
    entries = json.loads(cache.read_text())
    (key,) = [k for k in entries if k.endswith(f"|hdfs|{speed_module.MODEL_FIT}")]
    entries[key] = {"probes": [[now - (speed_module.CACHE_DAYS + 1) * 86400, 0.5]]}
    cache.write_text(json.dumps(entries))
    assert speed_module.cached_spark_speed("hdfs") is None
    speed_module.record_spark_speed("hdfs", 1e6)
    assert speed_module.cached_spark_speed("hdfs").factor == speed_module.FACTOR_LIMITS[1]
    # the model the estimate uses carries it
    root = fresh_probe.parent.parent / "ckpt"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=4, committed=4)
    assert local_model(open_checkpoint(str(root))).machine.source == "spark"
