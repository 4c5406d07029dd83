"""``statekit tui CKPT``: triage a checkpoint from the terminal.

One app, one tab per question an on-call engineer asks — how is this checkpoint (the
Overview dashboard), where is the state (Operators → partitions → files → records), what ran
when (Batches), is it growing (Growth), how long would a restart take (Recovery), what does
Spark's UI say (Query, from ``--progress-log``) — and the writes that move the state
(Repartition) or repair it (Fix: the doctor's rollback, evict). Everything slow is read in
thread workers through one path (:mod:`statekit.tui.work`), so the first screen appears
before anything slow finishes and the JVM never starts unless a screen that needs Spark is
opened. Errors are shown where the data would have been; the rest keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.command import Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane, Tabs

from statekit.state.memory import ONE_EXECUTOR, ExecutorSizing
from statekit.support.machine import usable_cpus
from statekit.tui.help import HelpScreen
from statekit.tui.model import Snapshot, load_snapshot
from statekit.tui.pane import Pane
from statekit.tui.panes.batches import BatchesPane
from statekit.tui.panes.fix import FixPane
from statekit.tui.panes.growth import GrowthPane
from statekit.tui.panes.operators import OperatorsPane
from statekit.tui.panes.overview import OverviewPane
from statekit.tui.panes.query import QueryPane
from statekit.tui.panes.recovery import RecoveryPane
from statekit.tui.panes.repartition import RepartitionPane
from statekit.tui.panes.state import StatePane
from statekit.tui.work import Asks

TABS = (("overview", "Overview", OverviewPane), ("operators", "Operators", OperatorsPane),
        ("batches", "Batches", BatchesPane), ("growth", "Growth", GrowthPane),
        ("recovery", "Recovery", RecoveryPane), ("state", "State", StatePane),
        ("repartition", "Repartition", RepartitionPane), ("query", "Query", QueryPane),
        ("fix", "Fix", FixPane))


class ScreenCommands(Provider):
    """The command palette: every screen and every action."""

    async def search(self, query: str) -> Hits:
        app = self.app
        assert isinstance(app, StatekitApp)
        matcher = self.matcher(query)
        entries: list[tuple[str, Callable[[], object], str]] = [
            (f"Show {title}", partial(app.show_tab, tab), f"go to {title}")
            for tab, title, _ in TABS]
        entries += [("Refresh", app.action_refresh, "re-read the checkpoint"),
                    ("Filter", app.action_filter, "filter the current table"),
                    ("Back", app.action_back, "one level up, or clear the filter"),
                    ("Help", app.action_help, "every key"), ("Quit", app.action_quit, "")]
        for tab, title, pane in TABS:  # each screen's own actions (State paging, execute…)
            for binding in vars(pane).get("BINDINGS", ()):
                entries.append((f"{title}: {binding.description}",
                                partial(app.pane_action, tab, binding.action),
                                f"key {binding.key_display or binding.key}"))
        for name, callback, help_text in entries:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


class StatekitApp(Asks, App):
    """The statekit TUI over one checkpoint."""

    TITLE = "statekit"
    CSS_PATH = "statekit.tcss"
    COMMANDS = App.COMMANDS | {ScreenCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("r", "refresh", "Refresh"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "back", "Back", show=False),
        *(Binding(str(n), f"show_tab('{tab}')", title, show=False)
          for n, (tab, title, _) in enumerate(TABS, 1)),
    ]

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None,
                 watch: float | None = None, cores: int | None = None,
                 allow_write: bool = False, first: Future[Snapshot] | None = None,
                 progress: str | None = None, rto_s: float | None = None,
                 fleet: Sequence[str] | None = None,
                 fleet_options: Mapping[str, dict[str, Any]] | None = None,
                 timeout_s: float | None = None,
                 sizing: ExecutorSizing | None = None) -> None:
        """``first``: the first snapshot, already being built
        (:func:`statekit.tui.model.snapshot_in_background`); refreshes load afresh.
        ``progress``: a StreamingQueryProgress log for the Query tab; ``rto_s``: the restart
        objective drawn on the Recovery chart and judged on the Overview. ``fleet``: several
        checkpoints — the app opens on their list (:mod:`statekit.tui.fleet_screen`), Enter
        shows one, Esc at its top level returns to the list; ``fleet_options``: each one's
        own storage options (a fleet file's lines), ``timeout_s``: each one's deadline in
        the list. ``sizing``: the executors the growth outlook and the restart's memory
        check assume."""
        super().__init__()
        self.fleet = list(dict.fromkeys(fleet or ())) if fleet and len(fleet) > 1 else None
        self.progress_path = progress
        self.rto_s = rto_s
        self._first = first
        self.url = url
        self.storage_options = storage_options or {}
        self._common_options = dict(self.storage_options)
        self.fleet_options = dict(fleet_options or {})
        self.timeout_s = timeout_s
        self.watch_seconds = watch
        self.cores = cores or usable_cpus()
        self.sizing = sizing or ONE_EXECUTOR
        self.allow_write = allow_write
        self.snapshot: Snapshot | None = None
        self.refreshes = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter rows (Enter to apply, Esc to clear)", id="filter")
        yield self._tabs()
        yield Footer()

    @staticmethod
    def _tabs() -> TabbedContent:
        """A new set of screens (what ``with TabbedContent(): yield TabPane(…)`` builds)."""
        tabs = TabbedContent(id="tabs")
        for tab, title, pane in TABS:
            tabs.compose_add_child(TabPane(title, pane(id=f"{tab}-pane"), id=tab))
        return tabs

    def _unfocusable_tab_bar(self) -> None:
        # Tabs are switched with 1-9 and the palette. A focusable tab bar would take the focus
        # whenever the focused table's tab is hidden, after the new tab's table got it.
        self.query_one("#tabs", TabbedContent).query_one(Tabs).can_focus = False

    def on_mount(self) -> None:
        self._unfocusable_tab_bar()
        self.sub_title = self.url
        self.call_after_refresh(self.focus_current, self.current_pane())
        if self.fleet:
            from statekit.tui.fleet_screen import FleetScreen

            self.install_screen(FleetScreen(self.fleet, storage_options=self._common_options,
                                            per_url=self.fleet_options,
                                            timeout_s=self.timeout_s,
                                            cores=self.cores, rto_s=self.rto_s,
                                            watch=self.watch_seconds), name="fleet")
            self.show_fleet()
        else:
            self.load()
        if self.watch_seconds:
            self.set_interval(self.watch_seconds, self._watched)

    def _watched(self) -> None:
        # the checkpoint shown, not one left open under the fleet list (the list re-reads
        # its own rows)
        if self.fleet and (self.snapshot is None or self.screen is self.get_screen("fleet")):
            return
        if self.asking("snapshot"):  # the last tick's reading still runs: no second one
            return
        self.action_refresh()

    # ---------------------------------------------------------------- the fleet
    def show_fleet(self) -> None:
        """The list of every checkpoint (``statekit tui CKPT CKPT…``)."""
        self.push_screen("fleet", self.open_checkpoint)

    async def open_checkpoint(self, url: str | None) -> None:
        """Show ``url``'s screens (chosen in the fleet list). Another checkpoint than the one
        shown gets new screens: nothing of the last one (a drill-down, a plan, a Spark
        filter) can stay on the new one's tabs."""
        if url is None:
            return
        if url == self.url and self.snapshot is not None:
            self.call_after_refresh(self.focus_current, self.current_pane())
            return
        self.url = url
        self.storage_options = dict(self.fleet_options.get(url, self._common_options))
        self.sub_title = url
        self.snapshot = None
        self.forget("snapshot")  # a reading of the last checkpoint must not land here
        await self.query_one("#tabs", TabbedContent).remove()
        await self.mount(self._tabs(), before=self.query_one(Footer))
        self._unfocusable_tab_bar()
        self.load()
        self.call_after_refresh(self.focus_current, self.current_pane())

    # ---------------------------------------------------------------- loading
    def load(self) -> None:
        first, self._first = self._first, None
        url, options = self.url, self.storage_options

        def read(_progress: object) -> Snapshot:
            return first.result() if first is not None else load_snapshot(url, options)

        self.ask("snapshot", read, self._loaded, describe=url)

    def _loaded(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.refreshes += 1
        for pane in self.query(Pane):
            pane.show_snapshot(snapshot)

    def show_error(self, message: str) -> None:
        """The checkpoint could not be read: every screen says so where its data would be."""
        for pane in self.query(Pane):
            pane.show_error(message)

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        """Textual's SVG screenshot (also behind ``save_screenshot`` and the palette's
        "Save screenshot"), with text runs pinned to their cells (:mod:`statekit.tui.svg`)."""
        from statekit.tui.svg import pin_spaces

        return pin_spaces(super().export_screenshot(title=title, simplify=simplify))

    # ---------------------------------------------------------------- actions
    def show_tab(self, tab: str) -> None:
        self.query_one("#tabs", TabbedContent).active = tab
        self.call_after_refresh(self.focus_current, self.current_pane())

    def focus_current(self, pane: Pane) -> None:
        """Focus ``pane``'s main widget if it is still the shown tab. A focus that lands
        in a hidden tab makes TabbedContent switch back to it: a late focus for the tab the
        user just left would undo their key press."""
        try:
            widget = pane.main_widget() if self.current_pane() is pane else None
        except NoMatches:  # closing
            return
        if widget is not None and widget.screen is self.screen:  # not under the fleet list
            self.screen.set_focus(widget)  # now, not later: a key meanwhile must not undo it

    def pane_action(self, tab: str, action: str) -> None:
        """Run a screen's own action (from the command palette), showing the screen first."""
        self.show_tab(tab)
        self.call_after_refresh(self.run_action, action, self.query_one(f"#{tab}-pane"))

    def action_show_tab(self, tab: str) -> None:
        self.show_tab(tab)

    def current_pane(self) -> Pane:
        active = self.query_one("#tabs", TabbedContent).active
        return self.query_one(f"#{active}-pane", Pane)

    def action_refresh(self) -> None:
        self.load()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.BINDINGS, TABS))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def clear_filter_box(self) -> bool:
        """Hide and empty the filter box; True if it was shown."""
        box = self.query_one("#filter", Input)
        if not box.has_class("shown"):
            return False
        with box.prevent(Input.Changed):
            box.value = ""
        box.remove_class("shown")
        return True

    async def action_back(self) -> None:
        if self.clear_filter_box():
            self.current_pane().apply_filter("")
            self.current_pane().focus_main()
            return
        if isinstance(self.focused, Input):  # a form field: Esc leaves the form
            self.current_pane().focus_main()
            return
        if not self.current_pane().back() and self.fleet:
            self.show_fleet()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.current_pane().apply_filter(event.value)
        self.current_pane().focus_main()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.current_pane().filter_typed(event.value)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, _event: TabbedContent.TabActivated) -> None:
        try:
            pane = self.current_pane()
        except NoMatches:  # the app is closing: its tabs are already gone
            return
        pane.activated()
        self.call_after_refresh(self.focus_current, pane)


def run_tui(url: str, *, storage_options: dict[str, Any] | None = None,
            watch: float | None = None, cores: int | None = None,
            allow_write: bool = False, first: Future[Snapshot] | None = None,
            progress: str | None = None, rto_s: float | None = None,
            fleet: Sequence[str] | None = None,
            fleet_options: Mapping[str, dict[str, Any]] | None = None,
            timeout_s: float | None = None, sizing: ExecutorSizing | None = None) -> None:
    app = StatekitApp(url, storage_options=storage_options, watch=watch, cores=cores,
                      allow_write=allow_write, first=first, progress=progress, rto_s=rto_s,
                      fleet=fleet, fleet_options=fleet_options, timeout_s=timeout_s,
                      sizing=sizing)
    _stop_on_signals(app)
    app.run()
    _leave(app.return_code or 0)


def _stop_on_signals(app: StatekitApp) -> None:
    """SIGTERM or SIGINT (a service manager, ``tmux kill-session``, ``kill``) ends the app
    as ``q`` does — the terminal restored — and the process, with everything it started,
    within seconds even when the app cannot end (a reading blocked on a dead store).
    Behind ``--web`` the web driver installs its own handlers over these, and the server
    ends the app's process group."""
    import threading

    from statekit.support.stopping import end_process, on_stop_signals

    def stop(_number: int) -> None:
        loop = app._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(app.exit)
        fallback = threading.Timer(2.0, end_process, kwargs={"code": 0, "grace_s": 0.5})
        fallback.daemon = True
        fallback.start()

    on_stop_signals(stop)


def _leave(code: int) -> None:
    """End the process once the app has exited, without waiting for its workers.

    A worker thread still reading (a fleet's checkpoints, a ``--watch`` refresh, the first
    snapshot) is not a daemon: the interpreter would join it at exit, and a quit app would
    hang — in a terminal after ``q``, and behind ``--web`` as a process the server must kill.
    Nothing it computes is wanted any more: with such threads left, the output is flushed
    and the process ends at once with the app's code, after ending every process it started
    (:func:`statekit.support.stopping.end_process`). Without them, the usual exit."""
    import logging
    import threading

    from statekit.support.stopping import end_process

    main = threading.main_thread()
    if any(thread is not main and thread.is_alive() and not thread.daemon
           for thread in threading.enumerate()):
        logging.shutdown()
        end_process(code, grace_s=1.0)
    if code:
        raise SystemExit(code)
