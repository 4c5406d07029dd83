"""One eviction, whichever front end asks for it: plan, Spark, write, verify, publish.

The same two steps as :mod:`statekit.jobs.actions.repartition`:

1. :func:`prepare` — no JVM: the selection is valid for the checkpoint's operators, the
   target is new, the query is not live and its last batch committed (a dry run notes
   instead of refusing);
2. :func:`run` — on a given SparkSession: count and sample the rows to remove (dry run), or
   write the kept rows into staging, verify them through Spark and publish
   (:func:`statekit.jobs.evict.run_evict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.location import Location
from statekit.jobs.actions.repartition import Progress, quiet
from statekit.writes.evict import EvictPlan, Selection, plan_evict
from statekit.writes.staging import Staging

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.jobs.evict import EvictResult

@dataclass(frozen=True)
class PreparedEvict:
    """A checked eviction plan, ready to run (or to dry-run) on Spark."""

    ckpt: Checkpoint
    plan: EvictPlan
    destination: Location
    storage_options: Mapping[str, Any] = field(default_factory=dict)


def prepare(ckpt: Checkpoint, destination: Location, selection: Selection, *,
            storage_options: Mapping[str, Any] | None = None,
            allow_uncommitted: bool = False, force: bool = False,
            dry_run: bool = False) -> PreparedEvict:
    """Plan writing ``ckpt`` minus ``selection`` into ``destination`` without a JVM (the
    refusals: :func:`statekit.writes.evict.plan_evict`)."""
    plan = plan_evict(ckpt, destination, selection, allow_uncommitted=allow_uncommitted,
                      force=force, dry_run=dry_run)
    return PreparedEvict(ckpt, plan, destination, dict(storage_options or {}))


def run(spark: SparkSession, prepared: PreparedEvict, *, dry_run: bool = False,
        verify: bool = True, progress: Progress = quiet) -> EvictResult:
    """Dry-run (count and sample the rows that would go) or write, verify and publish."""

    # pyspark loads here, not at import: prepare() serves the JVM-free dry-run checks and
    # the TUI's start, which must not pay for importing it
    from statekit.jobs.evict import run_evict

    return run_evict(spark, prepared.ckpt, prepared.plan,
                     Staging(prepared.destination, prepared.ckpt.location.url),
                     storage_options=dict(prepared.storage_options), dry_run=dry_run,
                     verify=verify, progress=progress)
