"""``statekit metrics`` without a JVM: the exposition parses as Prometheus' text format, its
numbers agree with what Spark wrote into the golden checkpoints' manifests, an unreadable
checkpoint is ``up 0`` with its exit code (not a failed scrape), ``--serve`` answers HTTP
scrapes from a cache, and ``promtool check metrics`` (Prometheus' linter) finds nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.fleet.metrics import FAMILIES, read_checkpoint_list
from tests.prometheus_server import needs, promtool_check

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "spark-4.1.4"
CHECKPOINTS = [GOLDEN / "aggregation_hdfs" / "checkpoint",
               GOLDEN / "apply_in_pandas_with_state_hdfs" / "checkpoint"]


def scrape(text: str) -> dict[str, list]:
    """``{family name: [(labels, value)]}`` through prometheus_client's own parser."""
    return {f.name: [(s.labels, s.value) for s in f.samples]
            for f in text_string_to_metric_families(text)}


def run(capsys, *args: str) -> tuple[int, str]:
    code = run_cli(cli, "statekit", ["metrics", *args])
    return code, capsys.readouterr().out


def test_exposition_agrees_with_the_golden_manifests(capsys, tmp_path):
    missing = str(tmp_path / "nope")
    code, text = run(capsys, *map(str, CHECKPOINTS), missing)
    assert code == 0
    families = scrape(text)
    assert set(families) <= set(FAMILIES)
    up = {labels["checkpoint"]: value for labels, value in families["statekit_checkpoint_up"]}
    assert up == {**{str(c): 1.0 for c in CHECKPOINTS}, missing: 0.0}
    assert families["statekit_checkpoint_error_exit_code"] == [({"checkpoint": missing}, 3.0)]
    for checkpoint in CHECKPOINTS:
        manifest = json.loads((checkpoint.parent / "manifest.json").read_text())
        keys = {(labels["operator"], labels["store"]): v
                for labels, v in families["statekit_state_keys"]
                if labels["checkpoint"] == str(checkpoint)}
        assert keys == {(op, store): float(n) for op, stores in
                        manifest["spark_state_rows"].items() for store, n in stores.items()}
        batch = [v for labels, v in families["statekit_last_committed_batch"]
                 if labels["checkpoint"] == str(checkpoint)]
        assert batch == [float(manifest["last_batch_id"])]
        files = sum(v for labels, v in families["statekit_state_files"]
                    if labels["checkpoint"] == str(checkpoint))
        state = [p for p in checkpoint.rglob("*") if p.suffix in (".delta", ".snapshot")]
        assert files == len(state)
        bytes_ = sum(v for labels, v in families["statekit_state_bytes"]
                     if labels["checkpoint"] == str(checkpoint))
        assert bytes_ == sum(p.stat().st_size for p in state)
        verdicts = [(labels["verdict"], v) for labels, v in families["statekit_growth_verdict"]
                    if labels["checkpoint"] == str(checkpoint)]
        assert sorted(v for _, v in verdicts) == [0.0, 0.0, 0.0, 0.0, 1.0]  # a stateset
    assert "statekit_partition_state_bytes" not in families  # low cardinality by default


def test_per_partition_families_add_up_to_the_store(capsys, tmp_path):
    listing = tmp_path / "checkpoints.txt"
    listing.write_text(f"# the golden aggregation\n\n{CHECKPOINTS[0]}\n")
    assert read_checkpoint_list(listing.read_text()) == [str(CHECKPOINTS[0])]
    code, text = run(capsys, "--checkpoints-from", str(listing), "--per-partition")
    assert code == 0
    families = scrape(text)
    parts = families["statekit_partition_state_bytes"]
    assert sorted(labels["partition"] for labels, _ in parts) == ["0", "1"]
    [(_, store_bytes)] = families["statekit_state_bytes"]
    assert sum(v for _, v in parts) == store_bytes


def test_no_checkpoint_and_a_bad_address_are_usage_errors(capsys):
    assert run_cli(cli, "statekit", ["metrics"]) == 2
    assert run_cli(cli, "statekit", ["metrics", str(CHECKPOINTS[0]), "--serve", "nope"]) == 3
    assert "expected [HOST]:PORT" in capsys.readouterr().err


def test_serve_answers_scrapes_from_its_cache():
    statekit = Path(sys.executable).parent / "statekit"
    server = subprocess.Popen([str(statekit), "metrics", str(CHECKPOINTS[0]), "--serve",
                               "127.0.0.1:0", "--cache-seconds", "600"],
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "serving http://127.0.0.1:" in line, line
        url = line.split("serving ", 1)[1].split()[0]
        bodies = []
        for _ in range(2):  # the timeout only catches a server that never answers
            with urllib.request.urlopen(url, timeout=120) as response:
                assert response.status == 200
                bodies.append(response.read().decode())
        first, second = (scrape(b) for b in bodies)
        assert first["statekit_checkpoint_up"][0][1] == 1.0
        # the second scrape came from the cache: the same reading, duration included
        assert first["statekit_scrape_duration_seconds"] == \
            second["statekit_scrape_duration_seconds"]
    finally:
        server.terminate()
        server.wait(timeout=10)


@needs("promtool")
def test_promtool_accepts_the_exposition(capsys, tmp_path):
    """Prometheus' own linter on every family statekit can emit: all golden checkpoints,
    per partition, and an unreadable one (the error family)."""
    everything = sorted(GOLDEN.glob("*/checkpoint"))
    uncommitted = tmp_path / "uncommitted"  # a restart problem: the doctor's family has rows
    shutil.copytree(CHECKPOINTS[0], uncommitted)
    newest = max((uncommitted / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    newest.unlink()
    # 1 MiB of executor memory: every state is over it (the time to it is 0)
    code, text = run(capsys, "--per-partition", "--rto", "1h", "--executor-memory", "1",
                     *map(str, everything), str(uncommitted), str(tmp_path / "nope"))
    assert code == 0
    # every family but the slope (too few versions in the golden checkpoints for one) and
    # the saturating- or leak-only gauges (no golden checkpoint saturates or leaks:
    # tests/spark/test_growth.py checks them, promtool included, on a finite population a
    # real query wrote)
    assert set(FAMILIES) - set(scrape(text)) == {
        "statekit_growth_keys_per_version", "statekit_growth_projected_plateau_keys",
        "statekit_growth_fraction_seen", "statekit_growth_leak_keys_per_batch"}
    checked = promtool_check(text)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), checked


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_names_follow_prometheus_conventions(name):
    kind, text = FAMILIES[name]
    assert name.startswith("statekit_") and name == name.lower() and text
    assert not name.endswith("_total") or kind == "counter"
    if "seconds" in name or "bytes" in name:
        assert name.endswith(("_seconds", "_bytes"))
