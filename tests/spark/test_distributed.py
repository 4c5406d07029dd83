"""Whole-state passes run as Spark tasks give exactly what the local replay gives.

``statekit growth --master`` and ``report --decode --master`` hand the same pure-Python work
to Spark, one task per store instance (:mod:`statekit.jobs.distributed`). On every kind of
real checkpoint written in this session the histories, the growth report and the
verification must be identical to the local ones, and Spark must really have run the tasks.
"""

from __future__ import annotations

import json

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.cli.runner import run_cli
from statekit.growth.analysis import analyse
from statekit.jobs.distributed import SparkGroupRunner
from statekit.state.history import all_histories
from statekit.state.verify import verify_restart_path
from tests.spark.real_checkpoints import ALL, checkpoint_for

pytestmark = [pytest.mark.spark]


def _comparable(report) -> dict:
    data = report.to_dict(with_history=True)
    data.pop("elapsed_s", None)
    return data


@pytest.mark.parametrize("name", ALL)
def test_spark_replay_equals_the_local_replay(name, spark, reference_checkpoints,
                                              small_queries):
    path = checkpoint_for(name, reference_checkpoints, small_queries)
    runner = SparkGroupRunner(spark)
    local = all_histories(open_checkpoint(str(path)))
    distributed = all_histories(open_checkpoint(str(path)), runner=runner)
    assert [h.to_dict() for h in distributed] == [h.to_dict() for h in local]
    instances = len(open_checkpoint(str(path)).inventory.instances)
    assert runner.tasks >= (instances if any(h.method == "replay" for h in local) else 0)
    assert _comparable(analyse(open_checkpoint(str(path)), runner=runner)) == \
        _comparable(analyse(open_checkpoint(str(path))))


@pytest.mark.parametrize("name", ["hdfs", "rocksdb", "rocksdb-changelog-v2", "join"])
def test_spark_verification_equals_the_local_one(name, spark, reference_checkpoints,
                                                 small_queries):
    path = checkpoint_for(name, reference_checkpoints, small_queries)
    runner = SparkGroupRunner(spark)
    local = verify_restart_path(open_checkpoint(str(path)))
    distributed = verify_restart_path(open_checkpoint(str(path)), runner=runner)
    assert local.files > 0 and runner.tasks > 0
    assert distributed.to_dict() | {"elapsed_s": 0} == local.to_dict() | {"elapsed_s": 0}


def test_growth_cli_on_spark_prints_the_local_report(spark, reference_checkpoints, capsys):
    path = str(reference_checkpoints.get(provider="hdfs", leaky=True).checkpoint)
    from statekit.cli.main import cli

    assert run_cli(cli, "statekit", ["growth", path, "--json"]) in (0, 1)
    local = json.loads(capsys.readouterr().out)
    assert run_cli(cli, "statekit", ["growth", path, "--json", "--master", "local[2]"]) in (0, 1)
    distributed = json.loads(capsys.readouterr().out)
    for data in (local, distributed):
        data.pop("elapsed_s", None)
    assert distributed == local
    assert local["verdict"] == "growing"


def test_recovery_verify_on_spark_reads_what_the_local_verification_reads(
        spark, reference_checkpoints, capsys):
    """``statekit recovery --decode --master``: the restart path decoded as Spark tasks."""
    from statekit.cli.main import cli

    path = str(reference_checkpoints.get(provider="rocksdb").checkpoint)
    results = []
    for extra in ([], ["--master", "local[2]"]):
        assert run_cli(cli, "statekit", ["recovery", path, "--decode", "--json", *extra]) == 0
        verification = json.loads(capsys.readouterr().out)["verification"]
        verification.pop("elapsed_s")
        results.append(verification)
    local, distributed = results
    assert local["files"] > 0 and distributed == local
