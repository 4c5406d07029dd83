"""``statekit migrate`` (and ``repartition``) on real checkpoints, proved by restarting them.

Each source is a real query run on three input files. The target (another provider, often
another partition count) must hold the source's rows, and the *original query*, restarted on
the target with a fourth file, must emit the same rows and end with the same state as the
same query restarted on a copy of the source. For the join the fourth file's rows match rows
kept in state from the first three, so the restart proves the moved state is found.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.cli.runner import run_cli
from tests.support.cli import statekit_cli, statekit_json
from tests.support.oracle import covering_sample
from tests.support.spark_runs import (
    CHANGELOG,
    FORMAT_VERSION,
    final_state,
    run_to_end,
    source_confs,
)
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]

OLD_ROWS = 180
"""Rows of the first three files (``seq`` below this): the state the restart must find."""


OPERATORS = ("aggregation", "dedup", "dedup-within-watermark", "session-window", "join",
             "fmgws", "tws", "tws-ttl", "multi")
"""Every stateful operator kind: ``fmgws`` is applyInPandasWithState (Spark's
flatMapGroupsWithState), ``tws`` transformWithStateInPandas with value, list and map state
and event-time timers, ``tws-ttl`` the same in processing-time mode with a TTL state
variable (and its TTL index column family), ``multi`` dropDuplicates then an aggregation."""


def _matrix():
    """Each operator × source provider: repartitioned 4 → 7, and migrated to the other
    provider (HDFS into RocksDB with changelog checkpointing, RocksDB into HDFS)."""
    for name in OPERATORS:
        for provider in ("hdfs", "rocksdb", "rocksdb-changelog"):
            if name.startswith("tws") and provider == "hdfs":
                continue  # transformWithState runs on RocksDB only
            changelog = provider == "rocksdb-changelog"
            yield pytest.param(name, provider, "repartition", 7, changelog,
                               id=f"{name}-{provider}-repartition")
            if name.startswith("tws"):
                continue  # into HDFS is refused: test_migration_refusals_start_no_spark
            if provider == "hdfs":
                yield pytest.param(name, provider, "migrate", 3, True,
                                   id=f"{name}-hdfs-migrate-rocksdb-changelog")
            else:
                yield pytest.param(name, provider, "migrate",
                                   3 if provider == "rocksdb" else None, False,
                                   id=f"{name}-{provider}-migrate-hdfs")
    # HDFS into RocksDB without changelog checkpointing (zips only)
    for name in ("aggregation", "join", "multi"):
        yield pytest.param(name, "hdfs", "migrate", 7, False, id=f"{name}-hdfs-migrate-rocksdb")
    # checkpoint format v2 (state store checkpoint ids, ``<version>_<uuid>`` files)
    for name in ("join", "session-window", "tws"):
        yield pytest.param(name, "rocksdb-changelog-v2", "repartition", 7, True,
                           id=f"{name}-rocksdb-changelog-v2-repartition")
    for name in ("join", "session-window"):
        yield pytest.param(name, "rocksdb-changelog-v2", "migrate", 3, False,
                           id=f"{name}-rocksdb-changelog-v2-migrate-hdfs")


def _dimensions(case) -> dict[str, object]:
    name, provider, command, _partitions, changelog = case.values
    target = command if command == "repartition" else \
        f"{command}-{'hdfs' if provider.startswith('rocksdb') else 'rocksdb'}" \
        f"{'-changelog' if changelog else ''}"
    return {"operator": name, "provider": provider, "target": target}


MATRIX = list(_matrix())
SAMPLE = covering_sample(MATRIX, _dimensions, count=14, seed=54)
"""``make test`` judges every operator, source provider and kind of target at least once
(tests/support/oracle.py); ``make test-oracle`` all of MATRIX."""


@pytest.mark.parametrize(("name", "provider", "command", "partitions", "changelog"), SAMPLE)
def test_target_restarts_like_the_source(spark, sources, tmp_path, name, provider, command,
                                         partitions, changelog):
    """The acceptance matrix: the target holds every (key, value) per store and column family
    in ``pmod(hash(partition key), P)``, ``state-metadata`` reports P, the offsets pin the
    target's provider, the source is untouched, and the query restarted on the target emits
    the same rows and ends with the same state as when restarted on a copy of the source."""
    source = sources.get(name, provider)
    before = tree_hash(source.checkpoint)
    source_provider = "rocksdb" if provider.startswith("rocksdb") else "hdfs"
    to = ({"hdfs": "rocksdb", "rocksdb": "hdfs"}[source_provider] if command == "migrate"
          else source_provider)
    target = tmp_path / "target"
    args = [command, str(source.checkpoint), "--out", str(target)]
    args += ["--to", to] if command == "migrate" else []
    args += ["--partitions", str(partitions)] if partitions else []
    args += ["--changelog"] if changelog and command == "migrate" else []
    result = statekit_json(*args)
    check = result["verification"]
    assert check["ok"], check["problems"]
    assert all(s["target_rows"] == s["source_rows"] > 0 for s in check["stores"])
    assert all(s["misplaced"] == 0 for s in check["stores"])
    if name == "join":  # all four stores, each placed by the join key alone
        assert {s["store"] for s in check["stores"]} == {
            "left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
            "right-keyWithIndexToValue"}
    assert tree_hash(source.checkpoint) == before
    plan = result["plan"]
    assert plan["target_provider"] == to
    expected_partitions = partitions or plan["from_partitions"]
    assert set(check["metadata_partitions"]) == {expected_partitions}
    written = open_checkpoint(str(target))
    assert written.offset(written.last_committed_batch).provider == to
    kinds = {f.kind for i in written.inventory.instances.values() for f in i.files}
    assert (kinds & {"zip", "changelog"}) if to == "rocksdb" else (kinds == {"snapshot"})
    assert sorted({i.partition for i in written.inventory.instances.values()}) == \
        list(range(expected_partitions))

    # the source's confs on restart: the target's offsets must pin its own provider
    confs = {**source_confs(provider, name), CHANGELOG: str(changelog).lower()}
    if to == "hdfs":  # checkpoint format v2 is RocksDB's: the HDFS target is v1
        confs[FORMAT_VERSION] = "1"
    output = run_to_end(spark, name, source.input_dir, target, confs)
    assert output == source.expected_output and output
    assert final_state(spark, target) == source.expected_state
    if name == "join":  # rows of the fourth file matched rows that were moved
        assert any(int(left) >= OLD_ROWS > int(right) for left, right, _ in output)
    if changelog:
        files = {f.kind for i in open_checkpoint(str(target)).inventory.instances.values()
                 for f in i.files}
        assert "changelog" in files


def test_migration_refusals_start_no_spark(small_queries, tmp_path, capsys):
    """Same provider and partitions, transformWithState, --changelog into HDFS: one line,
    exit 5 or 6, nothing written."""
    agg = small_queries.get("aggregation", "hdfs")
    tws = small_queries.get("tws", "rocksdb")
    capsys.readouterr()  # building the queries printed the Python workers' messages
    cases = [([str(agg.checkpoint), "--to", "hdfs"], "nothing to migrate"),
             ([str(agg.checkpoint), "--to", "hdfs", "--changelog"], "RocksDB targets only"),
             ([str(tws.checkpoint), "--to", "hdfs"], "not supported")]
    for args, message in cases:
        code = run_cli(statekit_cli(), "statekit", ["migrate", *args, "--out",
                                                    str(tmp_path / "dst"), "--force"])
        err = capsys.readouterr().err
        assert code in (5, 6) and message in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize(("name", "provider", "to"), [("aggregation", "hdfs", "rocksdb"),
                                                     ("aggregation", "rocksdb", "hdfs"),
                                                     ("tws", "rocksdb", None)])
def test_migration_fault_injection_leaves_no_target(spark, small_queries, tmp_path, name,
                                                    provider, to):
    """A crash at every write step of a migration, or of transformWithState's repartition
    (each file, Spark's rewrite, each snapshot, the retargeted schema paths, the publish)
    leaves no target and no staging folder; a rerun completes."""
    from tests.support.restarts import assert_crashes_leave_nothing, crash_runner

    source = small_queries.get(name, provider).checkpoint
    before = tree_hash(source)
    attempt = crash_runner(spark, open_checkpoint(str(source)), tmp_path, 3, to_provider=to)
    plan, steps, result = attempt("ok", None)
    assert result.verification.ok
    failures = list(steps)
    if to == "hdfs":
        failures += [f"write state/0/{p}/{plan.state_version}.snapshot" for p in range(3)]
    else:
        assert "spark state rewrite" in steps
    if to == "rocksdb":  # Spark's reader is planned on a view of the HDFS source's schemas
        assert any("_statekit_read_view" in s for s in steps)
    if name == "tws":  # the v2 operator metadata, pointed at the target's schema files
        assert any("_metadata/v2/" in s and s.endswith("#2") for s in steps), steps
    assert "publish" in failures and len(failures) > 5
    assert_crashes_leave_nothing(attempt, failures, tmp_path)
    assert tree_hash(source) == before


GOLDEN_35 = Path(__file__).resolve().parent.parent / "data" / "golden" / "spark-3.5.9"


@pytest.mark.parametrize("query", sorted(p.name for p in GOLDEN_35.iterdir() if p.is_dir()))
def test_checkpoints_without_operator_metadata(spark, tmp_path, query):
    """Spark 3.5 wrote no operator metadata: statekit derives each operator (name, stores,
    a session window's prefix columns) from the schema files, writes the v1 metadata Spark 4
    would, and both repartitions and migrates them (RocksDB sources are read through a view
    in the staging folder that carries the derived metadata)."""
    source = tmp_path / "source"
    shutil.copytree(GOLDEN_35 / query / "checkpoint", source)
    before = tree_hash(source)
    provider = open_checkpoint(str(source)).offset(
        open_checkpoint(str(source)).last_committed_batch).provider
    other = "hdfs" if provider == "rocksdb" else "rocksdb"
    for args in (["repartition", str(source), "--partitions", "3"],
                 ["migrate", str(source), "--to", other, "--partitions", "3"]):
        target = tmp_path / args[0]
        result = statekit_json(*args, "--out", str(target))
        check = result["verification"]
        assert check["ok"], check["problems"]
        assert check["metadata_partitions"] and set(check["metadata_partitions"]) == {3}
        written = open_checkpoint(str(target))
        assert "unknown" not in {m.name for m in written.operators.values()}
        assert all(m.version == 1 for m in written.operators.values())
    assert tree_hash(source) == before


def test_reference_pipeline_changelog_checkpoint_migrates_to_hdfs(reference_checkpoints,
                                                                  tmp_path):
    """applyInPandasWithState on RocksDB with changelog checkpointing (the reference
    pipeline) into HDFS snapshots: every user's state moved, placed and verified."""
    run = reference_checkpoints.get("rocksdb", changelog=True)
    before = tree_hash(run.checkpoint)
    result = statekit_json("migrate", str(run.checkpoint), "--to", "hdfs", "--partitions", "3",
                           "--out", str(tmp_path / "dst"))
    check = result["verification"]
    assert check["ok"], check["problems"]
    assert check["stores"][0]["target_rows"] == run.result.state_keys()
    written = open_checkpoint(str(tmp_path / "dst"))
    assert written.offset(written.last_committed_batch).provider == "hdfs"
    assert {f.kind for i in written.inventory.instances.values() for f in i.files} == \
        {"snapshot"}
    assert tree_hash(run.checkpoint) == before
