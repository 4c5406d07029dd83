"""Spark's event log: how long each task of a batch's stateful stages ran, per partition.

Why: the progress log times a batch as a whole. A restart's state load runs in the tasks of
its first batch's stateful stages, one task per partition, so the slowest partition's load
shows as that task running longer than the same partition's task in the run's steady
batches. Spark writes those task times into its event log (``spark.eventLog.enabled``, what
the History Server reads) — one application per run of the query.

Read: a log file (plain JSON lines, or ``.zstd``, Spark 4's default codec), a rolling log's
``eventlog_v2_*`` folder, or a folder of either. Jobs carry the streaming batch
(``streaming.sql.batchId``) and run (``runId = …`` in ``spark.job.description``); a stage
is stateful when its metrics include ``number of total state rows``; a task's time is its
finish less its launch. Only successful task attempts count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from statekit.support.errors import BadInput, CorruptFile

STATE_ROWS_METRIC = "number of total state rows"
CODECS = {".zstd": "zstd", ".zst": "zstd"}
"""Spark's event-log codecs statekit can read (lz4 and snappy use Spark's own block
formats, which no Python reader here decodes)."""


@dataclass(frozen=True)
class StatefulTask:
    """One successful task of a stateful stage of a streaming batch."""

    batch: int
    run_id: str | None
    stage_order: int
    """The stage's place among the batch's stateful stages (0: the first)."""
    partition: int
    seconds: float
    """Finish − launch."""


def _files(fs: Any, path: str) -> list[str]:
    """The event-log files at ``path``: itself, or every event file below a folder, in
    order (a rolling log's parts sort by their number)."""
    if not fs.isdir(path):
        return [path]
    found = [p for p in fs.find(path) if p.rsplit("/", 1)[-1].startswith(("events_", "app-",
                                                                          "local-", "application_"))
             or p.rsplit("/", 1)[-1].endswith(tuple(CODECS))]
    found = [p for p in found if not p.rsplit("/", 1)[-1].startswith(".")]

    def order(name: str) -> tuple[str, int]:
        folder, _, leaf = name.rpartition("/")
        parts = leaf.split("_")
        number = int(parts[1]) if leaf.startswith("events_") and parts[1].isdigit() else 0
        return folder, number

    return sorted(found, key=order)


def read_event_logs(paths: Sequence[str], storage_options: dict[str, Any] | None = None
                    ) -> list[tuple[str, list[str]]]:
    """(file, its JSON lines) of every event log at ``paths``; one-line errors naming the
    file (missing, unreadable, an unsupported codec)."""
    import fsspec

    out = []
    for path in paths:
        try:
            fs, root = fsspec.core.url_to_fs(path, **(storage_options or {}))
            if not fs.exists(root):
                raise BadInput("no such file or folder", path=path)
            for file in _files(fs, root):
                out.append((file, _lines(fs, file)))
        except (BadInput, CorruptFile):
            raise
        except PermissionError:
            raise BadInput("permission denied", path=path) from None
        except (OSError, ValueError) as error:
            raise BadInput(f"cannot read the event log: {error}", path=path) from None
    return out


def _lines(fs: Any, file: str) -> list[str]:
    suffix = "." + file.rsplit(".", 1)[-1] if "." in file.rsplit("/", 1)[-1] else ""
    if suffix in (".lz4", ".snappy", ".lzf"):
        raise BadInput(f"event log compressed with {suffix[1:]}: statekit reads plain or "
                       "zstd event logs (spark.eventLog.compression.codec=zstd, Spark 4's "
                       "default)", path=file)
    with fs.open(file, "rb") as handle:
        data: bytes = handle.read()
    if suffix in CODECS:
        import pyarrow as pa

        try:
            with pa.CompressedInputStream(pa.BufferReader(data), CODECS[suffix]) as stream:
                data = bytes(stream.read())
        except (OSError, pa.ArrowException) as error:
            raise CorruptFile(f"not a readable {suffix[1:]} event log: {error}",
                              path=file) from None
    try:
        text: str = data.decode("utf-8")
        return text.splitlines()
    except UnicodeDecodeError:
        raise CorruptFile("is not a text event log (JSON lines)", path=file) from None


def _run_of(description: str) -> str | None:
    for line in description.splitlines():
        if line.startswith("runId = "):
            return line.removeprefix("runId = ").strip()
    return None


def stateful_tasks(logs: Iterable[tuple[str, list[str]]]) -> list[StatefulTask]:
    """Every successful task of every streaming batch's stateful stages in the logs."""
    tasks = []
    for file, lines in logs:
        stage_batch: dict[int, tuple[int, str | None]] = {}
        stateful: set[int] = set()
        ends: list[dict[str, Any]] = []
        for number, line in enumerate(lines, 1):
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as bad:
                if number == len(lines):
                    break  # a log still being written ends mid-line
                raise CorruptFile(f"line {number} is not valid JSON ({bad.msg})",
                                  path=file) from None
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                props = event.get("Properties") or {}
                batch = props.get("streaming.sql.batchId")
                if isinstance(batch, str) and batch.isdigit():
                    run = _run_of(str(props.get("spark.job.description") or ""))
                    for stage in event.get("Stage IDs") or []:
                        stage_batch[int(stage)] = (int(batch), run)
            elif kind == "SparkListenerStageCompleted":
                info = event.get("Stage Info") or {}
                names = {a.get("Name") for a in info.get("Accumulables") or []}
                if STATE_ROWS_METRIC in names:
                    stateful.add(int(info.get("Stage ID", -1)))
            elif kind == "SparkListenerTaskEnd":
                ends.append(event)
        orders: dict[tuple[int, str | None], list[int]] = {}
        for stage in sorted(stateful):
            if stage in stage_batch:
                orders.setdefault(stage_batch[stage], []).append(stage)
        for event in ends:
            stage = int(event.get("Stage ID", -1))
            if stage not in stateful or stage not in stage_batch:
                continue
            if (event.get("Task End Reason") or {}).get("Reason") != "Success":
                continue
            info = event.get("Task Info") or {}
            launch, finish = info.get("Launch Time"), info.get("Finish Time")
            if not isinstance(launch, int) or not isinstance(finish, int) or finish < launch:
                continue
            batch, run = stage_batch[stage]
            tasks.append(StatefulTask(batch, run, orders[(batch, run)].index(stage),
                                      int(info.get("Index", -1)), (finish - launch) / 1000))
    return tasks
