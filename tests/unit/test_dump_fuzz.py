"""``statekit dump`` on damaged real state files, through the CLI entry point (no JVM).

Real files pyspark wrote, copied into checkpoint layouts (decoded with the store's schema) or
into a plain folder (shown as hex), are damaged two ways: in their bytes (bad copies, cuts:
the codec's checksums or the record framing must catch them) and in their records before
compression (what a writer with bad memory leaves: valid checksums, odd rows, including the
NaN and infinite doubles Spark itself stores). Then ``statekit dump FILE`` and
``statekit dump FILE --json`` must, as ``docs/reference/exit-codes.md`` promises:

* exit 0, or a documented code of a read failure (3 bad input, 4 corrupt, 5 unsupported;
  1 would be a bug) — the same for both forms;
* on failure print exactly one stderr line, ``statekit: error: <the damaged file>: …``;
* on success print nothing on stderr, and with ``--json`` strict JSON lines (no NaN), one per
  record, as many as the table counts;
* write nothing: the checkpoint's (or the folder's) files and bytes stay as they were.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import fsspec
import pytest
import zstandard
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from statekit.formats.compression import open_decompressed
from statekit.formats.records import iter_store_records
from statekit.support.errors import EXIT_BAD_INPUT, EXIT_CORRUPT, EXIT_UNSUPPORTED
from tests.support.builders import hdfs_checkpoint
from tests.support.cli import run, strict_json
from tests.support.trees import tree_hash
from tests.unit.checkpoint_builder import operator_metadata_text, write_checkpoint
from tests.unit.formats.builders import END, delete, lz4_stream, put

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "formats"
EXIT_CODES_DOC = REPO / "docs" / "reference" / "exit-codes.md"
READ_FAILURES = {EXIT_BAD_INPUT, EXIT_CORRUPT, EXIT_UNSUPPORTED}
"""What reading a damaged file may exit with (1, an internal error, is a bug)."""
ERROR = re.compile(r"statekit: error: (?P<message>[^\n]+)\n")


@dataclass(frozen=True)
class Target:
    tree: str
    source: str
    """The real file, relative to ``DATA``."""
    damaged: str
    """Where it sits in the tree: the file damaged."""
    dumped: str
    """The file given to ``statekit dump``."""
    codec: str | None = None
    """Set for the HDFS files whose records are damaged too (re-compressed with it)."""


_SST = "000008-9f559adc-3374-4fc2-8b23-b38fa7294449.sst"
_V3 = "aipws_rocksdb_changelog_v3/3_5b44b956-cdff-4d48-91e3-b1a87d476696.changelog"
TARGETS = {
    "hdfs delta": Target("hdfs", "aipws_hdfs/8.delta", "state/0/0/8.delta",
                         "state/0/0/8.delta", "lz4"),
    "hdfs snapshot": Target("hdfs", "aipws_hdfs/9.snapshot", "state/0/0/9.snapshot",
                            "state/0/0/9.snapshot", "lz4"),
    "types snapshot": Target("types", "agg_types/3.snapshot", "state/0/0/3.snapshot",
                             "state/0/0/3.snapshot", "lz4"),
    "zstd delta": Target("zstd", "agg_zstd/2.delta", "state/0/0/2.delta", "state/0/0/2.delta",
                         "zstd"),
    "rocksdb zip": Target("rocksdb", "rocksdb_sst/window_lz4/1.zip", "state/0/0/1.zip",
                          "state/0/0/1.zip"),
    "rocksdb sst": Target("rocksdb", f"rocksdb_sst/window_lz4/SSTs/{_SST}",
                          f"state/0/0/SSTs/{_SST}", "state/0/0/1.zip"),
    "loose changelog v2": Target("loose", "tws_rocksdb/1.changelog", "1.changelog",
                                 "1.changelog"),
    "loose changelog v3": Target("loose", _V3, "3.changelog", "3.changelog"),
    "loose zstd changelog": Target("loose", "agg_rocksdb_changelog_v1/1.zstd.changelog",
                                   "1.zstd.changelog", "1.zstd.changelog"),
    "loose snapshot": Target("loose", "aipws_hdfs/9.snapshot", "9.snapshot", "9.snapshot"),
}


def documented_exit_codes() -> set[int]:
    return {int(code) for code in re.findall(r"^\|\s*(\d+)\s*\|", EXIT_CODES_DOC.read_text(),
                                             re.MULTILINE)}


# --- the trees the files sit in ---------------------------------------------------------------

def _hdfs_layout(root: Path, folder: str, codec: str, names: list[str], planned: int) -> Path:
    """A one-partition HDFS checkpoint holding real files of ``DATA/folder`` and its schema."""
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=planned, committed=planned,
                     partitions=1, crc=False, codec=codec)
    (root / "state/0/_metadata/metadata").write_text(
        operator_metadata_text(name="stateStoreSave", partitions=1))
    state = root / "state/0/0"
    for old in state.glob("*.delta"):
        old.unlink()
    for name in names:
        shutil.copy(DATA / folder / name, state / name)
    shutil.copy(DATA / folder / "schema", state / "_metadata/schema")
    return root


def _rocksdb_layout(root: Path) -> Path:
    """Version 1 of a real RocksDB store: its zip, its one SST, its schema."""
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=1, committed=1, partitions=1,
                     provider="rocksdb", crc=False)
    (root / "state/0/_metadata/metadata").write_text(
        operator_metadata_text(name="stateStoreSave", partitions=1))
    shutil.rmtree(root / "state/0/0")  # the builder's zips: another store's
    (root / "state/0/0/SSTs").mkdir(parents=True)
    (root / "state/0/0/_metadata").mkdir()
    shutil.copy(DATA / "rocksdb_sst/window_lz4/schema", root / "state/0/0/_metadata/schema")
    return _place(root, "rocksdb")


def _loose_folder(root: Path) -> Path:
    """State files outside any checkpoint (codec sniffed, records shown as hex)."""
    root.mkdir()
    return _place(root, "loose")


def _place(root: Path, tree: str) -> Path:
    for target in TARGETS.values():
        if target.tree == tree:
            shutil.copy(DATA / target.source, root / target.damaged)
    return root


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("dump_fuzz")
    return {
        "hdfs": hdfs_checkpoint(base / "hdfs"),
        "types": _hdfs_layout(base / "types", "agg_types", "lz4", ["3.snapshot"], 3),
        "zstd": _hdfs_layout(base / "zstd", "agg_zstd", "zstd",
                             ["1.delta", "2.delta", "3.snapshot"], 3),
        "rocksdb": _rocksdb_layout(base / "rocksdb"),
        "loose": _loose_folder(base / "loose"),
    }


# --- damage -----------------------------------------------------------------------------------

ORIGINALS = {name: (DATA / target.source).read_bytes() for name, target in TARGETS.items()}


def _records(name: str) -> list[tuple[bytes, bytes | None]]:
    target = TARGETS[name]
    assert target.codec is not None
    stream = open_decompressed(io.BytesIO(ORIGINALS[name]), target.codec, path=name)
    return [(r.key, r.value) for r in iter_store_records(stream, path=name)]


RECORDS = {name: _records(name) for name, t in TARGETS.items() if t.codec is not None}
SPECIAL_SLOTS = [
    b"\x00\x00\xc0\x7f\x00\x00\xf8\x7f",  # a NaN double; its low half a NaN float
    struct.pack("<d", float("inf")), struct.pack("<d", float("-inf")),
    b"\x00\x00\x80\x7f\x00\x00\x00\x00",  # an infinite float
    b"\xff" * 8,
]


def damage_bytes(data: bytes, ops: list[tuple]) -> bytes:
    out = bytearray(data)
    for kind, pos, arg in ops:
        pos %= max(len(out), 1)
        if kind == "flip" and out:
            out[pos] ^= 1 << arg
        elif kind == "byte" and out:
            out[pos] = arg
        elif kind == "truncate":
            del out[pos:]
        elif kind == "insert":
            out[pos:pos] = arg
        elif kind == "delete":
            del out[pos : pos + arg]
    return bytes(out)


def damage_row(row: bytes, op: tuple) -> bytes:
    kind, pos, arg = op
    out = bytearray(row)
    if kind == "slot":  # field ``pos`` not null, its 8-byte slot set to ``SPECIAL_SLOTS[arg]``
        at = 8 + 8 * pos  # after one word of null bits: every schema here has < 64 fields
        if at + 8 <= len(out):
            out[pos // 8] &= ~(1 << (pos % 8)) & 0xFF
            out[at : at + 8] = SPECIAL_SLOTS[arg]
        return bytes(out)
    return damage_bytes(row, [op])


def damaged_file(name: str, layer: str, ops: list[tuple]) -> bytes:
    """The target's real file with ``ops`` applied to its bytes, or to its records (then
    re-compressed as Spark compresses, so every checksum holds)."""
    if layer == "bytes":
        return damage_bytes(ORIGINALS[name], ops)
    records = list(RECORDS[name])
    for index, part, op in ops:
        key, value = records[index % len(records)]
        if part == "key":
            key = damage_row(key, op)
        elif value is not None:
            value = damage_row(value, op)
        records[index % len(records)] = (key, value)
    body = b"".join(delete(k) if v is None else put(k, v) for k, v in records) + END
    if TARGETS[name].codec == "lz4":
        return lz4_stream(body)
    compressor = zstandard.ZstdCompressor().compressobj()
    return compressor.compress(body) + compressor.flush()


BYTE_OP = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 14), st.integers(0, 7)),
    st.tuples(st.just("byte"), st.integers(0, 1 << 14), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 14), st.none()),
    st.tuples(st.just("insert"), st.integers(0, 1 << 14), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 14), st.integers(1, 16)),
)
ROW_OP = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 256), st.integers(0, 7)),
    st.tuples(st.just("byte"), st.integers(0, 256), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 256), st.none()),
    st.tuples(st.just("slot"), st.integers(0, 20), st.integers(0, len(SPECIAL_SLOTS) - 1)),
)


@st.composite
def damage(draw, name: str):
    """``(layer, ops)`` for target ``name``."""
    if TARGETS[name].codec is not None and draw(st.booleans()):
        ops = draw(st.lists(st.tuples(st.integers(0, 1000), st.sampled_from(["key", "value"]),
                                      ROW_OP), min_size=1, max_size=3))
        return "records", ops
    return "bytes", draw(st.lists(BYTE_OP, min_size=1, max_size=3))


# --- the property -----------------------------------------------------------------------------

def test_the_codes_a_read_may_fail_with_are_documented():
    assert documented_exit_codes() >= READ_FAILURES | {0}


def dump_damaged(trees: dict[str, Path], name: str, layer: str, ops: list[tuple]):
    """Damage the target's file, run both dumps, restore the file; check the outcome."""
    target = TARGETS[name]
    root = trees[target.tree]
    damaged, dumped = root / target.damaged, root / target.dumped
    original = damaged.read_bytes()
    damaged.write_bytes(damaged_file(name, layer, ops))
    try:
        before = tree_hash(root)
        code, out, err = run(["dump", dumped])
        json_code, json_out, json_err = run(["dump", dumped, "--json"])
        assert tree_hash(root) == before, "dump wrote or changed files beside its input"
    finally:
        damaged.write_bytes(original)

    assert (code, err) == (json_code, json_err), "the table and --json disagree"
    assert code == 0 or code in READ_FAILURES, (code, err)
    if code != 0:
        found = ERROR.fullmatch(err)
        assert found, f"not one 'statekit: error:' line: {err!r}"
        assert found["message"].startswith(f"{damaged}: "), err
        assert found["message"].strip() != f"{damaged}:"
    else:
        assert err == ""
        assert out.endswith(f"\n{len(json_out.splitlines())} records\n"), out[-200:]
    # --json: complete, strict JSON lines (those printed before a failure too)
    records = [strict_json(line) for line in json_out.splitlines()]
    for record in records:
        assert isinstance(record, dict) and set(record) == {"op", "key", "value"}, record
        assert record["op"] in ("put", "delete", "merge")
        assert (record["value"] is None) == (record["op"] == "delete"), record
    return code, err, records


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_dump_of_a_damaged_state_file(trees, name, data):
    layer, ops = data.draw(damage(name))
    code, _, _ = dump_damaged(trees, name, layer, ops)
    event(f"{layer} damaged: exit {code}")


def test_dump_of_an_undamaged_file(trees):
    code, err, records = dump_damaged(trees, "types snapshot", "bytes", [])
    assert (code, err, len(records)) == (0, "", 78)  # README: 78 rows


def test_a_nan_double_is_null_in_json(trees):
    """agg_types' value field 8 is ``sum:double`` (avg's sum; ``sum#3`` once names are
    unique): NaN there, as Spark stores a NaN average, is shown as null."""
    code, _, records = dump_damaged(trees, "types snapshot", "records",
                                    [(0, "value", ("slot", 8, 0))])
    assert code == 0 and records[0]["value"]["sum#3"] is None


@pytest.mark.parametrize(("name", "layer", "ops", "what"), [
    ("hdfs snapshot", "bytes", [("flip", 100, 3)], "lz4 stream: block checksum mismatch"),
    ("rocksdb sst", "bytes", [("truncate", 3000, None)], ""),
    ("rocksdb zip", "bytes", [("truncate", 1000, None)], ""),
    ("zstd delta", "bytes", [("truncate", 40, None)], "zstd stream: truncated frame"),
])
def test_known_damage(trees, name, layer, ops, what):
    code, err, _ = dump_damaged(trees, name, layer, ops)
    assert code == EXIT_CORRUPT and what in err
