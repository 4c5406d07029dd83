"""The integrity checks without a JVM: ledger audit, checksum files, pinned codec, FIFOs,
option values and one-line errors (the fault corpus runs them on real checkpoints)."""

from __future__ import annotations

import json
import os
import struct
import zlib

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.soundness import raise_if_unsound
from statekit.cli.main import cli
from statekit.cli.options import dumps_json
from statekit.cli.runner import run_cli
from statekit.formats.checksum_files import (
    check_hadoop_crc,
    check_spark_crc,
    crc32c,
    hadoop_crc_size,
    hadoop_size_matches,
)
from statekit.formats.jsontext import loads_json
from statekit.report.checkpoint_report import build_report
from tests.unit.checkpoint_builder import write_checkpoint


@pytest.fixture
def ck(tmp_path):
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=6, committed=6)
    return root


def findings(root) -> dict[str, dict]:
    return {f.code: f for f in build_report(open_checkpoint(str(root))).findings}


def invoke(args, capsys) -> tuple[int, str, str]:
    code = run_cli(cli, "statekit", [str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_damaged_newest_commit_is_an_error_an_old_one_a_warning(ck):
    (ck / "commits/5").write_text("v1\n{garbage")
    (ck / "commits/1").write_text("")
    found = build_report(open_checkpoint(str(ck))).findings
    by_path = {f.message.split(":")[0]: f for f in found if f.code == "corrupt-log"}
    assert by_path[f"{ck}/commits/5"].severity == "error"
    assert by_path[f"{ck}/commits/1"].severity == "warning"
    with pytest.raises(Exception, match="commits/5: invalid JSON"):
        raise_if_unsound(open_checkpoint(str(ck)))


def test_incomplete_entries_odd_entries_and_long_names(ck):
    (ck / "offsets/5").write_text("v1")
    assert "no batch metadata line" in findings(ck)["corrupt-log"].message
    (ck / "offsets/5").unlink()
    (ck / "offsets/5").mkdir()
    odd = findings(ck)["odd-log-entry"]
    assert odd.severity == "error" and "is a folder" in odd.message
    (ck / "offsets/5").rmdir()
    (ck / "offsets/5").symlink_to("nowhere")
    assert "symlink" in findings(ck)["odd-log-entry"].message
    (ck / "offsets/5").unlink()
    os.mkfifo(ck / "offsets/5")
    assert "not a regular file" in findings(ck)["odd-log-entry"].message
    (ck / "offsets/5").unlink()
    (ck / f"offsets/{2**64}").write_text((ck / "offsets/4").read_text())
    ckpt = open_checkpoint(str(ck))
    assert ckpt.last_planned_batch == 4  # not batch 2**64
    assert findings(ck)["not-a-batch"].severity == "warning"


def test_gaps_clock_skew_and_watermarks(ck):
    (ck / "commits/2").unlink()
    lines = (ck / "offsets/4").read_text().split("\n")
    meta = json.loads(lines[1])
    meta["batchTimestampMs"] -= 10**9
    meta["batchWatermarkMs"] = -5
    (ck / "offsets/4").write_text("\n".join([lines[0], json.dumps(meta), *lines[2:]]))
    found = findings(ck)
    assert {"log-gap", "clock-skew", "watermark-backwards"} <= set(found)
    assert all(found[c].severity == "warning"
               for c in ("log-gap", "clock-skew", "watermark-backwards"))


def test_deep_json_is_a_decode_error_not_a_recursion_error(ck):
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        loads_json(deep)
    (ck / "offsets/5").write_text(f'v1\n{{"conf":{deep}}}\n-')
    assert "nested too deeply" in findings(ck)["corrupt-log"].message


def test_missing_commits_folder_while_state_exists(ck):
    for path in (ck / "commits").iterdir():
        path.unlink()
    (ck / "commits").rmdir()
    assert findings(ck)["missing-log"].severity == "error"


def test_pinned_codec_is_enforced(ck):
    for path in (ck / "offsets").iterdir():
        path.write_text(path.read_text().replace('codec": "lz4"', 'codec": "snappy"'))
    assert findings(ck)["unsupported-codec"].exit_code == 5


def test_partition_findings(ck, tmp_path):
    import shutil

    shutil.copytree(ck / "state/0/1", ck / "state/0/4")
    assert findings(ck)["extra-partitions"].path == f"{ck}/state/0/4"
    shutil.rmtree(ck / "state/0/4")
    shutil.rmtree(ck / "state/0/3")
    missing = findings(ck)["missing-partitions"]
    assert missing.severity == "error" and missing.partitions == (3,)


def test_hadoop_crc_size_and_content_checks():
    data = os.urandom(1300)
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + 512])) for i in range(0, 1300, 512))
    crc = b"crc\x00" + struct.pack(">i", 512) + sums
    assert check_hadoop_crc(data, crc, "c") is None
    assert hadoop_size_matches(1300, len(crc)) and not hadoop_size_matches(1000, len(crc))
    for size in (0, 1, 511, 512, 513, 1300, 10**6):  # the report's inlined size check
        chunks = len(range(0, size, 512))
        assert hadoop_crc_size(size) == 8 + 4 * chunks
        assert hadoop_size_matches(size, hadoop_crc_size(size))
        assert not hadoop_size_matches(size + 512, hadoop_crc_size(size))
    flipped = bytearray(data)
    flipped[700] ^= 1
    mismatch = check_hadoop_crc(bytes(flipped), crc, "c")
    assert mismatch is not None and mismatch.offset == 512
    assert "truncated" in check_hadoop_crc(data[:900], crc, "c").message


def test_spark_json_crc():
    data = b"state bytes"
    meta = {"algorithm": "CRC32C", "value": crc32c(data), "mainFileSize": len(data)}
    assert crc32c(b"123456789") == 0xE3069283
    assert check_spark_crc(data, json.dumps(meta).encode(), "c") is None
    assert "says 11" in check_spark_crc(data + b"!", json.dumps(meta).encode(), "c").message
    assert "CRC32C" in check_spark_crc(b"State bytes", json.dumps(meta).encode(), "c").message


def test_a_spark_checksum_record_missing_a_field_is_named():
    """Spark reads its checksum file into a record whose fields are all required: a bit flip
    that renames one (``timestampMs`` → ``uimestampMs``, measured) fails the state load."""
    from statekit.state.verify import _checksum_fields_missing

    whole = {"algorithm": "CRC32C", "value": -96707, "mainFileSize": 203,
             "timestampMs": 1795746555728, "creator": {"executorId": "driver", "taskInfo": ""},
             "unknown": "ignored"}
    assert _checksum_fields_missing(whole) is None
    renamed = {("uimestampMs" if k == "timestampMs" else k): v for k, v in whole.items()}
    assert _checksum_fields_missing(renamed) == "int field 'timestampMs'"
    assert _checksum_fields_missing({**whole, "value": "12"}) == "int field 'value'"
    assert _checksum_fields_missing({**whole, "creator": {"executorId": "driver"}}) == \
        "str field 'creator.taskInfo'"
    assert _checksum_fields_missing({**whole, "creator": None}) == "dict field 'creator'"


def test_json_output_is_standard():
    text = dumps_json({"a": float("nan"), "b": [float("inf"), 1.5]})
    assert json.loads(text) == {"a": None, "b": [None, 1.5]}


def test_usage_errors_are_one_line_with_exit_2(ck, capsys):
    for args in (["report", ck, "--bogus"], ["report"], ["nosuchcommand"],
                 ["report", ck, "--partition", "-1"], ["growth", ck, "--max-keys", "nan"]):
        code, _, err = invoke(args, capsys)
        assert code == 2 and err.count("\n") == 1 and err.startswith("statekit: error: "), err


def test_selections_the_checkpoint_does_not_have(ck, capsys):
    code, _, err = invoke(["report", ck, "--partition", "99"], capsys)
    assert code == 3 and "no partition 99" in err
    code, _, err = invoke(["report", ck, "--operator", "7"], capsys)
    assert code == 3 and "no operator 7" in err


def test_a_fifo_as_progress_log_does_not_hang(ck, tmp_path, capsys):
    fifo = tmp_path / "progress.jsonl"
    os.mkfifo(fifo)
    code, _, err = invoke(["growth", "--progress-log", fifo], capsys)
    assert code == 3 and "not a regular file" in err
