"""One rollback, whichever front end asks for it: plan, copy, verify, publish, file sink.

The same two steps as :mod:`statekit.jobs.actions.repartition`, so the CLI and the TUI run one
sequence and cannot drift apart:

1. :func:`prepare` — no JVM: the batch is committed and still restorable, the target is new,
   the query is not live (a dry run notes instead of refusing), the offset edits apply, and
   the file sink's log entries after the batch are listed;
2. :func:`run` — the staged copy, the proof through Spark's ``statestore`` reader when a
   session is given (``--no-verify``: none, no JVM), the publish, then the file sink's log
   cut so the re-run batches write again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.jobs.actions.repartition import Progress, quiet
from statekit.writes.file_sink import cut_sink_log
from statekit.writes.rollback import RollbackPlan, plan_rollback
from statekit.writes.staging import Staging

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.jobs.rollback import RollbackResult
    from statekit.writes.source_offsets import OffsetEdit

@dataclass(frozen=True)
class PreparedRollback:
    """A checked rollback plan, ready to write (or to show, for a dry run)."""

    ckpt: Checkpoint
    plan: RollbackPlan
    destination: Location
    file_sink: Location | None = None


@dataclass(frozen=True)
class RollbackOutcome:
    """What a run did: the plan, the published target's result (``None`` for a dry run)
    and where the file sink's moved log entries went."""

    plan: RollbackPlan
    result: RollbackResult | None
    sink_log_backup: str | None = None

    @property
    def dry_run(self) -> bool:
        return self.result is None

    def to_dict(self) -> dict[str, Any]:
        if self.result is None:
            return {"dry_run": True, "plan": self.plan.to_dict()}
        return {"dry_run": False, **self.result.to_dict(),
                "sink_log_backup": self.sink_log_backup}


def prepare(ckpt: Checkpoint, destination: Location, batch: int, *, force: bool = False,
            new_query_id: bool = False, file_sink: Location | None = None,
            offset_edits: Sequence[OffsetEdit] = (), dry_run: bool = False
            ) -> PreparedRollback:
    """Plan rolling ``ckpt`` back to committed ``batch`` in ``destination`` without a JVM
    (the refusals: :func:`statekit.writes.rollback.plan_rollback`)."""
    plan = plan_rollback(ckpt, destination, batch, force=force,
                         new_query_id=str(uuid.uuid4()) if new_query_id else None,
                         file_sink=file_sink, offset_edits=offset_edits, dry_run=dry_run)
    return PreparedRollback(ckpt, plan, destination, file_sink)


def run(spark: SparkSession | None, prepared: PreparedRollback, *, dry_run: bool = False,
        progress: Progress = quiet) -> RollbackOutcome:
    """Write, verify (when ``spark`` is given) and publish ``prepared``; then move the file
    sink's log entries after the batch aside. A dry run writes nothing."""
    plan = prepared.plan
    if dry_run:
        return RollbackOutcome(plan, None)
    # pyspark loads here, not at import: prepare() serves the JVM-free dry-run checks and
    # the TUI's start, which must not pay for importing it
    from statekit.jobs.rollback import run_rollback

    result = run_rollback(spark, prepared.ckpt, plan,
                          Staging(prepared.destination, prepared.ckpt.location.url),
                          progress=progress)
    backup = None
    if prepared.file_sink is not None and plan.sink_entries:
        progress("moving the file sink's log entries after the batch aside")
        backup = cut_sink_log(prepared.file_sink, list(plan.sink_entries),
                              f"_statekit_sink_log_backup/{plan.batch}-{int(time.time())}")
    return RollbackOutcome(plan, result, backup)
