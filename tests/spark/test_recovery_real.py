"""The recovery estimate on checkpoints the reference pipeline really wrote: no snapshot, a
crash with an uncommitted batch (sink committed or not), both providers, object storage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.checkpoint.progress_log import parse_timings
from statekit.cli.runner import run_cli
from statekit.recovery.estimate import estimate_recovery

pytestmark = [pytest.mark.spark]


def _cli():
    from statekit.cli.main import cli

    return cli


def crashed_copy(run, target: Path, *, sink_committed: bool) -> tuple[Path, Path, int]:
    """A copy of ``run``'s checkpoint and sink as a crash left them: the newest commit gone
    (and, unless ``sink_committed``, the sink's log entry of that batch too)."""
    ckpt, out = target / "checkpoint", target / "output"
    shutil.copytree(run.checkpoint, ckpt)
    shutil.copytree(run.output, out)
    batch = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    for path in (ckpt / "commits" / str(batch), ckpt / "commits" / f".{batch}.crc"):
        path.unlink(missing_ok=True)
    if not sink_committed:
        for name in (str(batch), f".{batch}.crc"):
            (out / "_spark_metadata" / name).unlink(missing_ok=True)
    return ckpt, out, batch


def test_no_snapshot_replays_every_delta_and_says_so(reference_checkpoints):
    plain = open_checkpoint(str(reference_checkpoints.get("hdfs").checkpoint))
    bare = open_checkpoint(str(reference_checkpoints.get("hdfs", variant="no-snapshot")
                               .checkpoint))
    with_snapshots, without = (estimate_recovery(c, cores=2) for c in (plain, bare))
    version = bare.last_committed_batch + 1
    assert without.version == version
    assert all(w.base_version is None and w.changes == version for w in without.instances)
    assert any("no snapshot yet" in n for n in without.notes)
    assert any(w.base_version is not None for w in with_snapshots.instances)
    # the same input and state: replaying every delta costs more than snapshot + a few (the
    # first wave's JVM warm-up aside: a one-time cost that does not grow with the chain)
    assert sum(w.seconds for w in without.instances) > \
        sum(w.seconds for w in with_snapshots.instances)
    assert sum(w.records for w in without.instances) > \
        sum(w.records for w in with_snapshots.instances)


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_uncommitted_batch_rerun_or_skipped(provider, reference_checkpoints, tmp_path, capsys):
    run = reference_checkpoints.get(provider)
    clean = estimate_recovery(open_checkpoint(str(run.checkpoint)), cores=2)
    timings, logged_sink = parse_timings(run.progress_log.read_text(), shown="log")
    assert logged_sink and Path(logged_sink.removeprefix("file:")) == run.output

    ckpt, out, batch = crashed_copy(run, tmp_path / "rerun", sink_committed=False)
    rerun = estimate_recovery(open_checkpoint(str(ckpt)), cores=2, timings=timings,
                              sink=resolve(str(out)))
    assert [(r.batch, r.action) for r in rerun.reruns] == [(batch, "re-run")]
    assert rerun.version == batch  # the re-run loads the last committed version + 1
    assert all(w.loadable for w in rerun.instances)
    # one run in the log: the re-run adds what its second batch took
    assert len({t.run_id for t in timings}) == 1
    assert rerun.rerun_s == pytest.approx(timings[1].trigger_s)
    assert "second batch after a start" in rerun.reruns[0].source
    assert rerun.estimate_s == pytest.approx(rerun.restart_s + timings[1].trigger_s)
    assert any(f"batch {batch} was planned but not committed" in n for n in rerun.notes)

    ckpt, out, batch = crashed_copy(run, tmp_path / "skip", sink_committed=True)
    skipped = estimate_recovery(open_checkpoint(str(ckpt)), cores=2, timings=timings,
                                sink=resolve(str(out)))
    assert [(r.batch, r.action) for r in skipped.reruns] == [(batch, "skip")]
    assert skipped.version == clean.version  # loads what the crashed run wrote
    # a skip costs a warm batch's planning and log writes, read from the same log (how it
    # compares with the re-run's seconds depends on the machine that wrote the log)
    assert skipped.reruns[0].source == "progress log: a warm batch's planning and log writes"
    assert 0 <= skipped.rerun_s <= max(t.trigger_s for t in timings)
    assert any("already committed" in n for n in skipped.notes)

    # the CLI finds the sink in the progress log: that log names the original output, which
    # committed the batch — so copy the log with the sink rewritten to the crashed copy
    log = tmp_path / "progress.jsonl"
    log.write_text(run.progress_log.read_text().replace(str(run.output), str(out)))
    assert run_cli(_cli(), "statekit", ["recovery", str(ckpt), "--progress-log", str(log),
                                        "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reruns"][0]["action"] == "skip" and data["version"] == clean.version
    assert run_cli(_cli(), "statekit", ["recovery", str(ckpt)]) == 0
    text = capsys.readouterr().out
    assert f"batch {batch}: re-run" in text and "--file-sink" in text


def test_object_storage_estimate_matches_local_and_calibrates(reference_checkpoints,
                                                              s3_server, capsys):
    from statekit.recovery.cost_model import default_model
    from statekit.recovery.scaling import calibrate

    local = reference_checkpoints.get("rocksdb", changelog=True).checkpoint
    url = s3_server.upload(str(local), "checkpoints", "recovery-rocksdb-changelog")
    remote = open_checkpoint(url, s3_server.storage_options())
    here = estimate_recovery(open_checkpoint(str(local)), cores=2)
    there = estimate_recovery(remote, cores=2)
    assert there.state_load_s == pytest.approx(here.state_load_s)
    assert [w.files for w in there.instances] == [w.files for w in here.instances]
    assert any("object storage" in n and "--calibrate" in n for n in there.notes)
    model, measured = calibrate(remote, default_model(remote))
    assert measured is not None and measured.files > 0 and model.source == "calibrated"
    # the calibrated model charges at least the measured latency per file, and never less
    # than the default for any term, so the estimate cannot shrink (by how much it grows is
    # the server's speed: a benchmark, benchmarks/bench_object_store.py)
    assert model.change_file_s >= measured.per_file_s > 0
    assert estimate_recovery(remote, cores=2, model=model).state_load_s >= there.state_load_s
    options = []
    for key, value in s3_server.storage_options().items():
        options += ["--storage-option", f"{key}={json.dumps(value)}"]
    assert run_cli(_cli(), "statekit", ["recovery", url, *options, "--calibrate",
                                        "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["source"] == "calibrated" and data["calibration"]["files"] > 0


@pytest.mark.parametrize("changelog", [False, True], ids=["rocksdb-zip", "rocksdb-changelog"])
def test_measure_on_rocksdb(changelog, reference_checkpoints, capsys):
    """``--measure`` loads RocksDB partitions through Spark's state reader — from a zip and its
    SSTs, or by replaying changelogs — and scales the model to what they took."""
    checkpoint = str(reference_checkpoints.get("rocksdb", changelog=changelog).checkpoint)
    assert run_cli(_cli(), "statekit", ["recovery", checkpoint, "--json", "--cores", "2",
                                        "--measure"]) == 0
    data = json.loads(capsys.readouterr().out)
    measurement = data["measurement"]
    assert data["model"]["source"] == "measured" and data["provider"] == "rocksdb"
    assert len(measurement["timings"]) == 2 and measurement["predicted_s"] > 0
    assert all(t["seconds"] > 0 for t in measurement["timings"])
    default = estimate_recovery(open_checkpoint(checkpoint), cores=2)
    assert data["state_load_s"] == pytest.approx(default.state_load_s * measurement["factor"],
                                                 rel=1e-6)
