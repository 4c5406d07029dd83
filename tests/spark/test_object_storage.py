"""The report on a real checkpoint uploaded to an S3-protocol server, through s3fs."""

from __future__ import annotations

import json
import math
from collections import Counter
from urllib.parse import parse_qs

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import store_schemas
from statekit.cli.runner import run_cli
from statekit.report.batches import batch_timeline
from statekit.report.checkpoint_report import build_report
from tests.spark.real_checkpoints import checkpoint_for

pytestmark = [pytest.mark.spark]


def comparable(report) -> dict:
    data = report.to_dict()
    data.pop("location")
    data.pop("elapsed_s")
    data.pop("listing")
    return data


@pytest.mark.parametrize("name", ["hdfs", "rocksdb-changelog-v2", "join", "tws"])
def test_report_on_s3_equals_the_local_report(name, reference_checkpoints, small_queries,
                                              s3_server):
    local = checkpoint_for(name, reference_checkpoints, small_queries)
    url = s3_server.upload(str(local), "checkpoints", name)
    s3_server.reset()
    remote = open_checkpoint(url, s3_server.storage_options())
    report = build_report(remote)
    requests = s3_server.summary()
    # The ledger and the newest zips are read while state/ is listed: still once each.
    assert_each_file_read_once(s3_server)
    assert comparable(report) == comparable(build_report(open_checkpoint(str(local))))
    # The request count the report states is the one the server saw: the root, then
    # state/ with offsets/ and commits/, each operator folder, one probe per operator and
    # ranged listings of the rest — never a request per file.
    assert report.listing["method"] == "s3-ranged"
    assert requests["LIST"] == report.listing["requests"], s3_server.requests
    assert requests["LIST"] <= 3 + 3 * len(remote.inventory.operator_ids) + math.ceil(
        remote.inventory.listed_files / 500), s3_server.requests
    # Reads, one GET each and no HEAD: metadata, every retained offsets and commit entry
    # (the ledger audit), the operator metadata and schema files and, for RocksDB, the
    # newest zip of each partition (its numKeys and SST list).
    committed = remote.last_committed_batch + 1
    zips = sum(1 for i in remote.inventory.instances.values()
               if i.latest_snapshot(committed) is not None and i.of_kind("zip"))
    ledger = len(remote.planned_batches) + len(remote.committed_batches)
    schemas = len(store_schemas(remote))
    operator_files = len({m.operator_id for m in remote.inventory.meta_files
                          if m.kind.startswith("operator-metadata")})
    assert requests["GET"] == 1 + ledger + operator_files + schemas + zips, \
        s3_server.requests
    assert requests.get("HEAD", 0) == 0, s3_server.requests
    assert batch_timeline(remote).rows == batch_timeline(open_checkpoint(str(local))).rows


def assert_each_file_read_once(s3_server) -> None:
    reads = Counter(path for method, path, query in s3_server.requests if method == "GET"
                    and "list-type" not in parse_qs(query) and path.count("/") > 1)
    assert reads and max(reads.values()) == 1, reads.most_common(3)


@pytest.mark.parametrize("page", [1000, 7])
@pytest.mark.parametrize("name", ["hdfs", "rocksdb", "join", "tws", "session-window"])
def test_parallel_listing_equals_the_sequential_one(name, page, reference_checkpoints,
                                                    small_queries, s3_server):
    """Counts, bytes, findings — the whole report — and the listing itself are the same
    whichever way S3 is listed; with 7-object pages every ranged group spans several pages
    and ends mid-page."""
    from statekit.checkpoint.s3_fast import s3_fast_for

    local = checkpoint_for(name, reference_checkpoints, small_queries)
    url = s3_server.upload(str(local), "checkpoints", f"{name}-paged")
    fast = open_checkpoint(url, s3_server.storage_options())
    s3_fast_for(fast.fs).max_keys = page
    slow = open_checkpoint(url, s3_server.storage_options())
    slow.listing_method = "sequential"
    assert sorted(f.path for f in fast.inventory.all_files()) == \
        sorted(f.path for f in slow.inventory.all_files())
    assert fast.inventory.checksums == slow.inventory.checksums
    assert sorted(m.path for m in fast.inventory.meta_files) == \
        sorted(m.path for m in slow.inventory.meta_files)
    fast_report, slow_report = build_report(fast), build_report(slow)
    assert comparable(fast_report) == comparable(slow_report)
    assert fast_report.state_files == fast.inventory.listed_files - len(
        fast.inventory.meta_files) - len(fast.inventory.unknown_files) - \
        fast.inventory.crc_files > 0
    assert fast_report.listing["method"] == "s3-ranged"
    assert slow_report.listing["method"] == "sequential"


def test_cli_report_on_s3(reference_checkpoints, s3_server, capsys):
    local = reference_checkpoints.get("rocksdb").checkpoint
    url = s3_server.upload(str(local), "checkpoints", "cli-rocksdb")
    options = []
    for key, value in s3_server.storage_options().items():
        options += ["--storage-option", f"{key}={json.dumps(value)}"]
    s3_server.reset()  # the listing and the small files: each read once
    assert run_cli(_cli(), "statekit", ["report", url, *options, "--no-decode", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["location"] == url and data["provider"] == "rocksdb"
    assert_each_file_read_once(s3_server)
    assert all(p["keys"] is not None for p in data["stores"][0]["partitions"])
    s3_server.reset()  # and decoding what a restart loads: each SST in one request
    assert run_cli(_cli(), "statekit", ["report", url, *options, "--json"]) == 0
    decoded = json.loads(capsys.readouterr().out)
    assert decoded["restart"]["verdict"] == "restarts" and decoded["verification"]["files"]
    reads = Counter(path for method, path, query in s3_server.requests if method == "GET"
                    and "list-type" not in parse_qs(query) and "/SSTs/" in path)
    assert reads and max(reads.values()) == 1, reads.most_common(3)
    assert run_cli(_cli(), "statekit", ["report", url + "-missing", *options]) == 3
    assert "no such file or folder" in capsys.readouterr().err


def _cli():
    from statekit.cli.main import cli

    return cli
