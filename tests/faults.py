"""The fault corpus: ways a real checkpoint gets damaged, each applied to a fresh copy.

Every fault names the file or folder it damages (relative to the checkpoint), the finding
``statekit report --decode`` must show, and the exit code the commands that compute from the
checkpoint (growth, recovery) must stop with — 0 where the damage is history only (a
warning) or where a command does not read what was damaged. tests/unit/test_fault_corpus.py
runs each through every JVM-free command on frozen checkpoints the reference pipeline really
wrote (tests/data/fault_corpus); tests/spark/test_fault_corpus.py through the Spark-backed ones
on the checkpoints it writes at test time.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from statekit.checkpoint import open_checkpoint

OK, BAD_INPUT, CORRUPT, UNSUPPORTED = 0, 3, 4, 5


@dataclass(frozen=True)
class Facts:
    """What a fault needs to know about the pristine checkpoint."""

    last: int
    """Last committed batch (restart loads version last + 1)."""
    restart_files: tuple[str, ...]
    """Partition 1's files a restart reads, relative to the checkpoint, oldest first."""
    partitions: int
    restart_ssts: tuple[str, ...] = ()
    """RocksDB: the SSTs partition 1's restart zip lists, relative."""


def strip_zips(checkpoint: Path) -> None:
    """The fault corpus's ``changelog`` checkpoint: a RocksDB changelog checkpoint as before
    maintenance ever uploaded a zip (a young query, or a maintenance task that cannot keep
    up) — every ``*.zip``, its ``.crc`` and the ``SSTs/`` folders removed, so the restart
    replays the changelogs from version 1."""
    for path in [*checkpoint.rglob("*.zip"), *checkpoint.rglob(".*.zip.crc"),
                 *checkpoint.rglob("SSTs")]:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def facts_of(root: Path) -> Facts:
    from statekit.checkpoint.state_data import zip_metadata, zip_sst_paths

    ckpt = open_checkpoint(str(root))
    last = ckpt.last_committed_batch
    assert last is not None
    instance = ckpt.inventory.instances[(0, "default", 1)]
    files = instance.files_to_load(last + 1)
    assert files, "partition 1 must be loadable in the pristine checkpoint"
    ssts: list[str] = []
    zips = [f for f in files if f.kind == "zip"]
    if zips:
        meta = zip_metadata(ckpt, zips)[zips[0].path]
        ssts = [os.path.relpath(p, root) for p in zip_sst_paths(ckpt, zips[0], meta)]
    return Facts(last, tuple(os.path.relpath(f.path, root) for f in files),
                 ckpt.latest_offset.shuffle_partitions or 0, tuple(ssts))


@dataclass(frozen=True)
class Fault:
    name: str
    apply: Callable[[Path, Facts], str]
    """Damages the copy at the given root; returns the damaged path, relative."""
    finding: str
    """The code of the finding ``report --decode`` shows."""
    code: int
    """Exit code of growth/recovery (0: they may succeed)."""
    checkpoints: tuple[str, ...] = ("hdfs", "changelog")
    """Which pristine checkpoints it applies to: ``hdfs`` (deltas and snapshots),
    ``changelog`` (RocksDB with changelogs), ``zips`` (RocksDB, a zip per version)."""
    names: tuple[str, ...] = ()
    """Paths an error may name instead of the damaged one (e.g. the state file a damaged
    conf makes unreadable)."""
    read_only: bool = False
    """Found only by reading file contents: plain ``report`` may miss it, ``--decode`` may
    not; recovery (which does not read whole files) may exit 0 with its "not verified"
    note."""
    everywhere: bool = False
    """Every command stops with ``code`` (the checkpoint cannot be opened at all)."""
    severity: str = "error"
    requires: tuple[str, ...] = field(default=())
    """Restart-path file kinds the pristine checkpoint must have for this fault."""


# ----------------------------------------------------------------------------- helpers
def _write(root: Path, rel: str, data: bytes | str) -> str:
    path = root / rel
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return rel


def _replace_with_dir(root: Path, rel: str) -> str:
    (root / rel).unlink()
    (root / rel).mkdir()
    return rel


def _replace_with_symlink(root: Path, rel: str, target: str = "nowhere") -> str:
    (root / rel).unlink()
    (root / rel).symlink_to(target)
    return rel


def _replace_with_fifo(root: Path, rel: str) -> str:
    (root / rel).unlink()
    os.mkfifo(root / rel)
    return rel


def _edit_offsets(root: Path, batch: int, edit: Callable[[dict], None]) -> str:
    rel = f"offsets/{batch}"
    lines = (root / rel).read_text().split("\n")
    meta = json.loads(lines[1])
    edit(meta)
    lines[1] = json.dumps(meta)
    (root / rel).write_text("\n".join(lines))
    return rel


def _set_conf(key: str, value: str, every: bool = False) -> Callable[[Path, Facts], str]:
    def apply(root: Path, facts: Facts) -> str:
        batches = sorted(int(p.name) for p in (root / "offsets").iterdir() if p.name.isdigit())
        for batch in (batches if every else batches[-1:]):
            rel = _edit_offsets(root, batch, lambda m: m["conf"].__setitem__(key, value))
        return rel
    return apply


def _truncate(rel_of: Callable[[Facts], str], keep: float) -> Callable[[Path, Facts], str]:
    def apply(root: Path, facts: Facts) -> str:
        rel = rel_of(facts)
        data = (root / rel).read_bytes()
        (root / rel).write_bytes(data[:int(len(data) * keep)])
        return rel
    return apply


def _zero_middle(rel_of: Callable[[Facts], str]) -> Callable[[Path, Facts], str]:
    def apply(root: Path, facts: Facts) -> str:
        rel = rel_of(facts)
        data = bytearray((root / rel).read_bytes())
        middle = len(data) // 2
        for i in range(middle, min(len(data) - 4, middle + 16)):
            data[i] ^= 0xFF
        (root / rel).write_bytes(bytes(data))
        return rel
    return apply


def _newest(kind: str) -> Callable[[Facts], str]:
    def rel_of(facts: Facts) -> str:
        found = [f for f in facts.restart_files if f.endswith("." + kind)]
        assert found, f"no .{kind} on the restart path of {facts.restart_files}"
        return found[-1]
    return rel_of


def _recompress_zstd(root: Path, facts: Facts) -> str:
    """The newest change file re-compressed with zstd (as if copied from a zstd query)."""
    import zstandard

    from statekit.formats.compression import open_decompressed

    rel = next(f for f in reversed(facts.restart_files) if f.endswith((".delta", ".changelog")))
    with open(root / rel, "rb") as raw:
        plain = open_decompressed(raw, "lz4", path=rel).read()
    (root / rel).write_bytes(zstandard.ZstdCompressor().compress(plain))
    crc = (root / rel).parent / f".{(root / rel).name}.crc"
    crc.unlink(missing_ok=True)  # no checksum file to give it away: only the codec can
    return rel


def _garbage_checksum_file(root: Path, facts: Facts) -> str:
    data = Path(facts.restart_files[-1])
    rel = str(data.parent / f".{data.name}.crc")
    size = (root / rel).stat().st_size  # the same size: only reading it shows the damage
    return _write(root, rel, random.Random(5).randbytes(size))


def _deep_json(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def _last(facts: Facts) -> int:
    return facts.last


def _later_than_now(timestamp_ms: int, ahead_ms: int) -> int:
    """``ahead_ms`` after the batch's timestamp or this machine's clock, whichever is later:
    "in the future" is judged against the clock, and a frozen checkpoint's batches (the
    JVM-free corpus) get older every day."""
    return max(timestamp_ms, int(time.time() * 1000)) + ahead_ms


def names_damage(line: str, root: Path, fault: Fault, rel: str, restart: str = "") -> bool:
    """Whether ``line`` names the damaged path ``rel`` under ``root`` (or one of the paths the
    fault lets an error name instead; ``<restart>``: partition 1's newest restart file)."""
    names = [rel, *(restart if n == "<restart>" else n for n in fault.names)]
    return any(f"{root}/{name}" in line or f"{root}/{name.rstrip('/')}" in line
               for name in names if name)


# ----------------------------------------------------------------------------- the corpus
def _commit(facts: Facts) -> str:
    return f"commits/{facts.last}"


def _offsets(facts: Facts) -> str:
    return f"offsets/{facts.last}"


FAULTS: list[Fault] = [
    # commits/
    Fault("commit-empty", lambda r, f: _write(r, _commit(f), b""), "corrupt-log", CORRUPT),
    Fault("commit-garbage", lambda r, f: _write(r, _commit(f), "v1\n{garbage"), "corrupt-log",
          CORRUPT),
    Fault("commit-v99", lambda r, f: _write(r, _commit(f), 'v99\n{"nextBatchWatermarkMs":0}'),
          "corrupt-log", UNSUPPORTED),
    Fault("commit-version-only", lambda r, f: _write(r, _commit(f), "v1\n"), "corrupt-log",
          CORRUPT),
    Fault("commit-not-utf8", lambda r, f: _write(r, _commit(f), b"v1\n\xff\xfe\x00garbage"),
          "corrupt-log", CORRUPT),
    Fault("commit-not-an-object", lambda r, f: _write(r, _commit(f), "v1\n[1,2]"),
          "corrupt-log", CORRUPT),
    Fault("commit-half-written", _truncate(_commit, 0.6), "corrupt-log", CORRUPT),
    Fault("commit-is-a-folder", lambda r, f: _replace_with_dir(r, _commit(f)), "odd-log-entry",
          CORRUPT),
    Fault("commit-dangling-symlink", lambda r, f: _replace_with_symlink(r, _commit(f)),
          "odd-log-entry", CORRUPT),
    Fault("commit-is-a-fifo", lambda r, f: _replace_with_fifo(r, _commit(f)), "odd-log-entry",
          CORRUPT),
    Fault("commit-without-offsets",
          lambda r, f: _write(r, f"commits/{f.last + 1}", (r / _commit(f)).read_bytes()),
          "commit-without-offsets", CORRUPT),
    Fault("commit-old-garbage", lambda r, f: _write(r, "commits/1", "v1\n{oops"),
          "corrupt-log", OK, severity="warning"),
    Fault("commit-gap", lambda r, f: (os.remove(r / f"commits/{f.last - 2}"),
                                      "commits")[1], "log-gap", OK, severity="warning"),
    Fault("commits-folder-missing", lambda r, f: (shutil.rmtree(r / "commits"), "commits")[1],
          "missing-log", BAD_INPUT),
    # offsets/
    Fault("offsets-version-only", lambda r, f: _write(r, _offsets(f), "v1"), "corrupt-log",
          CORRUPT),
    Fault("offsets-empty", lambda r, f: _write(r, _offsets(f), b""), "corrupt-log", CORRUPT),
    Fault("offsets-invalid-json", lambda r, f: _write(r, _offsets(f), 'v1\n{"conf":\n-'),
          "corrupt-log", CORRUPT),
    Fault("offsets-v99", lambda r, f: _write(r, _offsets(f), "v99\n{}\n-"), "corrupt-log",
          UNSUPPORTED),
    Fault("offsets-not-utf8", lambda r, f: _write(r, _offsets(f), os.urandom(64) + b"\xff"),
          "corrupt-log", CORRUPT),
    Fault("offsets-half-written", _truncate(_offsets, 0.5), "corrupt-log", CORRUPT),
    Fault("offsets-no-source-line",
          lambda r, f: _write(r, _offsets(f), "\n".join(
              (r / _offsets(f)).read_text().split("\n")[:2])), "corrupt-log", CORRUPT),
    Fault("offsets-deeply-nested-conf",
          lambda r, f: _write(r, _offsets(f), f'v1\n{{"conf":{_deep_json()}}}\n-'),
          "corrupt-log", CORRUPT),
    Fault("offsets-deeply-nested-source",
          lambda r, f: _write(r, _offsets(f), "\n".join(
              [*(r / _offsets(f)).read_text().split("\n")[:2], _deep_json()])),
          "corrupt-log", CORRUPT),
    Fault("offsets-source-not-json",
          lambda r, f: _write(r, _offsets(f), "\n".join(
              [*(r / _offsets(f)).read_text().split("\n")[:2], '{"logOffset":'])),
          "corrupt-log", CORRUPT),
    Fault("offsets-is-a-folder", lambda r, f: _replace_with_dir(r, _offsets(f)),
          "odd-log-entry", CORRUPT),
    Fault("offsets-dangling-symlink", lambda r, f: _replace_with_symlink(r, _offsets(f)),
          "odd-log-entry", CORRUPT),
    Fault("offsets-symlink-loop",
          lambda r, f: _replace_with_symlink(r, _offsets(f), os.path.basename(_offsets(f))),
          "odd-log-entry", CORRUPT),
    Fault("offsets-folder-missing", lambda r, f: (shutil.rmtree(r / "offsets"), "offsets")[1],
          "missing-log", BAD_INPUT),
    Fault("offsets-batch-id-beyond-64-bits",
          lambda r, f: _write(r, "offsets/99999999999999999999",
                              (r / _offsets(f)).read_bytes()),
          "not-a-batch", OK, severity="warning"),
    Fault("offsets-old-garbage", lambda r, f: _write(r, "offsets/1", "v1\n{oops\n-"),
          "corrupt-log", OK, severity="warning"),
    Fault("offsets-gap", lambda r, f: (os.remove(r / f"offsets/{f.last - 3}"), "offsets")[1],
          "log-gap", OK, severity="warning"),
    Fault("clock-skew-backwards",
          lambda r, f: _edit_offsets(r, f.last, lambda m: m.__setitem__(
              "batchTimestampMs", m["batchTimestampMs"] - 86_400_000)),
          "clock-skew", OK, severity="warning"),
    Fault("clock-skew-future",
          lambda r, f: _edit_offsets(r, f.last, lambda m: m.__setitem__(
              "batchTimestampMs", _later_than_now(m["batchTimestampMs"], 30 * 86_400_000))),
          "clock-skew", OK, severity="warning"),
    Fault("watermark-backwards",
          lambda r, f: _edit_offsets(r, f.last, lambda m: m.__setitem__(
              "batchWatermarkMs", -1)),
          "watermark-backwards", OK, severity="warning"),
    Fault("uncommitted-batch",
          lambda r, f: _write(r, f"offsets/{f.last + 1}", (r / _offsets(f)).read_bytes()),
          "uncommitted-batch", OK, severity="warning"),
    Fault("unfinished-repartition",
          lambda r, f: _edit_offsets(
              r, int(_write(r, f"offsets/{f.last + 1}", (r / _offsets(f)).read_bytes())
                     .rsplit("/", 1)[1]),
              lambda m: m["conf"].__setitem__("spark.sql.shuffle.partitions", "7")),
          "unfinished-repartition", CORRUPT),
    # pinned confs
    Fault("conf-partitions-not-a-number",
          _set_conf("spark.sql.shuffle.partitions", "lots"), "bad-conf", CORRUPT),
    Fault("conf-partitions-disagree-with-metadata",
          lambda r, f: (_set_conf("spark.sql.shuffle.partitions", "16", every=True)(r, f),
                        "state/0/_metadata")[1], "partition-mismatch", CORRUPT),
    Fault("conf-codec-snappy",
          _set_conf("spark.sql.streaming.stateStore.compression.codec", "snappy"),
          "unsupported-codec", UNSUPPORTED),
    Fault("conf-codec-nonsense",
          _set_conf("spark.sql.streaming.stateStore.compression.codec", "brotli9"),
          "unsupported-codec", UNSUPPORTED),
    Fault("conf-codec-zstd-files-lz4",
          _set_conf("spark.sql.streaming.stateStore.compression.codec", "zstd", every=True),
          "damaged-file", CORRUPT, read_only=True, names=("state/0/",)),
    # metadata
    Fault("metadata-missing", lambda r, f: (os.remove(r / "metadata"), "metadata")[1],
          "", BAD_INPUT, everywhere=True),
    Fault("metadata-garbage", lambda r, f: _write(r, "metadata", "{not json"), "", CORRUPT,
          everywhere=True),
    Fault("metadata-empty", lambda r, f: _write(r, "metadata", b""), "", CORRUPT,
          everywhere=True),
    Fault("metadata-is-a-folder",
          lambda r, f: (os.remove(r / "metadata"), os.mkdir(r / "metadata"), "metadata")[2],
          "", CORRUPT, everywhere=True),
    Fault("operator-metadata-garbage",
          lambda r, f: _write(r, "state/0/_metadata/metadata", "v1\n{oops"),
          "corrupt-metadata", CORRUPT),
    Fault("schema-file-garbage",
          lambda r, f: _write(r, "state/0/0/_metadata/schema", os.urandom(40)),
          "corrupt-schema", CORRUPT),
    # partitions
    Fault("partition-folder-missing",
          lambda r, f: (shutil.rmtree(r / "state/0/3"), "state/0/3")[1],
          "missing-partitions", CORRUPT),
    Fault("partition-folder-emptied",
          lambda r, f: ([os.remove(p) for p in (r / "state/0/2").rglob("*") if p.is_file()],
                        "state/0/2")[1], "missing-partitions", CORRUPT),
    Fault("partition-extra",
          lambda r, f: (shutil.copytree(r / "state/0/1", r / f"state/0/{f.partitions}"),
                        f"state/0/{f.partitions}")[1], "extra-partitions", CORRUPT),
    Fault("partitions-pinned-without-metadata",
          lambda r, f: (os.remove(r / "state/0/_metadata/metadata"),
                        _set_conf("spark.sql.shuffle.partitions", "8", every=True)(r, f),
                        f"state/0/{f.partitions}")[2], "missing-partitions", CORRUPT),
    # state files on the restart path
    Fault("change-file-missing",
          lambda r, f: (os.remove(r / f.restart_files[-1]), "state/0/1")[1],
          "cannot-load", CORRUPT),
    Fault("change-file-truncated", _truncate(lambda f: f.restart_files[-1], 0.5),
          "damaged-file", CORRUPT, read_only=True),
    Fault("change-file-empty", _truncate(lambda f: f.restart_files[-1], 0.0),
          "damaged-file", CORRUPT, read_only=True),
    Fault("change-file-bytes-flipped", _zero_middle(lambda f: f.restart_files[-1]),
          "damaged-file", CORRUPT, read_only=True),
    Fault("change-file-zstd-in-lz4-checkpoint", _recompress_zstd, "damaged-file", CORRUPT,
          read_only=True, requires=("delta", "changelog")),
    Fault("change-file-is-a-fifo", lambda r, f: _replace_with_fifo(r, f.restart_files[-1]),
          "not-a-file", CORRUPT),
    Fault("changelog-bytes-flipped", _zero_middle(_newest("changelog")), "damaged-file",
          CORRUPT, checkpoints=("changelog",), read_only=True),
    Fault("change-file-dangling-symlink",
          lambda r, f: _replace_with_symlink(r, f.restart_files[-1]), "not-a-file", CORRUPT),
    Fault("state-symlink-loop",
          lambda r, f: (os.symlink("loop", r / "state/0/1/loop"), "state/0/1/loop")[1],
          "not-a-file", CORRUPT),
    # Hadoop ignores a checksum file whose header is damaged (Spark reads the data): warning
    Fault("checksum-file-garbage", _garbage_checksum_file, "damaged-file", CORRUPT,
          read_only=True, severity="warning"),
    # a damaged snapshot with an intact older chain: Spark 4.3 repairs it (a warning)
    Fault("snapshot-truncated", _truncate(_newest("snapshot"), 0.5), "damaged-file", CORRUPT,
          checkpoints=("hdfs",), read_only=True, severity="warning"),
    Fault("snapshot-bytes-flipped", _zero_middle(_newest("snapshot")), "damaged-file",
          CORRUPT, checkpoints=("hdfs",), read_only=True, severity="warning"),
    Fault("zip-truncated", _truncate(_newest("zip"), 0.5), "damaged-file", CORRUPT,
          checkpoints=("zips",), read_only=True),
    Fault("zip-sst-missing",
          lambda r, f: (os.remove(r / f.restart_ssts[-1]), "state/0/1")[1], "cannot-load",
          CORRUPT, checkpoints=("zips",)),
    Fault("sst-bytes-flipped", _zero_middle(lambda f: f.restart_ssts[-1]), "damaged-file",
          CORRUPT, checkpoints=("zips",), read_only=True),
    Fault("zip-bytes-flipped", _zero_middle(_newest("zip")), "damaged-file", CORRUPT,
          checkpoints=("zips",), read_only=True),
    Fault("changelog-truncated", _truncate(_newest("changelog"), 0.5), "damaged-file",
          CORRUPT, checkpoints=("changelog",), read_only=True),
]

CASES: list[tuple[Fault, str]] = [(fault, name) for fault in FAULTS for name in fault.checkpoints]
"""Every (fault, pristine checkpoint) pair the corpus runs."""
CASE_IDS = [f"{fault.name}@{name}" for fault, name in CASES]
