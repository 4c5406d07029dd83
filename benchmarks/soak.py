"""Soak: statekit's long-running services on a broken fleet, for minutes, leaking nothing.

An SRE leaves ``statekit metrics --serve`` (scraped by Prometheus), ``statekit tui --watch``
(in a terminal) and ``statekit tui --web`` (opened from a chat link, again and again) running
for weeks over dozens of checkpoints. This runs all three at once on a fleet of ≥ 50 copies
of real checkpoints — on local disk and on an S3-protocol server on 127.0.0.1 — with every
kind of fault an SRE meets (damaged, deleted while read, permission denied, wrong
credentials, an endpoint that never answers, one that refuses), some checkpoints growing
meanwhile; and reports whether they survived: no gap in any healthy checkpoint's series, no
5xx, no traceback, each checkpoint showing what it should, process trees (RSS, fds,
threads, processes) flat, and everything gone within seconds of SIGTERM.

Modules: soak_fleet (the checkpoints), soak_storage (S3 server, dead endpoints), soak_churn
(growing, deleting), soak_services (the services, Prometheus, tmux), soak_browser
(Chromium), soak_probe (process trees, stopping a process), soak_http (the proxy-less
opener, waiting for a server to answer), soak_observe (scrapes, Prometheus' record),
soak_run (the phases), soak_report (bounds, table). tests/soak/test_soak.py runs the same
core for a minute on a small fleet.

Needs Debian's prometheus, chromium and tmux, and util-linux's setpriv when run as root.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--browser-cycles 20] [--json FILE]
        [--small] [--keep DIR]

Exits 1 when a bound is violated (the table marks it **NO**).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import soak_report  # noqa: E402
from soak_run import SoakConfig, run_soak  # noqa: E402


def _binary(name: str) -> str:
    path = shutil.which(name) or (shutil.which("chromium-browser") if name == "chromium"
                                  else None)
    if path is None:
        raise SystemExit(f"{name} not found: install Debian's {name} package")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="from the services' start to the end (warm-up included)")
    parser.add_argument("--browser-cycles", type=int, default=20)
    parser.add_argument("--small", action="store_true",
                        help="the test's small fleet (every kind of fault, 12 checkpoints)")
    parser.add_argument("--cache-seconds", type=float, default=SoakConfig.cache_s,
                        help="the exporter's --cache-seconds (Prometheus scrapes every 2 s)")
    parser.add_argument("--watch", type=float, default=SoakConfig.watch_s,
                        help="the terminal TUI's --watch")
    parser.add_argument("--timeout", type=float, default=SoakConfig.timeout_s,
                        help="each service's --timeout per checkpoint")
    parser.add_argument("--json", type=Path, help="write the raw numbers here")
    parser.add_argument("--keep", type=Path, help="keep the work folder (logs, fleet) here")
    args = parser.parse_args()
    seconds = args.minutes * 60
    config = SoakConfig(
        seconds=seconds, plan="small" if args.small else "full",
        browser_cycles=args.browser_cycles, cache_s=args.cache_seconds, watch_s=args.watch,
        timeout_s=args.timeout,
        warmup_min_s=min(60.0, seconds / 5), warmup_max_s=min(240.0, seconds / 2),
        prometheus=_binary("prometheus"), chromium=_binary("chromium"), tmux=_binary("tmux"),
        keep=args.keep, log=lambda line: print(f"soak: {line}", file=sys.stderr, flush=True))
    if seconds < 300:  # a short run has not reached steady state: see tests/soak/test_soak.py
        bounds = soak_report.Bounds(growth=0.25, extra_fds=8, extra_threads=8,
                                    min_browser_cycles=args.browser_cycles)
    else:
        bounds = soak_report.Bounds(min_browser_cycles=args.browser_cycles)
    try:
        result = run_soak(config)
    except RuntimeError as failure:  # a service (or a tool) that never came up
        print(f"soak aborted: {failure}")
        sys.exit(2)
    found = soak_report.checks(result, bounds)
    result["checks"] = [vars(check) for check in found]
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    print(soak_report.markdown(result, found))
    bad = soak_report.failed(found)
    if bad:
        print(f"\n{len(bad)} bound(s) violated: " + "; ".join(c.name for c in bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
