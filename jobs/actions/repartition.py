"""One repartition, whichever front end asks for it: plan, Spark, write, verify, file sink.

``statekit repartition`` and the TUI's Repartition screen run the same steps in the same
order, so they must not each spell them out:

1. :func:`prepare` — no JVM: the plan and every refusal (same partition count, uncommitted
   or live query, non-empty target, unsupported operator), and the file sink's entry for the
   repartition batch, checked against the sink's log before anything is written;
2. :func:`run` — on a given SparkSession: the reader confs this checkpoint needs, set for
   this run only and restored afterwards (the session may be shared with a notebook, the
   TUI's State screen or a test); then either the dry run's keys per new partition, or the
   staged write, verification and publish (:func:`statekit.jobs.repartition.run_repartition`);
   then, once the target is published, the file sink's entry.

Locations arrive resolved (the front end turned the user's strings into them); the storage
options travel along because executors re-open the filesystems themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.writes.file_sink import repartition_entry, write_entry
from statekit.writes.partition_key import partition_fields
from statekit.writes.repartition_plan import RepartitionPlan, plan_repartition
from statekit.writes.staging import Staging

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.jobs.repartition import RepartitionResult

Progress = Callable[[str], None]


def quiet(_message: str) -> None:
    """The progress callback of a caller that shows none."""
    return None


@dataclass(frozen=True)
class FileSinkEntry:
    """The file sink's log entry for the repartition batch (written after publishing)."""

    sink: Location
    relative: str
    """``_spark_metadata/<N+1>`` or ``_spark_metadata/<N+1>.compact``."""
    data: bytes

    @property
    def url(self) -> str:
        return f"{self.sink.url.rstrip('/')}/{self.relative}"


@dataclass(frozen=True)
class PreparedRepartition:
    """A checked plan, ready to run (or to dry-run) on Spark."""

    ckpt: Checkpoint
    plan: RepartitionPlan
    destination: Location
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    file_sink: FileSinkEntry | None = None


@dataclass(frozen=True)
class RepartitionOutcome:
    """What a run did: the plan (with keys per new partition after a dry run), the written
    and verified target (None for a dry run) and the file sink's entry."""

    plan: RepartitionPlan
    result: RepartitionResult | None
    file_sink_entry: str | None
    """The entry's URL: written after a real run, the one that would be after a dry run."""

    @property
    def dry_run(self) -> bool:
        return self.result is None

    def to_dict(self) -> dict[str, Any]:
        if self.result is None:
            return {"dry_run": True, "plan": self.plan.to_dict(),
                    "file_sink_entry": self.file_sink_entry}
        return {"dry_run": False, **self.result.to_dict(),
                "file_sink_entry": self.file_sink_entry}


def prepare(ckpt: Checkpoint, destination: Location, partitions: int | None, *,
            to_provider: str | None = None, changelog: bool = False,
            storage_options: Mapping[str, Any] | None = None, file_sink: Location | None = None,
            allow_uncommitted: bool = False, force: bool = False, dry_run: bool = False
            ) -> PreparedRepartition:
    """Plan the repartition (or, with ``to_provider``, the migration) of ``ckpt`` into
    ``destination`` without starting a JVM.

    Raises the plan's refusals (:func:`statekit.writes.repartition_plan.plan_repartition`), and
    ``UnsafeOperation``/``BadInput`` when ``file_sink`` is not this checkpoint's sink.
    """
    plan = plan_repartition(ckpt, destination, partitions, to_provider=to_provider,
                            changelog=changelog, allow_uncommitted=allow_uncommitted,
                            force=force, dry_run=dry_run)
    entry = None
    if file_sink is not None:
        relative, data = repartition_entry(file_sink, plan.repartition_batch)
        entry = FileSinkEntry(file_sink, relative, data)
    return PreparedRepartition(ckpt, plan, destination, dict(storage_options or {}), entry)


def run(spark: SparkSession, prepared: PreparedRepartition, *, dry_run: bool = False,
        verify: bool = True, progress: Progress = quiet) -> RepartitionOutcome:
    """Dry-run (count keys per new partition) or execute ``prepared`` on ``spark``; the
    session confs the state readers need are set for this call only."""
    # pyspark loads here, not at import: prepare() serves the JVM-free dry-run checks and
    # the TUI's start, which must not pay for importing it
    from statekit.jobs.errors import is_spark_error
    from statekit.jobs.repartition import count_per_new_partition, run_repartition
    from statekit.jobs.state_reader import reader_confs, session_confs, spark_failure, spark_path

    ckpt, plan = prepared.ckpt, prepared.plan
    result = None
    with session_confs(spark, reader_confs(ckpt)):
        if dry_run:
            progress("counting keys per new partition…")
            try:
                counts = count_per_new_partition(spark, source_path=spark_path(ckpt),
                                                 plan=plan, key_fields=partition_fields(ckpt))
            except Exception as error:
                if is_spark_error(error):  # one line, never the JVM's stack
                    raise spark_failure("repartition dry run", error, ckpt) from error
                raise
            plan.keys_per_partition.update(counts)
        else:
            result = run_repartition(
                spark, ckpt, plan, Staging(prepared.destination, ckpt.location.url),
                storage_options=dict(prepared.storage_options), check=verify,
                progress=progress)
    entry = prepared.file_sink
    if entry is not None and result is not None:
        progress("writing the file sink's entry for the repartition batch")
        write_entry(entry.sink, entry.relative, entry.data)
    return RepartitionOutcome(plan, result, entry.url if entry else None)
