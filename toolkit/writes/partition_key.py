"""Which columns of a store's key Spark partitions an operator's state by.

A stateful operator's input is hash-partitioned by its grouping key (``pmod(hash(key), n)``,
Spark's HashPartitioning), and a state store partition holds exactly the keys whose grouping
key hashes there. A repartition must place every state row by that same grouping key — which
is the whole store key for aggregations, deduplication and (flat)mapGroupsWithState, but only
a leading part of it where the store key carries one more column:

* session windows (``sessionWindowStateStoreSaveExec``): the key is the grouping key without
  the session window, plus ``sessionStartTime`` — all sessions of a key stay together;
* stream-stream joins (``symmetricHashJoin``): ``<side>-keyToNumValues`` is keyed by the join
  key, ``<side>-keyWithIndexToValue`` by the join key plus ``index`` — the value's position
  among the key's rows. Placing both stores of both sides by the join key alone keeps every
  key's count and its indices 0..count-1 together in one partition, so they stay valid.

* transformWithState (``transformWithStateExec`` / ``transformWithStateInPandasExec``):
  one store, one column family per state variable (value, list, map state, timers, TTL
  indexes), each keyed differently (a map state's key adds the user key, a timer's the expiry
  time). Spark's own raw-row reader extracts every column family's grouping key (its
  ``partition_key`` column), so statekit places those rows by that column and has no key
  shape of its own to check: these operators are absent from :func:`partition_fields`.

The columns are checked against the shape Spark writes; anything else is refused with the
reason rather than placed by a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statekit.checkpoint.state_data import store_schemas
from statekit.support.errors import UnsupportedFormat

if TYPE_CHECKING:
    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.state_data import StoreSchema

#: Operators whose partition key is their whole state key: Spark hash-partitions their input
#: by the grouping / deduplication key, which is exactly what the store keys hold.
WHOLE_KEY_OPERATORS = {
    "stateStoreSave": "streaming aggregation",
    "dedupe": "dropDuplicates",
    "dedupeWithinWatermark": "dropDuplicatesWithinWatermark",
    "flatMapGroupsWithState": "flatMapGroupsWithState / applyInPandasWithState",
    "applyInPandasWithState": "applyInPandasWithState",
}
SESSION_WINDOW = "sessionWindowStateStoreSaveExec"
JOIN = "symmetricHashJoin"
#: Operators placed by a leading part of their store keys (see the module docstring).
PREFIX_KEY_OPERATORS = {SESSION_WINDOW: "session window aggregation",
                        JOIN: "stream-stream join"}
#: Operators placed by the grouping key Spark's raw-row reader extracts per column family.
SPARK_KEYED_OPERATORS = {"transformWithStateExec": "transformWithState",
                         "transformWithStateInPandasExec": "transformWithStateInPandas"}
_JOIN_STORE_SUFFIXES = {"-keyToNumValues": None, "-keyWithIndexToValue": "index"}


def operator_label(name: str) -> str:
    """How a user knows the operator (``stateStoreSave`` → ``streaming aggregation``)."""
    return (WHOLE_KEY_OPERATORS.get(name) or PREFIX_KEY_OPERATORS.get(name)
            or SPARK_KEYED_OPERATORS.get(name) or name)


def partition_key_fields(operator: str, store: str, key_fields: list[str], *,
                         shown: str) -> list[str]:
    """The leading key columns Spark partitions ``operator``'s ``store`` by.

    ``key_fields``: the store's key column names (its schema file); ``shown``: the schema
    file as the user names it, for the error. Raises ``UnsupportedFormat`` for operators and
    key shapes statekit does not know how to place."""
    if operator in WHOLE_KEY_OPERATORS:
        return list(key_fields)
    if operator == SESSION_WINDOW:
        return _without_last(key_fields, "sessionStartTime", operator, store, shown)
    if operator == JOIN:
        for suffix, extra in _JOIN_STORE_SUFFIXES.items():
            if store.endswith(suffix) and store[:-len(suffix)] in ("left", "right"):
                return (list(key_fields) if extra is None
                        else _without_last(key_fields, extra, operator, store, shown))
        raise UnsupportedFormat(f"stream-stream join store {store!r} is not one of the four "
                                "Spark writes (left/right-keyToNumValues, "
                                "left/right-keyWithIndexToValue)", path=shown)
    raise UnsupportedFormat(f"operator {operator} is not one statekit knows how to partition",
                            path=shown)


def partition_fields(ckpt: Checkpoint,
                     schemas: dict[tuple[int, str], StoreSchema] | None = None
                     ) -> dict[tuple[int, str], list[str]]:
    """The key columns each (operator, store) of ``ckpt`` is partitioned by (stores of
    operators without metadata, and transformWithState's, are left out: see the module
    docstring); ``schemas``: :func:`store_schemas` of ``ckpt`` when the caller has read them
    already. Raises like :func:`partition_key_fields`."""
    schemas = schemas if schemas is not None else store_schemas(ckpt)
    operators = ckpt.operators
    return {key: partition_key_fields(operators[key[0]].name, key[1],
                                      list(schema.key.names) if schema.key else [],
                                      shown=ckpt.display(schema.path))
            for key, schema in schemas.items()
            if key[0] in operators and operators[key[0]].name not in SPARK_KEYED_OPERATORS}


def _without_last(fields: list[str], expected: str, operator: str, store: str,
                  shown: str) -> list[str]:
    if not fields or fields[-1] != expected:
        raise UnsupportedFormat(f"{operator} store {store}: expected the key's last column "
                                f"to be {expected!r}, found {fields[-1:] or 'no column'}",
                                path=shown)
    return list(fields[:-1])
