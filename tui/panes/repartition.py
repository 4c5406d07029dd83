"""The Repartition tab: the dry-run plan for a partition count (Enter in the inputs), and —
only when the app was started with ``--allow-write`` — its execution (``x``) after a
confirmation, with progress and the verification result. The source is only ever read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Select, Static

from statekit.support.presentation import human_bytes
from statekit.tui.confirm import ConfirmScreen
from statekit.tui.model import Snapshot
from statekit.tui.pane import Pane
from statekit.tui.spark_session import LazySession
from statekit.tui.table import Table
from statekit.tui.work import Progress

if TYPE_CHECKING:
    from statekit.jobs.actions.repartition import PreparedRepartition, RepartitionOutcome
    from statekit.jobs.repartition import RepartitionResult
    from statekit.writes.repartition_plan import RepartitionPlan


PROVIDER_CHOICES = [("keep the provider", ""), ("migrate to RocksDB", "rocksdb"),
                    ("migrate to HDFS-backed", "hdfs")]


class RepartitionPane(Pane):
    """The dry-run plan for a partition count (Enter in the inputs), and — only when the app
    was started with ``--allow-write`` — its execution (``x``) after a confirmation, with
    progress and the verification result. The source is only ever read.

    The steps are :mod:`statekit.jobs.actions.repartition`'s, exactly as ``statekit
    repartition`` runs them: refusals before Spark starts, reader confs for the run only, and
    the file sink's entry for the repartition batch when a sink folder is given."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "execute", "Execute")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prepared: PreparedRepartition | None = None
        self.outcome: RepartitionOutcome | None = None
        self.session = LazySession()

    @property
    def plan(self) -> RepartitionPlan | None:
        """The plan of the last dry run (None before one, and after it was executed)."""
        return self.prepared.plan if self.prepared is not None else None

    @property
    def result(self) -> RepartitionResult | None:
        """The last executed repartition's result."""
        return self.outcome.result if self.outcome is not None else None

    def compose(self) -> ComposeResult:
        yield Static("repartition / migrate into a NEW checkpoint — Enter in a field: plan "
                     "(dry run) · x: execute (needs --allow-write)", classes="title")
        with Horizontal(classes="form"):
            yield Input(placeholder="partitions", id="rp-partitions", type="integer")
            yield Input(placeholder="target: a NEW folder", id="rp-target")
            yield Checkbox("force (the query is stopped)", id="rp-force")
        with Horizontal(classes="form"):
            yield Input(placeholder="the query's file sink output (optional; its "
                                    "_spark_metadata gets an entry)",
                        id="rp-file-sink")
            yield Select(PROVIDER_CHOICES, value="", allow_blank=False, id="rp-provider")
        yield Static("", classes="status")
        yield Table(classes="main")

    def render_snapshot(self) -> None:
        """Nothing to fill in: the target is the user's choice (a default beside the source
        would write into a folder they never named)."""

    def main_widget(self) -> Widget | None:
        # the table, not the partitions field: digit keys must still switch tabs; a click or
        # Tab enters the form, Esc leaves it
        return self.table

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.plan_dry_run()

    def _request(self) -> tuple[int | None, str, str, bool, str | None] | None:
        text = self.query_one("#rp-partitions", Input).value.strip()
        provider = str(self.query_one("#rp-provider", Select).value or "") or None
        if not (text.isdigit() and int(text) >= 1) and not (provider and not text):
            self.show_error("enter the new number of partitions (it may stay empty when "
                            "migrating to another provider)")
            return None
        return (int(text) if text else None, self.query_one("#rp-target", Input).value.strip(),
                self.query_one("#rp-file-sink", Input).value.strip(),
                self.query_one("#rp-force", Checkbox).value, provider)

    def plan_dry_run(self) -> None:
        request = self._request()
        if request and self.snapshot is not None:
            self.status.update("planning…")
            self._dry_run(self.snapshot, *request)

    def _dry_run(self, snapshot: Snapshot, partitions: int | None, target: str,
                 file_sink: str, force: bool, to_provider: str | None) -> None:
        options = dict(self.tui.storage_options)

        def plan(say: Progress) -> PreparedRepartition:
            from statekit.checkpoint.location import resolve
            from statekit.jobs.actions.repartition import prepare, run

            prepared = prepare(snapshot.ckpt, resolve(target, options), partitions,
                               to_provider=to_provider, storage_options=options,
                               file_sink=resolve(file_sink, options) if file_sink else None,
                               force=force)
            spark = self.session.get(say)
            say("counting keys per new partition…")
            run(spark, prepared, dry_run=True, progress=say)
            return prepared

        self.ask("repartition", plan, self._planned, describe="dry run")

    def _planned(self, prepared: PreparedRepartition) -> None:
        self.prepared = prepared
        plan = prepared.plan
        estimate = plan.estimate()
        sizes = plan.bytes_per_partition()
        sink = prepared.file_sink
        self.status.update(
            f"batch {plan.last_committed} → repartition batch {plan.repartition_batch}, state "
            f"version {plan.state_version}; {plan.from_partitions} → {plan.to_partitions} "
            f"partitions"
            + (f"; provider {plan.provider} → {plan.target_provider}" if plan.migrates else "")
            + f"; {plan.files_to_write} files to write; estimated "
            f"{estimate['seconds'] or 0:.0f} s"
            + (f"; file sink: will write {sink.url}" if sink else "")
            + ("" if self.tui.allow_write else " · read-only: start with --allow-write to "
               "execute"))
        rows = []
        for key, counts in plan.keys_per_partition.items():
            mean = sum(counts) / len(counts) if counts else 0
            for p, count in enumerate(counts):
                size = sizes.get(key)
                rows.append((f"{key}/{p}", (key, str(p), f"{count:,}",
                                            human_bytes(size[p]) if size else "-",
                                            f"{count / mean:.2f}" if mean else "-")))
        self.table.load(("operator/store", "new partition", "keys", "≈ bytes", "÷ mean"),
                        rows)
        self.table.focus()  # so x (execute) reaches the pane

    def action_execute(self) -> None:
        if not self.tui.allow_write:
            self.show_error("read-only: start statekit tui with --allow-write to execute a "
                            "repartition")
            return
        prepared = self.prepared
        if prepared is None:
            self.show_error("plan first (Enter in the inputs): the dry run shows what will "
                            "be written")
            return
        plan = prepared.plan
        sink = (f" Then add the repartition batch's entry to the file sink "
                f"{prepared.file_sink.sink.url}, which from then on belongs to the new "
                "checkpoint." if prepared.file_sink else "")

        def answered(yes: bool | None) -> None:
            if yes:
                self._execute(prepared)

        self.app.push_screen(ConfirmScreen(
            f"Write a new checkpoint {plan.target} with {plan.to_partitions} partitions"
            + (f" and the {plan.target_provider} provider" if plan.migrates else "")
            + f" from {plan.source}? The source is only read.{sink}"), answered)

    def _execute(self, prepared: PreparedRepartition) -> None:
        def execute(say: Progress) -> RepartitionOutcome:
            from statekit.jobs.actions.repartition import run

            return run(self.session.get(say), prepared, progress=say)

        self.ask("repartition", execute, self._executed, describe="execute")

    def _executed(self, outcome: RepartitionOutcome) -> None:
        self.outcome = outcome
        result = outcome.result
        assert result is not None
        check = result.verification
        verdict = "verified: identical rows, all in place, state-metadata agrees" if \
            check is not None and check.ok else "NOT verified"
        sink = f"; file sink entry {outcome.file_sink_entry}" if outcome.file_sink_entry else ""
        self.status.update(Text(f"published {result.target} in {result.seconds:.1f} s — "
                                f"{verdict}{sink}", style="bold green"))
        self.prepared = None
