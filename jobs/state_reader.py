"""State rows through Spark's own state data source — what Spark itself would load.

statekit decodes state files in pure Python for speed, but the authority on what a restart
sees is Spark's ``statestore`` reader (with ``readChangeFeed``) and ``state-metadata``. This
module is the Python API over them, used by ``statekit state …``, the TUI and notebooks:

1. :func:`resolve_target` checks the request against the pure-Python model *before* any JVM
   starts (unknown operator, join without a side, transformWithState without a state
   variable → one-line errors listing what exists);
2. :func:`reader_confs` derives the session confs Spark's reader needs but cannot infer
   (checkpoint format v2, RocksDB changelog checkpointing);
3. :func:`read_state` / :func:`read_changes` return Spark DataFrames (lazy; nothing is
   collected to the driver), :func:`flatten` makes ``key.*``/``value.*`` columns, and
   :func:`to_arrow` hands a bounded result to Arrow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.state_data import store_schemas
from statekit.jobs.errors import TRACEBACK, first_line, python_raised
from statekit.state.verify import verify_restart_path
from statekit.support.errors import (
    BadInput,
    CorruptFile,
    JobFailed,
    StatekitError,
    UnsupportedFormat,
    error_for,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FORMAT_VERSION_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
JOIN_OPERATOR = "symmetricHashJoin"
TWS_OPERATORS = ("transformWithStateExec", "transformWithStateInPandasExec",
                 "transformWithStateInPySparkExec")
FMGWS_OPERATORS = ("flatMapGroupsWithState", "applyInPandasWithState")

T = TypeVar("T")


@dataclass(frozen=True)
class StateTarget:
    """One readable state: an operator's store (or join side, or state variable) at a batch."""

    path: str
    """The checkpoint location as Spark should see it."""
    operator_id: int
    operator_name: str
    store: str | None = None
    join_side: str | None = None
    state_var: str | None = None
    timers: bool = False
    batch_id: int | None = None
    """``None``: the last committed batch."""

    def options(self) -> dict[str, str]:
        options = {"operatorId": str(self.operator_id)}
        if self.store and self.store != "default":
            options["storeName"] = self.store
        if self.join_side:
            options["joinSide"] = self.join_side
        if self.state_var:
            options["stateVarName"] = self.state_var
        if self.timers:
            options["readRegisteredTimers"] = "true"
        if self.batch_id is not None:
            options["batchId"] = str(self.batch_id)
        return options

    @property
    def label(self) -> str:
        parts = [f"operator {self.operator_id} ({self.operator_name})"]
        if self.store and self.store != "default":
            parts.append(f"store {self.store}")
        if self.join_side:
            parts.append(f"{self.join_side} side")
        if self.state_var:
            parts.append(f"state variable {self.state_var}")
        if self.timers:
            parts.append("timers")
        return " ".join(parts)


def spark_path(ckpt: Checkpoint) -> str:
    """The checkpoint URL for Spark: absolute local paths; ``s3://`` becomes ``s3a://``."""
    return spark_url(ckpt.location.portable_url)


def spark_url(url: str) -> str:
    """Any statekit URL as Spark's Hadoop filesystems expect it."""
    if "://" not in url:
        return os.path.abspath(url)
    if url.startswith("s3://"):
        return "s3a://" + url[len("s3://"):]
    return url


def state_variables(ckpt: Checkpoint, operator_id: int) -> list[str]:
    """transformWithState's user state variables: as the operator metadata (v2) declares
    them, else the schema file's column families; timers and internal ones excluded."""
    meta = ckpt.operators.get(operator_id)
    declared = [v["stateName"] for v in (meta.state_variables if meta else ())
                if v.get("stateVariableType") != "TimerState"
                and not str(v["stateName"]).startswith("$")]
    if declared:
        return declared
    schema = store_schemas(ckpt).get((operator_id, "default"))
    if schema is None:
        return []
    return [cf.name for cf in schema.file.column_families
            if not cf.name.startswith(("$", "_")) and cf.name != "default"]


def resolve_target(ckpt: Checkpoint, *, operator: int | None = None, store: str | None = None,
                   join_side: str | None = None, state_var: str | None = None,
                   timers: bool = False, batch: int | None = None) -> StateTarget:
    """Validate a state request against the checkpoint model; no JVM involved."""
    operators = ckpt.operators
    shown = ckpt.location.url
    if not operators:
        raise BadInput("no state under state/: the query has no stateful operator, or no "
                       "batch has run yet", path=shown)
    if operator is None:
        operator = min(operators)
    if operator not in operators:
        raise BadInput(f"no operator {operator}; operators: "
                       + ", ".join(f"{i} ({m.name})" for i, m in sorted(operators.items())),
                       path=shown)
    meta = operators[operator]
    stores = [s.name for s in meta.stores]
    if store is not None and join_side is not None:
        raise BadInput("give --store or --join-side, not both", path=shown)
    if meta.name == JOIN_OPERATOR:
        if store is None and join_side is None:
            raise BadInput(f"operator {operator} is a stream-stream join: choose --join-side "
                           f"left|right or --store ({', '.join(stores)})", path=shown)
    elif join_side is not None:
        raise BadInput(f"--join-side applies to joins; operator {operator} is {meta.name}",
                       path=shown)
    if store is not None and store not in stores:
        raise BadInput(f"operator {operator} has no store {store!r}; stores: "
                       f"{', '.join(stores)}", path=shown)
    if meta.name in TWS_OPERATORS:
        variables = state_variables(ckpt, operator)
        if not timers and state_var is None:
            raise BadInput(f"operator {operator} is transformWithState: choose --state-var "
                           f"({', '.join(variables) or 'none found'}) or --timers",
                           path=shown)
        if state_var is not None and variables and state_var not in variables:
            raise BadInput(f"no state variable {state_var!r}; state variables: "
                           f"{', '.join(variables)}", path=shown)
        if timers and meta.time_mode == "None":
            raise BadInput(f"operator {operator} runs with timeMode None: it has no timers",
                           path=shown)
    elif state_var is not None or timers:
        raise BadInput(f"--state-var/--timers apply to transformWithState; operator "
                       f"{operator} is {meta.name}", path=shown)
    committed = ckpt.committed_batches
    if not committed:
        raise BadInput("no committed batch yet: there is no state to read", path=shown)
    if batch is not None and batch not in committed:
        raise BadInput(f"batch {batch} is not a retained committed batch "
                       f"({committed[0]}..{committed[-1]})", path=shown)
    return StateTarget(spark_path(ckpt), operator, meta.name, store, join_side, state_var,
                       timers, batch)


def target_batch(ckpt: Checkpoint, target: StateTarget) -> int:
    """The batch ``target`` reads: its own, else the last committed one (a target from
    :func:`resolve_target` always has one; a checkpoint without a commit has no state)."""
    batch = target.batch_id if target.batch_id is not None else ckpt.last_committed_batch
    if batch is None:
        raise BadInput("no committed batch yet: there is no state to read",
                       path=ckpt.location.url)
    return batch


def reader_confs(ckpt: Checkpoint) -> dict[str, str]:
    """Session confs Spark's reader needs for this checkpoint but does not read from it."""
    files = list(ckpt.inventory.all_files())
    confs = {}
    if any(f.unique_id for f in files):
        confs[FORMAT_VERSION_CONF] = "2"
    if any(f.kind == "changelog" for f in files):
        confs[CHANGELOG_CONF] = "true"
    return confs


@contextmanager
def session_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """Set ``confs`` for the duration of a read, then restore the previous values."""
    previous = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _spark_error_line(error: BaseException) -> str:
    """The most telling line of a Spark failure: the first ``[ERROR_CLASS] …`` line anywhere
    in the (JVM) message, plus its root cause; else the first line."""

    text = str(error)
    found = re.search(r"\[[A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*\][^\n]*", text)
    if not found:  # no error class: the JVM exception's own line, not Py4J's "calling o164"
        java = re.search(r"^: ?([\w.$]+(?:Exception|Error)\b[^\n]*)", text, re.M)
        return " ".join(java[1].split()) if java else first_line(error)
    line = " ".join(found[0].split())
    raised = python_raised(text)
    if raised:  # a Python worker's own exception says more than the JVM's wrapper of it
        return f"{line.removesuffix(TRACEBACK).rstrip()} {raised}"
    causes = re.findall(r"Caused by: ([\w.$]+(?:Exception|Error)[^\n]*)", text)
    return f"{line} (cause: {causes[-1].strip()})" if causes else line


_LOAD_FAILURES = ("CANNOT_LOAD_STATE_STORE", "EOFException", "CHECKSUM", "Stream is corrupted",
                  "FileNotFoundException", "CANNOT_READ_STREAMING_STATE_FILE",
                  "CANNOT_READ_DELTA_FILE", "CANNOT_READ_SNAPSHOT_FILE", "ChecksumException")


class StateLoadFailed(CorruptFile):
    """Spark could not load state from the checkpoint's files; :func:`name_damaged_file`
    finds which file (Spark's message often does not say)."""

    def __init__(self, message: str, *, spark_line: str) -> None:
        super().__init__(message)
        self.spark_line = spark_line


def spark_failure(what: str, exc: BaseException, ckpt: Checkpoint) -> StatekitError:
    """A Spark failure while working on ``ckpt`` as one line: a state load failure names the
    damaged file (statekit reads the restart path itself), anything else is ``JobFailed``."""
    translated = translate(what, exc)
    if isinstance(translated, StateLoadFailed):
        return name_damaged_file(ckpt, translated)
    return translated  # else JobFailed, BadInput… with Spark's most telling line


def name_damaged_file(ckpt: Checkpoint, failed: StateLoadFailed,
                      operator: int | None = None) -> StatekitError:
    """The damaged file behind a Spark load failure, as a one-line error naming it (statekit
    reads the restart path itself, :mod:`statekit.state.verify`); ``failed`` when every file
    decodes (then the problem is not in a file statekit can check)."""

    try:
        found = verify_restart_path(ckpt, operator=operator)
    except StatekitError:
        return failed
    if not found.damaged:
        return failed
    first = (found.fatal or found.damaged)[0]
    return error_for(first.exit_code, f"{first.message}; Spark cannot load the state "
                     f"({failed.spark_line.split(' (cause:')[0]})", path=first.path)


def translate(what: str, error: BaseException) -> StatekitError:
    """Spark's exception → a statekit error with Spark's own error class and cause."""
    line = _spark_error_line(error)
    if any(code in line for code in ("UNRESOLVED_COLUMN", "PARSE_SYNTAX_ERROR",
                                     "DATATYPE_MISMATCH", "UNRESOLVED_ROUTINE")):
        return BadInput(f"{what}: {line}")
    if any(mark in line for mark in _LOAD_FAILURES):
        return StateLoadFailed(f"{what}: Spark cannot load the state: {line}; `statekit "
                               "report --decode` shows which file is damaged", spark_line=line)
    if "UNSUPPORTED" in line or "NOT_SUPPORTED" in line or "INVALID_" in line:
        return UnsupportedFormat(f"{what}: {line}")
    return JobFailed(f"{what} failed: {line}")


def _guarded(what: str, action: Callable[[], T]) -> T:
    try:
        return action()
    except (PySparkException, Py4JJavaError) as error:
        raise translate(what, error) from error


def read_state(spark: SparkSession, target: StateTarget) -> DataFrame:
    """The state rows (``key``, ``value``, ``partition_id`` …) as a lazy DataFrame."""
    def load() -> DataFrame:
        reader = spark.read.format("statestore")
        for key, value in target.options().items():
            reader = reader.option(key, value)
        df = reader.load(target.path)
        df.schema  # noqa: B018 -- force analysis so errors surface here
        return df
    return _guarded(f"reading {target.label}", load)


def read_changes(spark: SparkSession, target: StateTarget, start: int,
                 end: int | None = None) -> DataFrame:
    """The change feed (``batch_id``, ``change_type``, ``key``, ``value``, ``partition_id``)."""
    def load() -> DataFrame:
        reader = spark.read.format("statestore").option("readChangeFeed", "true") \
            .option("changeStartBatchId", str(start))
        if end is not None:
            reader = reader.option("changeEndBatchId", str(end))
        for key, value in target.options().items():
            if key != "batchId":
                reader = reader.option(key, value)
        df = reader.load(target.path)
        df.schema  # noqa: B018
        return df
    return _guarded(f"reading the change feed of {target.label}", load)


def read_metadata(spark: SparkSession, path: str) -> DataFrame:
    return _guarded("reading state-metadata",
                    lambda: spark.read.format("state-metadata").load(path))


def flatten(df: DataFrame) -> DataFrame:
    """``key.<field>``/``value.<field>`` columns (one level) beside the other columns."""

    columns = []
    for field in df.schema.fields:
        if field.name in ("key", "value") and hasattr(field.dataType, "fields"):
            columns += [F.col(f"{field.name}.`{inner.name}`").alias(f"{field.name}.{inner.name}")
                        for inner in field.dataType.fields]
        else:
            columns.append(F.col(field.name))
    return df.select(*columns)


def rows_containing(df: DataFrame, text: str) -> DataFrame:
    """The rows where any column, rendered as a string, contains ``text`` (case-insensitive):
    the TUI's ``/`` filter over the whole state, evaluated by Spark."""

    rendered = F.concat_ws("\u0001", *[F.col(f"`{name}`").cast("string")
                                        for name in df.columns])
    return df.where(F.lower(rendered).contains(text.lower()))


def to_arrow(df: DataFrame, limit: int | None = None) -> pa.Table:
    """Collect (at most ``limit`` rows of) ``df`` as an Arrow table."""
    if limit is not None:
        df = df.limit(limit)
    return _guarded("collecting state rows", df.toArrow)


def collect(action: Callable[[], T], what: str) -> T:
    """Run a Spark action with errors translated (for callers outside this module)."""
    return _guarded(what, action)
