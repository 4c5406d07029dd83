"""The recovery estimate on a real checkpoint of 320k keys, and ``--measure`` on it (local, S3
and with a damaged partition). The estimate against a measured restart is a benchmark
(``benchmarks/bench_restart_check.py``), not an assertion: its seconds move with the
machine."""

from __future__ import annotations

import json
import shutil

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.cli.runner import run_cli
from statekit.recovery.estimate import estimate_recovery

pytestmark = [pytest.mark.spark]

KEYS = 320_000
BATCHES = 12
PARTITIONS = 4


@pytest.fixture(scope="module")
def large_state(spark, tmp_path_factory):
    from tests.restart_probe import write_state

    return write_state(spark, tmp_path_factory.mktemp("scale"), KEYS, BATCHES, PARTITIONS)


def _cli():
    from statekit.cli.main import cli

    return cli


def test_the_estimate_at_scale_is_made_of_its_terms(large_state):
    """The estimate on a state of 320k keys, as the model's output on a fixed checkpoint: it
    fits the memory given, the state load is one of its terms, and it grows with the cores
    taken away (waves). How close it comes to a measured restart is a benchmark
    (``benchmarks/bench_restart_check.py``, the held-out tables of docs/concepts/recovery.md),
    never a bound here: a restart's seconds move with the machine's state."""
    ckpt = open_checkpoint(str(large_state["checkpoint"]))
    two = estimate_recovery(ckpt, cores=2, memory_limit=8 << 30)
    one = estimate_recovery(ckpt, cores=1, memory_limit=8 << 30)
    assert two.memory is not None and two.memory.verdict == "fits", two.memory
    assert 0 < two.state_load_s < two.estimate_s
    assert one.state_load_s > two.state_load_s and one.estimate_s > two.estimate_s


def test_measure_scales_the_model_to_spark(large_state, capsys, monkeypatch):
    checkpoint = str(large_state["checkpoint"])
    assert run_cli(_cli(), "statekit", ["recovery", checkpoint, "--json", "--cores", "2",
                                        "--measure"]) == 0
    data = json.loads(capsys.readouterr().out)
    measurement = data["measurement"]
    assert data["model"]["source"] == "measured"
    assert len(measurement["timings"]) == 2 and measurement["fetch_s"] == 0
    assert all(t["seconds"] > measurement["empty_job_s"] for t in measurement["timings"])
    # the estimate is the default one scaled by what Spark measured (how near 1 the factor
    # is on a given machine is a benchmark: benchmarks/bench_machine_speed.py)
    assert measurement["factor"] > 0
    default = estimate_recovery(open_checkpoint(checkpoint), cores=2)
    assert data["state_load_s"] == pytest.approx(default.state_load_s * measurement["factor"],
                                                 rel=1e-6)
    # Spark's speed on this machine is kept for later JVM-free estimates of the provider
    from statekit.recovery.machine_speed import cached_spark_speed, machine_speed

    kept = cached_spark_speed("hdfs")
    assert kept is not None and kept.factor == pytest.approx(measurement["factor"])
    monkeypatch.delenv("STATEKIT_MACHINE_SPEED", raising=False)
    assert machine_speed(provider="hdfs") == kept


def test_measure_through_object_storage(large_state, s3_server, capsys):
    url = s3_server.upload(str(large_state["checkpoint"]), "checkpoints", "measure-scale")
    options = []
    for key, value in s3_server.storage_options().items():
        options += ["--storage-option", f"{key}={json.dumps(value)}"]
    assert run_cli(_cli(), "statekit", ["recovery", url, *options, "--json", "--cores", "2",
                                        "--measure"]) == 0
    data = json.loads(capsys.readouterr().out)
    # Spark has no S3 connector here: the partitions' files were fetched (and timed) into a
    # local staging copy that Spark loaded
    assert data["measurement"]["fetch_s"] > 0 and data["model"]["source"] == "measured"
    assert len(data["measurement"]["timings"]) == 2


def test_measure_on_an_unloadable_partition_names_the_file(large_state, tmp_path, capsys):
    copy = tmp_path / "damaged"
    shutil.copytree(large_state["checkpoint"], copy)
    delta = copy / "state" / "0" / "1" / f"{BATCHES}.delta"
    delta.write_bytes(delta.read_bytes()[:200])  # truncated
    (delta.parent / f".{delta.name}.crc").unlink(missing_ok=True)
    # the restart path is decoded first: the doctor's verdict, and no JVM started for a
    # restart that cannot happen
    code = run_cli(_cli(), "statekit", ["recovery", str(copy), "--measure", "--cores", "2"])
    out, err = capsys.readouterr()
    assert code in (11, 12) and err == "", err
    flat = " ".join(out.split())
    assert "does not apply" in flat and f"{BATCHES}.delta" in flat, flat
    # listed only, --measure meets the file itself: one line naming it
    code = run_cli(_cli(), "statekit", ["recovery", str(copy), "--measure", "--cores", "2",
                                        "--no-decode"])
    err = capsys.readouterr().err
    assert code not in (0, 1), err
    lines = [line for line in err.splitlines() if line.strip() and "WARNING" not in line]
    assert len(lines) == 1 and f"{BATCHES}.delta" in lines[0], err
    assert "Traceback" not in err
