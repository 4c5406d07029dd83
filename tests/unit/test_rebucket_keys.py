"""The HDFS re-bucketing's key columns: a value Python cannot represent is refused in one
line, since statekit can neither hash it nor hand it to Spark (no JVM here)."""

from __future__ import annotations

import pytest

from statekit.formats.values import RawValue
from statekit.jobs.hdfs_replay import representable
from statekit.support.errors import UnsupportedFormat


def test_representable_columns_pass_and_raw_values_are_refused():
    columns = ("k01", 3)
    assert representable(columns, "file:/c") is columns
    too_late = RawValue("date", 10**9, "days, outside Python's range")
    with pytest.raises(UnsupportedFormat, match="date outside years 1-9999") as raised:
        representable(["k01", too_late], "file:/c")
    assert raised.value.exit_code == 5 and "file:/c" in str(raised.value)
