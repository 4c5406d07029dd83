"""The monitoring assets in ``docs/monitoring`` against what ``statekit metrics`` exports:
the alert rules pass ``promtool check rules`` and their own unit tests (``promtool test
rules``), every metric the Grafana dashboard or a rule names is one ``statekit metrics``
exports, and every panel query returns data from a real Prometheus server (Debian's package)
scraping ``statekit metrics --serve`` over golden checkpoints. No JVM."""

from __future__ import annotations

import io
import json
import re
import shutil
import urllib.error
import urllib.parse
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from tests.prometheus_server import (
    fetch,
    needs,
    poll,
    prometheus,
    promtool,
    query,
    served_metrics,
)

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "docs" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULES = MONITORING / "alerts.yml"
RULE_TESTS = MONITORING / "alerts_test.yml"
GOLDEN = ROOT / "tests" / "data" / "golden" / "spark-4.1.4"

ALERTS = {"StatekitCheckpointUnreadable", "StatekitWillNotRestart", "StatekitStateGrowing",
          "StatekitStateFillsExecutorMemory", "StatekitRestartOverRTO",
          "StatekitSnapshotLagHigh", "StatekitStale"}
TINY_MEMORY = ("--executor-memory", "1")
"""1 MiB per executor: below the heap Spark reserves, so every HDFS state already fills it
and the time-to-memory gauge has rows."""
DATASOURCE = "${DS_PROMETHEUS}"
#: What Grafana would put in place of each variable a panel query may use.
SUBSTITUTIONS = {"checkpoint": ".*", "rto_seconds": "30", "__rate_interval": "1m",
                 "__interval": "1m", "__range": "5m"}
VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)")
METRIC = re.compile(r"\bstatekit_[a-z0-9_]+")


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel but the rows, a collapsed row's own panels included."""
    found = []
    for panel in board["panels"]:
        found.extend(panel.get("panels", []) if panel["type"] == "row" else [panel])
    return found


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(panel title, refId, expr)`` of every panel target."""
    return [(panel["title"], target["refId"], target["expr"])
            for panel in panels(board) for target in panel["targets"] if target.get("expr")]


def variables_in(expr: str) -> set[str]:
    return {match.group(1) or match.group(2) for match in VARIABLE.finditer(expr)}


def promql(expr: str) -> str:
    """A panel's query as Grafana sends it, every checkpoint selected and the RTO at 30 s."""
    return VARIABLE.sub(lambda match: SUBSTITUTIONS[match.group(1) or match.group(2)], expr)


def rules() -> list[dict[str, Any]]:
    [group] = yaml.safe_load(RULES.read_text())["groups"]
    assert group["name"] == "statekit"
    return group["rules"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> list[str]:
    """Every golden checkpoint of Spark 4.1.4 (restart estimates and growth verdicts), one
    whose last batch lost its commit (the doctor's problems and a will-not-restart verdict)
    and a path that does not exist (``statekit_checkpoint_up 0``)."""
    folder = tmp_path_factory.mktemp("monitoring")
    uncommitted = folder / "uncommitted"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", uncommitted)
    newest = max((uncommitted / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    newest.unlink()
    return [*map(str, sorted(GOLDEN.glob("*/checkpoint"))), str(uncommitted),
            str(folder / "nope")]


@pytest.fixture(scope="module")
def exported(checkpoints) -> set[str]:
    """The names of the families ``statekit metrics`` prints for those checkpoints."""
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert run_cli(cli, "statekit", ["metrics", *TINY_MEMORY, *checkpoints]) == 0
    return {family.name for family in text_string_to_metric_families(buffer.getvalue())}


@needs("promtool")
def test_promtool_accepts_the_rules():
    checked = promtool("check", "rules", str(RULES), cwd=MONITORING)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout, checked.stdout


@needs("promtool")
def test_the_rules_pass_their_unit_tests():
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=MONITORING)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout, tested.stdout


def test_every_rule_is_an_alert_a_person_can_act_on():
    assert {rule["alert"] for rule in rules()} == ALERTS
    for rule in rules():
        assert rule["for"], rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        for text in (rule["annotations"]["summary"], rule["annotations"]["description"]):
            assert "{{ $labels.checkpoint }}" in text, rule["alert"]
        assert "statekit " in rule["annotations"]["description"], rule["alert"]


def test_the_unit_tests_fire_every_alert_and_hold_one_back():
    suite = yaml.safe_load(RULE_TESTS.read_text())
    assert suite["rule_files"] == [RULES.name]
    cases = [case for test in suite["tests"] for case in test["alert_rule_test"]]
    assert {case["alertname"] for case in cases if case["exp_alerts"]} == ALERTS
    assert any(not case["exp_alerts"] for case in cases)


def test_the_dashboard_is_importable():
    board = dashboard()
    assert board["schemaVersion"] >= 39
    [source] = board["__inputs"]
    assert (source["name"], source["type"], source["pluginId"]) == \
        ("DS_PROMETHEUS", "datasource", "prometheus")
    ids = [panel["id"] for panel in panels(board)]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        assert panel["datasource"]["uid"] == DATASOURCE, panel["title"]
        assert any(target.get("expr") for target in panel["targets"]), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == DATASOURCE, panel["title"]
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    checkpoint = variables["checkpoint"]
    assert checkpoint["datasource"]["uid"] == DATASOURCE
    assert checkpoint["query"]["query"] == "label_values(statekit_checkpoint_up, checkpoint)"
    assert checkpoint["multi"] and checkpoint["includeAll"]
    assert variables["rto_seconds"]["current"]["value"] == "30"
    # every variable a query uses is the dashboard's own or one of Grafana's
    used = set().union(*(variables_in(expr) for _, _, expr in panel_queries(board)))
    assert used == {"checkpoint", "rto_seconds"} | (used & {n for n in SUBSTITUTIONS
                                                             if n.startswith("__")})
    assert {name for name in used if not name.startswith("__")} <= set(variables)


def test_the_dashboard_covers_what_an_sre_watches():
    board = dashboard()
    exprs = {expr for _, _, expr in panel_queries(board)}
    named = set().union(*(METRIC.findall(expr) for expr in exprs))
    for subject in ("statekit_checkpoint_up", "statekit_restart_verdict",
                    "statekit_state_keys", "statekit_state_bytes", "statekit_growth_verdict",
                    "statekit_recovery_estimate_seconds",
                    "statekit_recovery_estimate_low_seconds",
                    "statekit_recovery_estimate_high_seconds",
                    "statekit_snapshot_lag_versions", "statekit_last_batch_age_seconds",
                    "statekit_restart_problems"):
        assert subject in named, subject
    assert "sum by (checkpoint, operator) (statekit_state_keys{checkpoint=~\"$checkpoint\"})" \
        in exprs
    # the restart estimate is drawn against the RTO in one panel
    together = ["\n".join(target["expr"] for target in panel["targets"])
                for panel in panels(board)]
    assert any("statekit_recovery_estimate_high_seconds" in text and
               "vector($rto_seconds)" in text for text in together)


def test_every_metric_named_is_one_statekit_exports(exported):
    board = dashboard()
    texts = [expr for _, _, expr in panel_queries(board)]
    texts += [variable["query"]["query"] for variable in board["templating"]["list"]
              if variable["type"] == "query"]
    texts += [rule["expr"] for rule in rules()]
    named = set().union(*(METRIC.findall(text) for text in texts))
    assert len(named) >= 10
    assert named - exported == set()


def evaluate(base: str, expr: str) -> list[dict[str, Any]]:
    """``query``, failing with Prometheus' own message when it rejects the expression."""
    try:
        return query(base, expr)
    except urllib.error.HTTPError as error:
        pytest.fail(f"Prometheus rejected {expr!r}: {error.read().decode(errors='replace')}")


@needs("prometheus", "promtool")
def test_every_panel_and_rule_queries_a_real_prometheus(checkpoints, tmp_path):
    """``statekit metrics --serve`` over the checkpoints, scraped every second by a real
    Prometheus: each panel query (every checkpoint selected, RTO 30) returns data, each rule's
    expression is accepted, and the rules that hold on these checkpoints select exactly the
    checkpoints the exposition says they should."""
    with served_metrics(tmp_path, checkpoints, cache_seconds=600,
                        options=TINY_MEMORY) as (target, text):
        samples = {f.name: f.samples for f in text_string_to_metric_families(text)}
        unreadable = {s.labels["checkpoint"] for s in samples["statekit_checkpoint_up"]
                      if s.value == 0}
        assert unreadable == {checkpoints[-1]}
        broken = {s.labels["checkpoint"] for s in samples["statekit_restart_verdict"]
                  if s.labels["verdict"] == "will-not-restart" and s.value == 1}
        assert broken  # the copy whose last commit is gone
        stale = {s.labels["checkpoint"] for s in samples["statekit_last_batch_age_seconds"]
                 if s.value > 3600}
        full_soon = {s.labels["checkpoint"] for s in
                     samples["statekit_growth_executor_memory_full_in_seconds"]
                     if s.value < 7 * 86400}
        assert full_soon  # 1 MiB of heap is less than Spark reserves: the HDFS ones are full

        with prometheus(tmp_path, target, job="statekit") as base:
            poll(base, "count(statekit_checkpoint_up)",
                 lambda result: bool(result) and float(result[0]["value"][1]) ==
                 len(checkpoints))
            empty = [f"{title} [{ref}]: {promql(expr)}"
                     for title, ref, expr in panel_queries(dashboard())
                     if not evaluate(base, promql(expr))]
            assert empty == [], "panel queries without data:\n" + "\n".join(empty)

            [variable] = [v for v in dashboard()["templating"]["list"]
                          if v["name"] == "checkpoint"]
            match = re.fullmatch(r"label_values\((\w+), *(\w+)\)", variable["query"]["query"])
            assert match is not None
            values = json.loads(fetch(
                f"{base}/api/v1/label/{match[2]}/values?"
                f"{urllib.parse.urlencode({'match[]': match[1]})}"))["data"]
            assert sorted(values) == sorted(checkpoints)

            fired = {rule["alert"]: {r["metric"]["checkpoint"]
                                     for r in evaluate(base, rule["expr"])}
                     for rule in rules()}
            assert fired["StatekitCheckpointUnreadable"] == unreadable
            assert fired["StatekitWillNotRestart"] == broken
            assert fired["StatekitStale"] == stale
            assert fired["StatekitStateFillsExecutorMemory"] == full_soon
