"""Data files are paired with their Hadoop ``.crc`` while the listing is classified.

An object store lists a checksum before its data file (``.5.delta.crc`` sorts before
``5.delta``), so the inventory builder pairs most files as they arrive; what arrives in
another order (a local listing, another chunk) is paired when the inventory is built. Both
must give what pairing every data file at the end gives, in any order the chunks come in.
"""

from __future__ import annotations

import random

import fsspec

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.inventory import InventoryBuilder, StateInventory
from statekit.formats.checksum_files import hadoop_crc_size
from statekit.report.checkpoint_report import build_report
from tests.unit.checkpoint_builder import write_checkpoint

PREFIX = "b/ck/state/"


def _listing() -> tuple[list[tuple[str, int]], set[str]]:
    """A listing with every kind of data file (common names, checkpoint-v2 names, SSTs, a
    named store), some with a wrong-sized ``.crc``, some without one; and which are wrong."""
    generator = random.Random(3)
    objects: list[tuple[str, int]] = []
    wrong: set[str] = set()
    names = [f"{v}.delta" for v in range(1, 9)] + ["9.snapshot", "4_0a1b2c3d-aaaa.delta",
                                                     "SSTs/000007-4f2e.sst", "3.zip"]
    for part in range(3):
        for folder in (f"{PREFIX}0/{part}", f"{PREFIX}1/{part}/right"):
            for name in names:
                path = f"{folder}/{name}"
                size = generator.randint(0, 3000)
                objects.append((path, size))
                if generator.random() < 0.15:
                    continue  # no checksum file
                crc = hadoop_crc_size(size)
                if generator.random() < 0.2:
                    crc += 4
                    wrong.add(path)
                where, _, leaf = path.rpartition("/")
                objects.append((f"{where}/.{leaf}.crc", crc))
    objects.append((f"{PREFIX}0/0/.gone.delta.crc", 12))  # a checksum without its data file
    return sorted(objects), wrong


def _build(chunks: list[list[tuple[str, int]]]) -> StateInventory:
    builder = InventoryBuilder(PREFIX)
    for chunk in chunks:
        builder.add(chunk)
    return builder.build()


def test_pairing_does_not_depend_on_the_order_of_the_listing():
    objects, wrong = _listing()
    in_order = _build([objects])  # as an object store lists: checksums first
    expected = [f for f in in_order.all_files() if f.path in wrong]
    sizes = in_order.checksum_sizes
    with_crc = [f for f in in_order.all_files()
                if f"{f.path.rpartition('/')[0]}/.{f.path.rpartition('/')[2]}.crc" in sizes]
    assert len(expected) == len(wrong) > 5
    assert list(in_order.hadoop_checksum_mismatches) == expected
    assert in_order.hadoop_checksums_checked == len(with_crc)

    generator = random.Random(11)
    for _ in range(20):
        shuffled = objects[:]
        generator.shuffle(shuffled)
        cuts = sorted(generator.sample(range(1, len(shuffled)), 6))
        chunks = [shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(shuffled)],
                                                strict=True)]
        generator.shuffle(chunks)
        other = _build(chunks)
        assert other.hadoop_checksum_mismatches == in_order.hadoop_checksum_mismatches
        assert other.hadoop_checksums_checked == in_order.hadoop_checksums_checked
    reversed_order = _build([objects[::-1]])  # every data file before its checksum
    assert reversed_order.hadoop_checksum_mismatches == in_order.hadoop_checksum_mismatches


def test_without_checksum_files_nothing_is_checked():
    objects, _ = _listing()
    plain = _build([[o for o in objects if not o[0].endswith(".crc")]])
    assert plain.hadoop_checksums_checked == 0 and plain.hadoop_checksum_mismatches == ()


def test_report_names_the_first_data_file_whose_size_does_not_fit_its_checksum(tmp_path):
    root = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=6, committed=6,
                     partitions=4, snapshots=[3])
    clean = build_report(open_checkpoint(str(root)))
    assert "size-mismatch" not in {f.code for f in clean.findings}
    grown = root / "state/0/2/5.delta"  # its .crc (12 bytes) records one 512-byte chunk
    grown.write_bytes(grown.read_bytes() + b"\0" * 600)
    (root / "state/0/1/2.delta").write_bytes(b"\0" * 700)  # older, before the snapshot
    report = build_report(open_checkpoint(str(root)))
    found = [f for f in report.findings if f.code == "size-mismatch"]
    assert len(found) == 1
    assert found[0].severity == "error"  # 5.delta is read on restart
    assert found[0].partitions == (1, 2)
    assert str(grown) in found[0].message and "1 of them are read on restart" in found[0].message
