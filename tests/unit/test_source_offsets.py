"""Setting and shifting source offsets without a JVM: Kafka offsets exactly as Spark's Kafka
source writes them (``{"topic":{"partition":offset}}``, partitions in hash order), the file
source's ``logOffset``, ``rate-micro-batch``; v1 and v2 offsets entries; the rollback CLI's
dry-run diff and its target, and one-line refusals. Kafka cannot run here: the real-restart
proof is in tests/spark/test_source_offsets_restart.py (rate-micro-batch and file sources).
"""

from __future__ import annotations

import json

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.logs import parse_offset_entry
from statekit.support.errors import BadInput
from statekit.writes.source_offsets import (
    OffsetEdit,
    edit_offsets,
    parse_edit,
    source_kind,
)
from tests.support.builders import rollback_source
from tests.support.trees import tree_hash
from tests.unit.checkpoint_builder import offsets_text

KAFKA = '{"orders":{"2":300,"1":200,"0":100},"payments":{"0":7}}'
FILE = '{"logOffset":5}'


def entry(*sources: str, version: int = 1) -> bytes:
    head = offsets_text(5, version=version).split("\n")[:2]
    lines = sources if version == 1 else [f"{i}:{s}" for i, s in enumerate(sources)]
    return "\n".join([*head, *lines]).encode()


def sets(*texts: str) -> list[OffsetEdit]:
    return [parse_edit(t, shift=False) for t in texts]


def shifts(*texts: str) -> list[OffsetEdit]:
    return [parse_edit(t, shift=True) for t in texts]


def offsets_of(data: bytes) -> list[object]:
    return [json.loads(s.offset) if s.offset else None
            for s in parse_offset_entry(5, data, "x").sources]


@pytest.mark.parametrize("version", [1, 2])
def test_kafka_partition_and_topic_edits_keep_everything_else_byte_for_byte(version):
    data = entry(KAFKA, FILE, version=version)
    out, changes = edit_offsets(data, "offsets/5", sets("orders:1=150") + shifts("payments=+3"))
    before, after = data.decode().split("\n"), out.decode().split("\n")
    assert after[:2] == before[:2] and after[3] == before[3]  # metadata and the file source
    prefix = "0:" if version == 2 else ""
    # the partition order Spark wrote is kept; compact JSON as json4s writes it
    assert after[2] == prefix + '{"orders":{"2":300,"1":150,"0":100},"payments":{"0":10}}'
    assert [(c.source, c.key, c.before, c.after, c.delta) for c in changes] == \
        [("0", "orders:1", 200, 150, -50), ("0", "payments:0", 7, 10, 3)]
    assert changes[0].effect == "replays 50 records of partition orders:1"
    assert changes[1].effect == "skips 3 records of partition payments:0"


def test_a_topic_key_moves_every_partition_and_edits_compose_in_order():
    out, changes = edit_offsets(entry(KAFKA), "o", sets("orders=1000") + shifts("orders:0=-1"))
    assert offsets_of(out)[0] == {"orders": {"2": 1000, "1": 1000, "0": 999},
                                  "payments": {"0": 7}}
    assert {c.key: (c.before, c.after) for c in changes} == {
        "orders:2": (300, 1000), "orders:1": (200, 1000), "orders:0": (100, 999)}


def test_star_and_a_source_prefix_address_one_source():
    out, changes = edit_offsets(entry(KAFKA, '{"offset":30,"timestamp":4000}'), "o",
                                shifts("0/*=-5"))
    assert offsets_of(out)[0] == {"orders": {"2": 295, "1": 195, "0": 95}, "payments": {"0": 2}}
    assert offsets_of(out)[1] == {"offset": 30, "timestamp": 4000}
    assert {c.source for c in changes} == {"0"}
    with pytest.raises(BadInput, match=r"matches sources 0, 1: prefix the key with SOURCE/"):
        edit_offsets(entry(KAFKA, '{"offset":30,"timestamp":4000}'), "o", shifts("*=-5"))


def test_rate_micro_batch_and_bare_number_offsets():
    out, changes = edit_offsets(entry('{"offset":30,"timestamp":4000}', "17"), "o",
                                shifts("offset=-10") + sets("1/*=12"))
    assert offsets_of(out) == [{"offset": 20, "timestamp": 4000}, 12]
    assert [c.effect for c in changes] == ["replays 10 rows", "moves by -5"]
    assert [source_kind(o) for o in offsets_of(out)] == ["rate-micro-batch", "number"]


def test_file_source_log_offset_is_bounded_by_the_log_the_target_keeps():
    data = entry(FILE)
    out, changes = edit_offsets(data, "o", shifts("logOffset=-6"), file_log_ends={"0": 5},
                                describe=lambda c: "6 files")
    assert offsets_of(out) == [{"logOffset": -1}]
    assert changes[0].effect == "re-reads the files of log entries 0…5 (6 files)"
    with pytest.raises(BadInput, match=r"would be -2; a file source's logOffset is -1"):
        edit_offsets(data, "o", shifts("logOffset=-7"), file_log_ends={"0": 5})
    with pytest.raises(BadInput, match=r"past the newest entry of its log \(sources/0/5\)"):
        edit_offsets(data, "o", sets("logOffset=6"), file_log_ends={"0": 5})


@pytest.mark.parametrize(("edits", "message"), [
    (sets("orders:9=1"), r"'orders:9=1': matches no offset in o \(keys: 0/orders:2, "),
    (sets("clicks=1"), r"matches no offset"),
    (shifts("orders:0=-101"), r"would be -1; a Kafka offset cannot be negative"),
    (sets("3/orders=1"), r"no source '3' with an offset in o \(sources: 0\)"),
])
def test_impossible_edits_are_refused_in_one_line(edits, message):
    with pytest.raises(BadInput, match=message) as caught:
        edit_offsets(entry(KAFKA), "o", edits)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ("orders:0", r"expected \[SOURCE/\]KEY=INTEGER"),
    ("orders:0=ten", r"'ten' is not an integer"),
    ("orders:=5", r"empty key"),
    ("=5", r"expected"),
])
def test_malformed_arguments_are_refused(text, message):
    with pytest.raises(BadInput, match=message):
        parse_edit(text, shift=False)


def test_no_change_is_not_reported_and_a_void_source_is_left_alone():
    out, changes = edit_offsets(entry(KAFKA, "-"), "o", sets("payments:0=7"))
    assert changes == [] and out == entry(KAFKA, "-")


def kafka_checkpoint(tmp_path):
    """The rollback test layout with a Kafka source (0) next to the file source (1)."""
    root = rollback_source(tmp_path)
    (root / "sources" / "0").rename(root / "sources" / "1")
    for batch in range(7):
        path = root / "offsets" / str(batch)
        head = path.read_text().split("\n")[:2]
        kafka = json.dumps({"orders": {"1": 100 * batch + 50, "0": 100 * batch}},
                           separators=(",", ":"))
        path.write_text("\n".join([*head, kafka, json.dumps({"logOffset": batch})]))
    return root


def test_cli_dry_run_diff_then_target_with_the_new_offsets(tmp_path, capsys):
    from statekit.cli.main import cli
    from statekit.cli.runner import run_cli

    root = kafka_checkpoint(tmp_path)
    before = tree_hash(root)

    def statekit(*args):
        code = run_cli(cli, "statekit", ["rollback", str(root), *args, "--force"])
        out = capsys.readouterr()
        return code, out.out, out.err

    dst = tmp_path / "dst"
    args = ["--out", str(dst), "--shift-by", "orders:0=-250", "--set-offset", "1/logOffset=2"]
    code, out, _ = statekit(*args, "--dry-run", "--json")
    assert code == 0 and not dst.exists()
    plan = json.loads(out)["plan"]
    assert plan["batch"] == 5  # no --to-batch: the last committed batch, only offsets change
    assert [(c["source"], c["key"], c["before"], c["after"]) for c in plan["offset_changes"]] \
        == [("0", "orders:0", 500, 250), ("1", "logOffset", 5, 2)]
    assert plan["offset_changes"][1]["effect"] == \
        "re-reads the files of log entries 3…5 (3 files)"
    code, out, _ = statekit(*args, "--dry-run")
    assert code == 0 and "replays 250 records of partition orders:0" in out
    code, out, _ = statekit(*args, "--no-verify", "--json")
    assert code == 0
    target = open_checkpoint(str(dst))
    assert target.last_committed_batch == 5
    written = [json.loads(s.offset) for s in target.ledger.offsets[5].sources]
    assert written == [{"orders": {"1": 550, "0": 250}}, {"logOffset": 2}]
    # offsets/4 is the start of the getBatch Spark calls on restart: lowered to match
    assert [json.loads(s.offset) for s in target.ledger.offsets[4].sources] == \
        [{"orders": {"1": 450, "0": 250}}, {"logOffset": 2}]
    assert [(c["key"], c["before"], c["after"]) for c in
            json.loads(out)["plan"]["offsets_lowered"]] == [("orders:0", 400, 250),
                                                            ("logOffset", 4, 2)]
    assert (dst / "offsets" / "3").read_bytes() == (root / "offsets" / "3").read_bytes()
    code, _, err = statekit("--out", str(tmp_path / "x"), "--set-offset", "orders:7=1")
    assert code == 3 and "matches no offset" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()
    assert tree_hash(root) == before
