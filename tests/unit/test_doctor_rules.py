"""The doctor's rules and the rollback's sink-log cut without a JVM (tests/spark/test_doctor.py
proves the predictions against Spark restarts)."""

from __future__ import annotations

import json

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.doctor import (
    EXIT_DOCTOR_FIXABLE,
    EXIT_DOCTOR_UNFIXABLE,
    EXIT_DOCTOR_WARNINGS,
    FATAL,
    INFO,
    WARNING,
    Diagnosis,
    Problem,
    sink_log_end,
)
from statekit.doctor.operators import schema_error
from statekit.support.errors import UnsafeOperation
from statekit.writes.file_sink import cut_sink_log, sink_log_after
from statekit.writes.rollback import rollback_choices
from tests.unit.checkpoint_builder import write_checkpoint


def _diagnosis(*severities: str, fix: str | None = None) -> Diagnosis:
    problems = tuple(Problem(f"p{i}", s, "x", "what", "spark") for i, s in
                     enumerate(severities))
    return Diagnosis("ck", 3, 3, 4, 4, problems, 2 if fix else None, fix, 0, 0, 0.0)


def test_exit_codes_follow_the_worst_problem():
    assert _diagnosis().exit_code == 0 and _diagnosis().verdict == "restarts"
    assert _diagnosis(INFO).exit_code == 0
    assert _diagnosis(INFO, WARNING).exit_code == EXIT_DOCTOR_WARNINGS
    assert _diagnosis(WARNING).verdict == "restarts with warnings"
    fixable = _diagnosis(WARNING, FATAL, fix="statekit rollback ck --to-batch 2 --out x")
    assert fixable.exit_code == EXIT_DOCTOR_FIXABLE and fixable.verdict == "will not restart"
    assert _diagnosis(FATAL).exit_code == EXIT_DOCTOR_UNFIXABLE
    assert fixable.to_dict()["exit_code"] == EXIT_DOCTOR_FIXABLE


@pytest.mark.parametrize(("data", "predicted"), [
    (b"", "without a message"),
    (b"\x00", "without a message"),
    (b"\x00\x02v", "without a message"),  # the tag is cut short
    (b"\x00\x01garbage", "MALFORMED_LOG_FILE"),
    (b"\x00\x02x2{}", "MALFORMED_LOG_FILE"),
    (b"\x00\x02v2\x00\x00{oops", "JSON"),
])
def test_the_schema_readers_failure_follows_its_version_tag(data, predicted):
    assert predicted in schema_error(data)


def _sink(tmp_path, names: list[str]):
    log = tmp_path / "out" / "_spark_metadata"
    log.mkdir(parents=True)
    for name in names:
        (log / name).write_text("v1\n")
        (log / f".{name}.crc").write_bytes(b"crc")
    return resolve(str(tmp_path / "out"))


def test_the_sink_log_is_cut_back_with_its_checksums(tmp_path):
    sink = _sink(tmp_path, ["0", "1", "2", "3", "4"])
    assert sink_log_end(sink) == 4
    names = sink_log_after(sink, 2)
    assert names == ["3", "4"]
    backup = cut_sink_log(sink, names, "_statekit_sink_log_backup/2-1")
    log = tmp_path / "out" / "_spark_metadata"
    assert sorted(p.name for p in log.iterdir()) == [".0.crc", ".1.crc", ".2.crc", "0", "1",
                                                     "2"]
    moved = tmp_path / "out" / "_statekit_sink_log_backup" / "2-1"
    assert sorted(p.name for p in moved.iterdir()) == [".3.crc", ".4.crc", "3", "4"]
    assert backup.endswith("_statekit_sink_log_backup/2-1")
    assert sink_log_end(sink) == 2 and sink_log_after(sink, 2) == []


def test_a_sink_log_compacted_past_the_batch_cannot_be_cut(tmp_path):
    # batches 0..8 were compacted into 9.compact and then deleted, as Spark's log does
    sink = _sink(tmp_path, ["9.compact", "10", "11"])
    assert sink_log_after(sink, 9) == ["10", "11"]  # cut after the compaction: fine
    with pytest.raises(UnsafeOperation, match="cannot be cut back to batch 5"):
        sink_log_after(sink, 5)


def test_a_missing_offsets_entry_before_the_newest_stops_a_restart(tmp_path):
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=6, committed=6)
    (root / "offsets/4").unlink()
    (root / "offsets/1").unlink()
    problems = {p.code: p for p in open_checkpoint(str(root)).ledger.problems}
    assert problems["missing-previous-offsets"].severity == "error"
    assert "batch 4 doesn't exist" in problems["missing-previous-offsets"].message
    assert problems["log-gap"].severity == "warning"  # batch 1: history only
    assert "batches 4" not in problems["log-gap"].message
    choices = {c.batch: c for c in rollback_choices(open_checkpoint(str(root)))}
    assert not choices[5].possible and "offsets/4 is missing" in choices[5].reason
    assert not choices[2].possible and "offsets/1" in choices[2].reason
    assert choices[3].possible


@pytest.mark.parametrize("committed", [6, 5])
def test_a_file_source_offset_going_backwards_stops_a_restart(tmp_path, committed):
    """offsets/5 edited by hand to replay files: Spark's getBatch(offsets/4, offsets/5) on
    restart asserts start <= end (the doctor campaign restarts it). The fix rolls back to
    the batch before the edit; the remedy names the rollback that keeps the edit."""
    from statekit.doctor import diagnose

    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=6, committed=committed)
    path = root / "offsets/5"
    path.write_text(path.read_text().replace('{"logOffset": 5}', '{"logOffset":2}'))
    diagnosis = diagnose(open_checkpoint(str(root)), fix=False)
    [problem] = [p for p in diagnosis.problems if p.code == "offsets-backwards"]
    assert (problem.severity, problem.spark_error) == (FATAL, "assertion failed")
    assert "logOffset 2 but batch 4 at 4" in problem.what and problem.batch == 4
    assert ("--shift-by 0/logOffset=0" in problem.remedy) == (committed == 6)
    path.write_text(path.read_text().replace('{"logOffset":2}', '{"logOffset":4}'))
    diagnosis = diagnose(open_checkpoint(str(root)), fix=False)
    assert not [p for p in diagnosis.problems if p.code == "offsets-backwards"]


def _progress_line(batch: int, operators: int) -> str:
    ops = ", ".join('{"operatorName": "stateStoreSave", "numRowsTotal": 4}'
                    for _ in range(operators))
    return (f'{{"batchId": {batch}, "durationMs": {{"addBatch": 5, "triggerExecution": 9}}, '
            f'"stateOperators": [{ops}]}}\n')


def test_the_progress_log_finds_the_highest_operator_gone(tmp_path, capsys):
    """Nothing in a checkpoint records how many stateful operators the query runs: with
    the highest one's folder deleted there is no gap to see. The progress log says."""
    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    def doctor(*args: str) -> tuple[int, str, str]:
        code = run_cli(cli, "statekit", ["doctor", str(root), "--no-decode", *args])
        out, err = capsys.readouterr()
        return code, out, err

    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=6, committed=6)
    log = tmp_path / "progress.jsonl"
    log.write_text(_progress_line(4, 1) + _progress_line(5, 2))  # an operator added at 5
    assert doctor("--json")[::2] == (0, "")
    code, out, err = doctor("--progress-log", str(log), "--json")
    assert (code, err) == (EXIT_DOCTOR_UNFIXABLE, "")
    [problem] = [p for p in json.loads(out)["problems"] if p["code"] == "operator-missing"]
    assert problem["path"].endswith("state/1") and "lists 2 stateful operators" in \
        problem["what"]
    log.write_text(_progress_line(5, 1))
    assert doctor("--progress-log", str(log))[0] == 0
    log.write_text("not json\n{oops\n")
    code, _, err = doctor("--progress-log", str(log))
    assert code not in (0, 1) and err.count("\n") == 1 and str(log) in err


def test_operator_metadata_naming_another_operator_id(tmp_path):
    """Spark maps operator ids to names from the ids inside the metadata files: a file that
    names another id leaves its own operator out, and the restart fails (measured with two
    operators: the campaign's ``replace-other`` of ``state/0/_metadata/metadata``)."""
    import shutil
    from pathlib import Path

    from statekit.doctor import diagnose

    golden = Path(__file__).resolve().parents[1] / "data/golden/spark-4.1.4/aggregation_hdfs"
    root = tmp_path / "ck"
    shutil.copytree(golden / "checkpoint", root)
    path = root / "state/0/_metadata/metadata"
    assert not [p for p in diagnose(open_checkpoint(str(root)), decode=False, fix=False)
                .problems if p.code == "operator-metadata-mismatch"]
    path.write_text(path.read_text().replace('"operatorId":0', '"operatorId":1'))
    (root / "state/0/_metadata/.metadata.crc").unlink(missing_ok=True)
    diagnosis = diagnose(open_checkpoint(str(root)), decode=False, fix=False)
    [problem] = [p for p in diagnosis.problems if p.code == "operator-metadata-mismatch"]
    assert problem.severity == FATAL and "finds no operator 0" in problem.what
    assert diagnosis.exit_code == EXIT_DOCTOR_UNFIXABLE


@pytest.mark.parametrize(("spec", "wrong"), [
    ({"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}, None),
    ({"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 1}, None),
    ({"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [0]}, None),
    ({"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKez": 1},
     "key not found: numColsPrefixKey"),  # a flipped bit in the name (measured: Spark fails)
    ({"keyStateEncoderType": "RangeKeyScanStateEncoderSpeb", "orderingOrdinals": [0]},
     "does not know"),
])
def test_transform_with_state_key_encoder_specs_as_spark_reads_them(spec, wrong):
    from statekit.doctor.operators import _check_encoder_spec
    from statekit.support.errors import CorruptFile

    if wrong is None:
        _check_encoder_spec(spec, "schema")
    else:
        with pytest.raises(CorruptFile, match=wrong):
            _check_encoder_spec(spec, "schema")
