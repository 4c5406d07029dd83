"""``statekit rollback`` on real checkpoints, proved by restarting them.

A query runs over four files, one batch each, with its output kept per batch. Rolled back to
a batch B (every possible one under ``make test-oracle``, three of them in ``make test``),
the query restarted on the new checkpoint must emit exactly the original output of every
batch after B and end in the original final state; the source is never written.
"""

from __future__ import annotations

import pytest

from statekit.cli.runner import run_cli
from tests.support.cli import statekit_cli, statekit_json
from tests.support.oracle import fixed_sample, full_oracle
from tests.support.spark_runs import final_state, run_by_batch, source_confs
from tests.support.trees import tree_hash

pytestmark = [pytest.mark.spark]


@pytest.mark.parametrize(("name", "provider"), [("aggregation", "hdfs"),
                                                ("join", "rocksdb-changelog"),
                                                ("tws", "rocksdb"),
                                                ("tws", "rocksdb-changelog-v2")])
def test_rollback_to_each_batch_reruns_the_same_batches(spark, tmp_path, name, provider):
    from tests.small_queries import FILES, _write_input, make_rows

    input_dir = tmp_path / "input"
    _write_input(input_dir, make_rows(seed=11))
    source = tmp_path / "source"
    confs = source_confs(provider, name)
    original = run_by_batch(spark, name, input_dir, source, confs)
    assert len(original) >= FILES and any(original.values())  # one file per batch
    expected_state = final_state(spark, source)
    before = tree_hash(source)

    choices = statekit_json("rollback", str(source), "--list")
    assert [c["batch"] for c in choices] == sorted(original, reverse=True)
    assert all(c["possible"] for c in choices), choices
    every = sorted(original)[:-1]
    # make test: the oldest batch (the most re-run), the newest (only no-data batches
    # follow) and one between, fixed seed; make test-oracle: every batch
    batches = every if full_oracle() else \
        sorted({every[0], every[-1], *fixed_sample(every[1:-1], 1, seed=54)})
    for batch in batches:
        target = tmp_path / f"at-{batch}"
        result = statekit_json("rollback", str(source), "--to-batch", str(batch),
                               "--out", str(target))
        assert result["verification"]["ok"], result
        assert all(s["source_rows"] == s["target_rows"] for s in
                   result["verification"]["stores"])
        assert result["plan"]["dropped_batches"] == [b for b in sorted(original) if b > batch]
        v2 = list(target.glob("state/*/_metadata/v2/[0-9]*"))
        assert bool(v2) == (name == "tws")  # transformWithState: operator metadata v2
        for meta in v2:  # whose schema paths name the target's own files
            assert str(source) not in meta.read_text() and str(target) in meta.read_text()
        rerun = run_by_batch(spark, name, input_dir, target, confs)
        if batch < FILES - 1:
            assert rerun == {b: rows for b, rows in original.items() if b > batch}, batch
            assert final_state(spark, target) == expected_state, batch
        else:  # only no-data batches followed, which a restart does not run (Spark's rule)
            assert not any(rerun.values()), rerun
    assert tree_hash(source) == before


def test_rollback_refusals_are_one_line(small_queries, tmp_path, capsys):
    """An uncommitted or unknown batch: exit 3 naming the checkpoint; nothing written."""
    query = small_queries.get("aggregation", "hdfs")
    capsys.readouterr()
    for batch, text in (("99", "batch 99 is not committed"),):
        code = run_cli(statekit_cli(), "statekit", ["rollback", str(query.checkpoint),
                                                    "--to-batch", batch, "--out",
                                                    str(tmp_path / "dst"), "--force"])
        err = capsys.readouterr().err
        assert code == 3 and text in err and len(err.strip().splitlines()) == 1, err
        assert str(query.checkpoint) in err
    assert not (tmp_path / "dst").exists()
