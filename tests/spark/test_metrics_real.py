"""``statekit metrics`` on checkpoints the reference pipeline really wrote: the growth verdict
of the leaky pipeline and of the bounded one, as a Prometheus query would read them."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
from prometheus_client.parser import text_string_to_metric_families

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.trend import ACCELERATING, BOUNDED, GROWING

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
