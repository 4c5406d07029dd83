"""A checkpoint below an S3 prefix with characters URLs and XML escape (Hive-style ``=``, a
space, ``+``, non-ASCII) reads the same through statekit's fast S3 path as through s3fs.

Against moto's S3 server, which, as S3 does, URL-encodes listed keys when asked to
(``encoding-type=url``, which botocore always asks for). No JVM: the checkpoint is written
by tests/unit/checkpoint_builder.py.
"""

from __future__ import annotations

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.report.checkpoint_report import build_report
from tests.unit.checkpoint_builder import write_checkpoint


def _comparable(report) -> dict:
    data = report.to_dict()
    for volatile in ("location", "elapsed_s", "listing"):
        data.pop(volatile)
    return data


@pytest.mark.parametrize("prefix", ["app=fraud x/dt=2026-11-24", "ü+plus%pct/ck"])
@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_fast_path_equals_s3fs_below_a_prefix_with_escaped_characters(
        tmp_path, s3_server, prefix, provider):
    from statekit.checkpoint.s3_fast import s3_fast_for

    local = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(local), planned=6, committed=5,
                     partitions=12, provider=provider, snapshots=[3])
    url = s3_server.upload(str(local), "checkpoints", f"{provider}/{prefix}")
    fast = open_checkpoint(url, s3_server.storage_options())
    slow = open_checkpoint(url, s3_server.storage_options())
    slow.listing_method = "sequential"
    fast_report, slow_report = build_report(fast), build_report(slow)
    assert fast_report.listing["method"] == "s3-ranged"
    assert fast_report.state_files == slow_report.state_files > 12
    assert _comparable(fast_report) == _comparable(slow_report)
    assert sorted(f.path for f in fast.inventory.all_files()) == \
        sorted(f.path for f in slow.inventory.all_files())
    # the requests were signed by statekit's own presigner (verified against botocore)
    checked = s3_fast_for(fast.fs)._presigners["checkpoints"][1]
    assert checked.done() and checked.result() is not None
