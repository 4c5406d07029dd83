"""``statekit doctor`` against Spark itself: every prediction is checked by a real restart.

Three checkpoints are written by a real query (deduplication into a Parquet file sink,
HDFS, RocksDB with a zip per version, RocksDB with changelogs), over four input files, one
per batch. Each fault below damages a copy the way production checkpoints get damaged;
then
1. ``statekit doctor --json`` must name the fault and predict the restart (Spark's error,
   or that it restarts) and say whether it has a fix, with the documented exit code;
2. Spark restarts the damaged copy on a fifth input file: it must fail exactly as
   predicted, or run;
3. the printed fix command is run as printed; the source is not written; and the query
   restarted on the command's new checkpoint runs and commits the fifth file's batch.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import zipfile
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.cli.runner import run_cli
from tests.support.cli import statekit_cli
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]

RESTARTS = None
JSON_ERROR = r"Unexpected (character|end-of-input)"
"""Jackson's message for a log entry that is not JSON (Spark gives no error class)."""


def _confs(kind: str) -> dict[str, str]:
    from tests.small_queries import provider_confs

    confs = provider_confs("hdfs" if kind == "hdfs" else "rocksdb", "lz4")
    confs["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] = str(
        kind == "changelog").lower()
    confs["spark.sql.shuffle.partitions"] = "2"
    return confs


def _restart(spark, checkpoint: Path, sink: Path, input_dir: Path, kind: str) -> str | None:
    """Run the query on ``checkpoint`` to the end of its input; Spark's error, or None."""
    from statekit.jobs.state_reader import session_confs
    from tests.conftest import quiesce
    from tests.small_queries import EVENT_DDL

    df = (spark.readStream.schema(EVENT_DDL + ", seq LONG").option("maxFilesPerTrigger", 1)
          .json(str(input_dir)).dropDuplicates(["key", "bucket", "day"])
          .select("key", "bucket", "day", "value"))
    try:
        with session_confs(spark, _confs(kind)):
            query = (df.writeStream.format("parquet").option("path", str(sink))
                     .outputMode("append").option("checkpointLocation", str(checkpoint))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
    except Exception as error:  # Spark's failure is the observation
        return str(error)
    finally:
        quiesce(spark, str(checkpoint))
    return None


@dataclass
class Sources:
    root: Path
    input_dir: Path

    def copy(self, kind: str, to: Path) -> tuple[Path, Path]:
        shutil.copytree(self.root / kind, to)
        return to / "checkpoint", to / "out"


@pytest.fixture(scope="module")
def sources(spark, tmp_path_factory):
    from tests.small_queries import _write_input, make_rows

    root = tmp_path_factory.mktemp("doctor")
    input_dir = root / "input"
    _write_input(input_dir, make_rows(seed=23))
    for kind in ("hdfs", "zips", "changelog"):
        assert _restart(spark, root / kind / "checkpoint", root / kind / "out", input_dir,
                        kind) is None
    # the restarts below read one more file: a batch that must load the state
    extra = make_rows(seed=29)[0]
    (input_dir / "part-900.json").write_text("".join(json.dumps(r) + "\n" for r in extra))
    return Sources(root, input_dir)


# ------------------------------------------------------------------------------ the faults
def _last(ckpt: Path) -> int:
    return max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())


def _remove(path: Path) -> None:
    path.unlink()
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():
        crc.unlink()


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():
        crc.unlink()


def _restart_path(ckpt: Path, partition: int = 1) -> list[Path]:
    """The data files a restart of ``partition`` loads, per statekit's own model."""
    model = open_checkpoint(str(ckpt))
    instance = model.inventory.instances[(0, "default", partition)]
    return [Path(f.path) for f in instance.files_to_load(_last(ckpt) + 1)]


def missing_delta(ckpt: Path, _out: Path) -> str:
    delta = [f for f in _restart_path(ckpt) if f.suffix == ".delta"][-1]
    _remove(delta)
    return str(delta)


def truncated_delta(ckpt: Path, _out: Path) -> str:
    delta = [f for f in _restart_path(ckpt) if f.suffix == ".delta"][-1]
    _write(delta, delta.read_bytes()[: delta.stat().st_size // 2])
    return str(delta)


def missing_sst(ckpt: Path, _out: Path) -> str:
    """An SST the restart's zip lists and no older zip does."""
    zips = sorted((ckpt / "state/0/1").glob("*.zip"), key=lambda p: int(p.stem))

    def ssts(z: Path) -> set[str]:
        text = zipfile.ZipFile(z).read("metadata").decode().split("\n", 1)[1]
        return {s["dfsSstFileName"] for s in json.loads(text)["sstFiles"]}

    newest = [f for f in _restart_path(ckpt) if f.suffix == ".zip"][-1]
    own = ssts(newest) - set().union(*(ssts(z) for z in zips if int(z.stem) < int(newest.stem)))
    assert own, "the restart zip must own an SST"
    sst = ckpt / "state/0/1/SSTs" / sorted(own)[0]
    _remove(sst)
    return str(sst)


def missing_changelog(ckpt: Path, _out: Path) -> str:
    """The newest version's changelog (and a zip of it, if the upload came first)."""
    version = _last(ckpt) + 1
    folder = ckpt / "state/0/1"
    if (folder / f"{version}.zip").exists():
        _remove(folder / f"{version}.zip")
    _remove(folder / f"{version}.changelog")
    return str(folder / f"{version}.changelog")


def missing_metadata(ckpt: Path, _out: Path) -> str:
    _remove(ckpt / "metadata")
    return str(ckpt / "metadata")


def offsets_gap(ckpt: Path, _out: Path) -> str:
    path = ckpt / f"offsets/{_last(ckpt) - 1}"
    _remove(path)
    return str(path)


def corrupt_commit(ckpt: Path, _out: Path) -> str:
    path = ckpt / f"commits/{_last(ckpt)}"
    _write(path, b'v1\n{"nextBatchWatermarkMs":')
    return str(path)


def corrupt_uncommitted_offsets(ckpt: Path, _out: Path) -> str:
    last = _last(ckpt)
    _remove(ckpt / f"commits/{last}")
    _write(ckpt / f"offsets/{last}", b"v1\n{garbage")
    return str(ckpt / f"offsets/{last}")


def unfinished_repartition(ckpt: Path, _out: Path) -> str:
    last = _last(ckpt)
    text = (ckpt / f"offsets/{last}").read_text()
    pinned = '"spark.sql.shuffle.partitions":"2"'
    assert pinned in text
    path = ckpt / f"offsets/{last + 1}"
    path.write_text(text.replace(pinned, pinned.replace('"2"', '"4"')))
    return str(path)


def commit_without_offsets(ckpt: Path, _out: Path) -> str:
    last = _last(ckpt)
    shutil.copy(ckpt / f"commits/{last}", ckpt / f"commits/{last + 1}")
    return str(ckpt / f"commits/{last + 1}")


def offsets_folder_missing(ckpt: Path, _out: Path) -> str:
    shutil.rmtree(ckpt / "offsets")
    return str(ckpt / "offsets")


def corrupt_schema(ckpt: Path, _out: Path) -> str:
    """A version tag that is not ``v<N>``."""
    path = ckpt / "state/0/0/_metadata/schema"
    _write(path, b"\x00\x01garbage")
    return str(path)


def truncated_schema(ckpt: Path, _out: Path) -> str:
    path = ckpt / "state/0/0/_metadata/schema"
    _write(path, path.read_bytes()[:1])
    return str(path)


def commits_folder_missing(ckpt: Path, _out: Path) -> str:
    shutil.rmtree(ckpt / "commits")
    return str(ckpt / "commits")


def operator_metadata_missing(ckpt: Path, _out: Path) -> str:
    path = ckpt / "state/0/_metadata/metadata"
    _remove(path)
    return str(path)


def sink_behind(ckpt: Path, out: Path) -> str:
    path = out / "_spark_metadata" / str(_last(ckpt))
    _remove(path)
    return str(out / "_spark_metadata")


def rolled_back_without_sink(ckpt: Path, out: Path) -> str:
    """A rollback whose file sink log was left ahead (no --file-sink)."""
    rolled = ckpt.parent / "rolled"
    assert run_cli(statekit_cli(), "statekit", [
        "rollback", str(ckpt), "--to-batch", str(_last(ckpt) - 2), "--out", str(rolled),
        "--no-verify", "--force"]) == 0
    shutil.rmtree(ckpt)
    rolled.rename(ckpt)
    return str(out / "_spark_metadata")


def offsets_edited_by_hand(ckpt: Path, _out: Path) -> str:
    """``offsets/L`` edited to replay one file (as support articles suggest doing by
    hand) without touching ``offsets/L-1``: the file source's offset goes backwards."""
    last = _last(ckpt)
    path = ckpt / f"offsets/{last}"
    text = path.read_text()
    assert f'{{"logOffset":{last}}}' in text
    path.write_text(text.replace(f'{{"logOffset":{last}}}', f'{{"logOffset":{last - 2}}}'))
    return str(path)


def staging_left(ckpt: Path, _out: Path) -> str:
    staging = ckpt.parent / ".checkpoint.statekit-staging"
    staging.mkdir()
    (staging / "_STATEKIT_STAGING").write_text(json.dumps(
        {"source": "/elsewhere", "argv": ["statekit", "repartition", "/elsewhere", "--out",
                                          str(ckpt), "--partitions", "4"]}))
    return str(staging)


@dataclass(frozen=True)
class Case:
    fault: Callable[[Path, Path], str]
    kind: str
    code: str
    """The problem code the doctor must name."""
    error: str | None
    """The regex Spark's error must match on restart (``None``: it restarts)."""
    exit_code: int
    predicted: str | None = None
    """A regex the doctor's predicted error must match, when not ``error`` itself."""


CASES = [
    Case(missing_delta, "hdfs", "state-file-missing",
         r"CANNOT_LOAD_STATE_STORE\.CANNOT_READ_DELTA_FILE_NOT_EXISTS", 11),
    Case(truncated_delta, "hdfs", "state-file-corrupt",
         r"CANNOT_LOAD_STATE_STORE\.UNCATEGORIZED", 11),
    Case(missing_sst, "zips", "state-file-corrupt",
         r"CANNOT_LOAD_STATE_STORE\.UNCATEGORIZED", 11),
    Case(missing_changelog, "changelog", "state-file-missing",
         r"CANNOT_LOAD_STATE_STORE\.CANNOT_READ_STREAMING_STATE_FILE", 11),
    Case(missing_metadata, "hdfs", "metadata-missing",
         "STREAMING_CHECKPOINT_MISSING_METADATA_FILE", 11),
    Case(offsets_gap, "changelog", "offsets-gap", r"batch \d+ doesn't exist", 11),
    Case(corrupt_commit, "hdfs", "corrupt-commits", JSON_ERROR, 11),
    Case(corrupt_uncommitted_offsets, "zips", "corrupt-offsets", JSON_ERROR, 11),
    Case(unfinished_repartition, "zips", "unfinished-repartition",
         "STREAMING_UNFINISHED_REPARTITION_DETECTED", 11),
    Case(commit_without_offsets, "hdfs", "commit-without-offsets",
         "CONCURRENT_STREAM_LOG_UPDATE", 11),
    Case(sink_behind, "hdfs", "file-sink-behind", RESTARTS, 9),
    Case(offsets_folder_missing, "hdfs", "offsets-missing", "assertion failed", 12),
    Case(corrupt_schema, "hdfs", "schema-corrupt", "MALFORMED_LOG_FILE", 12),
    Case(truncated_schema, "zips", "schema-corrupt", r"terminated with exception:\s+SQLSTATE",
         12, predicted="without a message"),
    Case(rolled_back_without_sink, "hdfs", "file-sink-ahead",
         r"CANNOT_LOAD_STATE_STORE\.CANNOT_READ_DELTA_FILE_NOT_EXISTS", 11),
    Case(commits_folder_missing, "zips", "commits-missing", RESTARTS, 9),
    Case(operator_metadata_missing, "changelog", "operator-metadata-missing", RESTARTS, 0),
    Case(staging_left, "hdfs", "unfinished-statekit-write", RESTARTS, 9),
    Case(offsets_edited_by_hand, "zips", "offsets-backwards", "assertion failed", 11),
]


def _doctor(ckpt: Path, out: Path) -> tuple[int, dict]:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = run_cli(statekit_cli(), "statekit", ["doctor", str(ckpt), "--file-sink", str(out),
                                                    "--json"])
    return code, json.loads(buffer.getvalue())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.fault.__name__}-{c.kind}")
def test_doctor_predicts_the_restart_and_its_fix_works(spark, sources, tmp_path, case):
    ckpt, out = sources.copy(case.kind, tmp_path / "broken")
    damaged = case.fault(ckpt, out)
    broken_sink = tmp_path / "sink-broken"  # Spark restarts the broken copy against this
    shutil.copytree(out, broken_sink)

    code, diagnosis = _doctor(ckpt, out)
    named = [p for p in diagnosis["problems"] if p["code"] == case.code]
    assert named, diagnosis
    problem = named[0]
    assert Path(damaged).name in problem["path"], (damaged, problem)
    assert code == case.exit_code == diagnosis["exit_code"], diagnosis
    fatal = [p for p in diagnosis["problems"] if p["severity"] == "fatal"]
    assert bool(fatal) == (case.error is not None), diagnosis
    if case.error is None:
        assert problem["spark_error"] is None and diagnosis["verdict"].startswith("restarts")
    else:
        assert problem["spark_error"], problem
        if case.error != JSON_ERROR:  # otherwise Jackson's message varies with the bytes
            assert re.search(case.predicted or case.error, problem["spark_error"]), problem

    # the fix command, exactly as printed, on the broken checkpoint (which it must not write)
    command = diagnosis["fix_command"]
    assert bool(command) == (case.exit_code == 11 or case.code == "file-sink-behind"), \
        diagnosis
    fixed = None
    if command:
        before = tree_hash(ckpt)
        args = shlex.split(command)
        assert args[:3] == ["statekit", "rollback", str(ckpt)]
        # --force only because these checkpoints are seconds old ("looks live")
        assert run_cli(statekit_cli(), "statekit", [*args[1:], "--force"]) == 0, command
        assert tree_hash(ckpt) == before
        fixed = Path(args[args.index("--out") + 1])
        doctor_code, after = _doctor(fixed, out)
        assert doctor_code in (0, 9), after
        assert not [p for p in after["problems"] if p["severity"] == "fatal"], after

    # Spark restarts the broken copy (on a copy of its sink): fails as predicted, or runs
    error = _restart(spark, ckpt, broken_sink, sources.input_dir, case.kind)
    if case.error is None:
        assert error is None, error
    else:
        assert error is not None and re.search(case.error, error), error

    if fixed is not None:  # the fix restarts (on the sink it fixed) and runs the new batch
        fixed_sink = out
        error = _restart(spark, fixed, fixed_sink, sources.input_dir, case.kind)
        assert error is None, error[:1500]
        assert _last(fixed) > diagnosis["fix_batch"]
        if case.code == "file-sink-behind":  # the lost batch is in the sink's log again
            lost = int(Path(damaged).name) if Path(damaged).name.isdigit() else \
                diagnosis["last_committed"]
            assert (fixed_sink / "_spark_metadata" / str(lost)).exists()
