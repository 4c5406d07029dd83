"""Offsets, commits, operator metadata and query-id parsing, including broken files."""

from __future__ import annotations

import pytest

from statekit.checkpoint.logs import (
    batch_id_of,
    parse_commit_entry,
    parse_offset_entry,
    parse_query_id,
)
from statekit.checkpoint.operators import parse_operator_metadata
from statekit.support.errors import CorruptFile, UnsupportedFormat
from tests.unit.checkpoint_builder import offsets_text, operator_metadata_text


def test_offsets_v1_with_pinned_confs_and_positional_sources():
    text = offsets_text(7, partitions=8, provider="rocksdb", watermark=123) + "\n-"
    entry = parse_offset_entry(7, text.encode(), "ck/offsets/7")
    assert (entry.batch_id, entry.version, entry.watermark_ms) == (7, 1, 123)
    assert entry.timestamp_ms == 1_700_000_070_000
    assert entry.shuffle_partitions == 8 and entry.provider == "rocksdb" and entry.codec == "lz4"
    assert [(s.source, s.offset) for s in entry.sources] == [("0", '{"logOffset": 7}'),
                                                             ("1", None)]
    assert entry.state_format_versions == {"flatMapGroupsWithState.stateFormatVersion": "2"}


def test_offsets_v2_names_its_sources():
    entry = parse_offset_entry(3, (offsets_text(3, version=2) + "\nclicks:-").encode(), "o/3")
    assert entry.version == 2
    assert [(s.source, s.offset) for s in entry.sources] == [("0", '{"logOffset": 3}'),
                                                             ("clicks", None)]


def test_unpinned_provider_means_the_hdfs_default():
    entry = parse_offset_entry(0, b'v1\n{"batchWatermarkMs":0,"conf":{}}\n{"logOffset":0}\n', "o/0")
    assert entry.provider == "hdfs" and entry.codec == "lz4" and entry.shuffle_partitions is None


def test_commits_v1_and_v2():
    v1 = parse_commit_entry(4, b'v1\n{"nextBatchWatermarkMs":99}', "c/4")
    assert (v1.version, v1.next_watermark_ms, v1.state_unique_ids) == (1, 99, None)
    v2 = parse_commit_entry(4, b'v2\n{"nextBatchWatermarkMs":1,"stateUniqueIds":{"0":[["a"]]}}',
                            "c/4")
    assert v2.version == 2 and dict(v2.state_unique_ids) == {"0": [["a"]]}


@pytest.mark.parametrize(("data", "expected"), [
    (b"", "c/1: empty log file"),
    (b"v1\n{not json", "c/1: invalid JSON on line 2"),
    (b"v1\n[1, 2]", "c/1: line 2 is JSON but not an object"),
    (b"hello\n{}", "c/1: first line is 'hello'"),
    (b"v1\n\xff\xfe", "c/1: not UTF-8 text"),
    (b'v1\n{"nextBatchWatermarkMs":"soon"}', "c/1: nextBatchWatermarkMs is 'soon'"),
])
def test_broken_commit_files_name_the_file_and_the_problem(data, expected):
    with pytest.raises(CorruptFile) as caught:
        parse_commit_entry(1, data, "c/1")
    assert str(caught.value).startswith(expected)


def test_a_newer_log_version_is_unsupported_not_corrupt():
    with pytest.raises(UnsupportedFormat, match=r"o/1: offset log version v9; statekit reads"):
        parse_offset_entry(1, b"v9\n{}", "o/1")


def test_offsets_v2_line_without_a_colon_is_corrupt():
    with pytest.raises(CorruptFile, match="line 3 is not 'sourceId:offset'"):
        parse_offset_entry(1, b'v2\n{"conf":{}}\nno-colon-here', "o/1")


def test_operator_metadata_v1_and_v2():
    v1 = parse_operator_metadata(operator_metadata_text(name="symmetricHashJoin", stores=(
        "left-keyToNumValues", "right-keyToNumValues")).encode(), "m")
    assert v1.name == "symmetricHashJoin" and v1.num_partitions == 4
    assert [s.name for s in v1.stores] == ["left-keyToNumValues", "right-keyToNumValues"]
    v2_text = ('v2\n{"operatorInfo":{"operatorId":1,"operatorName":"transformWithStateExec"},'
               '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,'
               '"numPartitions":5,"stateSchemaFilePaths":["file:/ck/state/1/_stateSchema/x"]}],'
               '"operatorPropertiesJson":"{\\"timeMode\\":\\"EventTime\\",'
               '\\"stateVariables\\":[{\\"stateName\\":\\"count\\",'
               '\\"stateVariableType\\":\\"ValueState\\"}]}"}')
    v2 = parse_operator_metadata(v2_text.encode(), "m2", batch_id=12)
    assert (v2.version, v2.operator_id, v2.batch_id, v2.num_partitions) == (2, 1, 12, 5)
    assert v2.stores[0].schema_file_paths == ("file:/ck/state/1/_stateSchema/x",)
    assert v2.time_mode == "EventTime"
    assert v2.state_variables == [{"stateName": "count", "stateVariableType": "ValueState"}]


def test_operator_metadata_without_store_info_is_corrupt():
    with pytest.raises(CorruptFile, match="lacks operatorInfo/stateStoreInfo"):
        parse_operator_metadata(b'v1\n{"operatorInfo":{}}', "m")


def test_query_id_and_log_names():
    assert parse_query_id(b'{"id":"abc"}', "metadata") == "abc"
    with pytest.raises(CorruptFile, match="no query 'id'"):
        parse_query_id(b'{"x":1}', "metadata")
    assert [batch_id_of(n) for n in ("12", ".12.crc", "12.tmp", "o/9.compact")] == [
        12, None, None, 9]
