"""The concurrent, level-by-level listing finds exactly what one sequential listing finds.

No JVM: layouts built on ``memory://`` (a synchronous filesystem: the thread-pool way) and on
a local folder (the ``os.scandir`` walk), each compared with the reference — one recursive
``fs.find`` and one ``ls`` per log folder. The S3 way runs against real S3-protocol servers
in tests/spark/test_object_storage.py.
"""

from __future__ import annotations

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.listing import list_checkpoint
from statekit.checkpoint.location import resolve
from statekit.checkpoint.s3_fast import parse_list_page
from statekit.report.checkpoint_report import build_report
from tests.unit.checkpoint_builder import write_checkpoint


def _layout(fs, root: str) -> None:
    """Two operators, a join-like operator with four stores, schema and metadata files,
    a stray file directly under state/ and one directly in an operator folder."""
    write_checkpoint(fs, root, planned=6, committed=5, partitions=12, snapshots=[3])
    fs.makedirs(f"{root}/state/1", exist_ok=True)
    for part in range(5):
        for store in ("left-keyToNumValues", "left-keyWithIndexToValue",
                      "right-keyToNumValues", "right-keyWithIndexToValue"):
            for version in range(1, 6):
                fs.makedirs(f"{root}/state/1/{part}/{store}", exist_ok=True)
                fs.pipe(f"{root}/state/1/{part}/{store}/{version}.delta", b"x" * version)
    fs.pipe(f"{root}/state/README", b"left by someone")
    fs.pipe(f"{root}/state/1/notes.txt", b"?")


def _listings(location):
    auto = list_checkpoint(location, state=True, log_folders=["offsets", "commits"])
    reference = list_checkpoint(location, state=True, log_folders=["offsets", "commits"],
                                method="sequential")
    return auto, reference


def _names(entries):
    return sorted((e["name"].rstrip("/"), e["type"], e.get("size")) for e in entries)


def test_memory_filesystem_listing_equals_the_sequential_one():
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    _layout(fs, "/ck")
    location = resolve("memory://ck")
    auto, reference = _listings(location)
    assert auto.stats.method == "threads"
    assert sorted(auto.files) == sorted(reference.files)
    assert len(auto.files) == 12 * 5 * 2 + 12 + 1 + 1 + 5 * 4 * 5 + 2
    for name in ("offsets", "commits"):
        assert _names(auto.folders[name]) == _names(reference.folders[name])
    # levels: state/ + 2 logs, 2 operators, then one find per sub-folder
    assert auto.stats.requests == 3 + 2 + (12 + 1) + 5
    assert auto.stats.objects == len(auto.files) + 6 + 5


def test_local_walk_equals_fsspec_find(tmp_path):
    fs = fsspec.filesystem("file")
    _layout(fs, str(tmp_path / "ck"))
    auto, reference = _listings(resolve(str(tmp_path / "ck")))
    assert auto.stats.method == "local"
    assert sorted(auto.files) == sorted(reference.files)


def test_reports_from_both_listings_are_identical(tmp_path):
    fs = fsspec.filesystem("file")
    _layout(fs, str(tmp_path / "ck"))
    fast = open_checkpoint(str(tmp_path / "ck"))
    slow = open_checkpoint(str(tmp_path / "ck"))
    slow.listing_method = "sequential"
    one, two = build_report(fast).to_dict(), build_report(slow).to_dict()
    assert one.pop("listing")["method"] == "local"
    assert two.pop("listing")["method"] == "sequential"
    one.pop("elapsed_s")
    two.pop("elapsed_s")
    assert one == two
    assert one["state_files"] > 100


NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


@pytest.mark.parametrize("namespace", [NS, ""])
def test_list_page_parses_keys_sizes_prefixes_and_token(namespace):
    body = (f'<?xml version="1.0"?><ListBucketResult {namespace}><Name>b</Name>'
            "<IsTruncated>true</IsTruncated><NextContinuationToken>tok</NextContinuationToken>"
            "<Contents><Key>state/0/1/1.delta</Key><Size>17</Size></Contents>"
            "<Contents><Key>a&amp;b</Key><Size>0</Size></Contents>"
            "<CommonPrefixes><Prefix>state/0/2/</Prefix></CommonPrefixes>"
            "</ListBucketResult>").encode()
    page = parse_list_page(body)
    assert page.objects == [("state/0/1/1.delta", 17), ("a&b", 0)]
    assert page.prefixes == ["state/0/2/"]
    assert page.next_token == "tok"


def test_list_page_pairs_keys_and_sizes_whatever_the_element_order():
    """S3-compatible stores order a ``Contents``' elements as they like, and may add an
    ``Owner`` with children: the n-th key still goes with the n-th size."""
    body = (b"<ListBucketResult><IsTruncated>false</IsTruncated>"
            b"<Contents><Size>5</Size><Key>x/1.zip</Key><ETag>\"e\"</ETag></Contents>"
            b"<Contents><Key>x/2.zip</Key><Owner><ID>o</ID><DisplayName>d</DisplayName>"
            b"</Owner><Size>9</Size></Contents></ListBucketResult>")
    page = parse_list_page(body)
    assert page.objects == [("x/1.zip", 5), ("x/2.zip", 9)]
    assert page.next_token is None


def test_list_page_decodes_url_encoded_keys_as_botocore_does():
    """statekit sends ``encoding-type=url`` (as botocore does): S3 then percent-encodes keys
    and prefixes ("+" for a space). A checkpoint below ``app=fraud x/`` must keep its name —
    undecoded, every key of it fell outside the ranged groups and the state looked empty."""
    body = (b'<ListBucketResult xmlns="x"><Name>b</Name><Prefix>app%3Dfraud+x%2F</Prefix>'
            b"<KeyCount>3</KeyCount><EncodingType>url</EncodingType>"
            b"<IsTruncated>true</IsTruncated><NextContinuationToken>a+b/c=</NextContinuationToken>"
            b"<Contents><Key>app%3Dfraud+x/state/0/1/1.delta</Key>"
            b"<ETag>&quot;e&quot;</ETag><Size>7</Size></Contents>"
            b"<Contents><Key>app%3Dfraud+x/%C3%BC%2B%25.delta</Key><Size>1</Size></Contents>"
            b"<CommonPrefixes><Prefix>app%3Dfraud+x/state/</Prefix></CommonPrefixes>"
            b"</ListBucketResult>")
    page = parse_list_page(body)
    assert page.objects == [("app=fraud x/state/0/1/1.delta", 7), ("app=fraud x/ü+%.delta", 1)]
    assert page.prefixes == ["app=fraud x/state/"]
    assert page.next_token == "a+b/c="  # continuation tokens are never encoded


def test_list_page_keeps_plus_and_percent_when_keys_are_not_url_encoded():
    body = (b"<ListBucketResult><KeyCount>1</KeyCount><IsTruncated>false</IsTruncated>"
            b"<Contents><Key>a+b%20c</Key><Size>1</Size></Contents></ListBucketResult>")
    assert parse_list_page(body).objects == [("a+b%20c", 1)]


def test_list_page_refuses_a_key_count_that_does_not_add_up():
    body = (b"<ListBucketResult><KeyCount>3</KeyCount><IsTruncated>false</IsTruncated>"
            b"<Contents><Key>a</Key><Size>1</Size></Contents></ListBucketResult>")
    with pytest.raises(ValueError):
        parse_list_page(body)


@pytest.mark.parametrize("body", [
    b"<Error><Code>AccessDenied</Code></Error>",
    b"not xml at all",
    b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
    b"<ListBucketResult><Contents><Key>k</Key><Size>x</Size></Contents></ListBucketResult>",
    b"<ListBucketResult><Contents><Key>a</Key></Contents><Contents><Size>3</Size></Contents>"
    b"</ListBucketResult>",
])
def test_list_page_refuses_what_is_not_a_listing(body):
    with pytest.raises(ValueError):
        parse_list_page(body)


@pytest.mark.parametrize("rel", [
    "0/1/5.delta", "0/1/12.snapshot", "3/17/left-keyToNumValues/9.delta",
    "0/0/7_0a1b2c3d-aaaa-bbbb-cccc-111122223333.zip", "0/4/8.changelog",
    "0/1/_metadata/schema", "0/1/SSTs/000017-43062a3e.sst", "0/_metadata/metadata",
    "0/_metadata/v2/4", "0/_stateSchema/default/0_abc", "0/x/5.delta", "0/1/a/b/5.delta",
    "0/1/5.delta.tmp", "x/1/5.delta", "0/1/SSTs/5.zip", "README", "0/1/_metadata/5.delta",
    "0/1/\u0663.delta", "0/1/\u00b25.delta", "0/1/05.delta", "0/1/5..delta", "0/1/5.DELTA",
    "0/1/.5.delta", "0/1/5", "0/1/store/5.snapshot", "00/01/5.zip", "0/1/5_x.zip",
    "0/1/store/SSTs/000009-5e1f.sst", "0/1/SSTs/a.b.sst", "0/1/SSTs/.sst", "0/1/SSTs/x.SST",
    "0/1/SSTs/x.sst.tmp", "0/1/a/b/SSTs/x.sst", "0/SSTs/x.sst", "0/1/SSTs/5.delta",
    "0/1/SSTs/sub/x.sst", "0/1/_metadata/SSTs/x.sst", "0/\u0663/SSTs/x.sst", "x/1/SSTs/x.sst",
    "0/1/SSTsx/x.sst", "0/1/x.sst",
])
def test_the_inventory_builders_inlined_classification_agrees_with_classify(rel):
    from statekit.checkpoint.inventory import InventoryBuilder
    from statekit.checkpoint.layout import StateFile, classify

    builder = InventoryBuilder("/p/state/")
    touched, _metas = builder.add([("/p/state/" + rel, 10)])
    inventory = builder.build()
    expected = classify(rel, 10, "/p/state/" + rel)
    if isinstance(expected, StateFile):
        key = (expected.operator_id, expected.store, expected.partition)
        assert touched == {key}
        assert inventory.instances[key].files == (expected,)
    else:
        assert not touched
        assert [*inventory.meta_files, *inventory.unknown_files] == [expected]


def test_the_inventory_does_not_depend_on_the_order_listing_chunks_arrive_in(tmp_path):
    """Object-store groups finish in any order; the inventory must come out the same."""
    import random

    from statekit.checkpoint.inventory import InventoryBuilder

    prefix = "/ck/state/"
    files = [(f"{prefix}0/{p}/{v}.delta", 100 + v) for p in range(6) for v in range(1, 12)]
    files += [(f"{prefix}0/{p}/.{v}.delta.crc", 12) for p in range(6) for v in range(1, 12)]
    files += [(f"{prefix}0/{p}/10.snapshot", 900) for p in range(6)]
    files += [(f"{prefix}0/_metadata/metadata", 80), (f"{prefix}0/0/_metadata/schema", 40),
              (f"{prefix}0/stray.txt", 3), (f"{prefix}0/3/", 0)]

    def built(chunks):
        builder = InventoryBuilder(prefix)
        for chunk in chunks:
            builder.add(chunk)
        return builder.build()

    reference = built([files])
    shuffled = files[:]
    random.Random(3).shuffle(shuffled)
    again = built([shuffled[i:i + 7] for i in range(0, len(shuffled), 7)])
    assert again == reference
    assert list(again.instances) == list(reference.instances)
    assert reference.listed_files == len(files) - 1  # the folder marker is no file
    assert reference.crc_files == 66
    assert [c.path for c in reference.checksums_of(f"{prefix}0/2/5.delta")] == \
        [f"{prefix}0/2/.5.delta.crc"]
    assert [m.path for m in reference.unknown_files] == [f"{prefix}0/stray.txt"]


@pytest.mark.parametrize(("environment", "configured", "expected"), [
    ({}, {}, (None, None)),
    ({"HTTP_PROXY": "http://proxy.corp:3128"}, {}, ("http://proxy.corp:3128", None)),
    ({"HTTP_PROXY": "http://ann:s3cret@proxy.corp:3128"}, {},
     ("http://proxy.corp:3128", {"Proxy-Authorization": "Basic YW5uOnMzY3JldA=="})),
    ({"HTTP_PROXY": "http://proxy.corp:3128", "NO_PROXY": "store.local"}, {}, (None, None)),
    ({"HTTP_PROXY": "http://proxy.corp:3128"}, {"http": "http://other:8080"},
     ("http://other:8080", None)),
])
def test_presigned_requests_go_through_the_proxy_botocore_would_use(
        monkeypatch, environment, configured, expected):
    import s3fs

    from statekit.checkpoint.s3_fast import _proxy_lookup

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                 "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    fs = s3fs.S3FileSystem(anon=True, skip_instance_cache=True,
                           config_kwargs={"proxies": configured} if configured else {})
    proxy, headers = _proxy_lookup(fs, "http", "store.local:9000")
    assert (str(proxy) if proxy else None, headers) == expected


def test_concurrency_comes_from_the_environment_and_bad_values_are_named(monkeypatch):
    from statekit.checkpoint.listers import (
        CONCURRENCY_ENV,
        DEFAULT_CONCURRENCY,
        concurrency_setting,
    )
    from statekit.support.errors import BadInput

    monkeypatch.delenv(CONCURRENCY_ENV, raising=False)
    assert concurrency_setting() == DEFAULT_CONCURRENCY
    monkeypatch.setenv(CONCURRENCY_ENV, "16")
    assert concurrency_setting() == 16
    for bad in ("0", "-3", "many", "1e3", "99999"):
        monkeypatch.setenv(CONCURRENCY_ENV, bad)
        with pytest.raises(BadInput) as raised:
            concurrency_setting()
        assert raised.value.path == CONCURRENCY_ENV and repr(bad) in str(raised.value)


def test_files_are_sorted_as_file_order_sorts_them():
    """The C-keyed sort of every instance's files equals the reference order."""
    import random

    from statekit.checkpoint.inventory import _file_order, _in_file_order
    from statekit.checkpoint.layout import StateFile

    generator = random.Random(5)
    for _ in range(200):
        files = [StateFile(f"/s/0/1/{generator.randint(0, 9)}.{kind}", 0, 1, "default", kind,
                           None if kind == "sst" else generator.randint(0, 6), 1,
                           generator.choice([None, "0a1b2c3d"]))
                 for kind in generator.choices(["delta", "snapshot", "zip", "changelog",
                                                "sst"], k=generator.randint(0, 12))]
        assert list(_in_file_order(files)) == sorted(files, key=_file_order)


def test_a_relative_location_travels_as_an_absolute_one(tmp_path, monkeypatch):
    """What a job hands to an executor must not depend on the executor's working folder."""
    from statekit.checkpoint.location import resolve

    (tmp_path / "ckpt").mkdir()
    monkeypatch.chdir(tmp_path)
    location = resolve("ckpt")
    assert location.url == "ckpt"  # messages keep what the user typed
    assert location.portable_url == str(tmp_path / "ckpt")
    assert resolve("memory://bucket/ckpt").portable_url == "memory://bucket/ckpt"
