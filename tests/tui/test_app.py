"""The TUI driven with Textual's Pilot on checkpoints the reference pipeline wrote."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from statekit.tui.app import StatekitApp
from statekit.tui.panes.batches import BatchesPane
from statekit.tui.panes.growth import GrowthPane
from statekit.tui.panes.operators import OperatorsPane
from statekit.tui.panes.overview import OverviewPane
from statekit.tui.panes.recovery import RecoveryPane
from statekit.tui.table import Table
from tests.tui.helpers import Messages, show_tab, until

pytestmark = [pytest.mark.spark]


def driven(app: StatekitApp, size=(160, 48)):
    """``app.run_test`` with its work messages recorded in ``app.messages``."""
    app.messages = Messages()
    return app.run_test(size=size, message_hook=app.messages.hook)


async def plan_repartition(pilot, app, partitions: int, target: Path,
                           file_sink: Path | None = None):
    """Fill the Repartition screen (the query is stopped: force) and wait for the dry run."""
    from statekit.tui.panes.repartition import RepartitionPane

    pane = app.query_one(RepartitionPane)
    await app.messages.idle(pilot)  # the Overview's analyses are done: nothing else runs
    await pilot.press("7")
    await until(pilot, lambda: app.current_pane() is pane, "the Repartition tab")
    pane.query_one("#rp-target").value = str(target)
    if file_sink is not None:
        pane.query_one("#rp-file-sink").value = str(file_sink)
    pane.query_one("#rp-force").value = True
    await pilot.click("#rp-partitions")
    await pilot.press(*str(partitions), "enter")
    await app.messages.answer(pilot, "repartition", timeout=120)
    assert pane.plan is not None, str(pane.status.render())
    return pane


async def open_fix_tab(pilot, app):
    """Open the Fix tab once the Overview is done, and wait for the doctor's answer."""
    from statekit.tui.panes.fix import FixPane

    await app.messages.answer(pilot, "snapshot")
    await app.messages.idle(pilot)
    pane = app.query_one(FixPane)
    await show_tab(pilot, app, "9")
    await app.messages.answer(pilot, "analysis", describe="FixPane", timeout=120)
    return pane


async def execute(pilot, app, pane, kind: str, allow_write: bool, timeout: float) -> bool:
    """``x`` on a planned write: refused in place without ``--allow-write`` (False), else
    confirmed with ``y`` and waited for (its second answer after the dry run; True)."""
    await pilot.press("x")
    if not allow_write:
        assert "read-only" in str(pane.status.render())
        assert app.screen.__class__.__name__ != "ConfirmScreen"
        return False
    assert app.screen.__class__.__name__ == "ConfirmScreen"
    await pilot.press("y")
    await app.messages.answer(pilot, kind, 2, timeout=timeout)
    return True


def cells(table: Table) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def test_overview_operators_drilldown_filter_and_back(reference_checkpoints):
    run = reference_checkpoints.get("hdfs")

    async def scenario():
        app = StatekitApp(str(run.checkpoint))
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            overview = app.query_one(OverviewPane)
            assert str(app.snapshot.report.query_id) in str(overview.title_line.render())
            await show_tab(pilot, app, "2")
            ops = app.query_one(OperatorsPane)
            assert app.focused is ops.table
            assert ops.table.row_count == len(app.snapshot.report.stores)
            await pilot.press("enter")  # store → partitions
            assert ops.path == ["0/default"] and ops.table.row_count == 4
            await pilot.press("j", "enter")  # partition 1 → files
            assert ops.path == ["0/default", "1"]
            files = cells(ops.table)
            assert any(row[1] == "delta" for row in files)
            await pilot.press("slash")
            await pilot.press(*"snapshot", "enter")  # filter the files
            assert ops.table.row_count and all("snapshot" in r[1] for r in cells(ops.table))
            await pilot.press("enter")  # a snapshot → its decoded records
            await app.messages.answer(pilot, "records")
            assert ops.table.row_count > 0 and len(ops.path) == 3
            assert ops.table.columns and "records shown" in str(ops.status.render())
            await pilot.press("escape", "escape")
            assert ops.path == ["0/default"]
            await pilot.press("escape")
            assert ops.path == []

    asyncio.run(scenario())


def test_batches_growth_recovery_and_help(reference_checkpoints):
    run = reference_checkpoints.get("rocksdb")

    async def scenario():
        app = StatekitApp(str(run.checkpoint))
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            await pilot.press("3")
            batches = app.query_one(BatchesPane)
            assert batches.table.row_count == len(app.snapshot.timeline.rows)
            await pilot.press("4")
            growth = app.query_one(GrowthPane)
            await app.messages.answer(pilot, "analysis", describe="GrowthPane")
            assert growth.result.verdict and growth.table.row_count >= 1
            await pilot.press("5")
            recovery = app.query_one(RecoveryPane)
            await app.messages.answer(pilot, "analysis", describe="RecoveryPane")
            assert recovery.result is not None
            assert "estimated restart" in str(recovery.title_line.render())
            await pilot.press("question_mark")
            assert app.screen.__class__.__name__ == "HelpScreen"
            await pilot.press("escape")
            assert app.screen.__class__.__name__ != "HelpScreen"

    asyncio.run(scenario())


def test_refresh_shows_new_batches_and_errors_stay_in_place(reference_checkpoints, tmp_path):
    source = reference_checkpoints.get("hdfs").checkpoint
    copy = tmp_path / "ckpt"
    shutil.copytree(source, copy)
    newest = max(int(p.name) for p in (copy / "commits").iterdir() if p.name.isdigit())

    async def scenario():
        app = StatekitApp(str(copy))
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            before = len(app.snapshot.timeline.rows)
            # a new planned batch appears (a running query), then refresh
            text = (copy / "offsets" / str(newest)).read_text()
            (copy / "offsets" / str(newest + 1)).write_text(text)
            await pilot.press("r")
            await app.messages.answer(pilot, "snapshot", 2)
            assert len(app.snapshot.timeline.rows) == before + 1
            await pilot.press("3")
            assert "NOT committed" in str(cells(app.query_one(BatchesPane).table)[-1])
            # a damaged query-id file: the checkpoint still reads, and the Overview says
            # what the doctor says — it will not restart, so no estimate applies
            (copy / "metadata").write_text("not json")
            await pilot.press("r")
            await app.messages.answer(pilot, "snapshot", 3)
            await pilot.press("1")
            await app.messages.answer(pilot, "assessment", 3)
            line = str(app.query_one(OverviewPane).recovery_line.render())
            assert "WILL NOT RESTART" in line and "metadata" in line, line
            assert "does not apply" in line and "meets the RTO" not in line
            # a checkpoint that cannot be read at all: the error is shown in place, the app
            # keeps running
            shutil.rmtree(copy)
            await pilot.press("r")
            await app.messages.answer(pilot, "snapshot", 4)
            assert "✗" in str(app.query_one(OverviewPane).status.render())
            assert app.is_running

    asyncio.run(scenario())


def test_state_screen_starts_spark_only_when_opened_and_pages(reference_checkpoints):
    from statekit.tui.panes.state import StatePane

    run = reference_checkpoints.get("hdfs")
    keys = run.result.state_keys()

    async def scenario():
        app = StatekitApp(str(run.checkpoint))
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            state = app.query_one(StatePane)
            await pilot.press("2", "3")
            assert state.session.spark is None and not state.started  # no JVM for other screens
            await pilot.press("6")
            await app.messages.answer(pilot, "state-page", timeout=90)
            assert state.table.row_count == min(StatePane.PAGE, keys)
            assert "key.user_id" in state.columns
            shown = sum(len(p) for p in state.pages)
            while not state.exhausted:
                pages = len(app.messages.answered("state-page"))
                await pilot.press("n")
                await app.messages.answer(pilot, "state-page", pages + 1, timeout=60)
                shown = sum(len(p) for p in state.pages)
            assert shown == keys  # every key, page by page
            assert not [c for page in state.pages for r in page for c in r
                        if c.startswith("Row(")]  # values as `statekit state show` prints
            await pilot.press("p")
            assert state.page == max(0, len(state.pages) - 2)
            # "/" + Enter: Spark searches every row, not just this page
            user = str(state.pages[-1][-1][state.columns.index("key.user_id")])
            pages = len(app.messages.answered("state-page"))
            await pilot.press("slash", *user, "enter")
            await app.messages.answer(pilot, "state-page", pages + 1, timeout=60)
            assert state.spark_filter == user and state.exhausted
            assert [r[state.columns.index("key.user_id")] for r in state.pages[0]] == [user]
            pages = len(app.messages.answered("state-page"))
            await pilot.press("escape")  # all rows again
            await app.messages.answer(pilot, "state-page", pages + 1, timeout=60)
            assert not state.spark_filter and len(state.pages[0]) == min(StatePane.PAGE, keys)

    asyncio.run(scenario())


@pytest.mark.parametrize("allow_write", [False, True])
def test_repartition_flow_plans_and_executes_only_with_allow_write(reference_checkpoints,
                                                                   tmp_path, allow_write):
    from tests.support.trees import tree_hash

    source = reference_checkpoints.get("hdfs").checkpoint
    before = tree_hash(source)
    target = tmp_path / "new"

    async def scenario():
        app = StatekitApp(str(source), allow_write=allow_write)
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            pane = await plan_repartition(pilot, app, 2, target)
            assert pane.table.row_count == 2  # keys per new partition
            assert sum(int(str(pane.table.get_row_at(i)[2]).replace(",", ""))
                       for i in range(2)) == reference_checkpoints.get("hdfs").result \
                .state_keys()
            if not await execute(pilot, app, pane, "repartition", allow_write, timeout=120):
                return
            assert pane.result.verification.ok and "published" in str(pane.status.render())

    asyncio.run(scenario())
    assert tree_hash(source) == before
    assert target.exists() == allow_write


def test_repartition_screen_migrates_the_provider(reference_checkpoints, tmp_path):
    """The Repartition screen's provider choice: the reference pipeline's HDFS state
    (applyInPandasWithState) into a new RocksDB checkpoint, partition count kept (the field
    left empty), through the same prepare/run as ``statekit migrate``."""
    from statekit.checkpoint import open_checkpoint
    from statekit.tui.panes.repartition import RepartitionPane
    from tests.support.trees import tree_hash

    run = reference_checkpoints.get("hdfs")
    before = tree_hash(run.checkpoint)
    target = tmp_path / "rocks"

    async def scenario():
        app = StatekitApp(str(run.checkpoint), allow_write=True)
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            pane = app.query_one(RepartitionPane)
            await app.messages.idle(pilot)
            await pilot.press("7")
            await until(pilot, lambda: app.current_pane() is pane, "the Repartition tab")
            pane.query_one("#rp-target").value = str(target)
            pane.query_one("#rp-force").value = True
            pane.query_one("#rp-provider").value = "rocksdb"
            await pilot.click("#rp-partitions")
            await pilot.press("enter")
            await app.messages.answer(pilot, "repartition", timeout=120)
            assert pane.plan.migrates and pane.plan.to_partitions == pane.plan.from_partitions
            assert "provider hdfs → rocksdb" in str(pane.status.render())
            await pilot.press("x")
            assert "the rocksdb provider" in app.screen.question
            await pilot.press("y")
            await app.messages.answer(pilot, "repartition", 2, timeout=180)
            check = pane.result.verification
            assert check.ok and check.stores[0].target_rows == run.result.state_keys()

    asyncio.run(scenario())
    assert tree_hash(run.checkpoint) == before
    written = open_checkpoint(str(target))
    assert written.offset(written.last_committed_batch).provider == "rocksdb"


def test_repartition_with_the_file_sink_then_the_target_restarts(spark, tmp_path):
    """The TUI runs the same repartition as the CLI: with the pipeline's file sink given, the
    sink gets the repartition batch's entry, and the reference pipeline restarted on the
    target produces exactly what the source would have. The session's confs are unchanged."""
    from statekit.jobs.session import session_conf
    from tests.support.restarts import assert_target_restarts_like_the_source, pipeline_run
    from tests.support.trees import tree_hash

    run = pipeline_run(spark, tmp_path / "run", "hdfs", 4)
    before = tree_hash(run.checkpoint)
    target, target_out = tmp_path / "target", tmp_path / "target-out"
    shutil.copytree(run.output, target_out)
    statekit_defaults = {*session_conf("statekit-tui"), "spark.app.name"}

    def session_confs_now() -> dict[str, str]:
        return {k: v for k, v in spark.conf.getAll.items() if k not in statekit_defaults}

    confs_before = session_confs_now()

    async def scenario():
        app = StatekitApp(str(run.checkpoint), allow_write=True)
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            pane = await plan_repartition(pilot, app, 3, target, file_sink=target_out)
            assert f"file sink: will write {target_out}" in str(pane.status.render())
            await pilot.press("x")
            assert app.screen.__class__.__name__ == "ConfirmScreen"
            await pilot.press("y")
            await app.messages.answer(pilot, "repartition", 2, timeout=180)
            assert pane.result.verification.ok
            return pane.outcome

    outcome = asyncio.run(scenario())
    batch = outcome.plan.repartition_batch
    entry = f"{target_out}/_spark_metadata/{batch}"
    assert outcome.file_sink_entry in (entry, entry + ".compact")
    assert Path(outcome.file_sink_entry).is_file()
    assert tree_hash(run.checkpoint) == before
    assert session_confs_now() == confs_before

    assert_target_restarts_like_the_source(spark, run, target, target_out, tmp_path)


def test_the_first_snapshot_started_before_the_app_is_shown_and_refreshes_load_afresh(
        reference_checkpoints, tmp_path):
    """``statekit tui`` starts the first snapshot before Textual loads: the app shows that
    one (not a second load), a refresh reads the checkpoint again, and a failure of the
    early load is shown like any load error."""
    from statekit.checkpoint import open_checkpoint
    from statekit.tui.model import snapshot_in_background

    path = str(reference_checkpoints.get("hdfs").checkpoint)
    first = snapshot_in_background(path, opened=open_checkpoint(path))
    missing = snapshot_in_background(str(tmp_path / "gone"))

    async def scenario():
        app = StatekitApp(path, first=first)
        async with driven(app) as pilot:
            await app.messages.answer(pilot, "snapshot")
            assert app.snapshot is first.result() and app.refreshes == 1
            await pilot.press("r")
            await app.messages.answer(pilot, "snapshot", 2)
            assert app.snapshot is not first.result()
            assert app.snapshot.report.to_dict() | {"elapsed_s": 0, "listing": 0} == \
                first.result().report.to_dict() | {"elapsed_s": 0, "listing": 0}
        broken = StatekitApp(str(tmp_path / "gone"), first=missing)
        async with driven(broken) as pilot:
            overview = broken.query_one(OverviewPane)
            await broken.messages.answer(pilot, "snapshot")
            assert "gone" in str(overview.status.render())
            assert broken.snapshot is None

    asyncio.run(scenario())


def test_fix_tab_runs_the_doctors_rollback_through_the_rollback_action(reference_checkpoints,
                                                                       tmp_path):
    """A checkpoint that will not restart (a partition's newest delta is gone): the Fix tab
    shows the doctor's verdict and fills in its rollback; the dry run (no JVM) says what the
    rollback copies and re-runs; ``x`` → ``y`` writes it through the same action as
    ``statekit rollback``, verified through Spark, and the doctor finds the target sound.
    The broken source is never written."""
    from statekit.checkpoint import open_checkpoint
    from statekit.doctor import diagnose
    from tests.support.trees import tree_hash

    source = tmp_path / "broken"
    shutil.copytree(reference_checkpoints.get("hdfs").checkpoint, source)
    deltas = sorted((source / "state" / "0" / "0").glob("*.delta"), key=lambda p: int(p.stem))
    deltas[-1].unlink()
    before = tree_hash(source)
    target = tmp_path / "fixed"

    async def scenario():
        app = StatekitApp(str(source), allow_write=True)
        async with driven(app) as pilot:
            pane = await open_fix_tab(pilot, app)
            diagnosis = pane.result
            assert not diagnosis.restarts and diagnosis.fix_batch is not None
            assert str(pane.status.render()).startswith("will not restart; fix: roll back")
            assert pane.query_one("#fx-batch").value == str(diagnosis.fix_batch)
            assert pane.query_one("#fx-target").value.endswith(f"-at-{diagnosis.fix_batch}")
            assert any(deltas[-1].name in str(row[2]) for row in cells(pane.table))  # file
            pane.query_one("#fx-target").value = str(target)
            pane.query_one("#fx-force").value = True
            await pilot.click("#fx-batch")
            await pilot.press("enter")
            await app.messages.answer(pilot, "fix", timeout=60)
            status = str(pane.status.render())
            assert f"→ {diagnosis.fix_batch};" in status and "files" in status, status
            assert not target.exists()  # a dry run writes nothing
            await pilot.press("x")
            assert app.screen.__class__.__name__ == "ConfirmScreen"
            assert f"rolled back to batch {diagnosis.fix_batch}" in app.screen.question
            await pilot.press("y")
            await app.messages.answer(pilot, "fix", 2, timeout=180)
            status = str(pane.status.render())
            assert "published" in status and "verified" in status and "NOT" not in status, \
                status
            return diagnosis.fix_batch

    batch = asyncio.run(scenario())
    assert tree_hash(source) == before
    fixed = open_checkpoint(str(target))
    assert fixed.last_committed_batch == batch
    assert diagnose(fixed, decode=True, fix=False).restarts


async def plan_stale_evict(pilot, app, target: Path):
    """The Fix tab's dry run of evicting keys unchanged for ≥ 4 versions into ``target``."""
    pane = await open_fix_tab(pilot, app)
    pane.query_one("#fx-action").value = "evict"
    pane.query_one("#fx-target").value = str(target)
    pane.query_one("#fx-force").value = True
    await pilot.click("#fx-stale")
    await pilot.press("4", "enter")
    await app.messages.answer(pilot, "fix", timeout=180)
    return pane


@pytest.mark.parametrize("allow_write", [False, True])
def test_fix_tab_evicts_stale_keys_through_the_evict_action(reference_checkpoints, tmp_path,
                                                           allow_write):
    """Evict from the Fix tab: keys unchanged for ≥ 4 versions of the leaky pipeline — the
    dry run counts exactly the keys ``statekit growth`` calls untouched; written (only with
    ``--allow-write``) they are gone from a verified target, the rest kept."""
    from statekit.checkpoint import open_checkpoint
    from statekit.growth.analysis import analyse
    from tests.support.trees import tree_hash

    source = reference_checkpoints.get("hdfs", leaky=True).checkpoint
    (store,) = analyse(open_checkpoint(str(source)), stale_after=4).stores
    untouched = store.history.versions[-1].untouched
    assert untouched > 0
    before = tree_hash(source)
    target = tmp_path / "evicted"

    async def scenario():
        app = StatekitApp(str(source), allow_write=allow_write)
        async with driven(app) as pilot:
            pane = await plan_stale_evict(pilot, app, target)
            assert f"{untouched:,} rows to remove" in str(pane.status.render()), \
                str(pane.status.render())
            if not await execute(pilot, app, pane, "fix", allow_write, timeout=240):
                return
            status = str(pane.status.render())
            assert f"verified: {untouched:,} rows removed" in status, status
            assert pane.done.checks[0].target_rows == store.history.versions[-1].keys \
                - untouched

    asyncio.run(scenario())
    assert tree_hash(source) == before
    assert target.exists() == allow_write


def test_fix_tab_cancel_stops_the_write_and_leaves_nothing(reference_checkpoints, tmp_path):
    """``c`` while the evict writes (after the dry run and the confirmation): the Spark job
    is interrupted, the tab says it was cancelled, and neither the target nor its staging
    folder exists; the source is unchanged, and the tab plans again afterwards."""
    from statekit.tui.messages import WorkProgress
    from tests.support.trees import tree_hash

    source = reference_checkpoints.get("hdfs", leaky=True).checkpoint
    before = tree_hash(source)
    target = tmp_path / "evicted"

    async def scenario():
        app = StatekitApp(str(source), allow_write=True)
        async with driven(app) as pilot:
            pane = await plan_stale_evict(pilot, app, target)
            assert "rows to remove" in str(pane.status.render())
            await pilot.press("c")  # nothing running: says so, changes nothing
            assert "nothing to cancel" in str(pane.status.render())
            await pilot.press("x")
            await pilot.press("y")

            def writing() -> bool:
                return any(isinstance(m, WorkProgress) and m.text.startswith("writing")
                           for m in app.messages.seen)

            await app.messages.wait(pilot, writing, "the evict writing", timeout=120)
            await pilot.press("c")
            await app.messages.answer(pilot, "fix", 2, timeout=120)
            (ended,) = app.messages.answered("fix", "execute")
            assert ended.cancelled, ended.text
            status = str(pane.status.render())
            assert status.startswith("cancelled: nothing was published"), status
            assert pane.done is None
            # the tab is usable again: the same dry run answers
            await pilot.click("#fx-stale")
            await pilot.press("enter")
            await app.messages.answer(pilot, "fix", 3, timeout=120)
            assert "rows to remove" in str(pane.status.render())

    asyncio.run(scenario())
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no staging beside it
    assert tree_hash(source) == before


def test_cancelling_the_fix_tabs_job_group_interrupts_its_running_spark_job(spark):
    """What ``c`` relies on when a Spark job of the Fix tab is running: the worker thread's
    jobs carry the tab's job group, and cancelling the group stops a job that would otherwise
    run for a minute — it fails as cancelled — and no job outside the group."""
    import threading
    import time

    from statekit.tui.panes.fix import FIX_JOB_GROUP
    from statekit.tui.spark_session import LazySession

    session = LazySession()
    session.spark = spark.newSession()
    failures: list[BaseException] = []

    def slow_job() -> None:
        grouped = session.get(job_group=FIX_JOB_GROUP)
        try:
            grouped.sparkContext.parallelize(range(2), 2).map(
                lambda x: time.sleep(60) or x).collect()
        except Exception as error:  # the cancelled job's error
            failures.append(error)

    worker = threading.Thread(target=slow_job)
    worker.start()
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 120  # only catches a hang
    while not tracker.getJobIdsForGroup(FIX_JOB_GROUP) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert tracker.getJobIdsForGroup(FIX_JOB_GROUP), "the job never joined the tab's group"
    time.sleep(1)  # the tasks are sleeping in their Python workers
    cancelled_at = time.monotonic()
    session.cancel(FIX_JOB_GROUP)
    worker.join(120)
    # a job that ran its minute out would have succeeded: the cancel error is the proof
    assert not worker.is_alive() and failures, "the job was not interrupted"
    assert time.monotonic() - cancelled_at < 120  # only catches a hang, not a slow machine
    assert "cancel" in str(failures[0]).lower()
    # the test's own thread never joined the group: its jobs run as before
    assert spark.sparkContext.parallelize(range(3)).count() == 3
