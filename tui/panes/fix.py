"""The Fix tab: what the doctor found and its fix, and the two write commands that repair a
checkpoint — rollback (to the doctor's batch, or any committed one) and evict (rows by a
predicate or by age) — each into a NEW checkpoint.

The steps are :mod:`statekit.jobs.actions.rollback`'s and :mod:`statekit.jobs.actions.evict`'s,
exactly as ``statekit rollback`` / ``statekit evict`` run them: Enter plans a dry run (a
rollback's needs no JVM; an evict's counts the rows through Spark), ``x`` writes only when the
app was started with ``--allow-write`` and after a confirmation; the target is verified
through Spark before it is published. The source is only ever read. ``c`` cancels a dry run
or a write: its Spark job is interrupted (the job group the worker set), the job stops at its
next step, the staging folder is removed and nothing is published.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Select, Static

from statekit.jobs.actions import evict as evict_action
from statekit.jobs.actions import rollback as rollback_action
from statekit.jobs.actions.evict import PreparedEvict
from statekit.jobs.actions.rollback import PreparedRollback, RollbackOutcome
from statekit.support.presentation import human_bytes
from statekit.tui.confirm import ConfirmScreen
from statekit.tui.model import Snapshot
from statekit.tui.pane import LazyPane
from statekit.tui.spark_session import LazySession
from statekit.tui.table import Table
from statekit.tui.work import Progress

if TYPE_CHECKING:
    from statekit.doctor.problems import Diagnosis
    from statekit.jobs.evict import EvictResult

ACTIONS = [("rollback", "rollback"), ("evict rows", "evict")]
FIX_JOB_GROUP = "statekit-tui-fix"
"""The Spark job group of the Fix tab's jobs: what ``c`` interrupts (and only that)."""


@dataclass(frozen=True)
class FixRequest:
    """What the form asks for (read on the UI thread, used in workers)."""

    action: str
    target: str
    force: bool
    batch: int | None = None
    file_sink: str = ""
    where: str | None = None
    stale_after: int | None = None


Planned = tuple[FixRequest, PreparedRollback | PreparedEvict, "EvictResult | None"]
"""A dry run's answer: the request, its prepared action and (evict) the rows counted."""


class FixPane(LazyPane["Diagnosis"]):
    """The doctor's findings and fix; a rollback or an evict planned (Enter) and — only with
    ``--allow-write`` — written (``x``) after a confirmation, verified, then published."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "execute", "Execute"),
                                             Binding("c", "cancel", "Cancel")]
    loading_message = "the doctor is looking for problems and the safest rollback…"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prepared: PreparedRollback | PreparedEvict | None = None
        self.planned: FixRequest | None = None
        """The request of the last dry run: what ``x`` writes (not the form as edited
        since)."""
        self.done: RollbackOutcome | EvictResult | None = None
        self.session = LazySession()

    def compose(self) -> ComposeResult:
        yield Static("fix into a NEW checkpoint — Enter in a field: plan (dry run) · "
                     "x: execute (needs --allow-write)", classes="title")
        with Horizontal(classes="form"):
            yield Select(ACTIONS, value="rollback", allow_blank=False, id="fx-action")
            yield Input(placeholder="batch to roll back to", id="fx-batch", type="integer")
            yield Input(placeholder="target folder (new)", id="fx-target")
            yield Checkbox("force (the query is stopped)", id="fx-force")
        with Horizontal(classes="form"):
            yield Input(placeholder="evict: SQL over key, value",
                        id="fx-where")
            yield Input(placeholder="evict: stale after N versions", id="fx-stale",
                        type="integer")
            yield Input(placeholder="rollback: file sink folder (optional)",
                        id="fx-file-sink")
        yield Static("", classes="status")
        yield Table(classes="main")
        yield Static("", classes="detail")

    def main_widget(self) -> Widget | None:
        return self.table

    # -- the doctor ----------------------------------------------------------------------

    def compute(self, snapshot: Snapshot, progress: Progress) -> Diagnosis:
        return snapshot.health()  # the assessment's diagnosis: one verdict on every tab

    def show_result(self, result: Diagnosis) -> None:
        self.done, self.prepared, self.planned = None, None, None
        fix = (f"fix: roll back to batch {result.fix_batch} — {result.fix_command}"
               if result.fix_command else "no rollback needed" if result.restarts
               else "no rollback fixes it")
        outcome = f", but {result.outcome}" if result.outcomes else ""
        self.status.update(f"{result.verdict}{outcome}; {fix}")
        if result.fix_batch is not None:
            from statekit.doctor.fix import fix_target

            self.query_one("#fx-batch", Input).value = str(result.fix_batch)
            target = self.query_one("#fx-target", Input)
            if not target.value:
                target.value = fix_target(self.shown.ckpt, result.fix_batch)
        self.table.load(("severity", "outcome", "file", "what is wrong", "on restart"),
                        [(str(i), (p.severity, p.outcome or "", p.path, p.what, p.spark))
                         for i, p in enumerate(result.problems)])

    def describe(self, key: str) -> str | Text | None:
        if self.result is None or not key.isdigit() or self.prepared or self.done:
            return None
        problem = self.result.problems[int(key)]
        return (f"{problem.path}: {problem.what}. On restart: {problem.spark}"
                + (f" Outcome: {problem.outcome}"
                   + (f" ({problem.affects})." if problem.affects else ".")
                   if problem.outcome else "")
                + (f" Remedy: {problem.remedy}" if problem.remedy else ""))

    # -- dry run -------------------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.plan_dry_run()

    def _request(self) -> FixRequest | None:
        def text(field: str) -> str:
            return self.query_one(f"#fx-{field}", Input).value.strip()

        action = str(self.query_one("#fx-action", Select).value)
        target, force = text("target"), self.query_one("#fx-force", Checkbox).value
        if not target:
            self.show_error("enter the target folder: a fix always writes a new checkpoint")
            return None
        if action == "rollback":
            if not text("batch").isdigit():
                self.show_error("enter the committed batch to roll back to")
                return None
            return FixRequest(action, target, force, batch=int(text("batch")),
                              file_sink=text("file-sink"))
        stale = text("stale")
        if not text("where") and not stale.isdigit():
            self.show_error("evict: enter a predicate and/or how many versions a key must "
                            "be unchanged")
            return None
        return FixRequest(action, target, force, where=text("where") or None,
                          stale_after=int(stale) if stale.isdigit() else None)

    def plan_dry_run(self) -> None:
        request = self._request()
        if request is None or self.snapshot is None:
            return
        self.status.update("planning…")
        snapshot, options = self.snapshot, dict(self.tui.storage_options)

        def plan(say: Progress) -> Planned:
            prepared = _prepare(snapshot, request, options, dry_run=True)
            if isinstance(prepared, PreparedRollback):
                return request, prepared, None
            spark = self.session.get(say, job_group=FIX_JOB_GROUP)
            say("counting the rows to remove…")
            return request, prepared, evict_action.run(spark, prepared, dry_run=True,
                                                       progress=say)

        self.ask("fix", plan, self._planned, describe="dry run")

    def _planned(self, answer: Planned) -> None:
        self.planned, prepared, counted = answer
        self.prepared, self.done = prepared, None
        read_only = ("" if self.tui.allow_write else
                     " · read-only: start with --allow-write to execute")
        if isinstance(prepared, PreparedRollback):
            plan = prepared.plan
            self.status.update(
                f"rollback: last committed batch {plan.last_committed} → {plan.batch}; "
                f"{len(plan.copied)} files ({human_bytes(plan.state_bytes)} of state) to copy; "
                f"{plan.reruns}"
                + (f"; file sink: {len(plan.sink_entries)} log entries move aside"
                   if plan.file_sink else "") + read_only)
            self.table.load(("note",), [(str(i), (note,)) for i, note in
                                        enumerate(plan.notes or ("nothing to warn about",))])
        elif counted is not None:
            evict = counted.plan
            total = sum(sum(counts) for counts in evict.removed.values())
            self.status.update(f"evict {evict.selection.describe()}: {total:,} rows to remove"
                               + read_only)
            self.table.load(("operator/store", "rows to remove", "predicate"), [
                (f"{s.operator_id}/{s.store}",
                 (f"{s.operator_id} {s.operator_name} / {s.store}",
                  f"{sum(evict.removed.get(f'{s.operator_id}/{s.store}', [])):,}",
                  s.predicate if s.touched else f"untouched: {s.why_untouched}"))
                for s in evict.stores])
        self.table.focus()  # so x (execute) reaches the pane

    # -- execute -------------------------------------------------------------------------

    def action_execute(self) -> None:
        if not self.tui.allow_write:
            self.show_error("read-only: start statekit tui with --allow-write to write a fix")
            return
        prepared, request = self.prepared, self.planned
        if prepared is None or request is None:
            self.show_error("plan first (Enter in a field): the dry run shows what will be "
                            "written")
            return
        what = (f"{prepared.plan.source} rolled back to batch {request.batch}"
                if isinstance(prepared, PreparedRollback) else
                f"{prepared.plan.source} without the rows {prepared.plan.selection.describe()}")

        def answered(yes: bool | None) -> None:
            if yes:
                self._execute(request)

        self.app.push_screen(ConfirmScreen(
            f"Write a new checkpoint {prepared.plan.target}: {what}? It is verified through "
            "Spark before it is published; the source is only read."), answered)

    def _execute(self, request: FixRequest) -> None:
        snapshot, options = self.shown, dict(self.tui.storage_options)

        def execute(say: Progress) -> RollbackOutcome | EvictResult:
            # planned again for real: a dry run notes what a write refuses
            prepared = _prepare(snapshot, request, options, dry_run=False)
            spark = self.session.get(say, job_group=FIX_JOB_GROUP)
            if isinstance(prepared, PreparedRollback):
                return rollback_action.run(spark, prepared, progress=say)
            return evict_action.run(spark, prepared, verify=True, progress=say)

        self.ask("fix", execute, self._executed, describe="execute")

    def action_cancel(self) -> None:
        if not self.asking("fix"):
            self.show_error("nothing to cancel: no dry run or write is running")
            return
        self.status.update("cancelling: stopping the Spark job; nothing will be published…")
        self.app.workers.cancel_group(self, "fix")
        self.session.cancel(FIX_JOB_GROUP)

    def show_cancelled(self, request: Any) -> None:
        self.prepared, self.planned = None, None
        target = self.query_one("#fx-target", Input).value.strip()
        where = f" to {target}" if target else ""
        self.status.update(Text(f"cancelled: nothing was published{where}; no staging folder "
                                "is left", style="bold yellow"))

    def _executed(self, outcome: RollbackOutcome | EvictResult) -> None:
        self.done, self.prepared, self.planned = outcome, None, None
        if isinstance(outcome, RollbackOutcome):
            result = outcome.result
            assert result is not None
            verified = result.checks is not None and all(c.ok for c in result.checks)
            verdict = (f"verified: the same rows in every store at batch {outcome.plan.batch}"
                       if verified else "NOT verified")
            target, seconds = outcome.plan.target, result.seconds
        else:
            checks = outcome.checks or ()
            verified = bool(checks) and all(c.ok for c in checks)
            removed = sum(c.removed_rows for c in checks)
            verdict = (f"verified: {removed:,} rows removed, the rest identical"
                       if verified else "NOT verified")
            target, seconds = outcome.plan.target, outcome.seconds
        self.status.update(Text(f"published {target} in {seconds:.1f} s — {verdict}",
                                style="bold green" if verified else "bold red"))


def _prepare(snapshot: Snapshot, request: FixRequest, options: dict[str, Any], *,
             dry_run: bool) -> PreparedRollback | PreparedEvict:
    """The action module's ``prepare`` for ``request`` (no JVM)."""
    from statekit.checkpoint.location import resolve

    target = resolve(request.target, options)
    if request.action == "rollback":
        assert request.batch is not None
        sink = resolve(request.file_sink, options) if request.file_sink else None
        return rollback_action.prepare(snapshot.ckpt, target, request.batch,
                                       force=request.force, file_sink=sink, dry_run=dry_run)
    from statekit.writes.evict import Selection

    return evict_action.prepare(snapshot.ckpt, target,
                                Selection(request.where, request.stale_after),
                                storage_options=options, force=request.force, dry_run=dry_run)
