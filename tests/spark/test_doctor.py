"""``statekit doctor`` against Spark itself: every prediction is checked by a real restart.

The checkpoints are the run's shared builds, each case damaging its own copy (the builds are
read only):

* ``hdfs``, ``zips``, ``changelog``: the deduplication query of tests/support/spark_runs
  (``sources``: HDFS, RocksDB with a zip per version, RocksDB with changelogs), written on
  three input files; its restart reads the fourth — a batch that must load the state;
* ``sink``: the reference pipeline's HDFS checkpoint and its Parquet file sink
  (``reference_checkpoints``) — the faults of a file sink's log, which the doctor campaign
  does not damage. Its landing folder is shared too and gets no new file, so a restart runs
  only the batches the damage or the fix leaves to run again, on the files they read
  before (the sink's log behind: none — Spark opens every log and stops).

Each fault damages the copy the way production checkpoints get damaged; then
1. ``statekit doctor --json`` must name the fault and predict the restart (Spark's error,
   or that it restarts) and say whether it has a fix, with the documented exit code;
2. Spark restarts the damaged copy: it must fail exactly as predicted, or run;
3. the printed fix command is run as printed; the damaged checkpoint is not written; and
   the query restarted on the command's new checkpoint runs and commits batches after the
   fix's.

Faults the doctor campaign (tests/spark/test_doctor_campaign.py) always judges by a restart
are not repeated here: the newest ``.delta`` of a partition deleted is its
``test_the_newest_delta_gone_is_fixed_by_a_rollback_that_keeps_every_row``.
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

QUERY = "dedup"
"""The ``sources`` query: dropDuplicates on (key, bucket, day), kept in state forever."""
PROVIDERS = {"hdfs": "hdfs", "zips": "rocksdb", "changelog": "rocksdb-changelog"}
"""The ``sources`` provider of each checkpoint kind."""


# ------------------------------------------------------------------ the shared checkpoints
@dataclass(frozen=True)
class Copy:
    """A writable copy of a shared checkpoint (and of its file sink), and the restarts of
    its query (each: Spark's error, or ``None`` when it ran to the end of its input)."""

    checkpoint: Path
    sink: Path | None
    restart: Callable[[Path, Path | None], str | None]
    """Restart the query on a checkpoint and a sink (the damaged ones, or the fix's)."""


def _failure(spark, run: Callable[[], object]) -> str | None:
    """Spark's error when the restart ``run`` fails (the state stores it loaded unloaded,
    so their maintenance writes nothing more into the checkpoint), else ``None``."""
    from tests.oracle.restart import unload_state_stores

    try:
        run()
    except Exception as error:  # Spark's failure is the observation
        unload_state_stores(spark)
        return str(error)
    return None


def _source_copy(spark, sources, kind: str, to: Path) -> Copy:
    from tests.support.spark_runs import run_to_end, source_confs

    source = sources.get(QUERY, PROVIDERS[kind])
    shutil.copytree(source.checkpoint, to / "checkpoint")

    def restart(checkpoint: Path, _sink: Path | None) -> str | None:
        return _failure(spark, lambda: run_to_end(
            spark, QUERY, source.input_dir, checkpoint, source_confs(source.provider, QUERY)))
    return Copy(to / "checkpoint", None, restart)


def _copy_file_sink(sink: Path, to: Path) -> Path:
    """A copy of a file sink that Spark reads as a file sink: its log names each file by
    its absolute path, so the copy's log names the copies (and its entries' hidden
    checksums follow) — else Spark reads no file of the copy through its log."""
    from tests.oracle.campaign import hadoop_crc

    shutil.copytree(sink, to)
    for entry in (to / "_spark_metadata").iterdir():
        if entry.name.startswith("."):
            continue
        data = entry.read_bytes().replace(f"{sink.as_uri()}/".encode(),
                                          f"{to.as_uri()}/".encode())
        entry.write_bytes(data)
        crc = entry.parent / f".{entry.name}.crc"
        if crc.exists():
            crc.write_bytes(hadoop_crc(data))
    return to


def _reference_copy(spark, reference_checkpoints, to: Path) -> Copy:
    from tests.conftest import TEST_PARTITIONS
    from tests.support.restarts import PipelineRun, restart_pipeline

    shared = reference_checkpoints.get("hdfs")
    shutil.copytree(shared.checkpoint, to / "checkpoint")
    _copy_file_sink(shared.output, to / "out")
    run = PipelineRun(to, shared.landing, shared.checkpoint, shared.output, "hdfs",
                      TEST_PARTITIONS)

    def restart(checkpoint: Path, sink: Path | None) -> str | None:
        assert sink is not None
        return _failure(spark, lambda: restart_pipeline(spark, run, checkpoint, sink))
    return Copy(to / "checkpoint", to / "out", restart)


# ------------------------------------------------------------------------------ the faults
def _last(ckpt: Path) -> int:
    return max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())


def _remove(path: Path) -> None:
    path.unlink()
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():
        crc.unlink()


def _data_batches(ckpt: Path) -> list[int]:
    """The batches that read new input (a no-data batch repeats the sources' offsets of the
    batch before it)."""
    offsets = {int(p.name): p.read_text().split("\n")[2:]
               for p in (ckpt / "offsets").iterdir() if p.name.isdigit()}
    return [b for b in sorted(offsets) if offsets[b] != offsets.get(b - 1)]


def _sink_log_until(out: Path, batch: int) -> None:
    """The sink's log entries after ``batch`` gone (as if never written)."""
    for entry in (out / "_spark_metadata").iterdir():
        if entry.name.removesuffix(".compact").isdigit() and \
                int(entry.name.removesuffix(".compact")) > batch:
            assert entry.name.isdigit(), f"{entry}: a compaction after batch {batch}"
            _remove(entry)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    crc = path.parent / f".{path.name}.crc"
    if crc.exists():
        crc.unlink()


def _restart_path(ckpt: Path, suffix: str) -> list[Path]:
    """The data files a restart loads for the first partition whose load path holds a
    ``suffix`` file (the load path per statekit's own model)."""
    model = open_checkpoint(str(ckpt))
    for (op, store, _), instance in sorted(model.inventory.instances.items()):
        path = [Path(f.path) for f in instance.files_to_load(_last(ckpt) + 1)]
        if op == 0 and store == "default" and any(p.suffix == suffix for p in path):
            return path
    raise AssertionError(f"no restart loads a {suffix} file")


def truncated_delta(ckpt: Path, _out: Path | None) -> str:
    delta = [f for f in _restart_path(ckpt, ".delta") if f.suffix == ".delta"][-1]
    _write(delta, delta.read_bytes()[: delta.stat().st_size // 2])
    return str(delta)


def missing_sst(ckpt: Path, _out: Path | None) -> str:
    """The newest SST the restart's zip lists that an older zip does not (a rollback gets
    before it; the restart's own zip may add none: the query's last batch ran no data)."""
    newest = [f for f in _restart_path(ckpt, ".zip") if f.suffix == ".zip"][-1]
    folder = newest.parent
    zips = sorted(folder.glob("*.zip"), key=lambda p: int(p.stem))

    def ssts(z: Path) -> set[str]:
        text = zipfile.ZipFile(z).read("metadata").decode().split("\n", 1)[1]
        return {s["dfsSstFileName"] for s in json.loads(text)["sstFiles"]}

    older = [ssts(z) for z in zips if int(z.stem) < int(newest.stem)]
    own = ssts(newest) - set.intersection(*older) if older else set()
    assert own, "the restart zip must list an SST an older zip does not"
    sst = folder / "SSTs" / sorted(own)[-1]
    _remove(sst)
    return str(sst)


def missing_changelog(ckpt: Path, _out: Path | None) -> str:
    """The newest version's changelog (and a zip of it, if the upload came first)."""
    version = _last(ckpt) + 1
    folder = ckpt / "state/0/1"
    if (folder / f"{version}.zip").exists():
        _remove(folder / f"{version}.zip")
    _remove(folder / f"{version}.changelog")
    return str(folder / f"{version}.changelog")


def missing_metadata(ckpt: Path, _out: Path | None) -> str:
    _remove(ckpt / "metadata")
    return str(ckpt / "metadata")


def offsets_gap(ckpt: Path, _out: Path | None) -> str:
    path = ckpt / f"offsets/{_last(ckpt) - 1}"
    _remove(path)
    return str(path)


def corrupt_commit(ckpt: Path, _out: Path | None) -> str:
    path = ckpt / f"commits/{_last(ckpt)}"
    _write(path, b'v1\n{"nextBatchWatermarkMs":')
    return str(path)


def corrupt_uncommitted_offsets(ckpt: Path, _out: Path | None) -> str:
    last = _last(ckpt)
    _remove(ckpt / f"commits/{last}")
    _write(ckpt / f"offsets/{last}", b"v1\n{garbage")
    return str(ckpt / f"offsets/{last}")


def unfinished_repartition(ckpt: Path, _out: Path | None) -> str:
    """A next offsets entry pinning another partition count than the committed batches'
    (a repartition by hand that stopped half-way)."""
    last = _last(ckpt)
    text = (ckpt / f"offsets/{last}").read_text()
    pinned = re.search(r'"spark\.sql\.shuffle\.partitions":"(\d+)"', text)
    assert pinned is not None, text
    path = ckpt / f"offsets/{last + 1}"
    other = str(int(pinned.group(1)) + 3)
    path.write_text(text.replace(pinned.group(0), pinned.group(0).replace(
        f'"{pinned.group(1)}"', f'"{other}"')))
    return str(path)


def commit_without_offsets(ckpt: Path, _out: Path | None) -> str:
    last = _last(ckpt)
    shutil.copy(ckpt / f"commits/{last}", ckpt / f"commits/{last + 1}")
    return str(ckpt / f"commits/{last + 1}")


def offsets_folder_missing(ckpt: Path, _out: Path | None) -> str:
    shutil.rmtree(ckpt / "offsets")
    return str(ckpt / "offsets")


def corrupt_schema(ckpt: Path, _out: Path | None) -> str:
    """A version tag that is not ``v<N>``."""
    path = ckpt / "state/0/0/_metadata/schema"
    _write(path, b"\x00\x01garbage")
    return str(path)


def truncated_schema(ckpt: Path, _out: Path | None) -> str:
    path = ckpt / "state/0/0/_metadata/schema"
    _write(path, path.read_bytes()[:1])
    return str(path)


def commits_folder_missing(ckpt: Path, _out: Path | None) -> str:
    shutil.rmtree(ckpt / "commits")
    return str(ckpt / "commits")


def operator_metadata_missing(ckpt: Path, _out: Path | None) -> str:
    path = ckpt / "state/0/_metadata/metadata"
    _remove(path)
    return str(path)


def sink_behind(ckpt: Path, out: Path | None) -> str:
    """The sink's log lost its entries from the last batch that read input on (the query
    crashed between committing them and the sink's log being copied, say)."""
    assert out is not None
    _sink_log_until(out, _data_batches(ckpt)[-1] - 1)
    return str(out / "_spark_metadata")


def rolled_back_without_sink(ckpt: Path, out: Path | None) -> str:
    """A rollback without --file-sink: the sink's log is left ahead of the commits, by one
    batch here (its later entries gone). The restart runs that batch again without writing
    state (the sink has it: Spark skips it), then fails loading that state in the next
    batch — which reads the input of the checkpoint's last batch that read any, so the
    restart needs no new input."""
    assert out is not None
    to = _data_batches(ckpt)[-2] - 1
    rolled = ckpt.parent / "rolled"
    assert run_cli(statekit_cli(), "statekit", [
        "rollback", str(ckpt), "--to-batch", str(to), "--out", str(rolled),
        "--no-verify", "--force"]) == 0
    shutil.rmtree(ckpt)
    rolled.rename(ckpt)
    _sink_log_until(out, to + 1)
    return str(out / "_spark_metadata")


def offsets_edited_by_hand(ckpt: Path, _out: Path | None) -> str:
    """``offsets/L`` edited to replay two files (as support articles suggest doing by
    hand) without touching ``offsets/L-1``: the file source's offset goes backwards."""
    path = ckpt / f"offsets/{_last(ckpt)}"
    text = path.read_text()
    found = re.search(r'\{"logOffset":(\d+)\}', text)
    assert found is not None and int(found.group(1)) >= 2, text
    path.write_text(text.replace(found.group(0),
                                 f'{{"logOffset":{int(found.group(1)) - 2}}}'))
    return str(path)


def staging_left(ckpt: Path, _out: Path | None) -> str:
    staging = ckpt.parent / ".checkpoint.statekit-staging"
    staging.mkdir()
    (staging / "_STATEKIT_STAGING").write_text(json.dumps(
        {"source": "/elsewhere", "argv": ["statekit", "repartition", "/elsewhere", "--out",
                                          str(ckpt), "--partitions", "4"]}))
    return str(staging)


@dataclass(frozen=True)
class Case:
    fault: Callable[[Path, Path | None], str]
    kind: str
    """``hdfs``, ``zips``, ``changelog`` (the shared ``sources``) or ``sink`` (the shared
    reference run and its file sink)."""
    code: str
    """The problem code the doctor must name."""
    error: str | None
    """The regex Spark's error must match on restart (``None``: it restarts)."""
    exit_code: int
    predicted: str | None = None
    """A regex the doctor's predicted error must match, when not ``error`` itself."""


CASES = [
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
    # restarts, but readers of the sink miss the batches its log lost: outcome "loses"
    Case(sink_behind, "sink", "file-sink-behind", RESTARTS, 14),
    Case(offsets_folder_missing, "hdfs", "offsets-missing", "assertion failed", 12),
    Case(corrupt_schema, "hdfs", "schema-corrupt", "MALFORMED_LOG_FILE", 12),
    Case(truncated_schema, "zips", "schema-corrupt", r"terminated with exception:\s+SQLSTATE",
         12, predicted="without a message"),
    Case(rolled_back_without_sink, "sink", "file-sink-ahead",
         r"CANNOT_LOAD_STATE_STORE\.CANNOT_READ_DELTA_FILE_NOT_EXISTS", 11),
    # the newest batch runs again into a sink the doctor was not told about: "repeats"
    Case(commits_folder_missing, "zips", "commits-missing", RESTARTS, 14),
    Case(operator_metadata_missing, "changelog", "operator-metadata-missing", RESTARTS, 0),
    Case(staging_left, "hdfs", "unfinished-statekit-write", RESTARTS, 9),
    Case(offsets_edited_by_hand, "zips", "offsets-backwards", "assertion failed", 11),
]


def _doctor(ckpt: Path, out: Path | None) -> tuple[int, dict]:
    buffer = io.StringIO()
    sink = ["--file-sink", str(out)] if out is not None else []
    with redirect_stdout(buffer):
        code = run_cli(statekit_cli(), "statekit", ["doctor", str(ckpt), *sink, "--json"])
    return code, json.loads(buffer.getvalue())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.fault.__name__}-{c.kind}")
def test_doctor_predicts_the_restart_and_its_fix_works(spark, request, tmp_path, case):
    copy = (_reference_copy(spark, request.getfixturevalue("reference_checkpoints"),
                            tmp_path / "broken") if case.kind == "sink" else
            _source_copy(spark, request.getfixturevalue("sources"), case.kind,
                         tmp_path / "broken"))
    ckpt, out = copy.checkpoint, copy.sink
    damaged = case.fault(ckpt, out)
    broken_sink = None  # Spark restarts the broken copy against a copy of its sink
    if out is not None:
        broken_sink = _copy_file_sink(out, tmp_path / "sink-broken")

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
        # --force only because these checkpoints are minutes old ("looks live")
        assert run_cli(statekit_cli(), "statekit", [*args[1:], "--force"]) == 0, command
        assert tree_hash(ckpt) == before
        fixed = Path(args[args.index("--out") + 1])
        doctor_code, after = _doctor(fixed, out)
        assert doctor_code in (0, 9), after
        assert not [p for p in after["problems"] if p["severity"] == "fatal"], after

    # Spark restarts the broken copy (on a copy of its sink): fails as predicted, or runs
    error = copy.restart(ckpt, broken_sink)
    if case.error is None:
        assert error is None, error
    else:
        assert error is not None and re.search(case.error, error), error

    if fixed is not None:  # the fix restarts (on the sink it fixed) and runs new batches
        error = copy.restart(fixed, out)
        assert error is None, error[:1500]
        assert _last(fixed) > diagnosis["fix_batch"]
        if out is not None:  # the re-run batches are in the sink's log (again)
            assert all((out / "_spark_metadata" / str(b)).exists()
                       for b in range(diagnosis["fix_batch"] + 1, _last(fixed) + 1))
