"""The decode cache (statekit.state.decode_cache) without a JVM: entries and identities, and
that verdicts and growth replays read from it are the ones decoding gives — on healthy and
damaged real state files, in one process and in forked workers.

Every test keeps its cache in its own folder (``STATEKIT_CACHE_DIR``). Files written by a
test are younger than the cache's "racily clean" window, so the tests that want them cached
set :data:`RACY_SECONDS` to 0 and wait a moment before changing a file (as a file changed
within the window would be, see :func:`test_a_file_changed_just_now_has_no_identity`).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
import zlib
from dataclasses import replace
from pathlib import Path

import fsspec
import pytest

import statekit.state.decode_cache as decode_cache
import statekit.state.history as history
import statekit.state.partition_replay as partition_replay
import statekit.state.replay_records as replay_records
import statekit.state.verify as verify
import statekit.state.workers as partition_workers
import statekit.state.zip_history as zip_history
from statekit.checkpoint import open_checkpoint
from statekit.state.decode_cache import DecodeCache, sweep
from statekit.state.history import all_histories
from statekit.state.verify import first_damaged, verify_restart_path
from tests.support.builders import REAL_HDFS, hdfs_checkpoint
from tests.unit.checkpoint_builder import REAL_SCHEMA_FILE, operator_metadata_text, write_checkpoint

WINDOW_ROCKSDB = REAL_SCHEMA_FILE.parent.parent / "rocksdb_sst" / "window_lz4"  # zips 1-7


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache folder of the test's own; files count as settled at once."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("STATEKIT_CACHE_DIR", str(folder))
    monkeypatch.delenv("STATEKIT_DECODE_CACHE", raising=False)
    monkeypatch.setattr(decode_cache, "RACY_SECONDS", 0.0)
    return folder / "decode"


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*/*.json")) if folder.exists() else []


def hadoop_crc(data: bytes) -> bytes:
    return b"crc\0" + struct.pack(">i", 512) + b"".join(
        struct.pack(">I", zlib.crc32(data[at:at + 512])) for at in range(0, len(data), 512))


def checksummed(tmp_path: Path) -> Path:
    """Three partitions of real HDFS files with their Hadoop ``.crc``: partition 0 restarts
    from snapshot 6 and deltas 7-9, partitions 1 and 2 from snapshot 9."""
    root = hdfs_checkpoint(tmp_path, partitions=3)
    (root / "state/0/0/9.snapshot").unlink()
    for path in (root / "state").rglob("*"):
        if path.suffix in (".delta", ".snapshot"):
            (path.parent / f".{path.name}.crc").write_bytes(hadoop_crc(path.read_bytes()))
    return root


def rocksdb(tmp_path: Path) -> Path:
    """One partition holding a real RocksDB store's zips and SSTs (no changelogs)."""
    root = tmp_path / "rocks"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=7, committed=7,
                     partitions=1, provider="rocksdb", crc=False)
    (root / "state/0/_metadata/metadata").write_text(
        operator_metadata_text(name="stateStoreSave", partitions=1))
    shutil.rmtree(root / "state/0/0")
    shutil.copytree(WINDOW_ROCKSDB, root / "state/0/0",
                    ignore=shutil.ignore_patterns("expected.json", "schema"))
    return root


def settle() -> None:
    """Let the filesystem's clock move on before a file is changed (its ctime moves then)."""
    time.sleep(0.05)


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def verdict(root: Path) -> verify.Verification:
    return replace(verify_restart_path(open_checkpoint(str(root))), elapsed_s=0.0)


def uncached(root: Path, monkeypatch, compute=verdict):
    with monkeypatch.context() as patch:
        patch.setenv("STATEKIT_DECODE_CACHE", "0")
        return compute(root)


@pytest.fixture
def decoded(monkeypatch) -> list[str]:
    """The names of the files verification decodes (not takes from the cache)."""
    seen: list[str] = []
    real = verify._verify_file

    def spy(ckpt, file, data=None):
        seen.append(file.name)
        return real(ckpt, file, data)

    monkeypatch.setattr(verify, "_verify_file", spy)
    return seen


# -- entries and identities ---------------------------------------------------------------------

def test_an_entry_is_kept_under_its_key_and_a_release_never_reads_another_ones(
        cache, tmp_path, monkeypatch):
    ckpt = open_checkpoint(str(hdfs_checkpoint(tmp_path)))
    store = DecodeCache.of(ckpt)
    key = store.key("test", 1, [2, "three"])
    assert store.get(key) is None
    store.put(key, {"answer": [42, None]})
    assert store.get(key) == {"answer": [42, None]}
    assert entries(cache) == [cache / key[:2] / f"{key}.json"]
    assert not list(cache.glob("*/.tmp-*"))  # written beside, then renamed
    assert store.key("test", 1, [2, "three"]) == key
    assert store.key("test", 1, [2, "four"]) != key
    monkeypatch.setattr(decode_cache, "CACHE_FORMAT", decode_cache.CACHE_FORMAT + 1)
    assert store.key("test", 1, [2, "three"]) != key
    monkeypatch.undo()
    monkeypatch.setattr(decode_cache, "__version__", "999.0")
    assert store.key("test", 1, [2, "three"]) != key


def test_a_rewritten_file_has_another_identity_even_with_its_old_size_and_mtime(
        cache, tmp_path):
    root = hdfs_checkpoint(tmp_path)
    path = root / "state/0/0/8.delta"
    size = path.stat().st_size
    ckpt = open_checkpoint(str(root))
    before = DecodeCache.of(ckpt).identity(str(path), size)
    assert before is not None and DecodeCache.of(ckpt).identity(str(path), size) == before
    stamp = path.stat().st_mtime_ns
    settle()
    path.write_bytes(path.read_bytes())  # the same bytes again: a rewrite all the same
    os.utime(path, ns=(stamp, stamp))
    assert DecodeCache.of(ckpt).identity(str(path), size) not in (None, before)
    # listed at another size than it has now: changed since the listing, no identity
    assert DecodeCache.of(ckpt).identity(str(path), size + 1) is None
    assert DecodeCache.of(ckpt).identity(str(path) + ".gone", size) is None


def test_a_file_changed_just_now_has_no_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("STATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = hdfs_checkpoint(tmp_path)  # written just now: within RACY_SECONDS
    path = root / "state/0/0/8.delta"
    store = DecodeCache.of(open_checkpoint(str(root)))
    assert store.identity(str(path), path.stat().st_size) is None
    old = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(old, old))  # an old mtime does not help: the ctime is new
    assert DecodeCache.of(open_checkpoint(str(root))).identity(
        str(path), path.stat().st_size) is None
    verify_restart_path(open_checkpoint(str(root)))
    assert entries(tmp_path / "cache/decode") == []  # nothing kept for unsettled files


def test_a_corrupt_entry_is_a_miss(cache, tmp_path, monkeypatch, decoded):
    root = checksummed(tmp_path)
    healthy = verdict(root)
    kept = {e: json.loads(e.read_text())["value"] for e in entries(cache)}
    whole = [e for e, value in kept.items() if isinstance(value, list)]
    files = [e for e, value in kept.items() if isinstance(value, dict)]
    assert len(whole) == 1 and len(files) == 6  # the whole path, and each of its files
    whole[0].write_text("[1, 2")
    for entry in files[:2]:
        entry.write_text('{"key": "x", "value": {"problem": nul')
    for entry in files[2:4]:
        entry.write_text(json.dumps({"key": entry.stem, "value": {"problem": {"bad": 1}}}))
    files[4].write_bytes(b"")
    decoded.clear()
    assert verdict(root) == healthy
    assert len(decoded) == 5  # the five unreadable entries were decoded again, and rewritten
    decoded.clear()
    assert verdict(root) == healthy and decoded == []
    assert healthy == uncached(root, monkeypatch)
    whole[0].write_text(json.dumps({"key": whole[0].stem, "value": ["6", None]}))
    decoded.clear()
    assert verdict(root) == healthy and decoded == []  # (from the files' entries)


def test_a_cache_folder_that_cannot_be_written_only_stops_the_writing(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("STATEKIT_CACHE_DIR", str(blocker / "cache"))  # mkdir fails
    monkeypatch.setattr(decode_cache, "RACY_SECONDS", 0.0)
    root = checksummed(tmp_path)
    expected = uncached(root, monkeypatch)
    assert verdict(root) == expected
    (history_,) = all_histories(open_checkpoint(str(root)))
    assert [history_] == uncached(root, monkeypatch,
                                  lambda r: all_histories(open_checkpoint(str(r))))
    store = DecodeCache.of(open_checkpoint(str(root)))
    store.put("ab" * 32, [1])
    assert store.get("ab" * 32) is None


def test_turned_off_by_the_environment(cache, tmp_path, monkeypatch):
    root = checksummed(tmp_path)
    for off in ("0", "off", "false", "no"):
        monkeypatch.setenv("STATEKIT_DECODE_CACHE", off)
        assert DecodeCache.of(open_checkpoint(str(root))) is None
        verify_restart_path(open_checkpoint(str(root)))
        all_histories(open_checkpoint(str(root)))
        assert not cache.exists()
    monkeypatch.setenv("STATEKIT_DECODE_CACHE", "1")
    assert DecodeCache.of(open_checkpoint(str(root))) is not None


def test_no_cache_on_memory_filesystems(cache):
    fs = fsspec.filesystem("memory")
    write_checkpoint(fs, "/dc-memory", planned=3, committed=3)
    try:
        assert DecodeCache.of(open_checkpoint("memory:///dc-memory")) is None
    finally:
        fs.rm("/dc-memory", recursive=True)


def test_sweeps_delete_the_least_recently_used_entries_beyond_the_bound(cache, tmp_path):
    store = DecodeCache.of(open_checkpoint(str(hdfs_checkpoint(tmp_path))))
    keys = [store.key("sweep", n) for n in range(20)]
    for age, key in enumerate(keys):
        store.put(key, "x" * 3000)
        stamp = time.time() - 10_000 + age
        os.utime(cache / key[:2] / f"{key}.json", (stamp, stamp))
    (cache / keys[0][:2] / ".tmp-left-by-a-killed-writer").write_text("")
    os.utime(cache / keys[0][:2] / ".tmp-left-by-a-killed-writer", (0, 0))
    used = sum(e.stat().st_blocks * 512 for e in entries(cache))
    deleted, left = sweep(cache, used // 2)
    assert deleted >= 10 and left <= used // 2 * decode_cache.KEEP_FRACTION
    kept = {e.stem for e in entries(cache)}
    assert kept == set(keys[deleted:])  # the oldest went first
    assert not list(cache.glob("*/.tmp-*"))
    assert sweep(cache, used) == (0, left)


def test_a_write_sweeps_at_most_every_so_often(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("STATEKIT_DECODE_CACHE_MB", "0")  # everything is beyond the bound
    monkeypatch.setattr(decode_cache, "_next_sweep", 0.0)
    store = DecodeCache.of(open_checkpoint(str(hdfs_checkpoint(tmp_path))))
    store.put(store.key("a"), 1)
    assert entries(cache) == [] and (cache / ".swept").exists()  # swept at once
    store.put(store.key("b"), 1)
    assert len(entries(cache)) == 1  # not again within SWEEP_EVERY_S
    monkeypatch.setattr(decode_cache, "_next_sweep", 0.0)
    store.put(store.key("c"), 1)
    assert len(entries(cache)) == 2  # another process swept a moment ago (the marker)


# -- verdicts ----------------------------------------------------------------------------------

def test_verdicts_from_the_cache_equal_decoding_on_healthy_and_damaged_files(
        cache, tmp_path, monkeypatch, decoded):
    root = checksummed(tmp_path)
    state = root / "state/0"
    cold = verdict(root)
    assert cold.ok and cold.files == 6 and sorted(decoded) == sorted(
        ["6.snapshot", "7.delta", "8.delta", "9.delta", "9.snapshot", "9.snapshot"])
    decoded.clear()
    assert verdict(root) == cold and decoded == []
    assert cold == uncached(root, monkeypatch)

    settle()
    truncate(state / "0/8.delta", 700)  # Spark fails on it
    flip(state / "1/9.snapshot", 3000)  # an lz4 block checksum: repaired from snapshot 6
    crc = state / "2/.9.snapshot.crc"
    crc.write_bytes(crc.read_bytes()[:4] + b"\xff\xff\xff\xff" + crc.read_bytes()[8:])
    decoded.clear()
    damaged = verdict(root)
    assert sorted(decoded) == ["8.delta", "9.snapshot", "9.snapshot"]  # only what changed
    assert damaged == uncached(root, monkeypatch)
    assert [(Path(d.path).name, d.repaired_from, d.checksum_only) for d in damaged.damaged] \
        == [("8.delta", None, False), ("9.snapshot", 6, False), (".9.snapshot.crc", None, True)]
    decoded.clear()
    assert verdict(root) == damaged and decoded == []

    settle()
    shutil.copy(REAL_HDFS / "8.delta", state / "0/8.delta")  # restored: decoded afresh
    decoded.clear()
    assert [d.path for d in verdict(root).damaged] == [d.path for d in damaged.damaged[1:]]
    assert decoded == ["8.delta"]
    settle()
    flip(state / "0/7.delta", 100)  # same size, new bytes
    decoded.clear()
    again = verdict(root)
    assert decoded == ["7.delta"]  # (8.delta and 9.delta come after the damage)
    assert again == uncached(root, monkeypatch) and again.damaged[0].path.endswith("7.delta")


def test_first_damaged_takes_and_keeps_verdicts_too(cache, tmp_path, monkeypatch, decoded):
    root = checksummed(tmp_path)
    ckpt = open_checkpoint(str(root))
    chain = ckpt.inventory.instance(0, "default", 0).files_to_load(9)
    settle()
    flip(root / "state/0/0/9.delta", 60)
    ckpt = open_checkpoint(str(root))
    found = first_damaged(ckpt, chain)
    assert found is not None and found == uncached(
        root, monkeypatch, lambda r: first_damaged(open_checkpoint(str(r)), chain))
    decoded.clear()
    assert first_damaged(open_checkpoint(str(root)), chain) == found and decoded == []


def test_a_zip_verdict_is_kept_with_the_ssts_it_lists(cache, tmp_path, monkeypatch, decoded):
    root = rocksdb(tmp_path)
    cold = verdict(root)
    assert cold.ok and cold.files > 1  # the zip and its SSTs
    decoded.clear()
    assert verdict(root) == cold and decoded == []
    assert cold == uncached(root, monkeypatch)

    ssts = sorted((root / "state/0/0/SSTs").iterdir())
    settle()
    flip(ssts[-1], 100)  # an SST's bytes change, the zip's do not: decoded afresh
    decoded.clear()
    flipped = verdict(root)
    assert decoded == ["7.zip"] and flipped == uncached(root, monkeypatch)
    assert not flipped.ok
    decoded.clear()
    assert verdict(root) == flipped and decoded == []
    ssts[-1].unlink()  # and when it is gone
    decoded.clear()
    gone = verdict(root)
    assert decoded == ["7.zip"] and gone == uncached(root, monkeypatch)
    assert "missing" in gone.damaged[0].message


# -- growth replays ----------------------------------------------------------------------------

def histories(root: Path) -> list[history.StoreHistory]:
    return all_histories(open_checkpoint(str(root)))


@pytest.fixture
def replayed(monkeypatch) -> list[int]:
    """The partitions whose files the growth replay decodes."""
    seen: list[int] = []
    real = partition_replay._apply

    def spy(rep, records, version, acc, no_timeout, **kw):
        seen.append(rep.partition)
        return real(rep, records, version, acc, no_timeout, **kw)

    monkeypatch.setattr(partition_replay, "_apply", spy)
    return seen


def test_a_partition_result_and_a_store_history_survive_their_json_exactly(cache, tmp_path):
    root = hdfs_checkpoint(tmp_path, partitions=2)
    ckpt = open_checkpoint(str(root))
    plans = [history._plan(i, 9) for i in ckpt.inventory.instances_of(0)]
    result = partition_replay._replay_group(ckpt, plans, 6, 9, 6, None)
    assert replay_records.result_of(json.loads(json.dumps(replay_records.result_json(result)))) \
        == result
    (whole,) = all_histories(ckpt)
    kept = (whole.versions, whole.partition_keys, whole.touch_counts,
            [(5, 1, 2**64 - 1)], {2**64 - 1: (b"\x00key", b"value\xff")})
    assert replay_records.merged_of(json.loads(json.dumps(replay_records.merged_json(kept)))) \
        == kept
    assert replay_records.result_of({"partials": "nonsense"}) is None
    assert replay_records.merged_of(None) is None
    zipped = (whole.versions, whole.partition_keys, 3, 6, ("a note",),
              [(1, b"\x00k", b""), (2, b"key", b"\xffvalue")], None)
    assert replay_records.zip_kept_of(
        json.loads(json.dumps(replay_records.zip_kept_json(zipped)))) == zipped
    assert replay_records.zip_kept_of({"versions": [[1]]}) is None


def test_growth_replays_from_the_cache_equal_replaying(cache, tmp_path, monkeypatch, replayed):
    root = hdfs_checkpoint(tmp_path, partitions=3)
    cold = histories(root)
    assert sorted(set(replayed)) == [0, 1, 2]
    assert len(entries(cache)) == 4  # one per partition, one for the store
    replayed.clear()
    warm = histories(root)
    assert warm == cold and replayed == []
    assert cold == uncached(root, monkeypatch, histories)
    assert warm[0].oldest_keys and warm[0].oldest_keys == cold[0].oldest_keys

    # the store's entry gone: the partitions' entries remain, nothing is replayed
    replayed.clear()
    (store_entry,) = [e for e in entries(cache)
                      if "versions" in json.loads(e.read_text())["value"]]
    store_entry.unlink()
    assert histories(root) == cold and replayed == []

    settle()  # one partition's delta rewritten: that partition alone is replayed
    delta = root / "state/0/1/8.delta"
    delta.write_bytes(delta.read_bytes())
    assert histories(root) == cold and sorted(set(replayed)) == [1]


def test_a_changed_delta_changes_the_replayed_history(cache, tmp_path, monkeypatch, replayed):
    root = hdfs_checkpoint(tmp_path, partitions=2)
    before = histories(root)
    settle()
    shutil.copy(REAL_HDFS / "7.delta", root / "state/0/0/9.delta")  # other records
    replayed.clear()
    after = histories(root)
    assert set(replayed) == {0}
    assert after == uncached(root, monkeypatch, histories) and after != before


def test_forked_workers_keep_each_partition_once(cache, tmp_path, monkeypatch, replayed):
    root = hdfs_checkpoint(tmp_path, partitions=4)
    alone = uncached(root, monkeypatch, histories)
    monkeypatch.setattr(partition_workers, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(partition_workers, "usable_cpus", lambda: 2)
    assert histories(root) == alone
    assert len(entries(cache)) == 5  # four partitions (kept by whoever replayed them) + store
    replayed.clear()
    assert histories(root) == alone and replayed == []
    verified = uncached(root, monkeypatch)
    assert verdict(root) == verified == verdict(root)


def test_a_rocksdb_history_from_zips_is_kept_only_when_it_read_whole(cache, tmp_path,
                                                                     monkeypatch):
    root = rocksdb(tmp_path)
    reads: list[int] = []
    real = zip_history.readable_zip_metadata

    def spy(ckpt, files):
        reads.append(len(files))
        return real(ckpt, files)

    monkeypatch.setattr(zip_history, "readable_zip_metadata", spy)
    cold = histories(root)
    assert cold[0].method == "zip-metadata" and cold[0].history_starts_at == 1 and reads == [7]
    assert histories(root) == cold and reads == [7]  # from the cache: no zip read
    assert cold == uncached(root, monkeypatch, histories)

    settle()
    flip(sorted((root / "state/0/0/SSTs").iterdir())[-1], 100)  # the contents do not read
    reads.clear()
    damaged = histories(root)
    assert damaged == uncached(root, monkeypatch, histories) != cold
    assert any("SST contents not read" in n for n in damaged[0].notes)
    reads.clear()
    assert histories(root) == damaged and reads == [7]  # not kept: read again


def test_remembered_keeps_a_result_for_these_very_files(cache, tmp_path):
    from statekit.state.decode_cache import remembered

    root = hdfs_checkpoint(tmp_path)
    calls: list[int] = []

    def answer(ckpt):
        instance = ckpt.inventory.instance(0, "default", 0)
        files = instance.of_kind("delta")
        return remembered(ckpt, "test-sizes", files,
                          lambda: calls.append(1) or (sum(f.size for f in files), b"\x01"),
                          "v1", dump=lambda r: [r[0], r[1].hex()],
                          load=lambda d: (int(d[0]), bytes.fromhex(d[1])))

    first = answer(open_checkpoint(str(root)))
    assert answer(open_checkpoint(str(root))) == first and len(calls) == 1
    settle()
    (root / "state/0/0/7.delta").write_bytes((root / "state/0/0/7.delta").read_bytes())
    assert answer(open_checkpoint(str(root))) == first and len(calls) == 2


def test_a_healthy_restart_path_read_before_is_one_entry(cache, tmp_path, monkeypatch):
    root = checksummed(tmp_path)
    cold = verdict(root)
    looked: list[int] = []
    real = verify._verify_instance
    monkeypatch.setattr(verify, "_verify_instance",
                        lambda *a, **kw: looked.append(1) or real(*a, **kw))
    assert verdict(root) == cold and looked == []
    settle()
    crc = root / "state/0/1/.9.snapshot.crc"
    crc.write_bytes(crc.read_bytes())  # a checksum file rewritten: the path is looked at again
    assert verdict(root) == cold and len(looked) == 4  # 3 looked up, 1 of them decoded


def test_growth_fits_read_from_the_cache_equal_fitting(cache, monkeypatch):
    """The fits of a history seen before come from the cache, field for field — a fitted
    leak test included — and a history that differs in one count is fitted afresh."""
    import statekit.growth.saturation as saturation
    from statekit.growth.population import DiscoveryPoint

    points = tuple(DiscoveryPoint(v, 1000 + 40 * v, 60 - v, 200) for v in range(1, 40))
    touches = tuple(max(1, 400 - 9 * k) for k in range(30))
    fitted = []
    real = saturation._fit_discovery
    monkeypatch.setattr(saturation, "_fit_discovery",
                        lambda *a: fitted.append(a) or real(*a))
    first = saturation.fit_discovery(points, 2600, touches)
    saturation.fit_discovery.cache_clear()  # a new process: only the disk remembers
    again = saturation.fit_discovery(points, 2600, touches)
    assert len(fitted) == 1 and again == first
    assert not isinstance(first, str) and first.touches is not None
    saturation.fit_discovery.cache_clear()
    other = saturation.fit_discovery((*points[:-1], replace(points[-1], inserted=1)), 2600,
                                     touches)
    assert len(fitted) == 2 and other != first
    assert saturation._fit_from_json(json.loads(json.dumps(
        saturation._fit_to_json("too few")))) == "too few"


def test_workers_keep_entries_in_the_callers_folder_whatever_they_started_with(
        cache, tmp_path, monkeypatch):
    """A fork server's workers keep the environment the server started with; the work they
    are handed names the caller's cache folder, so their entries land there."""
    root = hdfs_checkpoint(tmp_path, partitions=2)
    ckpt = open_checkpoint(str(root))
    parent = DecodeCache.of(ckpt)
    assert parent is not None and parent.root == str(cache)
    monkeypatch.setenv("STATEKIT_CACHE_DIR", str(tmp_path / "the-servers-environment"))
    monkeypatch.setenv("STATEKIT_DECODE_CACHE", "0")
    handed = DecodeCache.of(ckpt, parent.root)
    assert handed is not None and handed.root == parent.root
    work = verify._VerifyGroup(ckpt.last_committed_batch + 1, parent.root)
    items = [(key, ckpt.inventory.instances[key].files_to_load(work.version))
             for key in sorted(ckpt.inventory.instances)]
    assert work(ckpt, items, None)[0] > 0
    assert entries(cache) and not (tmp_path / "the-servers-environment").exists()
