"""A stream-stream join's two stores per side must agree, or its first batch fails.

Each side of a join keeps ``keyToNumValues`` (join key → how many rows it holds) and
``keyWithIndexToValue`` ((join key, index) → a row). Spark reads them together: a key counted
``n`` times whose rows ``0 … n-1`` are not all there fails the batch that reaches it
(``STREAM_STREAM_JOIN_INCONSISTENT_STATE``) — and with a watermark every batch reaches every
key (old rows are evicted by a scan). Each store can load cleanly on its own: only replaying
both at the same version shows it (one store restored from an older copy, or one of its
files replaced by another version's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import replay_files, store_schemas
from statekit.formats.unsafe_row import make_decoder
from statekit.support.errors import StatekitError

Chain = Callable[[tuple[int, str, int]], list[StateFile] | None]


def inconsistent_join_keys(ckpt: Checkpoint, op_id: int, partition: int, chain: Chain
                           ) -> tuple[str, str] | None:
    """``(side, first inconsistent key)`` of one join partition at the version ``chain``
    loads, or ``None`` when both sides agree (or cannot be read: other rules say why)."""
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
            found = _first_missing_row(rows, counts, key_of, count_of, row_key_of)
        except StatekitError:  # rows that do not fit the schema: the schema rules name it
            continue
        if found is not None:
            return side, found
    return None


def _first_missing_row(rows: Mapping[bytes, Any], counts: Mapping[bytes, tuple[bytes, Any]],
                       key_of: Callable[[bytes], Any], count_of: Callable[[bytes], Any],
                       row_key_of: Callable[[bytes], Any]) -> str | None:
    present = {tuple(row_key_of(key_bytes)) for key_bytes in rows}
    for key_bytes, (value, _) in counts.items():
        key = tuple(key_of(key_bytes))
        (number, *_) = count_of(value)
        if not isinstance(number, int):
            continue
        missing = next((i for i in range(number) if (*key, i) not in present), None)
        if missing is not None:
            return f"{key!r} counts {number} rows, row {missing} is missing"
    return None
