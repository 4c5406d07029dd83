"""The soak's core: build the fleet, run the three services on it at once, measure, stop.

One function, :func:`run_soak`, shared by ``benchmarks/soak.py`` (minutes, the full fleet)
and ``tests/soak/test_soak.py`` (one minute, a small fleet with every fault). It returns raw
numbers only; soak_report.py judges them against the bounds and prints the table, so the
test and the script apply the same rules.

Phases, one method each: setup (the fleet on disk and on S3, then credentials switched on),
churn (growing and deleted checkpoints start changing), start (exporter, Prometheus, the TUI
in tmux, the web TUI, Chromium, our own scraper), warm-up (until every healthy checkpoint is
up, at least ``warmup_min_s``; one browser cycle), baseline (each service's process tree),
soak (browser cycles spread over the time left), end (the trees again, Prometheus' record,
the last answer), stop (SIGTERM to each service, timed). Every process started here is
stopped on the way out, the failed way included: an ExitStack holds each one's cleanup from
the moment it exists.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import soak_browser
import soak_churn
import soak_fleet
import soak_observe
import soak_services
import soak_storage

from tests.support.ports import free_port

FLEET_TEXT = "checkpoints"
"""What the fleet list shows in its header ("57 checkpoints"): the browser and tmux wait
for it."""


@dataclass
class SoakConfig:
    seconds: float = 600.0
    """From the services' start to the end of the soak (warm-up included)."""
    plan: str = "full"
    """``full`` (soak_fleet.full_plan) or ``small`` (the test's)."""
    browser_cycles: int = 20
    """Browser visits after the warm-up (one more is part of the warm-up)."""
    warmup_min_s: float = 60.0
    warmup_max_s: float = 240.0
    scrape_interval_s: float = 2.0
    cache_s: float = 15.0
    """The exporter re-reads a checkpoint at most this often (its default is 60 s)."""
    timeout_s: float = 20.0
    watch_s: float = 15.0
    keep_batches: int = 4
    """A growing checkpoint starts with this many batches."""
    grow_every_s: tuple[float, float] = (2.0, 20.0)
    """A growing checkpoint's pace: its remaining batches spread over the run, within."""
    stop_grace_s: float = 20.0
    prometheus: str = "prometheus"
    chromium: str = "chromium"
    tmux: str = "tmux"
    keep: Path | None = None
    """Keep the work folder (logs, fleet, TSDB) here instead of a temporary one."""
    log: Callable[[str], None] | None = None
    """Takes each progress line (the script prints them to stderr)."""


class _Sampler:
    """Tracks every service's process tree each second (survivors are found from it), and
    the peaks."""

    def __init__(self, services: list[soak_services.Service]) -> None:
        self.services = services
        self.peak: dict[str, dict[str, float]] = {
            s.name: {"processes": 0, "rss_mb": 0.0} for s in services}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            for service in self.services:
                members = service.track()
                peak = self.peak[service.name]
                peak["processes"] = max(peak["processes"], len(members))
                peak["rss_mb"] = max(peak["rss_mb"], round(
                    sum(m.rss_bytes for m in members) / 2**20, 1))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def grow_interval(config: SoakConfig, source: Path) -> float:
    """A growing checkpoint's pace: its remaining batches spread over the run."""
    remaining = max(1, len(soak_churn.layout(source).batches) - config.keep_batches)
    low, high = config.grow_every_s
    return min(high, max(low, config.seconds / remaining))


class _Soak:
    """One run's state, built up phase by phase (see the module's docstring)."""

    def __init__(self, config: SoakConfig, stack: contextlib.ExitStack) -> None:
        self.config = config
        self.stack = stack
        self.result: dict[str, Any] = {
            "config": {k: v for k, v in asdict(config).items() if k not in ("log", "keep")},
            "notes": []}
        self.began = time.monotonic()
        if config.keep is not None and config.keep.exists() and any(config.keep.iterdir()):
            raise RuntimeError(f"{config.keep} is not empty: --keep needs a new folder")
        self.work = config.keep or Path(tempfile.mkdtemp(prefix="statekit-soak-"))
        self.work.mkdir(parents=True, exist_ok=True)
        if config.keep is None:
            stack.callback(shutil.rmtree, self.work, True)
        self.result["work"] = str(self.work)
        self.cycles: list[dict[str, Any]] = []
        self.churns: dict[str, soak_churn.Churn] = {}
        self.stop_churn = threading.Event()

    def say(self, line: str) -> None:
        if self.config.log is not None:
            self.config.log(line)

    # ------------------------------------------------------------------ phases
    def setup(self) -> None:
        self.say("setup: the S3 servers and the fleet")
        work = self.work
        self.store = soak_storage.S3Store(work / "moto.log")
        self.stack.callback(self.store.close)
        guarded = soak_storage.S3Store(work / "moto-guarded.log", guarded=True)
        self.stack.callback(guarded.close)
        self.silent = soak_storage.SilentEndpoint()
        self.stack.callback(self.silent.close)
        plan = soak_fleet.full_plan() if self.config.plan == "full" \
            else soak_fleet.small_plan()
        keep = self.config.keep_batches
        self.entries = soak_fleet.build(
            plan, work, self.store, guarded, self.silent.endpoint,
            soak_storage.refused_endpoint(),
            lambda source, target: soak_churn.truncate(source, target, keep))
        self.stack.callback(soak_fleet.allow, self.entries)
        soak_fleet.deny(self.entries)
        self.listing = soak_fleet.write_list(self.entries, work / "checkpoints.txt")
        guarded.require_credentials()
        self.result["fleet"] = [e.public() for e in self.entries]
        self.result["setup_s"] = round(time.monotonic() - self.began, 1)
        self.env = soak_storage.without_proxies()
        self.env["STATEKIT_CACHE_DIR"] = str(work / "cache")

    def churn(self) -> None:
        self.stack.callback(lambda: soak_churn.join(list(self.churns.values())))
        self.stack.callback(self.stop_churn.set)
        for entry in self.entries:
            if entry.kind not in ("growing", "deleted") or entry.origin is None:
                continue
            sink: soak_churn.Sink = (soak_churn.LocalSink(Path(entry.url))
                                     if entry.where == "local"
                                     else soak_churn.S3Sink(self.store.filesystem(), entry.url))
            if entry.kind == "growing":
                self.churns[entry.name] = soak_churn.grow(
                    entry.name, entry.origin, sink, self.config.keep_batches,
                    grow_interval(self.config, entry.origin), self.stop_churn)
            else:
                self.churns[entry.name] = soak_churn.delete_and_rewrite(
                    entry.name, entry.origin, sink, self.stop_churn)

    def start(self) -> None:
        self.say("start: exporter, Prometheus, tmux TUI, web TUI, Chromium")
        config, work, env = self.config, self.work, self.env
        timeouts = {command: config.timeout_s if soak_services.supports(command, "--timeout")
                    else None for command in ("metrics", "tui")}
        self.result["notes"] += [f"statekit {command} has no --timeout: run without"
                                 for command, given in timeouts.items() if given is None]
        port = free_port()
        self.exporter = soak_services.metrics(self.listing, port, work / "metrics.log", env,
                                              cache_s=config.cache_s,
                                              timeout_s=timeouts["metrics"])
        self.stack.callback(self.exporter.kill)
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        self.result["first_answer_s"] = round(
            soak_services.wait_http(self.metrics_url, self.exporter, 180), 2)
        self.prometheus = soak_services.Prometheus(config.prometheus, work,
                                                   f"127.0.0.1:{port}", "statekit",
                                                   config.scrape_interval_s)
        self.stack.callback(self.prometheus.close)
        self.tmux = soak_services.Tmux(config.tmux, work, env)
        self.stack.callback(self.tmux.close)
        self.terminal = self.tmux.start(self.listing, work / "tui-tmux.log", config.watch_s,
                                        timeouts["tui"])
        self.stack.callback(self.terminal.kill)
        self.web, self.web_url = soak_services.web(self.listing, free_port(),
                                                   work / "tui-web.log", env, timeouts["tui"])
        self.stack.callback(self.web.kill)
        self.browser = soak_browser.Chromium(config.chromium)
        self.stack.callback(self.browser.close)
        self.scraper = soak_observe.Scraper(self.metrics_url, config.scrape_interval_s).start()
        self.stack.callback(self.scraper.stop)
        self.services = [self.exporter, self.terminal, self.web]
        self.sampler = _Sampler(self.services)
        self.stack.callback(self.sampler.stop)
        self.started = time.monotonic()
        self.web_idle = len(self.web.track())

    def cycle(self) -> None:
        """One browser visit, then until the web service is back to its idle processes."""
        visit = soak_browser.visit(self.browser.port, self.web_url, FLEET_TEXT)
        self.cycles.append({**asdict(visit), "settled_s": self.settle()})
        self.say(f"browser cycle {len(self.cycles)}: {'ok' if visit.ok else visit.error}")

    def settle(self, timeout_s: float = 15.0) -> float | None:
        """Seconds until the web service has no more processes than when idle (a closed
        tab's app ended), or None when not within ``timeout_s``."""
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            if len(self.web.track()) <= self.web_idle:
                return time.monotonic() - began
            time.sleep(0.2)
        return None

    def warm_up(self) -> None:
        self.say("warm-up")
        self.cycle()
        healthy = [e.url for e in self.entries if e.healthy]
        while True:
            elapsed = time.monotonic() - self.started
            latest = self.scraper.latest
            all_up = all(latest.get(url, soak_observe.Seen()).up == 1 for url in healthy)
            if (elapsed >= self.config.warmup_min_s and all_up) \
                    or elapsed >= self.config.warmup_max_s:
                break
            time.sleep(0.5)
        self.result["warmup"] = {"seconds": round(time.monotonic() - self.started, 1),
                                 "all_healthy_up": all_up}
        self.warm_wall = time.time()
        self.scraper.counting = True
        self.settle()
        self.baseline = {s.name: s.usage() for s in self.services}

    def soak(self) -> None:
        config = self.config
        end_at = self.started + config.seconds
        self.say(f"soak: {config.browser_cycles} browser cycles until {config.seconds:g} s")
        spacing = max(0.0, end_at - time.monotonic()) / max(1, config.browser_cycles)
        first_at = time.monotonic()
        for index in range(config.browser_cycles):
            time.sleep(max(0.0, first_at + index * spacing - time.monotonic()))
            self.cycle()
        time.sleep(max(0.0, end_at - time.monotonic()))

    def end(self) -> None:
        self.say("end: measuring")
        self.settle()
        self.final = {s.name: s.usage() for s in self.services}
        self.alive = {s.name: s.running() for s in self.services}
        self.screen = self.tmux.screen()
        self.result["prometheus"] = self._prometheus(time.time())
        self.scraper.stop()
        self.stop_churn.set()
        soak_churn.join(list(self.churns.values()))
        scraper, latest = self.scraper, self.scraper.latest
        self.result["scraper"] = scraper.summary()
        self.result["checkpoints"] = {
            e.name: {"kind": e.kind, "where": e.where, "expect": e.expect,
                     **asdict(latest.get(e.url, soak_observe.Seen())),
                     "answers_up": scraper.ups.get(e.url, 0),
                     "answers_down": scraper.downs.get(e.url, 0)} for e in self.entries}
        self.result["answers_counted"] = scraper.answers
        self.result["growing"] = {
            e.name: {"written": self.churns[e.name].last_batch,
                     "first_seen": scraper.first_batch.get(e.url),
                     "last_seen": latest.get(e.url, soak_observe.Seen()).last_batch,
                     "every_s": round(grow_interval(self.config, e.origin), 1)}
            for e in self.entries if e.kind == "growing" and e.origin is not None}
        self.result["churn"] = {name: {"steps": c.steps, "errors": c.errors}
                                for name, c in self.churns.items()}
        self.result["browser"] = {"cycles": self.cycles, "web_idle_processes": self.web_idle}

    def _prometheus(self, until: float) -> dict[str, Any]:
        healthy = [e.url for e in self.entries if e.healthy]
        try:
            seen = soak_observe.prometheus_view(self.prometheus.base, "statekit",
                                                self.warm_wall, until, healthy)
        except (OSError, RuntimeError) as failure:
            return {"error": str(failure)}
        names = {e.url: e.name for e in self.entries}
        seen["gaps"] = {names[url]: n for url, n in seen["gaps"].items()}
        return seen

    def stop(self) -> None:
        self.say("stop: SIGTERM to each service")
        self.sampler.stop()
        stops = {s.name: s.stop(self.config.stop_grace_s) for s in self.services}
        after = self.tmux.screen()  # the pane stays: a crash's last words are on it

        def tracebacks(service: soak_services.Service) -> int:
            shown = after.count(soak_services.TRACEBACK) if service is self.terminal else 0
            return max(service.tracebacks(), shown)

        self.result["services"] = {
            s.name: {"start": self.baseline[s.name].as_dict(),
                     "end": self.final[s.name].as_dict(), "peak": self.sampler.peak[s.name],
                     "alive_at_end": self.alive[s.name], **stops[s.name],
                     "tracebacks": tracebacks(s), "log_tail": s.text()[-1500:]}
            for s in self.services}
        self.result["transitions"] = soak_observe.transitions(self.exporter.text())
        self.result["tui_screen"] = {"fleet_shown": FLEET_TEXT in self.screen,
                                     "last_screen": self.screen[-4000:]}
        self.result["silent_connections"] = self.silent.accepted
        self.result["seconds_total"] = round(time.monotonic() - self.began, 1)


def run_soak(config: SoakConfig) -> dict[str, Any]:
    """Run the soak; the raw results (see soak_report.py for what they must satisfy)."""
    with contextlib.ExitStack() as stack:
        run = _Soak(config, stack)
        run.setup()
        run.churn()
        run.start()
        run.warm_up()
        run.soak()
        run.end()
        run.stop()
        return run.result
