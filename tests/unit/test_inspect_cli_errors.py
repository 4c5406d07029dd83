"""Bad input through the real CLI entry point, without a JVM: exact one-line errors, codes."""

from __future__ import annotations

import os

import fsspec
import pytest

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from tests.unit.checkpoint_builder import write_checkpoint

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "formats")


def invoke(args, capsys) -> tuple[int, str]:
    code = run_cli(cli, "statekit", [str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("url", "code", "message"), [
    ("gs://bucket/ck", 7, "gs://bucket/ck: reading gs:// locations needs gcsfs"),
    ("hdfs://namenode:8020/ck", 7, "hdfs://namenode:8020/ck: cannot open hdfs:// locations "
                                   "here"),
    ("nosuch://x/y", 3, "nosuch://x/y: cannot open this location: Protocol not known"),
])
def test_unusable_locations(url, code, message, capsys):
    result, err = invoke(["report", url], capsys)
    assert result == code
    assert err.startswith(f"statekit: error: {message}") and err.count("\n") == 1


def test_unknown_compression_is_unsupported_not_a_crash(tmp_path, capsys):
    ck = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(ck), planned=2, committed=2)
    bogus = ck / "state/0/1/2.delta"
    bogus.write_bytes(b"\x82SNAPPY\x00" + os.urandom(64))
    code, err = invoke(["dump", bogus], capsys)  # Spark decodes it with the pinned lz4: fails
    assert code == 4 and err.startswith(f"statekit: error: {bogus}: ")
    assert "snappy" in err and "pins lz4" in err and err.count("\n") == 1
    for offsets in (ck / "offsets").iterdir():  # a query pinning snappy: unsupported
        offsets.write_text(offsets.read_text().replace('codec": "lz4"', 'codec": "snappy"'))
    code, err = invoke(["dump", bogus], capsys)
    assert code == 5 and err.startswith(f"statekit: error: {bogus}: ")
    assert "snappy" in err and err.count("\n") == 1
    loose = tmp_path / "7.delta"
    loose.write_bytes(os.urandom(100))
    code, err = invoke(["dump", loose], capsys)
    assert (code, err) == (5, f"statekit: error: {loose}: unknown compression (neither lz4 "
                              "block stream nor zstd)\n")


def test_dump_of_other_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    code, err = invoke(["dump", tmp_path / "notes.txt"], capsys)
    assert (code, err) == (5, f"statekit: error: {tmp_path}/notes.txt: not a .delta, "
                              ".snapshot or .changelog file\n")
    code, err = invoke(["dump", tmp_path / "9.delta"], capsys)
    assert (code, err) == (3, f"statekit: error: {tmp_path}/9.delta: no such file\n")


def test_a_real_golden_delta_dumps_as_hex_outside_a_checkpoint(capsys):
    path = os.path.join(DATA, "aipws_hdfs", "8.delta")
    assert run_cli(cli, "statekit", ["dump", path, "--json", "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all('"key": "' in line for line in lines)


def test_ls_errors_name_what_exists(tmp_path, capsys):
    ck = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(ck), planned=2, committed=2)
    code, err = invoke(["ls", ck, "--partition", 9], capsys)
    assert (code, err) == (3, f"statekit: error: {ck}: no files for operator 0 store default "
                              "partition 9 (partitions: [0, 1, 2, 3])\n")
    code, err = invoke(["ls", ck, "--operator", 4, "--partition", 0], capsys)
    assert (code, err) == (3, f"statekit: error: {ck}: no state for operator 4 (operators: "
                              "[0])\n")


def test_every_command_has_help_text():
    from click import Context

    ctx = Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command.help and len(command.help) > 20, name
