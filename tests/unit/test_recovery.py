"""The recovery model reacts in the right direction (synthetic layouts, no JVM)."""

from __future__ import annotations

from dataclasses import replace

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.checkpoint.progress_log import BatchTiming
from statekit.recovery.cost_model import DEFAULT_MODELS
from statekit.recovery.estimate import estimate_recovery, schedule, with_cores
from statekit.recovery.reruns import SKIPPED_BATCH_S, file_sink_committed
from tests.unit.checkpoint_builder import write_checkpoint


def layout(tmp_path, name="ck", **kw):
    kw.setdefault("snapshot_bytes", 250)  # a snapshot holds fewer records than the deltas
    root = tmp_path / name
    write_checkpoint(fsspec.filesystem("file"), str(root), **kw)
    return open_checkpoint(str(root))


def test_more_deltas_since_the_snapshot_take_longer(tmp_path):
    recent = layout(tmp_path, "recent", planned=12, committed=12, snapshots=[11])
    old = layout(tmp_path, "old", planned=12, committed=12, snapshots=[3])
    none = layout(tmp_path, "none", planned=12, committed=12)
    fast, slow, slowest = (estimate_recovery(c, cores=2) for c in (recent, old, none))
    records = [sum(w.records for w in e.instances) for e in (fast, slow, slowest)]
    assert records[0] < records[1] < records[2]
    assert fast.instances[0].changes == 1 and slow.instances[0].changes == 9
    assert any("no snapshot yet" in n for n in slowest.notes)


def test_more_cores_help_until_the_slowest_partition_dominates():
    assert schedule([4, 1, 1, 1, 1], 1) == 8
    assert schedule([4, 1, 1, 1, 1], 2) == 4
    assert schedule([4, 1, 1, 1, 1], 8) == 4
    assert schedule([], 4) == 0


NO_OFFSET = replace(DEFAULT_MODELS["hdfs"], wave_s=0.0, restart_s=0.0)
"""The default model without its fixed parts, which may be negative (a new query's first batch,
the baseline, pays more than a restart of a tiny state): these layouts' kilobytes of state
would otherwise all estimate 0."""


def test_cores_on_a_real_layout(tmp_path):
    ckpt = layout(tmp_path, planned=10, committed=10, partitions=8)
    estimate = estimate_recovery(ckpt, cores=1, model=NO_OFFSET)
    one, two, many = (with_cores(estimate, c) for c in (1, 2, 64))
    assert one == pytest.approx(estimate.estimate_s)
    assert one > two > many > 0
    assert with_cores(estimate, 8) == pytest.approx(many)


def test_uncommitted_batch_is_rerun(tmp_path):
    clean = estimate_recovery(layout(tmp_path, "a", planned=10, committed=10), cores=2)
    crashed = estimate_recovery(layout(tmp_path, "b", planned=11, committed=10,
                                       extra_versions=[11]), cores=2)
    assert clean.rerun_s == 0 and crashed.rerun_batches == (10,)
    assert crashed.reruns[0].action == "re-run" and crashed.version == 10
    assert crashed.rerun_s == pytest.approx(10.0)  # batches start 10 s apart in the layout
    assert crashed.estimate_s > clean.estimate_s
    assert any("--file-sink" in n for n in crashed.notes)
    timings = [BatchTiming(b, s, s - 0.5) for b, s in enumerate((2.0, 3.0, 4.0))]
    with_log = estimate_recovery(layout(tmp_path, "c", planned=11, committed=10),
                                 cores=2, timings=timings)
    assert with_log.rerun_s == 3.0 and "progress" in with_log.reruns[0].source


def test_batch_the_file_sink_already_committed_is_skipped(tmp_path):
    ckpt = layout(tmp_path, planned=11, committed=10, extra_versions=[11])
    sink = tmp_path / "out"
    (sink / "_spark_metadata").mkdir(parents=True)
    for batch in range(10):
        (sink / "_spark_metadata" / str(batch)).write_text("v1\n")
    timings = [BatchTiming(b, 2.0, 1.5) for b in range(5)]
    pending = estimate_recovery(ckpt, cores=2, timings=timings, sink=resolve(str(sink)))
    assert pending.reruns[0].action == "re-run" and pending.version == 10
    (sink / "_spark_metadata" / "10").write_text("v1\n")
    skipped = estimate_recovery(ckpt, cores=2, timings=timings, sink=resolve(str(sink)))
    assert skipped.reruns[0].action == "skip" and skipped.rerun_s == pytest.approx(0.5)
    assert skipped.version == 11  # the next batch loads what the crashed run wrote
    assert any("already committed" in n for n in skipped.notes)
    compacted = tmp_path / "out2" / "_spark_metadata"
    compacted.mkdir(parents=True)
    (compacted / "10.compact").write_text("v1\n")
    assert file_sink_committed(resolve(str(compacted.parent)), 10) is True
    assert file_sink_committed(resolve(str(tmp_path / "nowhere")), 10) is None
    default = estimate_recovery(ckpt, cores=2, sink=resolve(str(sink)))
    assert default.reruns[0].action == "skip" and default.rerun_s == SKIPPED_BATCH_S


def test_first_wave_pays_the_warm_up_once(tmp_path):
    assert schedule([1, 1, 1, 1], 2, warmup=0.5) == 2.5
    assert schedule([1], 4, warmup=0.5) == 1.5
    ckpt = layout(tmp_path, planned=10, committed=10, partitions=8)
    estimate = estimate_recovery(ckpt, cores=2)
    (stage,) = estimate.stages
    assert stage.warmup_s == DEFAULT_MODELS["hdfs"].first_wave_s
    empty = estimate_recovery(layout(tmp_path, "e", planned=0, committed=0), cores=2)
    assert empty.state_load_s == 0


def test_first_wave_replays_slower_and_only_the_first_wave():
    # the two largest tasks start first and pay their extra; the later ones do not
    assert schedule([3, 2, 1, 1], 2, first_wave_extra=[1, 1, 5, 5]) == 5
    assert schedule([1, 1], 1, first_wave_extra=[2, 2]) == 4
    model = DEFAULT_MODELS["hdfs"]
    slow_start = replace(model, first_wave_record_s=model.record_s)
    assert slow_start.scaled(2, "x").first_wave_record_s == 2 * model.record_s


def test_rocksdb_without_changelogs_has_no_what_if(tmp_path):
    ckpt = layout(tmp_path, planned=6, committed=6, provider="rocksdb")
    estimate = estimate_recovery(ckpt, cores=2, rto_s=30)
    assert estimate.what_if == () and estimate.recommendation is None
    assert any("minDeltasForSnapshot does not apply" in n for n in estimate.notes)
    (stage,) = estimate.stages
    assert stage.warmup_s == DEFAULT_MODELS["rocksdb"].first_wave_base_s  # opens a zip
    assert all(w.base_version == 6 and w.files > 1 for w in estimate.instances)


def test_what_if_and_rto_recommendation(tmp_path):
    ckpt = layout(tmp_path, planned=30, committed=30, snapshots=[10, 20, 30])
    estimate = estimate_recovery(ckpt, cores=2, rto_s=None, model=NO_OFFSET)
    worst = [w.worst_s for w in estimate.what_if]
    assert worst == sorted(worst)  # more deltas between snapshots: slower worst case
    written = [w.snapshot_bytes_per_batch for w in estimate.what_if]
    assert written == sorted(written, reverse=True)  # but fewer snapshot bytes per batch
    middle = estimate.what_if[3]
    assert middle.worst_low_s < middle.worst_s < middle.worst_high_s
    # the pick holds even at the top of the range: an RTO the point estimate just meets
    # is not enough
    pick = estimate_recovery(ckpt, cores=2, rto_s=middle.worst_high_s + 1e-9, model=NO_OFFSET)
    assert pick.recommendation == middle.min_deltas
    tight = estimate_recovery(ckpt, cores=2, rto_s=middle.worst_s + 1e-9, model=NO_OFFSET)
    assert tight.recommendation is None or tight.recommendation < middle.min_deltas
    assert estimate_recovery(ckpt, cores=2, rto_s=0, model=NO_OFFSET).recommendation is None


def test_cli_json_and_bad_rto(tmp_path, capsys):
    import json

    from statekit.cli.main import cli
    from statekit.cli.params import parse_duration
    from statekit.cli.runner import run_cli

    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=11, committed=10,
                     snapshots=[5], extra_versions=[11])
    # the layout's state files are placeholders: the estimate is from the listing
    assert run_cli(cli, "statekit", ["recovery", str(root), "--json", "--cores", "2",
                                     "--rto", "1m", "--calibrate", "--no-decode"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cores"] == 2 and data["rerun_batches"] == [10]
    assert data["model"]["source"] == "calibrated" and data["calibration"]["files"] > 0
    assert data["recommendation"] == 100
    assert run_cli(cli, "statekit", ["recovery", str(root), "--rto", "soon"]) == 2
    assert "Invalid value for '--rto': cannot read 'soon'" in capsys.readouterr().err
    # a usage error, found before any work: even before the checkpoint is opened
    assert run_cli(cli, "statekit", ["recovery", str(tmp_path / "missing"), "--rto", "3x",
                                     "--calibrate"]) == 2
    assert "Invalid value for '--rto': cannot read '3x' as a duration" in \
        capsys.readouterr().err
    assert parse_duration("500ms") == 0.5 and parse_duration("2m") == 120
    assert parse_duration("1.5h") == 5400 and parse_duration("30") == 30


def test_progress_log_gives_the_rerun_duration(tmp_path, capsys):
    import json

    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli
    from tests.support.progress_logs import progress

    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=11, committed=10,
                     extra_versions=[11])
    log = tmp_path / "p.jsonl"
    log.write_text("".join(json.dumps(progress(b, 10)) + "\n" for b in range(5)))
    assert run_cli(cli, "statekit", ["recovery", str(root), "--progress-log", str(log),
                                     "--json", "--no-decode"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rerun_s"] == 0.06 and "progress" in data["reruns"][0]["source"]
    sink = tmp_path / "out"
    (sink / "_spark_metadata").mkdir(parents=True)
    (sink / "_spark_metadata" / "10").write_text("v1\n")
    log.write_text("".join(json.dumps({**progress(b, 10), "sink": {
        "description": f"FileSink[{sink}]"}}) + "\n" for b in range(5)))
    assert run_cli(cli, "statekit", ["recovery", str(root), "--progress-log", str(log),
                                     "--json", "--no-decode"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reruns"][0]["action"] == "skip" and data["rerun_s"] == pytest.approx(0.02)
    assert data["version"] == 11
    assert run_cli(cli, "statekit", ["recovery", str(root), "--progress-log",
                                     str(tmp_path / "none.jsonl")]) == 3  # before any work


def test_rerun_costs_come_from_restarts_in_the_log(tmp_path):
    """A re-run adds a restart's *second* batch (the re-run itself is the cold first one);
    a skipped batch costs a restart's cold planning."""
    from statekit.recovery.reruns import plan_reruns

    ckpt = layout(tmp_path, planned=11, committed=10, extra_versions=[11])
    run_a = [BatchTiming(0, 8.0, 6.0, "a"), BatchTiming(1, 3.0, 2.8, "a"),
             BatchTiming(2, 1.0, 0.9, "a")]
    run_b = [BatchTiming(3, 9.0, 7.5, "b"), BatchTiming(4, 4.0, 3.9, "b"),
             BatchTiming(5, 1.2, 1.0, "b"), BatchTiming(6, 1.1, 1.0, "b")]
    (rerun,), version = plan_reruns(ckpt, [*run_a, *run_b])
    assert rerun.action == "re-run" and version == 10
    assert rerun.seconds == 4.0 and "second batch after a start" in rerun.source
    sink = tmp_path / "out" / "_spark_metadata"
    sink.mkdir(parents=True)
    (sink / "10").write_text("v1")
    (skip,), version = plan_reruns(ckpt, [*run_a, *run_b], sink=resolve(str(sink.parent)))
    assert skip.action == "skip" and version == 11
    # warm batches only (not a run's first): 0.2, 0.1, 0.1, 0.2, 0.1 → 0.1 (cold 2.0/1.5 left out)
    assert skip.seconds == pytest.approx(0.1)
    no_runs = [BatchTiming(b, s, s - 0.1) for b, s in enumerate((5.0, 1.0, 2.0))]
    (plain,), _ = plan_reruns(ckpt, no_runs)
    assert plain.seconds == 2.0 and "median of the last 20 batches" in plain.source


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_records_of_a_large_file_are_counted_from_its_head(tmp_path, codec):
    """A file past the sampling cap is decoded from its first MiB only; its records per
    compressed byte must be the whole file's (the cut once lost a MiB of read-ahead: 1.8×)."""
    import random

    from statekit.formats.state_writer import write_snapshot
    from statekit.recovery.estimate import SAMPLE_PREFIX_BYTES, records_in

    ckpt = layout(tmp_path, planned=3, committed=3, snapshots=[2], codec=codec)
    rng = random.Random(3)
    path = tmp_path / "ck" / "state" / "0" / "0" / "2.snapshot"
    with open(path, "wb") as out:
        write_snapshot(out, ((f"user-{i}".encode(), rng.randbytes(40) + b"x" * 40)
                             for i in range(120_000)), codec)
    ckpt = open_checkpoint(str(tmp_path / "ck"))
    file = ckpt.inventory.instances[sorted(ckpt.inventory.instances)[0]].of_kind("snapshot")[0]
    assert file.size > 4 * SAMPLE_PREFIX_BYTES
    whole, size, whole_bytes = records_in(ckpt, file, 1 << 40)
    head, covered, head_bytes = records_in(ckpt, file, SAMPLE_PREFIX_BYTES)
    assert (whole, size) == (120_000, file.size)
    assert covered <= SAMPLE_PREFIX_BYTES
    assert covered / head == pytest.approx(size / whole, rel=0.05)
    # decoded key + value bytes per record: the rows as written (UnsafeRow-free test rows)
    written = sum(len(f"user-{i}") + 80 for i in range(120_000))
    assert whole_bytes == written
    assert head_bytes / head == pytest.approx(whole_bytes / whole, rel=0.05)


def test_the_first_batch_pays_for_the_rows_it_holds(tmp_path):
    """The user-visible estimate: the load × load_factor, plus the rows the busiest core
    holds and their garbage collection, plus a fixed part; the state load stays a term."""
    ckpt = layout(tmp_path, planned=12, committed=12, partitions=8)
    base = replace(DEFAULT_MODELS["hdfs"], load_factor=1.0, row_s=0.0, gc_row_s=0.0,
                   wave_s=0.0, restart_s=0.0)
    plain = estimate_recovery(ckpt, cores=2, model=base)
    assert plain.restart_s == pytest.approx(plain.state_load_s)
    model = replace(base, load_factor=1.5, row_s=1e-3, gc_row_s=1e-2, restart_s=0.25)
    full = estimate_recovery(ckpt, cores=2, model=model)
    assert full.state_load_s == pytest.approx(plain.state_load_s)  # the load is the load
    rows = sum(s.rows for s in full.stages)
    heap = sum(w.rows for w in full.instances)
    assert rows > 0 and heap > rows
    expected = 1.5 * plain.state_load_s + 1e-3 * rows + 1e-2 * rows * heap / 1e6 + 0.25
    assert full.restart_s == pytest.approx(expected)
    # per task the busiest core runs (8 partitions on 2 cores: 4), either sign
    for wave_s in (0.05, -0.05):
        waved = estimate_recovery(ckpt, cores=2, model=replace(model, wave_s=wave_s))
        assert [s.waves for s in waved.stages] == [4]
        assert waved.restart_s == pytest.approx(expected + 4 * wave_s)
        assert sum(t.seconds for t in waved.breakdown) == pytest.approx(waved.restart_s,
                                                                        rel=0.05)
    # a part per task opening a base counts only tasks that open one: none here (deltas)...
    based = estimate_recovery(ckpt, cores=2, model=replace(model, base_wave_s=-0.05))
    assert based.restart_s == pytest.approx(expected)
    # ... and each of the busiest core's four when every partition has a snapshot
    snap = layout(tmp_path, "snap", planned=12, committed=12, partitions=8, snapshots=[10])
    with_base, without = (estimate_recovery(snap, cores=2, model=replace(model, base_wave_s=b))
                          for b in (-0.05, 0.0))
    assert all(w.base_files for w in with_base.instances)
    assert with_base.restart_s == pytest.approx(without.restart_s - 4 * 0.05)
    assert full.estimate_s == pytest.approx(full.restart_s)  # nothing to re-run
    assert full.low_s == pytest.approx(full.restart_s * model.low)
    names = {t.name for t in full.breakdown}
    assert {"rows", "gc"} <= names and sum(t.share for t in full.breakdown) == \
        pytest.approx(1)
    assert sum(t.seconds for t in full.breakdown) == pytest.approx(full.restart_s, rel=0.05)
    # the rows held do not change with the snapshot interval: every what-if row pays them
    held = 1e-3 * rows + 1e-2 * rows * heap / 1e6 + 0.25
    assert all(w.worst_s > held for w in full.what_if)
    # two executors: each heap holds half the rows, so less garbage collection
    spread = estimate_recovery(ckpt, cores=2, model=model, executors=2)
    assert spread.restart_s < full.restart_s
    # --measure scales every cost the same way, the factor on the load included
    scaled = model.scaled(2, "measured")
    assert estimate_recovery(ckpt, cores=2, model=scaled).restart_s == \
        pytest.approx(2 * full.restart_s)


def test_memory_of_the_loaded_state_against_the_heap(tmp_path):
    from statekit.state.memory import RESERVED_HEAP_BYTES, bytes_per_row

    ckpt = layout(tmp_path, planned=12, committed=12, partitions=4)
    unknown = estimate_recovery(ckpt, cores=2).memory
    assert unknown is not None and unknown.on_heap and unknown.verdict == "unknown"
    assert unknown.bytes == pytest.approx(unknown.rows * bytes_per_row("hdfs",
                                                                        unknown.row_bytes))
    assert unknown.peak_bytes == pytest.approx(2 * unknown.bytes)  # two versions kept
    need = unknown.bytes
    roomy = estimate_recovery(ckpt, cores=2, memory_limit=int(need * 10 + RESERVED_HEAP_BYTES))
    assert roomy.memory.verdict == "fits" and roomy.memory.note is None
    tight = estimate_recovery(ckpt, cores=2,
                              memory_limit=int(need * 1.5 + RESERVED_HEAP_BYTES))
    assert tight.memory.verdict == "tight" and any("memory:" in n for n in tight.notes)
    small = estimate_recovery(ckpt, cores=2, memory_limit=int(need / 2 + RESERVED_HEAP_BYTES))
    assert small.memory.verdict == "exceeds"
    assert any("will fail" in n for n in small.notes)
    # spread over two executors each holds half
    halves = estimate_recovery(ckpt, cores=4, executors=2).memory
    assert halves.bytes == pytest.approx(need / 2)
    # RocksDB keeps rows off the heap: reported, never compared with it
    rocks = estimate_recovery(layout(tmp_path, "r", planned=6, committed=6, provider="rocksdb"),
                              cores=2, memory_limit=1 << 20)
    assert rocks.memory is None or (not rocks.memory.on_heap
                                    and rocks.memory.verdict == "unknown")


@pytest.mark.parametrize(("text", "expected"), [("4g", 4 << 30), ("512m", 512 << 20),
                                                ("1T", 1 << 40), ("2048", 2048 << 20),
                                                ("64k", 64 << 10)])
def test_jvm_memory_sizes_read_as_spark_reads_them(text, expected):
    from statekit.cli.params import parse_jvm_size

    assert parse_jvm_size(text) == expected


@pytest.mark.parametrize("text", ["4.5g", "-1g", "lots", "0"])
def test_bad_jvm_memory_sizes_are_one_line(text):
    from statekit.cli.params import parse_jvm_size
    from statekit.support.errors import BadInput

    with pytest.raises(BadInput, match="--executor-memory"):
        parse_jvm_size(text)


def test_a_restart_of_a_small_state_never_costs_less_than_nothing(tmp_path):
    """The fixed part may be negative (a new query's first batch, the baseline, pays costs a
    restart does not): the estimate and the what-if rows stop at 0, the breakdown says so."""
    ckpt = layout(tmp_path, planned=6, committed=6, partitions=2)
    model = replace(DEFAULT_MODELS["hdfs"], restart_s=-100.0)
    estimate = estimate_recovery(ckpt, cores=2, model=model)
    assert estimate.restart_s == 0 and estimate.estimate_s == 0
    assert all(w.worst_s == 0 and w.typical_s == 0 for w in estimate.what_if)
    small = replace(model, restart_s=-0.001)
    estimate = estimate_recovery(ckpt, cores=2, model=small)
    offset = [t for t in estimate.breakdown if t.name == "offset"]
    assert len(offset) == 1 and offset[0].seconds == pytest.approx(-0.001)
    assert sum(t.seconds for t in estimate.breakdown) == pytest.approx(estimate.restart_s,
                                                                       rel=0.05)
