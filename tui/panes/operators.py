"""Operators → partitions → files → decoded records (Enter), and back (Esc).

Keys per partition (HDFS stores) and a file's records are read in workers; leaving a level
forgets its question, so a slow decode of file A never fills the table after file B was
opened or after Esc went back to the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from statekit.checkpoint.layout import StateFile
from statekit.state.files import RecordText, first_records
from statekit.support.presentation import human_bytes
from statekit.tui.model import Snapshot
from statekit.tui.pane import Pane
from statekit.tui.work import Progress


class OperatorsPane(Pane):
    """Operators → partitions → files → decoded records (Enter), and back (Esc)."""

    LAG_WARN = 10

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path: list[str] = []  # the selected store, partition, file (row keys)
        self.files: dict[str, StateFile] = {}  # the shown partition's files by path
        self.records: dict[str, str] = {}  # row key → the whole decoded record
        #: store → live keys per partition in this snapshot, or why they cannot be counted
        self.key_counts: dict[str, dict[int, int] | str] = {}

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.key_counts = {}
        for kind in [k for k in self._current if k.startswith("keys:")]:
            self.forget(kind)  # counted on the old snapshot: the new one counts afresh
        super().show_snapshot(snapshot)

    def describe(self, key: str) -> str | None:
        return self.records.get(key) if len(self.path) == 3 else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if len(self.path) < 3 and event.row_key.value:
            self.path.append(event.row_key.value)
            self.table.filter_text = ""
            self.tui.clear_filter_box()
            self.render_snapshot()

    def back(self) -> bool:
        if not self.path:
            return False
        if len(self.path) == 3:
            self.forget("records")  # a decode still running must not fill the files
        came_from = self.path.pop()
        self.render_snapshot()
        self.table.select_key(came_from)  # the cursor returns to the row left
        return True

    def render_snapshot(self) -> None:
        if self.snapshot is None:
            return
        self.clear_detail()
        level = len(self.path)
        if level == 0:
            self._stores()
        elif level == 1:
            self._partitions(self.path[0])
        elif level == 2:
            self._files(self.path[0], int(self.path[1]))
        else:
            self._records(self.path[2])

    def _store(self, key: str):
        op, store = key.split("/", 1)
        for s in self.shown.report.stores:
            if s.operator_id == int(op) and s.store == store:
                return s
        return None

    def _stores(self) -> None:
        self.title_line.update("operators and stores — Enter: partitions")
        self.status.update(f"{len(self.shown.report.stores)} stores")
        rows = []
        for s in self.shown.report.stores:
            lags = [p.versions_since_snapshot for p in s.partitions
                    if p.versions_since_snapshot is not None]
            sizes = [p.bytes for p in s.partitions]
            lag = max(lags) if lags else None
            rows.append((f"{s.operator_id}/{s.store}", (
                str(s.operator_id), s.operator_name or "-", s.store, str(len(s.partitions)),
                sum(p.files for p in s.partitions), human_bytes(sum(sizes)),
                lag_text(lag, self.LAG_WARN), skew_text(sizes))))
        self.table.load(("op", "operator", "store", "partitions", "files", "bytes",
                         "max snapshot lag", "skew (max/mean bytes)"), rows)

    def _partitions(self, key: str) -> None:
        store = self._store(key)
        if store is None:
            self.status.update(Text(f"store {key} is gone after the refresh", style="red"))
            return
        self.title_line.update(f"operator {key}: partitions — Enter: files · Esc: back")
        sizes = [p.bytes for p in store.partitions]
        mean = sum(sizes) / len(sizes) if sizes else 0
        counted = self.key_counts.get(key)
        keys_note = ""
        if any(p.keys is None for p in store.partitions):
            if counted is None:
                keys_note = " · counting keys (replaying the state files)…"
                if not self.asking(f"keys:{key}"):
                    self._count_keys(self.shown, key)
            elif isinstance(counted, str):
                keys_note = f" · keys: {counted}"
        self.status.update(f"{len(store.partitions)} partitions, committed version "
                           f"{store.committed_version}{keys_note}")
        rows = []
        for p in store.partitions:
            keys = p.keys if p.keys is not None else (
                counted.get(p.partition) if isinstance(counted, dict) else None)
            big = mean and p.bytes > 1.5 * mean
            rows.append((str(p.partition), (
                str(p.partition), str(p.deltas), str(p.snapshots),
                lag_text(p.versions_since_snapshot, self.LAG_WARN),
                Text(human_bytes(p.bytes), style="yellow" if big else ""),
                "-" if keys is None else f"{keys:,}",
                Text("yes" if p.loadable else "NO", style="" if p.loadable else "bold red"),
                str(p.orphans))))
        self.table.load(("partition", "deltas", "snapshots", "snapshot lag", "bytes",
                         "keys", "loadable", "orphans"), rows)

    def _count_keys(self, snapshot: Snapshot, key: str) -> None:
        """Live keys per partition at the committed version, from a replay of the files
        (the report knows them only for RocksDB zips)."""

        def count(_progress: Progress) -> dict[int, int] | str:
            from statekit.state.history import store_history
            from statekit.support.errors import StatekitError

            op, store = key.split("/", 1)
            try:
                history = store_history(snapshot.ckpt, int(op), store)
            except StatekitError as error:  # not countable: said in the status line
                return str(error)
            return ({p: keys[-1] for p, keys in history.partition_keys.items() if keys}
                    if history.partition_keys else "; ".join(history.notes) or "unknown")

        self.ask(f"keys:{key}", count, partial(self._keys_counted, key), describe=key)

    def _keys_counted(self, key: str, counted: dict[int, int] | str) -> None:
        self.key_counts[key] = counted
        if self.path == [key]:
            row = self.table.cursor_row
            self._partitions(key)
            self.table.move_cursor(row=row)

    def _files(self, key: str, partition: int) -> None:
        op, store = key.split("/", 1)
        instance = self.shown.ckpt.inventory.instance(int(op), store, partition)
        self.title_line.update(f"operator {key} partition {partition}: files — Enter: records "
                               "· Esc: back")
        files = instance.files if instance else ()
        self.files = {f.path: f for f in files}
        self.status.update(f"{len(files)} files")
        rel = self.shown.ckpt.location.relative
        self.table.load(("file", "kind", "version", "bytes"), [
            (f.path, (rel(f.path), f.kind, "-" if f.version is None else str(f.version),
                      human_bytes(f.size))) for f in files])

    def _records(self, path: str) -> None:
        rel = self.shown.ckpt.location.relative(path)
        self.title_line.update(f"{rel}: decoded records (first {RECORD_LIMIT}) · Esc: back")
        file = self.files.get(path)
        if file is None:
            self.show_error(f"{rel} is gone after the refresh")
            return
        self.status.update("decoding…")
        self.table.load(("#", "op", "key", "value"), [])
        ckpt = self.shown.ckpt
        self.ask("records",
                 lambda _progress: first_records(ckpt, file, RECORD_LIMIT, DETAIL_LIMIT),
                 self._records_loaded, describe=rel)

    def _records_loaded(self, records: list[RecordText]) -> None:
        from statekit.formats.values import shorten

        numbered = list(enumerate(records, 1))
        rows = [(str(n), (str(n), r.op, r.key, shorten(r.value, 200))) for n, r in numbered]
        self.records = {str(n): f"#{n} {r.op} key {r.key}\nvalue {r.value}"
                        for n, r in numbered}
        self.table.load(("#", "op", "key", "value"), rows)
        self.status.update(f"{len(rows)} records shown")


RECORD_LIMIT = 500
DETAIL_LIMIT = 2000


def lag_text(lag: int | None, warn: int) -> Text:
    if lag is None:
        return Text("-")
    style = "bold red" if lag >= 2 * warn else "yellow" if lag >= warn else ""
    return Text(str(lag), style=style)


def skew_text(sizes: Sequence[int]) -> Text:
    if not sizes or not sum(sizes):
        return Text("-")
    skew = max(sizes) / (sum(sizes) / len(sizes))
    return Text(f"{skew:.2f}", style="yellow" if skew >= 1.5 else "")
