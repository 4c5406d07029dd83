"""One minute of benchmarks/soak.py: the three long-running services on a small broken fleet.

``statekit metrics --serve`` (scraped by a real Prometheus every 2 s), ``statekit tui
--watch`` (in tmux) and ``statekit tui --web`` (visited by headless Chromium) run at once on
12 checkpoints — on local disk and on moto's S3 server — with every kind of fault of the full
soak: a damaged copy on each storage, one deleted and written again in a loop, one folder
chmod 000, a bucket read with a wrong secret, an endpoint that never answers and one that
refuses, and two checkpoints gaining batches meanwhile. The harness core is the script's
(soak_run.py); this asserts what must hold after a minute. The full soak (10 minutes, 57
checkpoints, 20 browser visits) is ``python benchmarks/soak.py``.

No JVM. Needs Debian's prometheus, chromium and tmux (and util-linux's setpriv as root):
missing, the test fails under CI and skips elsewhere (tests/support/tools.py). Every process
the harness starts is stopped by it on the way out, failures included.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import tools

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import soak_report  # noqa: E402
from soak_fleet import DOWN, KINDS, UP, WILL_NOT_RESTART  # noqa: E402
from soak_run import SoakConfig, run_soak  # noqa: E402

pytestmark = [tools.needs(tools.PROMETHEUS, tools.CHROMIUM, tools.TMUX),
              tools.ROOT_NEEDS_SETPRIV, pytest.mark.timeout(600), pytest.mark.soak]

SECONDS = 60.0
BROWSER_CYCLES = 3

# The resource bound of a one-minute run: looser than the full soak's 10 %, still meaningful.
# The start is taken ~20 s after the services started, while caches still fill (the decode
# cache's index, s3fs/aiobotocore clients and their connection pools, Textual's render
# caches, the allocator's arenas): RSS may still rise by some MB without any leak, so 25 %.
# File descriptors and threads are counts of ten to twenty, and a single sample catches
# whatever readings are in flight at that moment (each holds a thread and a socket until it
# ends or its deadline passes; on a busy CI machine an S3 reading takes seconds): 25 % plus
# 8. A real leak still fails it: one fd per scrape is +20 in the measured ~40 s, one thread
# per reading of each of the 12 checkpoints (every 15 s) is +30. Processes get no slack at
# all: one app left behind by a browser tab, or one worker per reading, is a leak whatever
# the run's length.
BOUNDS = soak_report.Bounds(growth=0.25, extra_fds=8, extra_threads=8, extra_processes=0,
                            exit_s=5.0, min_browser_cycles=BROWSER_CYCLES)
TIMEOUT_S = 20.0
"""Each checkpoint's reading deadline, as the script's: the suite runs beside other tests on
two cores, where moto answers slowly; the silent endpoint still shows as a timeout well
within the minute."""


@pytest.fixture(scope="module")
def soak() -> dict[str, Any]:
    config = SoakConfig(seconds=SECONDS, plan="small", browser_cycles=BROWSER_CYCLES,
                        warmup_min_s=15.0, warmup_max_s=45.0, timeout_s=TIMEOUT_S,
                        prometheus=tools.require(tools.PROMETHEUS),
                        chromium=tools.require(tools.CHROMIUM), tmux=tools.require(tools.TMUX))
    result = run_soak(config)
    result["table"] = soak_report.markdown(result, soak_report.checks(result, BOUNDS))
    return result


def _named(soak: dict[str, Any], prefix: str) -> list[soak_report.Check]:
    return [c for c in soak_report.checks(soak, BOUNDS) if c.name.startswith(prefix)]


def _assert_checks(soak: dict[str, Any], *prefixes: str) -> None:
    found = [c for prefix in prefixes for c in _named(soak, prefix)]
    assert found, f"no check named {prefixes}"
    bad = [f"{c.name}: {c.value} (bound {c.bound})" for c in found if not c.ok]
    assert not bad, "\n".join(bad) + "\n\n" + soak["table"]


def test_the_soak_ran_every_service_and_fault(soak: dict[str, Any]) -> None:
    assert {entry["kind"] for entry in soak["fleet"]} == set(KINDS)
    assert {entry["where"] for entry in soak["fleet"]} == {"local", "s3"}
    assert soak["warmup"]["all_healthy_up"], soak["table"]
    assert soak["prometheus"].get("scrapes", 0) >= 5, soak["table"]
    _assert_checks(soak, "browser cycles served", "tmux TUI shows the fleet")
    for name, service in soak["services"].items():
        assert service["alive_at_end"], f"{name} died:\n{service['log_tail']}"


def test_no_healthy_series_has_a_gap(soak: dict[str, Any]) -> None:
    gaps = soak["prometheus"].get("gaps")
    assert gaps is not None, soak["prometheus"]
    assert set(gaps) == {e["name"] for e in soak["fleet"] if e["kind"] in ("healthy", "growing")}
    assert sum(gaps.values()) == 0, soak["table"]


def test_no_5xx_and_no_traceback(soak: dict[str, Any]) -> None:
    assert soak["scraper"]["http_5xx"] == 0, soak["table"]
    assert soak["scraper"]["failed"] == 0, soak["table"]
    for name, service in soak["services"].items():
        assert service["tracebacks"] == 0, f"{name}:\n{service['log_tail']}"


def test_faulty_checkpoints_are_down_with_a_reason_healthy_ones_up(soak: dict[str, Any]) -> None:
    for name, state in soak["checkpoints"].items():
        if state["expect"] == DOWN:
            assert state["up"] == 0 and state["reason"], (name, state, soak["table"])
        elif state["expect"] == UP:
            assert state["up"] == 1, (name, state, soak["table"])
        elif state["expect"] == WILL_NOT_RESTART:
            assert state["up"] == 1 and state["verdict"] == "will-not-restart", (name, state)


def test_every_process_is_gone_within_5_s_of_sigterm(soak: dict[str, Any]) -> None:
    _assert_checks(soak, "metrics: all processes gone", "metrics: survivors",
                   "tui --watch (tmux): all processes gone", "tui --watch (tmux): survivors",
                   "tui --web: all processes gone", "tui --web: survivors")


def test_process_trees_stay_flat(soak: dict[str, Any]) -> None:
    _assert_checks(soak, *(f"{service}: {key}" for service in soak["services"]
                           for key in ("rss_mb", "fds", "threads", "processes")),
                   "browser tabs whose app outlived them")
