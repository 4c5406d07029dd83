"""A stream-stream join's two stores per side must agree, or its first batch fails.

Each side of a join keeps ``keyToNumValues`` (join key → how many rows it holds) and
``keyWithIndexToValue`` ((join key, index) → a row). Spark reads them together: a key counted
``n`` times whose rows ``0 … n-1`` are not all there fails the batch that reaches it
(``STREAM_STREAM_JOIN_INCONSISTENT_STATE``) — and with a watermark every batch reaches every
key (old rows are evicted by a scan). Each store can load cleanly on its own: only replaying
both at the same version shows it (one store restored from an older copy, or one of its
files replaced by another version's).

The other way round does not fail: a row at an index its key does not count (or of a key
not counted at all) is never read — but Spark never leaves one (removing a row moves the
last one into its place; a key whose count drops to zero loses its rows), so one is a file
from another version, and the values at the counted indexes are that version's too: the
restart runs on other state (measured: a ``keyWithIndexToValue`` delta replaced by a newer
one restarts, loads changed and extra rows, and its sink misses joined rows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import replay_files, store_schemas
from statekit.formats.unsafe_row import make_decoder
from statekit.support.errors import StatekitError

Chain = Callable[[tuple[int, str, int]], list[StateFile] | None]


@dataclass(frozen=True)
class Disagreement:
    side: str
    detail: str
    """The first key the two stores disagree on, and how."""
    fails: bool
    """A counted row is missing (the batch reaching it fails); else rows are not counted
    (the restart runs on another version's rows)."""


def inconsistent_join_keys(ckpt: Checkpoint, op_id: int, partition: int, chain: Chain
                           ) -> Disagreement | None:
    """Where the two stores of a side of one join partition disagree at the version
    ``chain`` loads (a missing row before an uncounted one), or ``None`` when both sides
    agree (or cannot be read: other rules say why)."""
    uncounted: Disagreement | None = None
    try:
        schemas = store_schemas(ckpt)
    except StatekitError:
        return None
    for side in ("left", "right"):
        counts_store, rows_store = f"{side}-keyToNumValues", f"{side}-keyWithIndexToValue"
        counts_schema, rows_schema = schemas.get((op_id, counts_store)), \
            schemas.get((op_id, rows_store))
        counts_files = chain((op_id, counts_store, partition))
        rows_files = chain((op_id, rows_store, partition))
        if None in (counts_schema, rows_schema, counts_files, rows_files):
            continue
        assert counts_schema is not None and rows_schema is not None
        if not (counts_schema.key and counts_schema.value and rows_schema.key):
            continue
        try:
            counts = replay_files(ckpt, counts_files or [])
            rows = replay_files(ckpt, rows_files or [])
            key_of = make_decoder(counts_schema.key, as_tuple=True)
            count_of = make_decoder(counts_schema.value, as_tuple=True)
            row_key_of = make_decoder(rows_schema.key, as_tuple=True)
        except StatekitError:
            continue
        try:
            missing, extra = _disagreements(rows, counts, key_of, count_of, row_key_of)
        except StatekitError:  # rows that do not fit the schema: the schema rules name it
            continue
        if missing is not None:
            return Disagreement(side, missing, fails=True)
        if extra is not None and uncounted is None:
            uncounted = Disagreement(side, extra, fails=False)
    return uncounted


def _disagreements(rows: Mapping[bytes, Any], counts: Mapping[bytes, tuple[bytes, Any]],
                   key_of: Callable[[bytes], Any], count_of: Callable[[bytes], Any],
                   row_key_of: Callable[[bytes], Any]) -> tuple[str | None, str | None]:
    """``(first missing counted row, first uncounted row)``, each ``None`` when there is
    none."""
    present = {tuple(row_key_of(key_bytes)) for key_bytes in rows}
    counted: dict[tuple[Any, ...], int] = {}
    missing = None
    for key_bytes, (value, _) in counts.items():
        key = tuple(key_of(key_bytes))
        (number, *_) = count_of(value)
        if not isinstance(number, int):
            continue
        counted[key] = number
        gap = next((i for i in range(number) if (*key, i) not in present), None)
        if gap is not None and missing is None:
            missing = f"{key!r} counts {number} rows, row {gap} is missing"
    extra = None
    for row_key in sorted(present, key=repr):
        key, index = row_key[:-1], row_key[-1]
        if isinstance(index, int) and index >= counted.get(key, 0):
            extra = (f"{key!r} has a row at index {index}, but counts "
                     f"{counted.get(key, 0)} rows")
            break
    return missing, extra
