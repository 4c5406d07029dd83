"""The report on a real checkpoint uploaded to an S3-protocol server, through s3fs."""

from __future__ import annotations

import json
import math

import pytest

from statekit.batches import batch_timeline
from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import store_schemas
from statekit.cli.runner import run_cli
from statekit.report import build_report
from tests.spark.real_checkpoints import checkpoint_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def comparable(report) -> dict:
    data = report.to_dict()
    data.pop("location")
    data.pop("elapsed_s")
    return data


@pytest.mark.parametrize("name", ["hdfs", "rocksdb-changelog-v2", "join"])
def test_report_on_s3_equals_the_local_report(name, reference_checkpoints, small_queries,
                                              s3_server):
    local = checkpoint_for(name, reference_checkpoints, small_queries)
    url = s3_server.upload(str(local), "checkpoints", name)
    s3_server.reset()
    remote = open_checkpoint(url, s3_server.storage_options())
    report = build_report(remote)
    requests = s3_server.summary()
    assert comparable(report) == comparable(build_report(open_checkpoint(str(local))))
    # Listing costs one LIST per folder (root, offsets, commits) plus one per 1000 keys of
    # state/ — never a request per file.
    state_keys = remote.inventory.listed_files
    assert requests["LIST"] == 3 + math.ceil(state_keys / 1000), s3_server.requests
    # Reads, one GET each (s3fs checks each with a HEAD first): metadata, every retained
    # offsets and commit entry (the ledger audit), the operator metadata and schema files
    # and, for RocksDB, the newest zip of each partition (its numKeys and SST list).
    committed = remote.last_committed_batch + 1
    zips = sum(1 for i in remote.inventory.instances.values()
               if i.latest_snapshot(committed) is not None and i.of_kind("zip"))
    ledger = len(remote.planned_batches) + len(remote.committed_batches)
    schemas = len(store_schemas(remote))
    assert requests["GET"] == 1 + ledger + len(remote.operators) + schemas + zips, \
        s3_server.requests
    assert requests.get("HEAD", 0) <= requests["GET"], s3_server.requests
    assert batch_timeline(remote).rows == batch_timeline(open_checkpoint(str(local))).rows


def test_cli_report_on_s3(reference_checkpoints, s3_server, capsys):
    local = reference_checkpoints.get("rocksdb").checkpoint
    url = s3_server.upload(str(local), "checkpoints", "cli-rocksdb")
    options = []
    for key, value in s3_server.storage_options().items():
        options += ["--storage-option", f"{key}={json.dumps(value)}"]
    assert run_cli(_cli(), "statekit", ["report", url, *options, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["location"] == url and data["provider"] == "rocksdb"
    assert run_cli(_cli(), "statekit", ["report", url + "-missing", *options]) == 3
    assert "no such file or folder" in capsys.readouterr().err


def _cli():
    from statekit.cli.main import cli

    return cli
