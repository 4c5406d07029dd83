"""Which key columns each operator's state is placed by in a repartition."""

from __future__ import annotations

import pytest

from statekit.support.errors import UnsupportedFormat
from statekit.writes.partition_key import partition_key_fields


@pytest.mark.parametrize(("operator", "store", "fields", "expected"), [
    ("stateStoreSave", "default", ["user", "day"], ["user", "day"]),
    ("applyInPandasWithState", "default", ["user"], ["user"]),
    ("dedupe", "default", [], []),
    ("sessionWindowStateStoreSaveExec", "default", ["user", "sessionStartTime"], ["user"]),
    ("sessionWindowStateStoreSaveExec", "default", ["sessionStartTime"], []),
    ("symmetricHashJoin", "left-keyToNumValues", ["k", "w"], ["k", "w"]),
    ("symmetricHashJoin", "right-keyToNumValues", ["k"], ["k"]),
    ("symmetricHashJoin", "left-keyWithIndexToValue", ["k", "w", "index"], ["k", "w"]),
    ("symmetricHashJoin", "right-keyWithIndexToValue", ["k", "index"], ["k"]),
])
def test_each_store_is_placed_by_its_grouping_key(operator, store, fields, expected):
    assert partition_key_fields(operator, store, fields, shown="s") == expected


@pytest.mark.parametrize(("operator", "store", "fields", "message"), [
    ("sessionWindowStateStoreSaveExec", "default", ["user", "start"], "sessionStartTime"),
    ("sessionWindowStateStoreSaveExec", "default", [], "sessionStartTime"),
    ("symmetricHashJoin", "left-keyWithIndexToValue", ["k"], "'index'"),
    ("symmetricHashJoin", "middle-keyToNumValues", ["k"], "not one of the four"),
    ("symmetricHashJoin", "default", ["k"], "not one of the four"),
    ("transformWithStateExec", "default", ["k"], "knows how to partition"),
])
def test_unexpected_shapes_are_refused_with_the_reason(operator, store, fields, message):
    with pytest.raises(UnsupportedFormat, match=message) as refused:
        partition_key_fields(operator, store, fields, shown="state/0/_metadata/schema")
    assert refused.value.path == "state/0/_metadata/schema"
