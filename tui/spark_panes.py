"""The tabs that need Spark: State (rows through Spark's ``statestore`` reader, paged) and
Repartition (the dry-run plan, and execution only with ``--allow-write``). The JVM starts
in a worker the first time one of them needs it, never for the other tabs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Select, Static

from statekit.presentation import human_bytes
from statekit.tui.model import Snapshot
from statekit.tui.panes import Pane, Table

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import Row, SparkSession

    from statekit.jobs.repartition import RepartitionResult
    from statekit.jobs.repartition_action import PreparedRepartition, RepartitionOutcome
    from statekit.jobs.state_reader import StateTarget
    from statekit.repartition.plan import RepartitionPlan


def spark_session() -> SparkSession:
    """A Spark session of the TUI's own (the JVM starts on first use, in a worker).

    Each screen gets a new session over the one SparkContext: its SQL confs are its own, so
    what one screen sets for a read never reaches another screen (or a notebook sharing the
    JVM); and each read sets the confs it needs only while it runs (``session_confs``).
    """
    from statekit.jobs.session import build_session

    return build_session("statekit-tui").newSession()


def failed_in_worker(pane: Pane, error: Exception) -> None:
    """Show a worker's failure in its pane: statekit's own one-line message, or Spark's
    first line (never a JVM stack)."""
    from statekit.errors import StatekitError
    from statekit.jobs.errors import first_line

    message = str(error) if isinstance(error, StatekitError) else f"Spark: {first_line(error)}"
    pane.app.call_from_thread(pane.show_error, message)


class StatePane(Pane):
    """State rows through Spark's own reader: the JVM starts the first time this tab opens,
    in a worker, with each step shown. Rows stream in pages (``n`` next, ``p`` previous);
    ``o`` switches to the next operator."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "page(1)", "Next page"), Binding("p", "page(-1)", "Previous page"),
        Binding("o", "next_operator", "Next operator")]
    PAGE = 100

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started = False
        self.operator: int | None = None
        self.pages: list[list[tuple]] = []
        self.columns: list[str] = []
        self.page = 0
        self.rows_iter: Iterator[Row] | None = None
        self.exhausted = False
        self.spark: SparkSession | None = None
        self.confs: dict[str, str] = {}  # the reader confs, set while Spark reads
        self.spark_filter = ""  # rows shown contain this (evaluated by Spark over all rows)

    def filter_typed(self, text: str) -> None:
        self.table.apply_filter(text)  # as you type: this page only; Enter asks Spark

    def apply_filter(self, text: str) -> None:
        text = text.strip()
        self.table.apply_filter("")
        if text != self.spark_filter and self.started:
            self.spark_filter = text
            self.pages, self.page, self.exhausted = [], 0, False
            self._open(self.operator)

    def back(self) -> None:
        self.apply_filter("")  # Esc: all rows again

    def render_snapshot(self) -> None:
        self.title_line.update("state rows through Spark's statestore reader")
        if not self.started:
            self.status.update("opens Spark when shown (the JVM starts only here)")

    def activated(self) -> None:
        if not self.started and self.snapshot is not None:
            self.started = True
            self._open(self.operator)

    def action_next_operator(self) -> None:
        operators = sorted(self.snapshot.ckpt.operators) if self.snapshot else []
        if not operators:
            return
        current = self.operator if self.operator is not None else operators[0]
        later = [o for o in operators if o > current]
        self._open(later[0] if later else operators[0])

    def action_page(self, step: int) -> None:
        target = self.page + step
        if target < 0:
            return
        if target < len(self.pages):
            self.page = target
            self._show_page()
        elif not self.exhausted and self.rows_iter is not None:
            self._fetch()

    @work(thread=True, exclusive=True, group="state")
    def _open(self, operator: int | None) -> None:

        def say(message: str) -> None:
            self.app.call_from_thread(self.status.update, message)

        snapshot = self.snapshot
        if snapshot is None:
            return
        try:
            from statekit.jobs.state_reader import (
                flatten,
                read_state,
                reader_confs,
                resolve_target,
                rows_containing,
                session_confs,
            )

            target = resolve_target(snapshot.ckpt, operator=operator)
            if self.spark is None:
                say("starting Spark (the JVM takes a few seconds)…")
                self.spark = spark_session()
            wanted = self.spark_filter
            say(f"planning the read of {target.label}"
                + (f" (rows containing {wanted!r})" if wanted else "") + "…")
            self.confs = reader_confs(snapshot.ckpt)
            with session_confs(self.spark, self.confs):
                frame = flatten(read_state(self.spark, target))
                if wanted:
                    frame = rows_containing(frame, wanted)
                columns = list(frame.columns)
                rows_iter = frame.toLocalIterator()
        except Exception as error:  # shown in place, one line
            failed_in_worker(self, error)
            return
        self.app.call_from_thread(self._opened, target, columns, rows_iter)

    def _opened(self, target: StateTarget, columns: list[str], rows_iter: Iterator[Row]
                ) -> None:
        self.operator = target.operator_id
        shown = (f"rows containing {self.spark_filter!r} (Esc: all rows)" if self.spark_filter
                 else "/: rows containing a text, searched by Spark")
        self.title_line.update(f"{target.label} — n/p: pages · o: next operator · {shown}")
        self.columns, self.rows_iter = columns, rows_iter
        self.pages, self.page, self.exhausted = [], 0, False
        self._fetch()

    @work(thread=True, exclusive=True, group="state-page")
    def _fetch(self) -> None:
        from itertools import islice

        from statekit.jobs.state_reader import session_confs

        self.app.call_from_thread(self.status.update, "reading rows…")
        if self.spark is None or self.rows_iter is None:
            return
        try:
            with session_confs(self.spark, self.confs):
                rows = [tuple(str(v) for v in r) for r in islice(self.rows_iter, self.PAGE)]
        except Exception as error:  # shown in place, one line
            failed_in_worker(self, error)
            return
        self.app.call_from_thread(self._fetched, rows)

    def _fetched(self, rows: list[tuple]) -> None:
        if len(rows) < self.PAGE:
            self.exhausted = True
        if rows or not self.pages:
            self.pages.append(rows)
            self.page = len(self.pages) - 1
        self._show_page()

    def _show_page(self) -> None:
        rows = self.pages[self.page] if self.pages else []
        first = self.page * self.PAGE
        self.table.load(self.columns, [(str(first + n), r) for n, r in enumerate(rows)])
        more = "" if self.exhausted and self.page == len(self.pages) - 1 else " · n: more"
        self.status.update(f"rows {first + 1 if rows else 0}–{first + len(rows)}{more}")





class ConfirmScreen(ModalScreen[bool]):
    """y / n for an action that writes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "Yes"),
                                         Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(self.question)
            yield Static("y: yes · n / Esc: no", classes="status")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


PROVIDER_CHOICES = [("keep the provider", ""), ("migrate to RocksDB", "rocksdb"),
                    ("migrate to HDFS-backed", "hdfs")]


class RepartitionPane(Pane):
    """The dry-run plan for a partition count (Enter in the inputs), and — only when the app
    was started with ``--allow-write`` — its execution (``x``) after a confirmation, with
    progress and the verification result. The source is only ever read.

    The steps are :mod:`statekit.jobs.repartition_action`'s, exactly as ``statekit
    repartition`` runs them: refusals before Spark starts, reader confs for the run only, and
    the file sink's entry for the repartition batch when a sink folder is given."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("x", "execute", "Execute")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prepared: PreparedRepartition | None = None
        self.outcome: RepartitionOutcome | None = None
        self.spark: SparkSession | None = None

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
            yield Input(placeholder="target folder", id="rp-target")
            yield Checkbox("force (the query is stopped)", id="rp-force")
        with Horizontal(classes="form"):
            yield Input(placeholder="the query's file sink output (optional; its "
                                    "_spark_metadata gets an entry)",
                        id="rp-file-sink")
            yield Select(PROVIDER_CHOICES, value="", allow_blank=False, id="rp-provider")
        yield Static("", classes="status")
        yield Table(classes="main")

    def render_snapshot(self) -> None:
        target = self.query_one("#rp-target", Input)
        if not target.value and self.snapshot is not None:
            target.value = self.snapshot.ckpt.location.url.rstrip("/") + "-repartitioned"

    def focus_main(self) -> None:
        self.query_one("#rp-partitions", Input).focus()

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

    def _say(self, message: str) -> None:
        self.app.call_from_thread(self.status.update, message)

    @work(thread=True, exclusive=True, group="repartition")
    def _dry_run(self, snapshot: Snapshot, partitions: int | None, target: str,
                 file_sink: str, force: bool, to_provider: str | None) -> None:
        from statekit.checkpoint.location import resolve
        from statekit.jobs.repartition_action import prepare, run

        options = dict(self.tui.storage_options)
        try:
            prepared = prepare(snapshot.ckpt, resolve(target, options), partitions,
                               to_provider=to_provider, storage_options=options,
                               file_sink=resolve(file_sink, options) if file_sink else None,
                               force=force)
            self._say("counting keys per new partition (starting Spark)…")
            run(self._session(), prepared, dry_run=True, progress=self._say)
        except Exception as error:  # shown in place, one line
            failed_in_worker(self, error)
            return
        self.app.call_from_thread(self._planned, prepared)

    def _session(self) -> SparkSession:
        if self.spark is None:
            self.spark = spark_session()
        return self.spark

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

    @work(thread=True, exclusive=True, group="repartition")
    def _execute(self, prepared: PreparedRepartition) -> None:
        from statekit.jobs.repartition_action import run

        try:
            outcome = run(self._session(), prepared, progress=self._say)
        except Exception as error:  # shown in place, one line
            failed_in_worker(self, error)
            return
        self.app.call_from_thread(self._executed, outcome)

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
