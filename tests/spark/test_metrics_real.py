"""``statekit metrics`` on checkpoints the reference pipeline really wrote: the growth verdict
of the leaky pipeline and of the bounded one, as a Prometheus query would read them, and as a
real Prometheus server (Debian's package) does read them."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
from prometheus_client.parser import text_string_to_metric_families

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.growth.trend import ACCELERATING, BOUNDED, GROWING
from tests.prometheus_server import (
    needs,
    poll,
    prometheus,
    promtool_check,
    served_metrics,
)

pytestmark = [pytest.mark.spark]


def test_leaky_and_bounded_verdicts(reference_checkpoints):
    leaky = reference_checkpoints.get("hdfs", leaky=True).checkpoint
    bounded = reference_checkpoints.get("hdfs").checkpoint
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert run_cli(cli, "statekit", ["metrics", str(leaky), str(bounded)]) == 0
    samples = {f.name: f.samples for f in text_string_to_metric_families(buffer.getvalue())}
    current = {s.labels["checkpoint"]: s.labels["verdict"]
               for s in samples["statekit_growth_verdict"] if s.value == 1}
    assert current[str(bounded)] == BOUNDED
    assert current[str(leaky)] in (GROWING, ACCELERATING)
    slope = {s.labels["checkpoint"]: s.value
             for s in samples["statekit_growth_keys_per_version"]}
    assert slope[str(leaky)] > 0
    keys = {s.labels["checkpoint"]: s.value for s in samples["statekit_state_keys"]}
    assert keys[str(leaky)] > keys[str(bounded)] > 0


@needs("prometheus", "promtool")
def test_a_real_prometheus_scrapes_the_served_metrics(reference_checkpoints, tmp_path):
    """``statekit metrics --serve`` scraped by a real Prometheus server (Debian's package):
    PromQL through its HTTP API returns the keys per operator and the growth verdicts that
    statekit itself reports, and ``promtool check metrics`` accepts the exposition."""
    leaky = str(reference_checkpoints.get("hdfs", leaky=True).checkpoint)
    bounded = str(reference_checkpoints.get("hdfs").checkpoint)
    with served_metrics(tmp_path, [leaky, bounded], cache_seconds=60) as (target, text):
        checked = promtool_check(text)
        assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), checked
        expected: dict[tuple[str, str], float] = {}
        for sample in next(f for f in text_string_to_metric_families(text)
                           if f.name == "statekit_state_keys").samples:
            where = (sample.labels["checkpoint"], sample.labels["operator"])
            expected[where] = expected.get(where, 0.0) + sample.value
        assert {checkpoint for checkpoint, _ in expected} == {leaky, bounded}

        with prometheus(tmp_path, target, job="statekit") as base:
            up = poll(base, 'up{job="statekit"} == 1', bool)
            assert [r["metric"]["instance"] for r in up] == [target]
            keys = poll(base, "sum by (checkpoint, operator) (statekit_state_keys)",
                        lambda result: len(result) == len(expected))
            got = {(r["metric"]["checkpoint"], r["metric"]["operator"]): float(r["value"][1])
                   for r in keys}
            assert got == expected
            per_checkpoint = {c: sum(v for (k, _), v in got.items() if k == c)
                              for c in (leaky, bounded)}
            assert per_checkpoint[leaky] > per_checkpoint[bounded] > 0
            current = poll(base, "statekit_growth_verdict == 1",
                           lambda result: {r["metric"]["checkpoint"] for r in result}
                           == {leaky, bounded})
            verdicts: dict[str, set[str]] = {leaky: set(), bounded: set()}
            for r in current:
                verdicts[r["metric"]["checkpoint"]].add(r["metric"]["verdict"])
            assert verdicts[bounded] == {BOUNDED}
            assert verdicts[leaky] and verdicts[leaky] <= {GROWING, ACCELERATING}
