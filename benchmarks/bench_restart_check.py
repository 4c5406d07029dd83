"""Benchmark: the recovery estimate against one restart measured on this machine, at a size and
batch count the model was not fitted on (2M keys, 12 batches, 4 partitions, HDFS without a
snapshot), and the speed probe's own scaling.

Why a benchmark and not a test. Both numbers are seconds on a shared two-core machine: a
restart measured while anything else runs (another test worker's Spark job, a busy moment of
the VM) moves by 1.5×, and the VM itself has two speeds between which the single-threaded
probe does not carry the JVM's (docs/concepts/recovery.md). A bound on them in ``make test``
passed or failed with the machine's state; here they are printed as a table, run by hand on a
quiet machine, and the accuracy claims live in the docs' benchmark tables.

Protocol: the state is written in its own JVM (``tests/restart_probe.py``, mode ``write``);
each of ``--repeats`` copies is restarted as a *warm pair* in a fresh JVM (throw-away first
batches on empty checkpoints, then the same batch on an empty checkpoint — the reference —
and on the copy — the restart); restart − reference is what the state cost the first batch.
The estimate is the one a user gets here: the fitted constants × this machine's speed probe,
the fastest of the cached probes and two taken beside the restarts (the product's rule).
Spark's own per-partition state-load times (its DEBUG log) are combined over the cores as
the critical path and shown beside the estimated load.

The probe's scaling: the probe's CPU time for its rows and for three times its rows (the
fastest of three each); a probe that measures work gives a ratio near 3.

Run: ``.venv/bin/python benchmarks/bench_restart_check.py [--keys 2000000] [--repeats 3]``
(~5 min at 2M keys; needs ~1 GB of disk per copy and an 8 GB heap).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _probe(spec: dict) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.restart_probe", json.dumps(spec)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        sys.exit(f"restart probe failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def critical_path(values: list[float], cores: int) -> float:
    """Tasks in waves over ``cores``: the slowest of each wave, summed."""
    ordered = sorted(values, reverse=True)
    return sum(ordered[i] for i in range(0, len(ordered), cores))


def probe_scaling() -> tuple[float, float]:
    from statekit.recovery import machine_speed

    small = machine_speed.probe_seconds(3)
    rows = machine_speed.PROBE_ROWS
    machine_speed.PROBE_ROWS = rows * 3
    try:
        large = machine_speed.probe_seconds(3)
    finally:
        machine_speed.PROBE_ROWS = rows
    return small, large


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--heap", default="8g")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()

    from statekit.checkpoint import open_checkpoint
    from statekit.recovery.cost_model import local_model
    from statekit.recovery.estimate import estimate_recovery
    from statekit.recovery.machine_speed import (
        REFERENCE_PROBE_S,
        MachineSpeed,
        machine_speed,
        probe_seconds,
    )

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-restart-"))
    work.mkdir(parents=True, exist_ok=True)
    paths = {k: Path(v) for k, v in _probe({
        "mode": "write", "root": str(work / "state"), "keys": args.keys,
        "batches": args.batches, "partitions": args.partitions,
        "driver_memory": args.heap}).items()}
    cores = os.cpu_count() or 2
    probes = [p for p in (machine_speed("probe").probe_s, probe_seconds()) if p]
    rows = []
    for attempt in range(args.repeats):
        copy = work / f"restart-{attempt}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(paths["checkpoint"], copy)
        measured = _probe({"mode": "pair", "checkpoint": str(copy),
                           "landing": str(paths["landing"]), "fresh": str(paths["fresh"]),
                           "partitions": args.partitions, "driver_memory": args.heap})
        load = critical_path([ms / 1000 for ms in measured["load_ms"].values()], cores)
        rows.append((measured["restart_s"], measured["reference_s"], load))
        shutil.rmtree(copy)
    probes.append(probe_seconds())
    speed = MachineSpeed(min(probes) / REFERENCE_PROBE_S, "probe", min(probes))
    ckpt = open_checkpoint(str(paths["checkpoint"]))
    estimate = estimate_recovery(ckpt, cores=cores, memory_limit=8 << 30,
                                 model=local_model(ckpt, speed))
    measured_s = statistics.median(r[0] - r[1] for r in rows)

    print(f"{args.keys:,} keys, {args.batches} batches, {args.partitions} partitions, "
          f"{cores} cores; probe {min(probes) * 1000:.1f} ms (factor {speed.factor:.2f})")
    print(f"{'repeat':>6} {'restart s':>10} {'reference s':>12} {'Spark load s':>13}")
    for i, (restart, reference, load) in enumerate(rows):
        print(f"{i:>6} {restart:>10.2f} {reference:>12.2f} {load:>13.2f}")
    print(f"measured (median restart - reference): {measured_s:.2f} s")
    print(f"estimate: {estimate.estimate_s:.2f} s (state load {estimate.state_load_s:.2f} s, "
          f"memory {estimate.memory.verdict if estimate.memory else 'n/a'}); "
          f"estimate / measured = {estimate.estimate_s / measured_s:.2f}")
    small, large = probe_scaling()
    print(f"probe: {small * 1000:.1f} ms for its rows, {large * 1000:.1f} ms for 3x the rows "
          f"(ratio {large / small:.2f}; work-proportional = 3)")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
