"""Stateful operators as Spark records them in ``state/<op>/_metadata``.

Operator metadata tells which operator owns ``state/<op>`` (``applyInPandasWithState``,
``stateStoreSave``, ``symmetricHashJoin`` …), its store names and its partition count — the
facts Spark's ``state-metadata`` reader returns, which statekit must match without a JVM.
Version 1 lives in ``_metadata/metadata`` (one file, written at the first run); version 2 in
``_metadata/v2/<batchId>`` (one per query start, newest wins; used by transformWithState and
written by Spark's repartition), and adds per-store schema file paths and operator
properties.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statekit.checkpoint.textfile import json_object, log_version, text_lines
from statekit.formats.jsontext import loads_json
from statekit.support.errors import CorruptFile

DEFAULT_STORE = "default"


@dataclass(frozen=True)
class StoreInfo:
    """One state store of an operator (joins have four, most operators one: ``default``)."""

    name: str
    num_partitions: int
    num_cols_prefix_key: int = 0
    schema_file_paths: tuple[str, ...] = ()
    """v2 only: absolute URIs of the store's schema files (``stateSchemaFilePaths``; older
    writers used a single ``stateSchemaFilePath``)."""


@dataclass(frozen=True)
class OperatorMetadata:
    """Parsed ``_metadata/metadata`` (v1) or ``_metadata/v2/<batch>`` (v2)."""

    operator_id: int
    name: str
    stores: tuple[StoreInfo, ...]
    version: int
    batch_id: int | None = None
    """For v2: the batch (query start) the file was written at."""
    properties: Mapping[str, Any] | None = None
    path: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def state_variables(self) -> list[dict[str, Any]]:
        """transformWithState: the declared state variables (name, type, TTL) from the v2
        operator properties; timer column families included (type ``TimerState``)."""
        variables = (self.properties or {}).get("stateVariables") or []
        return [v for v in variables if isinstance(v, dict) and "stateName" in v]

    @property
    def time_mode(self) -> str | None:
        """transformWithState's ``timeMode`` (``None``/``ProcessingTime``/``EventTime``)."""
        mode = (self.properties or {}).get("timeMode")
        return mode if isinstance(mode, str) else None

    @property
    def num_partitions(self) -> int | None:
        counts = {store.num_partitions for store in self.stores}
        return counts.pop() if len(counts) == 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id, "name": self.name, "version": self.version,
            "batch_id": self.batch_id, "num_partitions": self.num_partitions,
            "stores": [{"name": s.name, "num_partitions": s.num_partitions,
                        "num_cols_prefix_key": s.num_cols_prefix_key,
                        "schema_file_paths": list(s.schema_file_paths)} for s in self.stores],
            "properties": dict(self.properties) if self.properties is not None else None,
        }


def _schema_paths(store: Mapping[str, Any]) -> tuple[str, ...]:
    paths = store.get("stateSchemaFilePaths")
    if isinstance(paths, list):
        return tuple(str(p) for p in paths)
    single = store.get("stateSchemaFilePath")
    return (str(single),) if single else ()


def _int_field(raw: Mapping[str, Any], key: str, path: str) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptFile(f"operator metadata field {key!r} is {value!r}, expected an integer",
                          path=path)
    return value


def parse_operator_metadata(data: bytes, path: str, batch_id: int | None = None
                            ) -> OperatorMetadata:
    """Parse an operator metadata file of version 1 or 2."""
    lines = text_lines(data, path)
    version = log_version(lines[0], path, "operator metadata", (1, 2))
    raw = json_object("\n".join(lines[1:]).strip() or "{}", path, 2)
    info = raw.get("operatorInfo")
    stores = raw.get("stateStoreInfo")
    if not isinstance(info, dict) or not isinstance(stores, list):
        raise CorruptFile("operator metadata lacks operatorInfo/stateStoreInfo", path=path)
    name = info.get("operatorName")
    if not isinstance(name, str):
        raise CorruptFile("operator metadata lacks operatorName", path=path)
    store_infos = []
    for store in stores:
        if not isinstance(store, dict) or not isinstance(store.get("storeName"), str):
            raise CorruptFile("a stateStoreInfo entry lacks storeName", path=path)
        store_infos.append(StoreInfo(
            name=store["storeName"],
            num_partitions=_int_field(store, "numPartitions", path),
            num_cols_prefix_key=int(store.get("numColsPrefixKey") or 0),
            schema_file_paths=_schema_paths(store),
        ))
    properties = None
    if version == 2:
        text = raw.get("operatorPropertiesJson")
        if isinstance(text, str) and text:
            try:
                properties = loads_json(text)
            except json.JSONDecodeError as bad:
                raise CorruptFile(f"operatorPropertiesJson is not JSON: {bad.msg}",
                                  path=path) from bad
    return OperatorMetadata(
        operator_id=_int_field(info, "operatorId", path),
        name=name,
        stores=tuple(store_infos),
        version=version,
        batch_id=batch_id,
        properties=properties,
        path=path,
        raw=raw,
    )


DERIVED_VERSION = 0
"""``OperatorMetadata.version`` of an operator statekit derived from the state folders
because Spark wrote no metadata file (Spark 3.5 and older, and never-restarted queries)."""
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
               "right-keyWithIndexToValue")


def derive_operator(operator_id: int, stores: list[str], num_partitions: int,
                    value_fields: list[str], key_fields: list[str] | None = None,
                    value_has_window: bool = False) -> OperatorMetadata:
    """Operator metadata for ``state/<op>`` from what its folders and schema files show.

    Spark's own ``statestore`` reader needs only the operator id and store name, so this is
    all a checkpoint without metadata needs to be read. The name is inferred where the layout
    says it unambiguously: the four join stores; a ``__dummy__`` value (dropDuplicates); an
    ``expiresAtMicros`` value (dropDuplicatesWithinWatermark); a ``groupState`` value
    (flatMapGroupsWithState / applyInPandasWithState); a key ending in ``sessionStartTime``
    with a ``struct<start, end>`` in the value (session window). A single ``default`` store
    with none of these is a streaming aggregation: it is the only other stateful operator
    Spark before 4.0 had (transformWithState, 4.0+, always writes metadata). Else
    ``unknown``.
    """
    key_fields = key_fields or []
    if set(JOIN_STORES) <= set(stores):
        name = "symmetricHashJoin"
    elif value_fields == ["__dummy__"]:
        name = "dedupe"
    elif value_fields == ["expiresAtMicros"]:
        name = "dedupeWithinWatermark"
    elif "groupState" in value_fields:
        name = "flatMapGroupsWithState"
    elif key_fields[-1:] == ["sessionStartTime"] and value_has_window:
        name = "sessionWindowStateStoreSaveExec"
    elif stores == ["default"] and value_fields:
        name = "stateStoreSave"
    else:
        name = "unknown"
    return OperatorMetadata(
        operator_id=operator_id, name=name,
        stores=tuple(StoreInfo(store, num_partitions) for store in sorted(stores)),
        version=DERIVED_VERSION, raw={"derived": True})
