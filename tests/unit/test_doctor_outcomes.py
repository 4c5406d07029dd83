"""The doctor's second axis without a JVM: what a restart that runs ends in.

The Spark-judged proof is the campaign (tests/spark/test_doctor_campaign.py); here the rules
themselves, on copies of the frozen ``make demo`` checkpoint: a batch run again repeats its
output unless the sink keeps each batch once, a state file with another version's bytes
makes the restart load other state, two equal files Spark wrote in order are not a copy.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.progress_log import sink_kind
from statekit.doctor import diagnose
from statekit.doctor.outcomes import UNKNOWN_SINK
from statekit.doctor.problems import (
    DIFFERS,
    EXIT_DOCTOR_WRONG_OUTCOME,
    FATAL,
    LOSES,
    REPEATS,
    SAME,
    WARNING,
    Diagnosis,
    Problem,
)

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "checkpoint"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    copy = tmp_path / "checkpoint"
    shutil.copytree(DEMO, copy)
    return copy


def _uncommit(ckpt: Path) -> int:
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    (ckpt / "commits" / str(last)).unlink()
    (ckpt / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_the_outcome_joins_what_the_problems_say_and_sets_the_exit_code():
    def diagnosis(*problems: Problem) -> Diagnosis:
        return Diagnosis("ck", 3, 3, 4, 4, problems, None, None, 0, 0, 0.0)

    quiet = diagnosis(Problem("a", WARNING, "x", "w", "s"))
    assert (quiet.outcome, quiet.outcomes, quiet.exit_code) == (SAME, (), 9)
    wrong = diagnosis(Problem("a", WARNING, "x", "w", "s", outcome=DIFFERS),
                      Problem("b", "info", "y", "w", "s", outcome=LOSES))
    assert wrong.outcomes == (LOSES, DIFFERS) and wrong.outcome == "loses, differs"
    assert wrong.exit_code == EXIT_DOCTOR_WRONG_OUTCOME
    assert wrong.headline.startswith("restarts with warnings, but loses, differs: ")
    fails = diagnosis(Problem("a", WARNING, "x", "w", "s", outcome=DIFFERS),
                      Problem("c", FATAL, "z", "w", "s"))
    assert fails.outcome is None and fails.outcomes is None and fails.exit_code == 12
    data = wrong.to_dict()
    assert data["outcome"] == "loses, differs" and data["outcomes"] == ["loses", "differs"]


@pytest.mark.parametrize(("sink", "outcome"), [
    ("file", SAME), ("noop", SAME), ("foreachBatch", REPEATS), ("other", REPEATS),
    (None, REPEATS)])
def test_a_batch_run_again_repeats_its_output_unless_the_sink_keeps_it_once(demo, sink,
                                                                             outcome):
    batch = _uncommit(demo)
    found = diagnose(open_checkpoint(str(demo)), sink=sink, fix=False)
    assert found.restarts and found.outcome == outcome
    rerun = next(p for p in found.problems if p.code == "uncommitted-batch")
    if outcome == REPEATS:
        assert rerun.affects == f"batch {batch} reaches the sink again"
        assert found.exit_code == EXIT_DOCTOR_WRONG_OUTCOME
    assert (UNKNOWN_SINK in found.unverified) == (sink is None)


def test_a_delta_with_another_versions_bytes_restarts_on_other_state(demo):
    folder = demo / "state" / "0" / "0"
    shutil.copyfile(folder / "35.delta", folder / "36.delta")
    shutil.copyfile(folder / ".35.delta.crc", folder / ".36.delta.crc")
    found = diagnose(open_checkpoint(str(demo)))
    copied = [p for p in found.problems if p.code == "state-file-copied"]
    assert [Path(p.path).name for p in copied] == ["36.delta"]
    assert copied[0].outcome == DIFFERS and "partition 0 (1 of 8 partitions" in copied[0].affects
    assert found.outcome == DIFFERS and found.exit_code == EXIT_DOCTOR_WRONG_OUTCOME
    # the fix keeps a batch before the copied version, and says what it plans again
    assert found.fix_batch == 34 and found.fix_reruns == "batches 35…36"


def test_equal_deltas_spark_wrote_before_their_commits_are_no_copy(demo):
    """Two batches that made exactly the same changes wrote two equal files, each before its
    batch's commit: Spark's own, not a copy."""
    _in_spark_order(demo)
    folder = demo / "state" / "0" / "0"
    shutil.copyfile(folder / "35.delta", folder / "36.delta")
    shutil.copyfile(folder / ".35.delta.crc", folder / ".36.delta.crc")
    commit = (demo / "commits" / "35").stat().st_mtime
    os.utime(folder / "36.delta", (commit - 1, commit - 1))
    os.utime(folder / "35.delta", (commit - 2, commit - 2))
    os.utime(demo / "commits" / "34", (commit - 1, commit - 1))
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    assert not [p for p in found.problems if p.code == "state-file-copied"]
    assert found.outcome == SAME


def test_the_sink_kind_comes_from_the_progress_logs_description(tmp_path):
    def log(description: str | None) -> str:
        sink = {} if description is None else {"sink": {"description": description}}
        return json.dumps({"batchId": 3, "durationMs": {"triggerExecution": 5, "addBatch": 4},
                           "stateOperators": [], **sink}) + "\n"

    assert sink_kind(log("FileSink[/data/out]"), shown="p") == "file"
    assert sink_kind(log("ForeachBatchSink"), shown="p") == "foreachBatch"
    assert sink_kind(log("org.apache.spark.sql.execution.datasources.noop.NoopTable$@1"),
                     shown="p") == "noop"
    assert sink_kind(log("org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@2"),
                     shown="p") == "other"
    assert sink_kind(log(None), shown="p") is None


def _edit_offsets(ckpt: Path, batch: int, edit) -> None:  # type: ignore[no-untyped-def]
    path = ckpt / "offsets" / str(batch)
    version, meta, *sources = path.read_text().split("\n")
    meta_obj = json.loads(meta)
    edit(meta_obj)
    path.write_text("\n".join([version, json.dumps(meta_obj), *sources]))
    (path.parent / f".{batch}.crc").unlink(missing_ok=True)


def _records(progress_log: Path):  # type: ignore[no-untyped-def]
    from statekit.checkpoint.progress_log import batch_records

    return batch_records(progress_log.read_text(), shown=str(progress_log))


def test_an_offsets_entry_the_querys_own_report_contradicts(demo):
    """offsets/L edited (its checksum gone with the edit): only the query's progress report
    of batch L says it changed. A committed batch's watermark is not read again (the commit
    log's is): the same outcome. Run again, the batch runs with the entry's watermark."""
    log = DEMO.parent / "progress.jsonl"
    last = max(int(p.name) for p in (demo / "offsets").iterdir() if p.name.isdigit())
    _edit_offsets(demo, last, lambda meta: meta.update(
        batchWatermarkMs=meta["batchWatermarkMs"] + 3_600_000))
    ckpt = open_checkpoint(str(demo))
    assert diagnose(ckpt, progress_records=_records(log), fix=False).outcome == SAME
    _uncommit(demo)
    ckpt = open_checkpoint(str(demo))
    assert diagnose(ckpt, sink="file", fix=False).outcome == SAME  # no witness: unseen
    found = diagnose(ckpt, sink="file", progress_records=_records(log))
    witness = [p for p in found.problems if p.code == "offsets-contradict-progress"]
    assert len(witness) == 1 and witness[0].outcome == DIFFERS
    assert found.outcome == DIFFERS and found.fix_batch == last - 1


def test_another_querys_progress_log_is_no_witness(demo):
    log = DEMO.parent / "progress.jsonl"
    _edit_offsets(demo, 36, lambda meta: meta.update(batchWatermarkMs=1))
    records = {b: r.__class__(r.batch, "00000000-0000-0000-0000-000000000000", r.run_id,
                              r.end_offsets, r.watermark_ms)
               for b, r in _records(log).items()}
    found = diagnose(open_checkpoint(str(demo)), progress_records=records, fix=False)
    assert not [p for p in found.problems if p.code == "offsets-contradict-progress"]
    assert any("another query's" in part for part in found.unverified)


def _file_sink(folder: Path, batches: int) -> Path:
    """A file sink whose log has entries 0…batches-1, one existing output file each."""
    log = folder / "_spark_metadata"
    log.mkdir(parents=True)
    for batch in range(batches):
        data = folder / f"part-{batch:05d}.parquet"
        data.write_bytes(b"PAR1")
        status = {"path": data.as_uri(), "size": 4, "isDir": False, "modificationTime": 1,
                  "blockReplication": 1, "blockSize": 1, "action": "add"}
        (log / str(batch)).write_text("v1\n" + json.dumps(status))
    return folder


def _with_sink(ckpt: Path, sink: Path):  # type: ignore[no-untyped-def]
    from statekit.checkpoint.location import SINK_FOLDER, resolve_folder

    return diagnose(open_checkpoint(str(ckpt)),
                    file_sink=resolve_folder(str(sink), {}, what=SINK_FOLDER))


@pytest.mark.parametrize("damage", ["truncated", "gone-between", "duplicate",
                                    "duplicate-of-empty", "file-gone", "log-gone"])
def test_a_damaged_file_sink_log_loses_or_repeats_output_for_its_readers(demo, tmp_path,
                                                                         damage):
    """The restart runs (the sink only writes its log), but every reader of the sink reads
    through ``_spark_metadata``: an entry that is gone or does not parse fails them, an entry
    listing another entry's file hides its own batch's files (the reader keeps one status per
    path), a listed file that is gone fails the read."""
    last = max(int(p.name) for p in (demo / "commits").iterdir() if p.name.isdigit())
    sink = _file_sink(tmp_path / "sink", last + 1)
    assert _with_sink(demo, sink).outcome == SAME
    log = sink / "_spark_metadata"
    if damage == "truncated":
        (log / "20").write_bytes((log / "20").read_bytes()[:12])
    elif damage == "gone-between":
        (log / "20").unlink()
    elif damage == "duplicate":
        shutil.copyfile(log / "19", log / "20")
    elif damage == "duplicate-of-empty":  # batch 20 wrote nothing: its entry hid nothing
        (sink / "part-00020.parquet").unlink()
        shutil.copyfile(log / "19", log / "20")
    elif damage == "file-gone":
        (sink / "part-00020.parquet").unlink()
    else:
        shutil.rmtree(log)
    found = _with_sink(demo, sink)
    assert found.restarts, found.headline
    if damage == "duplicate-of-empty":
        assert found.outcome == SAME and "file-sink-log-duplicates" in found.codes
        return
    wanted = {"truncated": (LOSES, "file-sink-log-damaged", 19),
              "gone-between": (LOSES, "file-sink-log-damaged", 19),
              "duplicate": (LOSES, "file-sink-log-duplicates", 19),
              "file-gone": (LOSES, "file-sink-log-damaged", 19),
              "log-gone": (LOSES, "file-sink-log-missing", None)}[damage]
    assert found.outcomes == (wanted[0],) and wanted[1] in found.codes, found.headline
    assert found.fix_batch == wanted[2]
    if wanted[2] is not None:  # the rollback cuts the sink's log after the batch it keeps
        assert found.fix_command is not None and "--file-sink" in found.fix_command


def _local_input(ckpt: Path, landing: Path) -> None:
    """Point the file source's log of ``ckpt`` at real files in ``landing`` (each with the
    modification time its entry logs), as on the machine that ran the query."""
    landing.mkdir()
    for entry in (ckpt / "sources" / "0").iterdir():
        if not entry.name.removesuffix(".compact").isdigit():
            continue
        version, *lines = entry.read_text().split("\n")
        moved = []
        for line in filter(None, lines):
            record = json.loads(line)
            target = landing / Path(record["path"]).name
            target.write_text("{}\n")
            os.utime(target, (record["timestamp"] / 1000, record["timestamp"] / 1000))
            record["path"] = target.as_uri()
            moved.append(json.dumps(record))
        entry.write_text("\n".join([version, *moved]))
        (entry.parent / f".{entry.name}.crc").unlink(missing_ok=True)


def test_input_files_witness_the_file_sources_log(demo, tmp_path):
    """A file taken out of an entry is older than files the log lists and listed by no
    entry: read again (repeats). A file added to an entry after its batch committed: no
    batch reads it (loses). An entry with no file: Spark never writes one (repeats)."""
    _local_input(demo, tmp_path / "landing")
    assert diagnose(open_checkpoint(str(demo)), fix=False).outcome == SAME
    log = demo / "sources" / "0"
    version, *lines = (log / "34").read_text().split("\n")
    (log / "34").write_text(version)  # the entry lists nothing now
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    assert found.outcomes == (REPEATS,), found.headline
    assert {p.what.split(" (")[0] for p in found.problems} >= {"entry 34 lists no file"}

    (log / "34").write_text("\n".join([version, *lines]))
    late = tmp_path / "landing" / "arrived-after.jsonl"
    late.write_text("{}\n")
    stamp = (demo / "commits" / "35").stat().st_mtime + 60
    os.utime(late, (stamp, stamp))
    version, *lines = (log / "35").read_text().split("\n")
    extra = {"path": late.as_uri(), "timestamp": int(stamp * 1000), "batchId": 35}
    (log / "35").write_text("\n".join([version, *lines, json.dumps(extra)]))
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    assert found.outcomes == (LOSES,), found.headline


def _flip(path: Path, needle: bytes, bit: int = 0) -> None:
    """Flip one bit of ``path``'s first ``needle`` byte, its checksum file left as written:
    bit rot."""
    data = bytearray(path.read_bytes())
    at = data.index(needle)
    data[at] ^= 1 << bit
    path.write_bytes(bytes(data))


def _flip_digit(path: Path, field: bytes, odd: bool | None = None) -> None:
    """Flip bit 0 of one digit of a number field of ``path`` (its checksum file left as
    written: bit rot): an even digit goes up by one, an odd one down. ``odd``: pick a digit
    of that parity (the last one otherwise)."""
    data = bytearray(path.read_bytes())
    start = data.index(field) + len(field)
    end = start
    while chr(data[end]).isdigit():
        end += 1
    candidates = [i for i in range(start + 1, end)
                  if odd is None or (data[i] - 0x30) % 2 == int(odd)]
    data[candidates[-1]] ^= 0x01
    path.write_bytes(bytes(data))


def test_one_flipped_bit_is_undone_to_say_what_the_entry_changed(demo):
    """Bit rot flips one bit: the checksum file finds the entry as written, and the doctor
    says what the change does. A committed batch's offsets entry is read for where its
    sources ended: its watermark changed does nothing; its source moved back repeats."""
    from statekit.formats.checksum_files import single_flip

    entry = demo / "offsets" / "36"
    written = entry.read_bytes()
    crc = (demo / "offsets" / ".36.crc").read_bytes()
    _flip_digit(entry, b'"batchWatermarkMs":')
    assert single_flip(entry.read_bytes(), crc) == ("data", written)
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    changed = [p for p in found.problems if p.code == "log-changed"]
    assert changed and changed[0].outcome is None and found.outcome == SAME
    entry.write_bytes(written)
    _flip_digit(entry, b'{"logOffset":')  # 35 -> 34: the next batch reads entry 35 again
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    changed = [p for p in found.problems if p.code == "log-changed"]
    assert changed and changed[0].outcome == REPEATS, found.problems


@pytest.mark.parametrize(("entry", "where"), [("commits", -1), ("offsets", 6)])
def test_a_rotted_checksum_file_is_not_a_changed_entry(demo, entry, where):
    """One bit of a stored CRC, or of the header's bytesPerChecksum (an offsets entry is
    longer than one 512-byte chunk: the chunks split elsewhere), rotted: the entry is as
    Spark wrote it."""
    crc = demo / entry / ".36.crc"
    data = bytearray(crc.read_bytes())
    data[where] ^= 0x04 if where < 0 else 0x01
    crc.write_bytes(bytes(data))
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    assert [p.code for p in found.problems] == ["checksum-mismatch"]
    assert found.outcome == SAME and found.exit_code == 0


@pytest.mark.parametrize(("odd", "outcome"), [(False, DIFFERS), (True, SAME)])
def test_a_commits_watermark_changed_by_one_bit(demo, odd, outcome):
    """Moved on, the next batch emits windows early and drops rows as late; moved back, it
    evicts later and the batch after catches up."""
    _flip_digit(demo / "commits" / "36", b'"nextBatchWatermarkMs":', odd=odd)
    found = diagnose(open_checkpoint(str(demo)), fix=False)
    assert "log-changed" in found.codes and found.outcome == outcome, found.problems


def test_the_querys_row_counts_witness_a_delta_from_elsewhere(demo):
    """Another partition's delta copied over one on the restart path: no retained file of
    the partition has its bytes, but the query's report of the batch that wrote the
    version no longer adds up to the change files' records."""
    from statekit.doctor.count_witness import _count

    records = _records(DEMO.parent / "progress.jsonl")
    ckpt = open_checkpoint(str(demo))
    assert diagnose(ckpt, progress_records=records, fix=False).outcome == SAME
    ours, theirs = demo / "state/0/0/36.delta", demo / "state/0/1/36.delta"
    counts = [_count(ckpt, next(f for f in ckpt.inventory.all_files() if f.path == str(p)))
              for p in (ours, theirs)]
    assert counts[0] != counts[1]  # the witness can see it
    shutil.copyfile(theirs, ours)
    found = diagnose(open_checkpoint(str(demo)), progress_records=records)
    assert "state-counts-contradict-progress" in found.codes, found.problems
    assert found.outcome == DIFFERS and found.fix_batch == 34


def test_input_read_again_changes_nothing_behind_the_watermark(tmp_path):
    """Re-read rows older than the restart's watermark are dropped as late by the
    operators that drop late rows; deduplication drops rows it has seen. On a real
    aggregation checkpoint (its commit's watermark set to 10 s), with the query's reports of
    each batch's newest event time."""
    from statekit.checkpoint.progress_log import BatchRecord
    from statekit.doctor.plan import restart_plan
    from statekit.doctor.rereads import Rereads

    golden = DEMO.parents[1] / "golden" / "spark-4.1.4" / "aggregation_hdfs" / "checkpoint"
    ckpt_path = tmp_path / "checkpoint"
    shutil.copytree(golden, ckpt_path)
    (ckpt_path / "commits" / "2").write_text('v1\n{"nextBatchWatermarkMs":10000}')
    (ckpt_path / "commits" / ".2.crc").unlink(missing_ok=True)
    ckpt = open_checkpoint(str(ckpt_path))
    plan = restart_plan(ckpt)
    records = {b: BatchRecord(b, None, None, (), None, event_max_ms=b * 6_000)
               for b in range(3)}
    late = Rereads(ckpt, plan, 0, {0: "stateStoreSave"}, records)
    assert late.outcome([1]) is None  # batch 1's newest row (6 s) is behind 10 s
    assert late.outcome([2]) == REPEATS  # batch 2's (12 s) is not
    assert late.outcome(None) == REPEATS  # which batch read them: unknown
    assert Rereads(ckpt, plan, 0, {0: "dedupe"}, {}).outcome([2]) is None
    # deduplication first, then an aggregation (ids from the sink down): dropped first
    assert Rereads(ckpt, plan, 0, {0: "stateStoreSave", 1: "dedupeWithinWatermark"},
                   {}).outcome([2]) is None
    assert Rereads(ckpt, plan, 0, {0: "dedupe", 1: "stateStoreSave"}, {}).outcome([2]) == \
        REPEATS
    # [flatMap|applyInPandas]GroupsWithState drop late rows only with event-time timeouts
    assert Rereads(ckpt, plan, 0, {0: "applyInPandasWithState"}, records).outcome([1]) == \
        REPEATS


def _in_spark_order(ckpt: Path) -> float:
    """Modification times as the query left them (the checkout's say nothing): batch B's
    change files (version B + 1) just before its commit entry; snapshots later
    (maintenance). Returns a time after all of them."""
    start = time.time()
    for path in ckpt.rglob("*"):
        name = path.name.lstrip(".").removesuffix(".crc")
        stem, _, kind = name.partition(".")
        if path.is_file() and stem.isdigit():
            version = int(stem)
            if path.parent.name == "commits":
                stamp = start + 10 * version + 5
            elif kind in ("delta", "changelog"):
                stamp = start + 10 * (version - 1) + 2
            else:
                stamp = start + 10 * version + 8
            os.utime(path, (stamp, stamp))
    return start + 100_000


def _restart_delta(ckpt: Path) -> Path:
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    return next((ckpt / "state" / "0").glob(f"*/{last + 1}.delta"))


def test_a_change_file_written_after_its_batchs_commit_was_put_there_later(demo):
    """Spark writes a batch's delta before its commit entry: one written after it, in a
    checkpoint whose other deltas keep the order, is another version's or run's (it decodes
    and names no version): the restart runs on other state, and the fix rolls back before
    it."""
    later = _in_spark_order(demo)
    assert "state-file-late" not in diagnose(open_checkpoint(str(demo))).codes
    late = _restart_delta(demo)
    os.utime(late, (later, later))
    found = diagnose(open_checkpoint(str(demo)))
    problem = next(p for p in found.problems if p.code == "state-file-late")
    assert problem.path.endswith(f"{late.parent.name}/{late.name}")
    version = int(late.name.split(".")[0])
    assert problem.outcome == DIFFERS and DIFFERS in found.outcomes
    assert problem.batch == version - 2 and found.fix_batch is not None


def test_times_a_copy_set_anew_say_nothing_of_the_order(demo):
    """A copy that gave every file a new time (``cp -r``, an object-store sync) puts many
    change files after their commits: the times are no witness then."""
    later = _in_spark_order(demo)
    for number, path in enumerate(sorted((demo / "state").rglob("*.delta"))):
        stamp = later + (number % 3)  # written in folder order, after every commit
        os.utime(path, (stamp, stamp))
    assert "state-file-late" not in diagnose(open_checkpoint(str(demo))).codes


GOLDEN_JOIN = (Path(__file__).resolve().parents[1] / "data" / "golden" / "spark-4.0.5"
               / "stream_stream_join_hdfs" / "checkpoint")


def test_join_rows_no_key_counts_are_another_versions(tmp_path):
    """Spark never leaves a row at an index its key does not count: a ``keyToNumValues``
    delta from an older version leaves rows uncounted — the restart runs (it never reads
    them) on another version's counts. The rollback goes before the first version whose
    stores disagree."""
    ckpt = tmp_path / "checkpoint"
    shutil.copytree(GOLDEN_JOIN, ckpt)
    assert not diagnose(open_checkpoint(str(ckpt))).problems
    side = ckpt / "state" / "0" / "0"
    for store in ("left-keyToNumValues", "left-keyWithIndexToValue"):
        for snapshot in (side / store).glob("*3.snapshot*"):
            snapshot.unlink()  # the restart loads version 3 from its deltas
    counts = side / "left-keyToNumValues"
    shutil.copyfile(counts / "1.delta", counts / "3.delta")
    shutil.copyfile(counts / ".1.delta.crc", counts / ".3.delta.crc")
    found = diagnose(open_checkpoint(str(ckpt)))
    assert found.restarts, found.headline
    problem = next(p for p in found.problems if p.code == "join-rows-uncounted")
    assert problem.outcome == DIFFERS and "left side" in problem.what
    assert problem.batch == 1  # version 2 agrees: keep batch 1 (it loads version 2)


def _input_timed(ckpt: Path, landing: Path, stamp) -> Path:  # type: ignore[no-untyped-def]
    """Local input for ``ckpt``'s file source, each file (and its entry's record) modified at
    ``stamp(source batch)``; returns the newest entry."""
    _local_input(ckpt, landing)
    entries = [p for p in (ckpt / "sources" / "0").iterdir()
               if p.name.removesuffix(".compact").isdigit()]
    for entry in entries:
        version, *lines = entry.read_text().split("\n")
        records = [json.loads(line) for line in lines if line]
        for record in records:
            when = stamp(record["batchId"])
            record["timestamp"] = int(when * 1000)
            path = Path(record["path"].removeprefix("file://"))
            os.utime(path, (when, when))
        entry.write_text("\n".join([version, *map(json.dumps, records)]))
    return max(entries, key=lambda p: int(p.name.removesuffix(".compact")))


@pytest.mark.parametrize("held_back", [True, False])
def test_a_lost_newest_source_entry_is_logged_again_and_not_read(demo, tmp_path, held_back):
    """The restart logs the unlisted files in the lost newest entry's place and reads none:
    its own files were read once (the same outcome) — unless it takes more than it had: with
    no sign of maxFilesPerTrigger (every file logged as soon as it came), a file that came
    after the lost entry is logged with its files and never read."""
    start = _in_spark_order(demo) - 100_000
    # held back: every file there from the start, the query took one per batch
    newest = _input_timed(demo, tmp_path / "landing",
                          (lambda b: start - 50) if held_back else
                          (lambda b: start + 10 * (b - 1) + 4))
    newest.unlink()
    (newest.parent / f".{newest.name}.crc").unlink(missing_ok=True)
    later = tmp_path / "landing" / "arrived-later.json"
    later.write_text("{}\n")
    os.utime(later, (start + 100_000, start + 100_000))  # after every batch
    found = diagnose(open_checkpoint(str(demo)))
    problem = next(p for p in found.problems if p.code == "source-log-behind")
    assert found.restarts, found.headline
    if held_back:
        assert problem.outcome is None and found.outcome == SAME, found.headline
    else:
        assert problem.outcome == LOSES and "1 input file(s)" in problem.affects


def test_a_later_watermark_still_behind_the_newest_event_changes_no_input_in_order():
    """A watermark moved later drops input rows between the two as late: behind the newest
    event time the query saw, in-order input is not among them (windows closed early are
    what the healthy restart emits too); past it, or with timers that fire early, the
    restart's output differs."""
    from statekit.doctor.entry_changes import commit_outcome

    was, moved = b'v1\n{"nextBatchWatermarkMs":1000}', b'v1\n{"nextBatchWatermarkMs":1004}'
    assert commit_outcome(was, moved, newest_event_ms=5000)[0] is None
    assert commit_outcome(was, moved, newest_event_ms=1002)[0] == DIFFERS
    assert commit_outcome(was, moved, newest_event_ms=5000, timers=True)[0] == DIFFERS
    assert commit_outcome(was, moved)[0] == DIFFERS  # no progress report: not known
    assert commit_outcome(moved, was, newest_event_ms=None)[0] is None  # moved back


@pytest.mark.parametrize("changed_nothing", [True, False])
def test_a_copy_of_the_previous_version_where_the_batch_changed_nothing(demo,
                                                                        changed_nothing):
    """A delta copied over by its partition's previous version replays that version's
    changes on the state they made: the restart loads the previous state. When the query's
    report says the batch changed nothing in that partition (the other partitions' deltas
    alone add up to it), that is the state Spark's own delta made: the same."""
    import dataclasses

    from statekit.doctor.count_witness import _count

    ckpt = open_checkpoint(str(demo))
    restart = max(int(p.name) for p in (demo / "commits").iterdir() if p.name.isdigit()) + 1
    others = [_count(ckpt, f) for f in ckpt.inventory.all_files()
              if f.kind == "delta" and f.version == restart and f.partition != 0]
    records = dict(_records(DEMO.parent / "progress.jsonl"))
    if changed_nothing:  # the report of a batch that changed nothing in partition 0
        record = records[restart - 1]
        name = record.operators[0][0]
        updated, removed = (sum(c[0] for c in others if c), sum(c[1] for c in others if c))
        records[restart - 1] = dataclasses.replace(
            record, operators=((name, updated, removed), *record.operators[1:]))
    folder = demo / "state" / "0" / "0"
    shutil.copyfile(folder / f"{restart - 1}.delta", folder / f"{restart}.delta")
    shutil.copyfile(folder / f".{restart - 1}.delta.crc", folder / f".{restart}.delta.crc")
    found = diagnose(open_checkpoint(str(demo)), progress_records=records, fix=False)
    copied = next(p for p in found.problems if p.code == "state-file-copied")
    if changed_nothing:
        assert copied.severity == "info" and found.outcome == SAME, found.problems
    else:
        assert copied.outcome == DIFFERS and found.outcome == DIFFERS, found.problems


def test_re_read_rows_behind_the_watermark_of_event_time_timeouts_change_nothing(demo,
                                                                                  tmp_path):
    """applyInPandasWithState drops late rows with event-time timeouts, which no conf in
    the checkpoint records — its timeouts do (near the watermark, not near the batches'
    wall-clock times). An emptied entry's files are read again, but the query's report says
    their newest row is behind the restart's watermark: the same state and output."""
    from statekit.doctor.plan import restart_plan
    from statekit.doctor.rereads import Rereads

    _local_input(demo, tmp_path / "landing")
    records = _records(DEMO.parent / "progress.jsonl")
    ckpt = open_checkpoint(str(demo))
    rereads = Rereads(ckpt, restart_plan(ckpt), 0, {0: "applyInPandasWithState"}, records)
    assert rereads._event_time_timeouts() == {"applyInPandasWithState"}
    log = demo / "sources" / "0"
    version, *_lines = (log / "34").read_text().split("\n")
    (log / "34").write_text(version)  # the entry lists nothing now: its file is read again
    found = diagnose(open_checkpoint(str(demo)), progress_records=records, fix=False)
    assert "source-log-mismatch" in found.codes and found.outcome == SAME, found.headline
