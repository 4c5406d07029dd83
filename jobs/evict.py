"""The Spark side of ``statekit evict``: the source's state minus the selected rows, verified.

Every store's live rows are rebuilt by statekit in executor tasks, one per source partition,
from the files (HDFS snapshot + deltas; RocksDB zip + SSTs, then changelogs), each row
carrying its key and value decoded to Spark's types (``key``, ``value``: the columns of
Spark's ``statestore`` reader, so a ``--where`` reads the same), the version that last wrote
it (:data:`statekit.writes.evict.CHANGED_AT`, the key age of ``statekit growth``) and
the raw bytes. Spark evaluates the selection on those rows:

* the removed rows are materialized once (``localCheckpoint``): their count per partition,
  a decoded sample, and the expected difference for the verification;
* the kept rows' bytes — never re-encoded — are written as the target's state at version
  N + 2: HDFS ``.snapshot`` files (:func:`statekit.jobs.repartition.write_snapshots`), or
  RocksDB files by Spark's own ``StateRewriter`` (:func:`statekit.jobs.migrate
  .rewrite_into_rocksdb`), each row in the partition ``pmod(hash(key), n)`` it came from.

The verification reads both checkpoints through Spark's ``statestore`` reader: the source's
rows at batch N minus the removed rows must equal the target's at N + 1 as multisets, every
target row must sit in its hash partition, and for a selection Spark can evaluate on its own
rows (no key age in it) no target row may still match it. Only then is the target published.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.state_data import file_records, replay_files, store_schemas
from statekit.formats.schema import parse_struct_json
from statekit.formats.unsafe_row import RawValue, make_decoder
from statekit.jobs.connect import one_row_per_task
from statekit.jobs.errors import first_line, is_spark_error
from statekit.jobs.migrate import rewrite_into_rocksdb
from statekit.jobs.raw_rows import read_raw_rows
from statekit.jobs.staged_writes import (
    KEY_BYTES,
    MISPLACED,
    VALUE_BYTES,
    WrittenPartition,
    each_store,
    multiset_diff,
    placement,
    point_schemas_at_target,
    staged_job,
    write_snapshots,
)
from statekit.jobs.state_reader import (
    StateTarget,
    read_state,
    reader_confs,
    session_confs,
    spark_url,
)
from statekit.state.history import age_chain
from statekit.support.errors import BadInput, JobFailed
from statekit.writes.evict import CHANGED_AT, SAMPLE_ROWS
from statekit.writes.partition_key import partition_fields
from statekit.writes.target import commit_entry, write_logs

STILL_SELECTED = "__statekit_still_selected"
"""A verification's flag column: the selection still matches the target row."""

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from statekit.checkpoint.checkpoint import Checkpoint
    from statekit.checkpoint.layout import StateFile
    from statekit.checkpoint.state_data import StoreSchema
    from statekit.writes.evict import EvictPlan, StoreSelection
    from statekit.writes.staging import Staging

PARTITION = "__statekit_partition"
ROWS_PER_BATCH = 16_384


@dataclass(frozen=True)
class AgedTask:
    """What one executor task rebuilds: one source partition's rows, with key ages."""

    partition: int
    chain: tuple[StateFile, ...]
    """Base (snapshot or zip) then change files, in order."""
    older_zip: StateFile | None = None
    """A RocksDB store without changelogs: an older retained zip; a key with the same value
    there has not changed since (``statekit growth``'s notion for such stores)."""


def aged_tasks(ckpt: Checkpoint, operator_id: int, store: str, version: int,
               ages: bool) -> list[AgedTask]:
    """One task per source partition: the files rebuilding ``version`` — from the earliest
    retained base when key ages matter (``ages``), else Spark's own load path."""

    tasks = []
    for instance in ckpt.inventory.instances_of(operator_id, store):
        chain = age_chain(instance, version) if ages else instance.files_to_load(version)
        older = None
        if ages and chain and chain[0].kind == "zip":
            zips = [f for f in instance.of_kind("zip")
                    if f.version is not None and f.version < (chain[0].version or 0)]
            older = min(zips, key=lambda f: f.version or 0) if zips else None
        tasks.append(AgedTask(instance.partition, tuple(chain), older))
    return tasks


def aged_state(ckpt: Checkpoint, task: AgedTask) -> dict[bytes, tuple[bytes, int]]:
    """One partition's live rows ``{key: (value, version that last wrote it)}``, replayed
    like Spark loads them (runs in an executor)."""

    state = replay_files(ckpt, task.chain)
    if task.older_zip is not None and task.chain:
        base = task.chain[0].version
        old_version = task.older_zip.version or 0
        for record in file_records(ckpt, task.older_zip):
            row = state.get(record.key)
            if row is not None and row[1] == base and row[0] == record.value:
                state[record.key] = (row[0], old_version)
    return state


def _rows_function(url: str, storage_options: dict, schema_json: str, key_json: str,
                   value_json: str | None, tasks: list[AgedTask]
                   ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The executor function (``mapInArrow``): each input row is a task index; out come the
    task's rows as Arrow batches (partition, changed-at, key, value, key and value bytes)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        # timestamps leave as UTC instants (statekit decodes them as aware datetimes)
        schema = to_arrow_schema(StructType.fromJson(json.loads(schema_json)),
                                 timezone="UTC")
        ckpt = open_checkpoint(url, storage_options)
        decode_key = make_decoder(parse_struct_json(key_json), as_tuple=True)
        decode_value = (make_decoder(parse_struct_json(value_json), as_tuple=True)
                        if value_json else None)

        def checked(row: tuple, what: str, task: AgedTask) -> tuple:
            if any(isinstance(v, RawValue) for v in row):
                raise BadInput(f"partition {task.partition}: a state {what} holds a value "
                               "Python cannot represent (e.g. a date outside years 1-9999)",
                               path=url)
            return row

        for batch in batches:
            for index in batch.column(0).to_pylist():
                task = tasks[index]
                items = list(aged_state(ckpt, task).items())
                for at in range(0, len(items), ROWS_PER_BATCH):
                    chunk = items[at:at + ROWS_PER_BATCH]
                    columns: list[list[Any]] = [
                        [task.partition] * len(chunk), [v for _, (_, v) in chunk],
                        [checked(decode_key(k), "key", task) for k, _ in chunk]]
                    if decode_value is not None:
                        columns.append([checked(decode_value(v), "value", task)
                                        for _, (v, _) in chunk])
                    columns += [[k for k, _ in chunk], [v for _, (v, _) in chunk]]
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(data, type=f.type) for data, f in
                         zip(columns, schema, strict=True)], schema=schema)

    return run


def store_rows(spark: SparkSession, ckpt: Checkpoint, schema: StoreSchema, tasks: list[AgedTask],
               storage_options: dict[str, Any]) -> DataFrame:
    """A store's live rows as statekit rebuilds them: ``key``, ``value``, ``CHANGED_AT``,
    ``PARTITION`` and the raw bytes, one task per source partition."""

    key_json = schema.file.raw["key"]
    value_json = schema.file.raw.get("value") if schema.value is not None else None
    fields = [{"name": PARTITION, "type": "integer", "nullable": False, "metadata": {}},
              {"name": CHANGED_AT, "type": "long", "nullable": False, "metadata": {}},
              {"name": "key", "type": json.loads(key_json), "nullable": True, "metadata": {}}]
    if value_json:
        fields.append({"name": "value", "type": json.loads(value_json), "nullable": True,
                       "metadata": {}})
    fields += [{"name": KEY_BYTES, "type": "binary", "nullable": True, "metadata": {}},
               {"name": VALUE_BYTES, "type": "binary", "nullable": True, "metadata": {}}]
    frame_schema = StructType.fromJson({"type": "struct", "fields": fields})
    return one_row_per_task(spark, len(tasks)).mapInArrow(
        _rows_function(ckpt.location.portable_url, storage_options, frame_schema.json(), key_json,
                       value_json, tasks), frame_schema)


def whole_key_rows(spark: SparkSession, path: str, batch: int, operator_id: int,
                   store: str) -> DataFrame:
    """transformWithState's rows as Spark's raw-row reader gives them, every column family
    (state variables, timers, TTL indexes), shaped like :func:`store_rows`' frames: ``key``
    is the grouping key Spark extracts from each row, ``value`` the column family and the
    row's bytes (base64), ``PARTITION`` the partition the row is in (the reader's partition,
    one per state store partition), ``CHANGED_AT`` unknown (-1)."""

    raw = read_raw_rows(spark, path, batch, operator_id, store)
    return raw.select(
        F.spark_partition_id().alias(PARTITION), F.lit(-1).cast("long").alias(CHANGED_AT),
        F.col("partition_key").alias("key"),
        F.struct(F.col("column_family_name").alias("column_family"),
                 F.base64("key_bytes").alias("key_bytes"),
                 F.base64("value_bytes").alias("value_bytes")).alias("value"),
        F.col("key_bytes").alias(KEY_BYTES), F.col("value_bytes").alias(VALUE_BYTES))


def selected(predicate: str) -> Column:
    """The rows a predicate selects (SQL NULL: not selected)."""

    return F.coalesce(F.expr(predicate), F.lit(False))


def check_predicate(frame: DataFrame, selection: StoreSelection, shown: str) -> None:
    """Refuse (exit 3, Spark's own message) a predicate Spark cannot evaluate on the rows —
    before anything is written."""

    # transformWithState: whole grouping keys only, so the predicate sees nothing else
    rows = frame.select("key") if selection.whole_keys else frame
    try:
        rows.where(selected(selection.predicate)).schema  # noqa: B018 - analysis only
    except Exception as error:
        if is_spark_error(error):
            scope = (" (transformWithState: --where sees key.*, the grouping key, only)"
                     if selection.whole_keys else "")
            raise BadInput(f"operator {selection.operator_id} store {selection.store}: the "
                           f"selection cannot be evaluated{scope}: {first_line(error)}",
                           path=shown) from None
        raise


def _row_json(frame: DataFrame) -> Column:
    """A row as Spark's ``to_json`` of its key and value: how removed, source and target rows
    are compared."""

    columns = ["key", "value"] if "value" in frame.columns else ["key"]
    return F.to_json(F.struct(*columns)).alias("row")


def _as_json(frame: DataFrame) -> DataFrame:
    return frame.select(_row_json(frame))


@dataclass(frozen=True)
class Removed:
    """One store's removed rows, computed once."""

    rows: DataFrame
    """``PARTITION`` and the row as JSON (Spark's ``to_json`` of key and value)."""
    per_partition: list[int]
    sample: list[dict[str, Any]]


def removed_rows(frame: DataFrame, selection: StoreSelection, partitions: int) -> Removed:
    if not selection.touched:
        nothing = frame.sparkSession.createDataFrame([], f"{PARTITION} int, row string")
        return Removed(nothing, [0] * partitions, [])
    chosen = frame.where(selected(selection.predicate))
    rows = chosen.select(PARTITION, CHANGED_AT, _row_json(frame)).localCheckpoint(eager=True)
    counts: dict[int, int] = dict(rows.groupBy(PARTITION).count().collect())
    sample = [{"partition": r[PARTITION], "changed_at": r[CHANGED_AT], **json.loads(r["row"])}
              for r in rows.limit(SAMPLE_ROWS).collect()]
    return Removed(rows.select(PARTITION, "row"),
                   [int(counts.get(p, 0)) for p in range(partitions)], sample)


@dataclass(frozen=True)
class EvictCheck:
    operator_id: int
    store: str
    source_rows: int
    removed_rows: int
    target_rows: int
    missing: int
    """Rows the source has, not removed, that the target lacks."""
    extra: int
    """Rows the target has beyond the source minus the removed rows."""
    misplaced: int
    still_selected: int | None
    """Target rows the selection still matches, on Spark's own rows (None: the selection
    needs key ages, which only statekit's replay carries)."""

    @property
    def ok(self) -> bool:
        return (self.missing == 0 and self.extra == 0 and self.misplaced == 0
                and not self.still_selected
                and self.source_rows - self.removed_rows == self.target_rows)

    def problem(self) -> str:
        return (f"operator {self.operator_id} store {self.store}: {self.source_rows} source "
                f"rows − {self.removed_rows} removed ≠ {self.target_rows} target rows, "
                f"{self.missing} missing, {self.extra} extra, {self.misplaced} misplaced, "
                f"{self.still_selected or 0} still selected")


def verify_evict(spark: SparkSession, *, source_path: str, target_path: str, plan: EvictPlan,
                 removed: dict[tuple[int, str], Removed],
                 key_fields: dict[tuple[int, str], list[str]]) -> tuple[EvictCheck, ...]:
    base = plan.base

    def check(selection: StoreSelection) -> EvictCheck:
        key = (selection.operator_id, selection.store)

        def rows(path: str, batch: int) -> DataFrame:
            if selection.whole_keys:
                return whole_key_rows(spark, path, batch, *key)
            return read_state(spark, StateTarget(path, key[0], selection.operator_name, key[1],
                                                 batch_id=batch))

        source = _as_json(rows(source_path, base.last_committed))
        target_rows = rows(target_path, base.repartition_batch)
        if selection.whole_keys:  # placed by Spark's own grouping-key extraction
            names = target_rows.schema["key"].dataType.names  # type: ignore[attr-defined]
            in_partition, fields = F.col(PARTITION), list(names)
        else:
            in_partition, fields = F.col("partition_id"), key_fields[key]
        flags = {MISPLACED: in_partition != F.expr(placement(fields, base.to_partitions))}
        if selection.touched and CHANGED_AT not in selection.predicate:
            flags[STILL_SELECTED] = selected(selection.predicate)
        target = target_rows.select(_row_json(target_rows),
                                    *(flag.alias(name) for name, flag in flags.items()))
        diff = multiset_diff(source, target, flags, removed=removed[key].rows.select("row"))
        return EvictCheck(key[0], key[1], diff.source_rows, diff.removed_rows,
                          diff.target_rows, diff.missing, diff.extra, diff.flagged[MISPLACED],
                          diff.flagged.get(STILL_SELECTED))

    return tuple(each_store(plan.stores, check).values())


@dataclass(frozen=True)
class EvictResult:
    plan: EvictPlan
    written: dict[str, list[WrittenPartition]] | None
    """None: a dry run."""
    checks: tuple[EvictCheck, ...] | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.written is None, "plan": self.plan.to_dict(),
                "seconds": round(self.seconds, 3),
                "written": None if self.written is None else
                {k: [asdict(w) for w in v] for k, v in self.written.items()},
                "verification": None if self.checks is None else
                {"ok": all(c.ok for c in self.checks),
                 "stores": [{**asdict(c), "ok": c.ok} for c in self.checks]}}


def run_evict(spark: SparkSession, ckpt: Checkpoint, plan: EvictPlan, staging: Staging, *,
              storage_options: dict[str, Any], dry_run: bool = False, verify: bool = True,
              progress: Callable[[str], None] = lambda _m: None,
              fail_on: str | None = None) -> EvictResult:
    """Dry-run (count and sample the rows to remove) or write, verify and publish ``plan``.

    On any failure the staging folder is removed and nothing is published; the source is
    only ever read."""

    started = time.perf_counter()
    base = plan.base
    schemas = store_schemas(ckpt)
    placed_by = partition_fields(ckpt, schemas)
    frames = {}
    for selection in plan.stores:
        key = (selection.operator_id, selection.store)
        if selection.whole_keys:  # its schema files are Spark's to read
            with session_confs(spark, reader_confs(ckpt)):
                frames[key] = whole_key_rows(spark, spark_url(ckpt.location.portable_url),
                                             base.last_committed, *key)
            shown = ckpt.display(ckpt.location.path("state", str(key[0])))
        else:
            schema = schemas[key]
            frames[key] = store_rows(spark, ckpt, schema, aged_tasks(
                ckpt, *key, base.last_committed + 1, plan.needs_age and selection.touched),
                storage_options)
            shown = ckpt.display(schema.path)
        check_predicate(frames[key], selection, shown)
    with session_confs(spark, reader_confs(ckpt)):
        if dry_run:
            with staged_job(spark, ckpt, None, "evict dry run"):
                progress("selecting the rows to remove…")
                _removed(plan, frames)
            return EvictResult(plan, None, None, time.perf_counter() - started)
        with staged_job(spark, ckpt, staging, "evict"):
            progress("selecting the rows to remove…")
            removed = _removed(plan, frames)
            written, last = _write(spark, ckpt, plan, staging, frames, placed_by,
                                   storage_options, progress, fail_on)
            checks = None
            if verify:
                progress("verifying through Spark's state reader")
                checks = verify_evict(spark, source_path=spark_url(ckpt.location.portable_url),
                                      target_path=spark_url(staging.url), plan=plan,
                                      removed=removed, key_fields=placed_by)
                bad = [c.problem() for c in checks if not c.ok]
                if bad:
                    raise JobFailed("verification failed, nothing published: "
                                    + "; ".join(bad), path=plan.target)
            point_schemas_at_target(ckpt, staging, plan.target)
            progress("publishing")
            staging.publish(last=last)
    return EvictResult(plan, written, checks, time.perf_counter() - started)


def _removed(plan: EvictPlan, frames: dict[tuple[int, str], DataFrame]
             ) -> dict[tuple[int, str], Removed]:
    out = {}
    for selection in plan.stores:
        key = (selection.operator_id, selection.store)
        out[key] = removed_rows(frames[key], selection, plan.base.to_partitions)
        plan.removed[f"{key[0]}/{key[1]}"] = out[key].per_partition
        if out[key].sample:
            plan.sample[f"{key[0]}/{key[1]}"] = out[key].sample
    return out


def _write(spark: SparkSession, ckpt: Checkpoint, plan: EvictPlan, staging: Staging,
           frames: dict[tuple[int, str], DataFrame],
           placed_by: dict[tuple[int, str], list[str]], storage_options: dict[str, Any],
           progress: Callable[[str], None], fail_on: str | None
           ) -> tuple[dict[str, list[WrittenPartition]], str]:
    """The kept rows as the target's state; returns what was written and the commit file
    (relative) to publish last."""

    base = plan.base
    kept = {(s.operator_id, s.store): frames[(s.operator_id, s.store)]
            .where(~selected(s.predicate)) for s in plan.stores}
    progress("copying logs and metadata")
    write_logs(ckpt, base, staging, new_batch=True)
    unique_ids = None
    if base.provider == "hdfs":
        def write(selection: StoreSelection) -> list[WrittenPartition]:
            key = (selection.operator_id, selection.store)
            progress(f"writing operator {key[0]} store {key[1]}")
            return write_snapshots(
                kept[key], [F.col("key").getField(name) for name in placed_by[key]],
                staging_url=staging.url, storage_options=storage_options,
                operator_id=key[0], store=key[1], version=base.state_version,
                codec=base.codec, partitions=base.to_partitions, fail_on=fail_on)

        written = {f"{s.operator_id}/{s.store}": w
                   for s, w in each_store(plan.stores, write).items()}
    else:
        progress("Spark's state rewriter: writing the kept rows as RocksDB files")
        whole = {(s.operator_id, s.store): s for s in plan.stores if s.whole_keys}
        replay = {key: (frame, [f"key.`{name}`" for name in placed_by[key]])
                  for key, frame in kept.items() if key not in whole}
        drop = {key: s.predicate for key, s in whole.items() if s.touched}
        written, unique_ids = rewrite_into_rocksdb(
            spark, ckpt, base, staging, schemas={}, placed_by=placed_by,
            storage_options=storage_options, replay=replay, drop=drop)
    name, data = commit_entry(ckpt, base, unique_ids)
    staging.write(name, data)
    return written, name
