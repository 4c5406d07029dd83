"""Benchmark: does the machine-speed probe carry the recovery estimate to another machine?

The question. ``statekit recovery``'s constants are seconds on the machine the grid was
fitted on (``bench_recovery_grid.py``). On another machine the same restart takes other
seconds; the estimate multiplies its constants by this machine's probe time ÷ the benchmark
machine's (``statekit.recovery.machine_speed``). This script re-measures restarts of grid
configurations on the machine it runs on — warm pairs, the grid's own protocol and code — and
compares them with the estimate as fitted (``--machine-speed reference``) and as scaled by the
probe, so the table says how much the probe helps here.

Data: ``bench_recovery_grid.py --protocol warm --only <configs>`` in ``--workdir`` (run by
this script when its ``warm.jsonl`` is missing: ~25 min for the default eight
configurations, 1M and 3M keys, both providers, every load path but v2). The probe is run
``--probes`` times, each in a fresh process (its own placement in memory, its own moment of
a shared machine).

Also ``--derive``: the benchmark machine's probe seconds that make the median measured ÷
estimated ratio 1 here — how ``REFERENCE_PROBE_S`` was set, when the benchmark machine itself
could not be probed.

And ``--protocol cold``: the grid's *cold* measure — what an SRE measures by hand, each run a
fresh process; median restart − median empty-checkpoint run, corrected for each JVM's
start-up, with its bootstrap 10–90 % interval (``bench_recovery_grid.measured_rows``) —
judged against the probe-scaled estimate with its range, by the grid's rule (errors under a
second judged in seconds). Data: ``bench_recovery_grid.py --protocol cold --repeats N --only
<configs>`` in ``--workdir`` (run first; not started from here). Small restarts are where this
matters: a cold first batch varies by about a second, so resolving a restart of tenths of a
second needs many runs of each.

Run: ``.venv/bin/python benchmarks/bench_machine_speed.py --workdir W [--probes 9]
[--derive]``. Not a test: nothing asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import CORES  # noqa: E402
from bench_recovery_grid import (  # noqa: E402
    WARM_STORE,
    grid,
    jvm_slope,
    load_measured,
    load_records,
    measured_rows,
    provider_of,
    relative_error,
    warm_pair,
)

from statekit.checkpoint import open_checkpoint  # noqa: E402
from statekit.recovery.cost_model import local_model  # noqa: E402
from statekit.recovery.estimate import estimate_recovery  # noqa: E402
from statekit.recovery.machine_speed import REFERENCE_PROBE_S, MachineSpeed  # noqa: E402

DEFAULT_CONFIGS = ("hdfs-nosnap-1000k-50B-p4", "hdfs-nosnap-3000k-50B-p16",
                   "hdfs-snap5-1000k-400B-p4", "hdfs-snap5-3000k-50B-p4",
                   "rocksdb-zip-1000k-400B-p16", "rocksdb-zip-3000k-50B-p4",
                   "rocksdb-changelog-1000k-50B-p16", "rocksdb-changelog-3000k-50B-p4")
PROBE = ("from statekit.recovery.machine_speed import probe_seconds; print(probe_seconds())")


def probes(count: int) -> list[float]:
    """The probe in ``count`` fresh processes."""
    return [float(subprocess.run([sys.executable, "-c", PROBE], capture_output=True,
                                 text=True, check=True).stdout) for _ in range(count)]


def measured(work: Path) -> dict[str, list[float]]:
    """restart − reference of every warm pair, by configuration."""
    out: dict[str, list[float]] = {}
    for record in load_records(work / WARM_STORE):
        pair = warm_pair(record)
        if pair is not None:
            out.setdefault(record["name"], []).append(pair[0] - pair[1])
    return out


def worst_factor(errors: list[float]) -> float:
    return max(max(1 + e, 1 / (1 + e)) if e > -1 else float("inf") for e in errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--only", default=",".join(DEFAULT_CONFIGS))
    parser.add_argument("--probes", type=int, default=9)
    parser.add_argument("--derive", action="store_true",
                        help="print the reference probe seconds that fit this machine")
    parser.add_argument("--protocol", choices=("warm", "cold"), default="warm",
                        help="judge the warm pairs (default) or the cold measure")
    args = parser.parse_args()
    names = args.only.split(",")
    if args.protocol == "cold":
        judge_cold(args.workdir, names, args.probes)
        return
    if not (args.workdir / WARM_STORE).exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_recovery_grid.py"),
                        "--workdir", str(args.workdir), "--protocol", "warm", "--repeats", "2",
                        "--no-check", "--only", args.only], check=True)
    times = probes(args.probes)
    probe_s = min(times)
    factor = probe_s / REFERENCE_PROBE_S
    print(f"probe over {len(times)} processes: min {probe_s * 1000:.1f} ms, median "
          f"{statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms; the "
          f"benchmark machine's {REFERENCE_PROBE_S * 1000:.1f} ms → factor {factor:.2f} "
          f"({CORES} cores)")
    pairs = measured(args.workdir)
    configs = {c.name: c for c in grid()}
    print("\n| configuration | measured here (warm pairs) | estimate as fitted | error | "
          "× probe factor | error |")
    print("|---|---:|---:|---:|---:|---:|")
    errors: dict[str, list[float]] = {"fitted": [], "probe": []}
    ratios = []
    for name in names:
        if name not in pairs or name not in configs:
            print(f"| {name} | not measured | | | | |")
            continue
        ckpt = open_checkpoint(str(args.workdir / "ckpt" / name / "ckpt"))
        here = statistics.median(pairs[name])
        fitted = estimate_recovery(ckpt, cores=CORES, model=local_model(
            ckpt, MachineSpeed(1.0, "reference"))).estimate_s
        scaled = estimate_recovery(ckpt, cores=CORES, model=local_model(
            ckpt, MachineSpeed(factor, "probe", probe_s))).estimate_s
        e1, e2 = relative_error(fitted, here), relative_error(scaled, here)
        errors["fitted"].append(e1)
        errors["probe"].append(e2)
        ratios.append(here / fitted)
        print(f"| {name} ({provider_of(configs[name])}) | {here:.2f} s "
              f"({', '.join(f'{v:.2f}' for v in pairs[name])}) | {fitted:.2f} s | {e1:+.0%} "
              f"| {scaled:.2f} s | {e2:+.0%} |")
    for label, values in errors.items():
        if values:
            print(f"- estimate {label}: median |error| "
                  f"{statistics.median(abs(v) for v in values):.0%}, worst factor "
                  f"{worst_factor(values):.2f}×")
    if args.derive and len(ratios) > 1:
        ratio = statistics.median(ratios)
        print(f"\nmeasured ÷ fitted estimate here: median {ratio:.3f} (range "
              f"{min(ratios):.2f}–{max(ratios):.2f}) → REFERENCE_PROBE_S = "
              f"{probe_s / ratio:.4f}")
        # the derived reference is one number fitted on these configurations: each one
        # predicted from the others' median instead says what it does on one it never saw
        held_out = [statistics.median(ratios[:i] + ratios[i + 1:]) / r - 1
                    for i, r in enumerate(ratios)]
        print(f"leave-one-out (each configuration scaled by the others' median): median "
              f"|error| {statistics.median(abs(e) for e in held_out):.0%}, worst factor "
              f"{worst_factor(held_out):.2f}× ("
              + ", ".join(f"{e:+.0%}" for e in held_out) + ")")


def judge_cold(work: Path, names: list[str], probe_count: int) -> None:
    """The cold measure of each configuration against the probe-scaled estimate."""
    times = probes(probe_count)
    speed = MachineSpeed(min(times) / REFERENCE_PROBE_S, "probe", min(times))
    print(f"probe over {len(times)} processes: min {min(times) * 1000:.1f} ms → factor "
          f"{speed.factor:.2f} ({CORES} cores)")
    measured = load_measured(work)
    slope = jvm_slope(measured)
    configs = {c.name: c for c in grid()}
    print("\n| configuration | half | cold runs (restart / empty) | measured cold [10–90 %] | "
          "estimate × probe [range] | error |")
    print("|---|---|---:|---:|---:|---:|")
    errors = []
    for name in names:
        config = configs[name]
        row = measured_rows(config, measured, slope)
        if row is None or "cold" not in row:
            print(f"| {name} | {config.half} | not measured | | | |")
            continue
        ckpt = open_checkpoint(str(work / "ckpt" / name / "ckpt"))
        estimate = estimate_recovery(ckpt, cores=CORES, model=local_model(ckpt, speed))
        error = relative_error(estimate.estimate_s, row["cold"])
        errors.append(error)
        runs = (len(measured.get(f"restart-{name}", [])),
                len(measured.get(f"baseline-{config.family}", [])))
        print(f"| {name} ({provider_of(config)}) | {config.half} | {runs[0]} / {runs[1]} | "
              f"{row['cold']:.2f} s [{row['cold_low']:.2f} – {row['cold_high']:.2f}] | "
              f"{estimate.estimate_s:.2f} s [{estimate.low_s:.2f} – {estimate.high_s:.2f}] | "
              f"{error:+.0%} |")
    if errors:
        print(f"- median |error| {statistics.median(abs(e) for e in errors):.0%}, worst factor "
              f"{worst_factor(errors):.2f}× (errors of restarts under a second judged in "
              "seconds: ÷ max(measured, 1 s))")


if __name__ == "__main__":
    main()
