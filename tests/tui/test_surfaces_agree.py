"""The TUI's screens show the assessment the CLI prints — driven with Pilot, no JVM.

Damaged copies of the frozen fault-corpus checkpoints (HDFS; RocksDB with changelogs; RocksDB
with a zip per version), a fault of every family that changes the restart verdict (a state
file truncated, flipped, missing; a log folder gone; a codec edit; an uncommitted batch)
and the pristine ones, opened together: each fleet row, each checkpoint's Overview (its
restart line and stores table) and its Fix tab must say what ``statekit doctor --json``
says and show the keys and the RTO judgement ``statekit recovery --json`` shows for the
same cores and RTO. (tests/oracle/surfaces.py holds the CLI, metrics and the TUI's model to
the same on every fault of the corpus; the web view is the same app, tests/tui/test_web.py.)
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from statekit.tui.app import StatekitApp
from statekit.tui.fleet_screen import FleetScreen
from statekit.tui.panes.fix import FixPane
from statekit.tui.panes.overview import OverviewPane
from tests.faults import CASES, facts_of
from tests.oracle.campaign import statekit
from tests.tui.helpers import Messages, until

FROZEN = Path(__file__).resolve().parents[1] / "data" / "fault_corpus"
SAMPLE = {
    "hdfs": ("change-file-bytes-flipped", "snapshot-truncated", "commits-folder-missing",
             "uncommitted-batch", "conf-codec-zstd-files-lz4"),
    "changelog": ("changelog-truncated",),
    "zips": ("sst-bytes-flipped",),
}
"""A fault of each family that changes what the surfaces show, on each kind (the corpus's
every fault goes through the CLI, metrics and the TUI's model in
tests/unit/test_fault_corpus.py)."""
CORES = 2


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("surfaces")
    made = []
    for name, faults in SAMPLE.items():
        pristine = root / f"{name}-pristine"
        shutil.copytree(FROZEN / name, pristine, symlinks=True)
        made.append(pristine)
        facts = facts_of(FROZEN / name)
        for fault, kind in CASES:
            if kind == name and fault.name in faults:
                copy = root / f"{name}-{fault.name}"
                shutil.copytree(FROZEN / name, copy, symlinks=True)
                fault.apply(copy, facts)
                made.append(copy)
    assert len(made) == len(SAMPLE) + sum(map(len, SAMPLE.values()))
    return made


def _json(args: list) -> dict:
    import json

    code, out, err = statekit(args)
    assert code in (0, 9, 11, 12, 14), (args, code, err)
    return json.loads(out)


def _truth(ckpt: Path, rto: float) -> dict:
    """What the CLI says of ``ckpt``: the doctor's verdict, the loaded keys and the RTO."""
    doctor = _json(["doctor", ckpt, "--json"])
    recovery = _json(["recovery", ckpt, "--json", "--cores", CORES, "--rto", f"{rto}s"])
    assessment = recovery["assessment"]
    if doctor["restarts"]:
        growth = _json(["growth", ckpt, "--json"])["assessment"]
        assert growth["loaded"]["keys"] == assessment["loaded"]["keys"], ckpt
    return {"verdict": doctor["verdict"], "restarts": doctor["restarts"],
            "outcome": doctor["outcome"],
            "keys": assessment["loaded"]["keys"] if doctor["restarts"] else None,
            "meets": assessment["rto"]["meets"] if assessment.get("rto") else None,
            "fix": doctor["fix_command"]}


def _rto(checkpoints: list[Path]) -> float:
    """One RTO for the whole app that some checkpoints meet and some miss (the median
    high end of their ranges), so both words are on screen."""
    highs = sorted(_json(["recovery", c, "--json", "--cores", CORES])["high_s"]
                   for c in checkpoints if _json(["doctor", c, "--json"])["restarts"])
    return round(highs[len(highs) // 2], 6)


_HEALTH = {"restarts": "restarts", "restarts with warnings": "restarts, warnings",
           "will not restart": "WILL NOT RESTART"}


def test_fleet_rows_overview_and_fix_tab_show_the_assessment(checkpoints):
    rto = _rto(checkpoints)
    truth = {str(c): _truth(c, rto) for c in checkpoints}
    verdicts = {t["verdict"] for t in truth.values()}
    assert {"restarts", "will not restart"} <= verdicts, truth
    assert {True, False} <= {t["meets"] for t in truth.values()}, truth
    asyncio.run(_scenario([str(c) for c in checkpoints], truth, rto))


async def _scenario(urls: list[str], truth: dict[str, dict], rto: float) -> None:
    app = StatekitApp(urls[0], cores=CORES, fleet=urls, rto_s=rto)
    app.messages = Messages()
    async with app.run_test(size=(200, 50), message_hook=app.messages.hook) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await until(pilot, lambda: screen.last_row_s is not None, "every row read", 120)
        wrong = []
        for url in urls:  # the fleet rows
            want = truth[url]
            cells = [" ".join(str(c).split()) for c in screen.table.get_row(url)]
            health = _HEALTH[want["verdict"]] if want["outcome"] in (None, "same") else \
                f"restarts, {want['outcome'].upper()}"
            if cells[1] != health:
                wrong.append(f"{url}: fleet health {cells[1]!r}, the doctor {want['verdict']!r}"
                             f" ({want['outcome']})")
            if want["restarts"]:
                keys = "" if want["keys"] is None else f"{want['keys']:,}"
                if cells[6] != keys:
                    wrong.append(f"{url}: fleet keys {cells[6]!r}, the CLI {keys!r}")
                rto_cell = {True: "within", False: "OVER RTO", None: ""}[want["meets"]]
                if cells[4] != rto_cell:
                    wrong.append(f"{url}: fleet RTO {cells[4]!r}, the CLI {rto_cell!r}")
            elif cells[3] or cells[4]:  # no restart time, no RTO judgement
                wrong.append(f"{url}: fleet shows a restart time {cells[3:5]} for a "
                             "checkpoint that will not restart")
        for n, url in enumerate(urls, 1):  # each checkpoint's Overview and Fix tab
            screen.table.select_key(url)
            screen.table.focus()
            await pilot.press("enter")
            await until(pilot, lambda u=url: app.url == u and app.screen is not screen,
                        "the checkpoint's screens")
            await app.messages.answer(pilot, "assessment", n, timeout=120)
            wrong += _overview(app, url, truth[url])
            await pilot.press("9")
            fix = app.query_one(FixPane)
            await until(pilot, lambda f=fix: f.result is not None, "the Fix tab", 120)
            said = " ".join(str(fix.status.render()).split())
            outcome = truth[url]["outcome"]
            verdict = truth[url]["verdict"] + ("" if outcome in (None, "same") else
                                               f", but {outcome}")
            if not said.startswith(f"{verdict};"):
                wrong.append(f"{url}: the Fix tab says {said!r}, the doctor "
                             f"{truth[url]['verdict']!r}")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is screen, "the fleet list again")
        assert not wrong, "\n".join(wrong)


def _overview(app: StatekitApp, url: str, want: dict) -> list[str]:
    overview = app.query_one(OverviewPane)
    line = " ".join(str(overview.recovery_line.render()).split())
    wrong = []
    if want["restarts"]:
        verdict = want["verdict"] + ("" if want["outcome"] in (None, "same") else
                                     f", but {want['outcome'].upper()}")
        if f"restart: {verdict}" not in line:
            wrong.append(f"{url}: the Overview says {line!r}, the doctor {want['verdict']!r}")
        if want["keys"] is not None:
            if f"{want['keys']:,} keys" not in line:
                wrong.append(f"{url}: the Overview's keys in {line!r}, the CLI {want['keys']}")
            shown = [str(overview.stores_table.get_row_at(r)[2])
                     for r in range(overview.stores_table.row_count)]
            if sum(int(k.replace(",", "")) for k in shown) != want["keys"]:
                wrong.append(f"{url}: the stores table's keys {shown}, the CLI {want['keys']}")
        word = {True: "meets the RTO", False: "MISSES the RTO"}.get(want["meets"])
        if word and word not in line:
            wrong.append(f"{url}: the Overview does not say {word!r}: {line!r}")
    elif "WILL NOT RESTART" not in line or "does not apply" not in line:
        wrong.append(f"{url}: the Overview says {line!r} of a checkpoint that will not "
                     "restart")
    return wrong
