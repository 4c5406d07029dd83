"""Benchmark: ``statekit report`` and the TUI's first screen on an object store at production scale.

The claim to prove: on S3 with a realistic per-request latency, a checkpoint of 2,000
partitions × 100 retained versions is reported in ≤ 3 s and the TUI shows its first screen in
≤ 4 s — where one sequential recursive listing (the "before") needs one request after another.

Data: a small real checkpoint per provider written by the reference pipeline with Spark
(``bench_report.make_template``, setup, not measured), synthesised into ``--partitions`` ×
``--versions`` from those real files (``bench_report.synthesize``, hard links: HDFS 100
``.delta`` + 10 ``.snapshot`` per partition, RocksDB a real ``.zip`` per version plus its
SSTs, each file with its Hadoop ``.crc`` — S3A writes no ``.crc`` files, so real S3
checkpoints hold half as many objects: this is the harder case).

Served by ``tests/s3_lite.py`` (an S3-protocol server whose listing cost does not grow with
the bucket, as S3's does not; moto re-sorts the whole bucket per page and cannot serve 400k
objects), answering each request after ``--latency-ms``, in a separate process on the same
cores. The request counts come from the server.

Measured per provider:

* before: ``open_checkpoint`` + ``build_report`` in-process with ``listing_method =
  "sequential"`` (one ``fs.find`` of ``state/``, then one ``ls`` per log folder);
* after: the same with the default listing (level by level, concurrent, ranged on S3);
* ``statekit report --json`` as a fresh process (imports and client set-up count);
* the TUI's first screen as a fresh process (``bench_tui.py``'s measure: until the Overview
  holds the loaded report).

Run: ``.venv/bin/python benchmarks/bench_object_store.py [--partitions 2000] [--versions 100]
[--latency-ms 50] [--providers hdfs,rocksdb]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_report import make_template, synthesize  # noqa: E402
from bench_tui import CHILD as TUI_CHILD  # noqa: E402

ACCESS = {"key": "testing", "secret": "testing"}


class Store:
    """The S3 server (with its per-request latency), in a child process."""

    def __init__(self, root: Path, latency_ms: float, hide_crc: bool = False) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.s3_lite", "--root", str(root), "--bucket", "bench",
             "--latency-ms", str(latency_ms), *(["--hide-crc"] if hide_crc else [])],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        self.endpoint = json.loads(line)["endpoint"]

    def options(self) -> dict:
        return {**ACCESS, "endpoint_url": self.endpoint, "skip_instance_cache": True,
                "use_listings_cache": False}

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(
            f"{self.endpoint}/_statekit/reset", method="POST")).read()

    def counts(self) -> dict[str, int]:
        return json.loads(urllib.request.urlopen(f"{self.endpoint}/_statekit/stats").read())

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


def in_process(store: Store, url: str, method: str) -> dict:
    from statekit.checkpoint import open_checkpoint
    from statekit.report.checkpoint_report import build_report

    store.reset()
    started = time.perf_counter()
    ckpt = open_checkpoint(url, store.options())
    ckpt.listing_method = method
    report = build_report(ckpt)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "requests": store.counts(), "listing": report.listing,
            "report": _comparable(report)}


def _comparable(report) -> dict:
    data = report.to_dict()
    for volatile in ("elapsed_s", "listing"):
        data.pop(volatile)
    return data


def cli_cold(store: Store, url: str) -> dict:
    command = [str(ROOT / ".venv/bin/statekit"), "report", url, "--json"]
    for key, value in store.options().items():
        command += ["--storage-option", f"{key}={json.dumps(value)}"]
    store.reset()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: the report has warnings
        raise SystemExit(f"statekit report failed: {done.stderr}")
    return {"seconds": seconds, "requests": store.counts()}


def tui_cold(store: Store, url: str) -> dict:
    store.reset()
    done = subprocess.run([sys.executable, "-c", TUI_CHILD, url, json.dumps(store.options())],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": result["first_screen_s"], "requests": store.counts()}


def _fmt(result: dict) -> str:
    requests = result["requests"]
    kinds = " ".join(f"{k}={v}" for k, v in sorted(requests.items()))
    return f"{result['seconds']:>7.2f}s  {sum(requests.values()):>6}  {kinds}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--providers", default="hdfs,rocksdb")
    parser.add_argument("--work", help="keep the generated data here (reused when present)")
    args = parser.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-s3-"))
    work.mkdir(parents=True, exist_ok=True)
    bucket = work / "bucket"
    providers = args.providers.split(",")
    try:
        for provider in providers:
            big = bucket / f"{provider}-{args.partitions}x{args.versions}"
            if not big.exists():
                template = work / f"template-{provider}"
                if not template.exists():
                    template = make_template(work, provider)
                print(f"synthesising {big.name} …", file=sys.stderr)
                synthesize(template, big, args.partitions, args.versions, link=True)
        store = Store(bucket, args.latency_ms)
        rows = []
        try:
            for provider in providers:
                url = f"s3://bench/{provider}-{args.partitions}x{args.versions}"
                before = in_process(store, url, "sequential")
                after = in_process(store, url, "auto")
                if before.pop("report") != after.pop("report"):
                    raise SystemExit(f"{provider}: the parallel listing's report differs")
                rows.append((provider, before, after, cli_cold(store, url),
                             tui_cold(store, url)))
        finally:
            store.close()
        # The same checkpoints as a checkpoint written through S3A is: without .crc files
        # (Hadoop writes them on local filesystems only; Spark 4.1+ may add its own).
        store = Store(bucket, args.latency_ms, hide_crc=True)
        plain = []
        try:
            for provider in providers:
                url = f"s3://bench/{provider}-{args.partitions}x{args.versions}"
                after = in_process(store, url, "auto")
                plain.append((provider, after, cli_cold(store, url), tui_cold(store, url)))
        finally:
            store.close()
        print(f"\n{args.partitions} partitions × {args.versions} versions on S3 "
              f"(tests/s3_lite.py, {args.latency_ms:.0f} ms per request)")
        print(f"{'provider':9} {'what':34} {'wall':>8}  {'reqs':>6}  by kind")
        for provider, before, after, cli, tui in rows:
            objects = after["listing"]["objects"]
            print(f"{provider:9} {'objects listed (with .crc)':34} {objects:>8}")
            print(f"{'':9} {'report, sequential listing (before)':34} {_fmt(before)}")
            print(f"{'':9} {'report, parallel listing (after)':34} {_fmt(after)}")
            print(f"{'':9} {'  of which listing':34} {after['listing']['seconds']:>7.2f}s  "
                  f"{after['listing']['requests']:>6}  ({after['listing']['method']}, "
                  f"concurrency {after['listing']['concurrency']})")
            print(f"{'':9} {'statekit report --json, cold':34} {_fmt(cli)}")
            print(f"{'':9} {'TUI first screen, cold':34} {_fmt(tui)}")
        for provider, after, cli, tui in plain:
            objects = after["listing"]["objects"]
            print(f"{provider:9} {'objects listed (no .crc, as S3A)':34} {objects:>8}")
            print(f"{'':9} {'report, parallel listing':34} {_fmt(after)}")
            print(f"{'':9} {'statekit report --json, cold':34} {_fmt(cli)}")
            print(f"{'':9} {'TUI first screen, cold':34} {_fmt(tui)}")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
