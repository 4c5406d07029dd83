"""HDFS-backed state replayed in executor tasks, for the jobs that move it (repartition,
migrate into RocksDB): one task per source partition loads its files — newest snapshot, then
the deltas — exactly as Spark's HDFS provider does, and hands the live rows to the JVM with
their partition-key columns decoded (timestamps and dates as raw micros and days, rebuilt in
Spark without a time-zone round trip).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

import fsspec
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from statekit.formats.records import read_state_file
from statekit.formats.schema import parse_struct_json
from statekit.formats.unsafe_row import RawValue, make_decoder
from statekit.jobs.connect import one_row_per_task
from statekit.jobs.staged_writes import KEY_BYTES, VALUE_BYTES
from statekit.support.errors import UnsupportedFormat

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint

S = TypeVar("S", bound=Sequence[Any])
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)
_TEMPORAL = ("timestamp", "date", "timestamp_ntz")


@dataclass(frozen=True)
class SourceTask:
    """What one executor task reads: one source partition's files to load version N + 1."""

    partition: int
    files: tuple[tuple[str, str], ...]
    """``(fs path, kind)`` in load order."""


def _mentions_temporal(field_type: Any) -> bool:
    if isinstance(field_type, str):
        return field_type in _TEMPORAL
    if isinstance(field_type, dict):
        return any(_mentions_temporal(v) for v in field_type.values())
    if isinstance(field_type, list):
        return any(_mentions_temporal(v) for v in field_type)
    return False


def key_columns(key_schema_json: str, shown: str) -> tuple[list[dict], list[str], list[str]]:
    """The partition-key columns as the job carries them: (Spark field JSON per column, SQL
    expression per column rebuilding the key's exact type, conversion per column).

    Timestamps and dates travel as their raw micros / days (``timestamp_micros`` /
    ``date_from_unix_date`` rebuild them in Spark exactly, with no time-zone round trip).
    """
    schema = json.loads(key_schema_json)
    fields, exprs, converts = [], [], []
    for index, field in enumerate(schema.get("fields") or []):
        column = f"k{index}"
        kind = field["type"]
        if kind == "timestamp":
            fields.append({"name": column, "type": "long", "nullable": True, "metadata": {}})
            exprs.append(f"timestamp_micros(`{column}`)")
            converts.append("timestamp")
        elif kind == "date":
            fields.append({"name": column, "type": "integer", "nullable": True,
                           "metadata": {}})
            exprs.append(f"date_from_unix_date(`{column}`)")
            converts.append("date")
        elif _mentions_temporal(kind):
            raise UnsupportedFormat(f"state key column {field['name']!r} has type "
                                    f"{json.dumps(kind)}: timestamp_ntz and temporal values "
                                    "inside nested key columns are not supported", path=shown)
        else:
            fields.append({**field, "name": column})
            exprs.append(f"`{column}`")
            converts.append("")
    return fields, exprs, converts


def _convert(value: Any, how: str) -> Any:
    if value is None or not how:
        return value
    if how == "timestamp":
        return (value - _EPOCH_UTC) // dt.timedelta(microseconds=1)
    return (value - _EPOCH_DATE).days


def live_state(url: str, storage_options: dict, codec: str, task: SourceTask
               ) -> dict[bytes, bytes]:
    """In an executor: one source partition's live state at the planned version, replayed
    from its files (snapshot, then deltas) exactly as Spark's HDFS provider loads it."""

    fs, _ = fsspec.core.url_to_fs(url, **storage_options)
    state: dict[bytes, bytes] = {}
    for path, kind in task.files:
        for record in read_state_file(fs, path, codec, kind):
            if record.value is None:
                state.pop(record.key, None)
            else:
                state[record.key] = record.value
    return state


def representable(values: S, url: str) -> S:
    """``values`` (decoded key columns), refused when one is a ``RawValue``: a value Python
    cannot represent, which statekit can neither hash nor hand to Spark."""

    if any(isinstance(v, RawValue) for v in values):
        raise UnsupportedFormat("a state key holds a value Python cannot represent (e.g. a "
                                "date outside years 1-9999)", path=url)
    return values


def _replay_chunks(url: str, storage_options: dict, codec: str, key_schema_json: str,
                   converts: list[str], chunk: int
                   ) -> Callable[[SourceTask], Iterator[tuple[list, list, list]]]:
    """The executor function: a source partition's live state (snapshot, then deltas), in
    chunks of ``(key columns, key bytes, value bytes)``, the columns decoded for the hash.

    Column-wise on purpose: the bytes are never repacked into per-row tuples."""

    def run(task: SourceTask) -> Iterator[tuple[list, list, list]]:
        state = live_state(url, storage_options, codec, task)
        decode = make_decoder(parse_struct_json(key_schema_json), as_tuple=True)
        width = len(converts)
        items = iter(state.items())
        while True:
            pairs = list(islice(items, chunk))
            if not pairs:
                return
            keys = [k for k, _ in pairs]
            decoded = [decode(k) for k in keys]
            columns = [list(c) for c in zip(*decoded, strict=True)] if decoded and width \
                else [[] for _ in range(width)]
            for index, how in enumerate(converts):
                column = representable(columns[index], url)
                if how:
                    columns[index] = [_convert(c, how) for c in column]
            yield columns, keys, [v for _, v in pairs]

    return run


ARROW_ROWS = 32_768
"""Rows per Arrow batch between the replaying Python workers and the JVM."""


def _replay_arrow(url: str, storage_options: dict, codec: str, key_schema_json: str,
                  converts: list[str], schema_json: str, tasks: list[SourceTask]
                  ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The executor function (``mapInArrow``): each input row is the index of a source
    partition's task; out come its live rows as Arrow batches (columns, key bytes, value
    bytes)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        schema = to_arrow_schema(StructType.fromJson(json.loads(schema_json)))
        replay = _replay_chunks(url, storage_options, codec, key_schema_json, converts,
                                ARROW_ROWS)
        for batch in batches:
            for index in batch.column(0).to_pylist():
                for columns, keys, values in replay(tasks[index]):
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(data, type=field.type) for data, field in
                         zip([*columns, keys, values], schema, strict=True)], schema=schema)

    return run


def keyed_frame(spark: SparkSession, source_url: str, storage_options: dict, codec: str,
                 tasks: list[SourceTask], key_schema_json: str, shown: str
                 ) -> tuple[Any, list[str]]:
    """Every live row of a store's source partitions, replayed by one task per source
    partition and handed to the JVM in Arrow batches: ``(frame, exprs)``, the frame's
    columns being the key columns, the key bytes and the value bytes, and ``exprs`` the
    SQL rebuilding each key column's exact type."""

    fields, exprs, converts = key_columns(key_schema_json, shown)
    schema = StructType.fromJson({"type": "struct", "fields": [
        *fields,
        {"name": KEY_BYTES, "type": "binary", "nullable": True, "metadata": {}},
        {"name": VALUE_BYTES, "type": "binary", "nullable": True, "metadata": {}}]})
    frame = one_row_per_task(spark, len(tasks)).mapInArrow(
        _replay_arrow(source_url, storage_options, codec, key_schema_json, converts,
                      schema.json(), tasks), schema)
    return frame, exprs


def source_tasks(ckpt: Checkpoint, operator_id: int, store: str, version: int
                 ) -> list[SourceTask]:
    """One task per source partition: the files Spark would load for ``version``."""
    return [SourceTask(i.partition, tuple((f.path, f.kind) for f in i.files_to_load(version)))
            for i in ckpt.inventory.instances_of(operator_id, store)]


