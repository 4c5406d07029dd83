"""Benchmark: growth verdicts on checkpoints real queries wrote — finite populations, leaks,
open populations and sessions, both providers.

The question. ``statekit growth`` must say *saturating* (with where it levels off) for a
stream keyed over a finite population still being discovered, *growing* for a leak or an
open population, *bounded* for keys that expire — from the checkpoint alone. This script
writes those checkpoints with real Spark, fits the decision's thresholds
(:class:`statekit.growth.saturation.Thresholds`) on half of the workloads and reports the confusion
table and the plateau error on the other half.

Workloads (16 batches of one Parquet file each, ``maxFilesPerTrigger`` 1, a keyed
``groupBy(user).count()`` in update mode to a ``noop`` sink, 4 shuffle partitions):

* **finite, uniform**: populations of 40k and 200k users, as many events per batch as make
  10 %, 30 %, 60 % or 90 % of the population seen after 16 batches — truth *saturating*;
* **finite, Zipf**: exponents 0.8 and 1.1 over 100k users, 30 %, 60 % or 90 % seen (the
  events per batch from the expected accumulation curve) — truth *saturating*;
* **open**: new users every batch (2k or 8k) plus events of returning users (6k or 30k, or
  10 % / 30 % of the users seen so far: traffic growing with the user base) — truth *growing*;
* **finite + leak**: a finite population (uniform or Zipf) nearly all seen, plus 1 % or 4 %
  of every batch's events from brand-new keys — truth *growing* (the leak is reported);
* **sessions**: per-user 5-minute event-time windows with a 5-minute watermark (keys expire
  as the watermark passes) — truth *bounded*.

Providers: HDFS, and RocksDB with changelog checkpointing (the replay needs change files to
see inserts and updates; a RocksDB store with zips only gives key counts, no discovery
curve, and stays *growing*). Halves alternate within each family, so both halves hold every
kind. Fit: the thresholds combination with no open population or leak called saturating or
bounded on the fit half, then the most verdicts right, then the nearest to the built-in
values. Not a test: nothing asserted.

Run: ``.venv/bin/python benchmarks/bench_growth_verdicts.py [--workdir DIR]
[--providers hdfs,rocksdb] [--report] [--docs docs/concepts/growth.md]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import STATE_PACKAGE, session, wait_static  # noqa: E402

BATCHES = 16
PARTITIONS = 4
MAX_EVENTS = 300_000
"""Events per batch at most (a heavy Zipf tail seen at 90 % would need more)."""
PROVIDERS = {
    "hdfs": {"spark.sql.streaming.stateStore.providerClass":
             f"{STATE_PACKAGE}.HDFSBackedStateStoreProvider"},
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass":
                f"{STATE_PACKAGE}.RocksDBStateStoreProvider",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
}
TRUTH = {"finite": "saturating", "zipf": "saturating", "open": "growing", "leak": "growing",
         "sessions": "bounded"}


@dataclass(frozen=True)
class Workload:
    name: str
    family: str
    population: int = 0
    seen: float = 0.0
    """Target share of the population seen after the last batch."""
    zipf: float = 0.0
    new_per_batch: int = 0
    returning: int = 0
    returning_share: float = 0.0
    """Open populations: events of returning users per batch as a share of the users seen so
    far (traffic that grows with the user base), instead of ``returning``."""
    leak: float = 0.0
    half: str = "fit"

    @property
    def truth(self) -> str:
        return TRUTH[self.family]


def workloads() -> list[Workload]:
    items = [Workload(f"finite-{n // 1000}k-{int(f * 100)}", "finite", n, f)
             for n in (40_000, 200_000) for f in (0.1, 0.3, 0.6, 0.9)]
    items += [Workload(f"zipf{z}-100k-{int(f * 100)}", "zipf", 100_000, f, zipf=z)
              for z in (0.8, 1.1) for f in (0.3, 0.6, 0.9)]
    items += [Workload(f"open-{n // 1000}k-new-{r // 1000}k-back", "open", new_per_batch=n,
                       returning=r) for n in (2_000, 8_000) for r in (6_000, 30_000)]
    items += [Workload(f"open-{n // 1000}k-new-{int(f * 100)}pct-back", "open", new_per_batch=n,
                       returning_share=f) for n, f in ((5_000, 0.1), (2_000, 0.3))]
    items += [Workload(f"leak-{int(share * 100)}pct-uniform", "leak", 40_000, 0.95, leak=share)
              for share in (0.01, 0.04)]
    items += [Workload("leak-2pct-zipf0.8", "leak", 100_000, 0.9, zipf=0.8, leak=0.02),
              Workload("leak-1pct-zipf1.1", "leak", 100_000, 0.6, zipf=1.1, leak=0.01)]
    items += [Workload(f"sessions-{u // 1000}k", "sessions", u, 0.9) for u in (20_000, 80_000)]
    out, count = [], Counter()
    for w in items:  # alternate halves within each family
        out.append(replace(w, half="fit" if count[w.family] % 2 == 0 else "held-out"))
        count[w.family] += 1
    return out


# -- data --------------------------------------------------------------------------------------

def events_per_batch(w: Workload) -> int:
    """Events a batch draws so that ``w.seen`` of the population is seen after the last."""
    if w.family in ("open",):
        return w.new_per_batch + w.returning
    if not w.zipf:
        return int(-w.population * math.log(1 - w.seen) / BATCHES)
    from statekit.growth.population import accumulation, draws_for

    total = float(draws_for(accumulation(w.population, w.zipf), w.seen * w.population))
    return int(min(MAX_EVENTS, total / BATCHES))


def batch_users(w: Workload, rng, b: int, known: int):
    import numpy as np

    if w.family == "open":
        fresh = np.arange(known, known + w.new_per_batch)
        back = int(w.returning_share * known) if w.returning_share else w.returning
        return np.concatenate([fresh, rng.integers(0, max(1, known), back)])
    m = events_per_batch(w)
    if w.zipf:
        weights = 1.0 / np.arange(1, w.population + 1) ** w.zipf
        users = rng.choice(w.population, m, p=weights / weights.sum())
    else:
        users = rng.integers(0, w.population, m)
    if w.leak:
        extra = int(w.leak * m)
        users = np.concatenate([users, np.arange(10**9 + b * extra, 10**9 + (b + 1) * extra)])
    return users


def write_data(work: Path, w: Workload) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = work / "landing" / w.name
    if (folder / "_DONE").exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(zlib.crc32(w.name.encode()))  # the same data every run
    known = 5_000
    for b in range(BATCHES):
        users = batch_users(w, rng, b, known)
        known += w.new_per_batch
        start_ms = 1_700_000_000_000 + b * 600_000  # 10 minutes of event time a batch
        ts = start_ms + rng.integers(0, 600_000, len(users))
        table = pa.table({"user": pa.array(users, pa.int64()),
                          "ts": pa.array(ts.astype("datetime64[ms]"))})
        pq.write_table(table, folder / f"batch-{b:03d}.parquet")
    (folder / "_DONE").write_text("")


# -- checkpoints (one JVM per provider) -----------------------------------------------------

def child_write(spec: dict) -> dict:
    from pyspark.sql import functions as F

    spark = session("bench-growth-verdicts", {
        "spark.sql.shuffle.partitions": str(PARTITIONS), **PROVIDERS[spec["provider"]]})
    jvm_store = getattr(spark._jvm, f"{STATE_PACKAGE}.StateStore")
    done = {}
    for item in spec["items"]:
        base = Path(item["checkpoint"])
        if (base / "_DONE").exists():
            continue
        shutil.rmtree(base, ignore_errors=True)
        stream = (spark.readStream.schema("user long, ts timestamp")
                  .option("maxFilesPerTrigger", 1).option("pathGlobFilter", "batch-*.parquet")
                  .parquet(item["landing"]))
        if item["family"] == "sessions":
            query = (stream.withWatermark("ts", "5 minutes")
                     .groupBy("user", F.window("ts", "5 minutes")).count()
                     .writeStream.outputMode("append"))
        else:
            query = stream.groupBy("user").count().writeStream.outputMode("update")
        started = time.perf_counter()
        running = (query.format("noop").option("checkpointLocation", str(base))
                   .trigger(availableNow=True).start())
        running.awaitTermination()
        jvm_store.stop()
        wait_static(base)
        (base / "_DONE").write_text("")
        done[item["name"]] = time.perf_counter() - started
        print(json.dumps({"written": item["name"], "seconds": done[item["name"]]}),
              file=sys.stderr, flush=True)
    spark.stop()
    return done


def write_checkpoints(work: Path, items: list[Workload], providers: list[str]) -> None:
    for w in items:
        write_data(work, w)
    for provider in providers:
        pending = [{"name": w.name, "family": w.family,
                    "landing": str(work / "landing" / w.name),
                    "checkpoint": str(work / "ckpt" / provider / w.name)} for w in items
                   if not (work / "ckpt" / provider / w.name / "_DONE").exists()]
        if not pending:
            continue
        print(f"{provider}: writing {len(pending)} checkpoints …", flush=True)
        out = subprocess.run([sys.executable, __file__, "--child",
                              json.dumps({"provider": provider, "items": pending})],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT, check=True)
        print(f"  {provider}: done ({sum(json.loads(out.stdout.splitlines()[-1]).values()):.0f} s"
              " of queries)", flush=True)


# -- verdicts ----------------------------------------------------------------------------------

@dataclass
class Case:
    workload: Workload
    provider: str
    histories: list
    timestamps: dict
    population: int | None
    seen: int


def load_cases(work: Path, items: list[Workload], providers: list[str]) -> list[Case]:
    from statekit.checkpoint import open_checkpoint
    from statekit.growth.analysis import batch_timestamps
    from statekit.state.history import all_histories

    cases = []
    for provider in providers:
        for w in items:
            path = work / "ckpt" / provider / w.name
            if not (path / "_DONE").exists():
                continue
            ckpt = open_checkpoint(str(path))
            histories = all_histories(ckpt)
            versions = sorted({v.version for h in histories for v in h.versions})
            keys = sum(h.versions[-1].keys for h in histories if h.versions)
            population = w.population if w.family in ("finite", "zipf") else None
            cases.append(Case(w, provider, histories, batch_timestamps(ckpt, versions),
                              population, keys))
    return cases


def judge(case: Case, thresholds) -> tuple[str, float | None]:
    """The verdict (accelerating counted as growing) and the projected plateau."""
    from statekit.growth.analysis import analyse_store, plateau_of, worst
    from statekit.growth.trend import ACCELERATING, GROWING, SATURATING

    stores = [analyse_store(h, case.timestamps, thresholds) for h in case.histories]
    verdict = worst([s.verdict for s in stores])
    plateau = plateau_of(stores) if verdict == SATURATING else None
    return (GROWING if verdict == ACCELERATING else verdict,
            plateau.keys if plateau is not None else None)


UNSAFE = {("growing", "saturating"), ("growing", "bounded")}
"""(truth, verdict) pairs that must never happen: a leak called harmless."""


def score(cases: list[Case], thresholds) -> tuple[int, int]:
    """(unsafe verdicts, right verdicts)."""
    unsafe = right = 0
    for case in cases:
        verdict, _ = judge(case, thresholds)
        unsafe += (case.workload.truth, verdict) in UNSAFE
        right += verdict == case.workload.truth
    return unsafe, right


def fit_thresholds(cases: list[Case]):
    from statekit.growth.saturation import Thresholds

    default = Thresholds()
    grid = {"leak_f": (3.0, 10.0, 30.0, 100.0), "max_plateau_ratio": (5.0, 10.0, 20.0, 50.0),
            "min_share_drop": (0.05, 0.10, 0.20), "max_traffic_growth": (1.25, 1.5, 2.0),
            "touch_leak_f": (3.0, 10.0, 30.0)}
    best, best_key = default, None
    for values in itertools.product(*grid.values()):
        candidate = replace(default, **dict(zip(grid, values, strict=True)))
        unsafe, right = score(cases, candidate)
        distance = sum(abs(math.log(getattr(candidate, k) / getattr(default, k))) for k in grid)
        key = (unsafe, -right, distance)
        if best_key is None or key < best_key:
            best, best_key = candidate, key
    return best


def report(cases: list[Case], docs: Path | None) -> None:
    from statekit.growth.saturation import Thresholds

    fit_cases = [c for c in cases if c.workload.half == "fit"]
    chosen = fit_thresholds(fit_cases)
    print(f"\nthresholds fitted on {len(fit_cases)} workloads: {asdict(chosen)} "
          f"(built in: {asdict(Thresholds())})")
    lines = ["| workload | provider | half | truth | verdict | keys seen | population | "
             "share seen | plateau | error |", "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    confusion: dict[str, Counter] = defaultdict(Counter)
    errors: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for case in cases:
        verdict, plateau = judge(case, chosen)
        w = case.workload
        if w.half == "held-out":
            confusion[w.truth][verdict] += 1
        share = case.seen / case.population if case.population else None
        error = plateau / case.population - 1 if plateau and case.population else None
        if error is not None and w.half == "held-out":
            errors[w.family].append((w.seen, error))  # the workload's target share seen
        lines.append(
            f"| {w.name} | {case.provider} | {w.half} | {w.truth} | {verdict} | "
            f"{case.seen:,} | {'-' if not case.population else f'{case.population:,}'} | "
            f"{'-' if share is None else f'{share:.0%}'} | "
            f"{'-' if plateau is None else f'{plateau:,.0f}'} | "
            f"{'-' if error is None else f'{error:+.0%}'} |")
    print("\n".join(lines))
    verdicts = ("bounded", "saturating", "growing", "insufficient-history")
    table = ["| truth \\ verdict | " + " | ".join(verdicts) + " |",
             "|---|" + "---:|" * len(verdicts)]
    for truth in ("bounded", "saturating", "growing"):
        table.append(f"| {truth} | " + " | ".join(str(confusion[truth][v]) for v in verdicts)
                     + " |")
    held = [c for c in cases if c.workload.half == "held-out"]
    right = sum(confusion[t][t] for t in confusion)
    unsafe = sum(confusion[t][v] for t, v in UNSAFE)
    summary = [f"- held-out: {right}/{len(held)} verdicts right ({right / max(1, len(held)):.0%}),"
               f" {unsafe} leak(s) or open population(s) called saturating or bounded"]
    for family, label, band in (("finite", "uniform", 0.15), ("zipf", "Zipf", 0.30)):
        rows = [e for s, e in errors[family] if s >= 0.3]
        if rows:
            worst_error = max(abs(e) for e in rows)
            summary.append(f"- plateau, {label}, ≥ 30 % seen: {len(rows)} workloads, worst "
                           f"{worst_error:.0%} (target ±{band:.0%})")
    print("\n" + "\n".join(table) + "\n\n" + "\n".join(summary))
    if docs is not None:
        text = docs.read_text() if docs.exists() else ""
        marker = "<!-- growth-verdicts -->"
        block = "\n".join([marker, *table, "", *summary, "", *lines, marker])
        if text.count(marker) == 2:
            head, _, rest = text.partition(marker)
            _, _, tail = rest.partition(marker)
            text = head + block + tail
        else:
            text += "\n" + block + "\n"
        docs.write_text(text)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child_write(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--providers", default="hdfs,rocksdb")
    parser.add_argument("--report", action="store_true", help="only report (no Spark)")
    parser.add_argument("--docs", type=Path, help="write the tables into this Markdown file")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="statekit-growth-verdicts-"))
    providers = args.providers.split(",")
    items = workloads()
    print(f"{len(items)} workloads × {len(providers)} provider(s); data in {work}", flush=True)
    if not args.report:
        write_checkpoints(work, items, providers)
    started = time.perf_counter()
    cases = load_cases(work, items, providers)
    print(f"replayed {len(cases)} checkpoints in {time.perf_counter() - started:.1f} s")
    report(cases, args.docs)


if __name__ == "__main__":
    main()
