"""What the exporter answered: our own scrapes of ``/metrics``, and what Prometheus stored.

Prometheus records a failed scrape as ``up 0`` whatever failed — a 500, a timeout, a
refused connection — so the soak also scrapes ``/metrics`` itself and counts status codes
(a 5xx is a bug: one broken checkpoint must never fail the whole answer) and keeps what each
checkpoint looked like in the last answer (up, reason, restart verdict, last batch).

The exporter's log is read for its failure-transition lines (down with a reason, up again).

Series gaps are counted from Prometheus' own samples: for each scrape Prometheus made after
the warm-up (each raw sample of ``up``), a healthy checkpoint has a gap when that scrape
stored no ``statekit_checkpoint_up`` sample of it with the value 1 — the scrape failed, the
series was missing, or it said 0. Samples of one scrape share one timestamp, which is what
matches them.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import urllib.error
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from soak_http import OPENER

DOWN_LINE = re.compile(r"\bdown \(([\w-]+)\)")
"""The exporter's line for a checkpoint going down: ``… down (REASON): URL: message``."""
UP_AGAIN_LINE = re.compile(r"\bup again\b")


@dataclass
class Seen:
    """One checkpoint in one answer."""

    up: float | None = None
    reason: str = ""
    verdict: str = ""
    last_batch: float | None = None


def parse(text: str) -> dict[str, Seen]:
    """Each checkpoint label's state in one exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    seen: dict[str, Seen] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            label = sample.labels.get("checkpoint")
            if label is None:
                continue
            state = seen.setdefault(label, Seen())
            if sample.name == "statekit_checkpoint_up":
                state.up = sample.value
                state.reason = sample.labels.get("reason", state.reason)
            elif sample.name == "statekit_restart_verdict" and sample.value == 1:
                state.verdict = sample.labels.get("verdict", "")
            elif sample.name == "statekit_last_committed_batch":
                state.last_batch = sample.value
            elif "reason" in sample.labels and not state.reason:
                state.reason = sample.labels["reason"]
    return seen


@dataclass
class Scraper:
    """Scrapes ``url`` every ``interval_s`` in a thread until stopped."""

    url: str
    interval_s: float = 2.0
    timeout_s: float = 30.0
    statuses: Counter[str] = field(default_factory=Counter)
    """Status code (as text) or error kind → answers."""
    seconds: list[float] = field(default_factory=list)
    latest: dict[str, Seen] = field(default_factory=dict)
    first_batch: dict[str, float] = field(default_factory=dict)
    """Growing checkpoints: the first last-committed batch seen for each label."""
    ups: Counter[str] = field(default_factory=Counter)
    """Checkpoint label → answers in which it was up (after ``counting`` starts)."""
    downs: Counter[str] = field(default_factory=Counter)
    answers: int = 0
    counting: bool = False
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-scraper", daemon=True)

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 5)

    def scrape_once(self) -> None:
        started = time.monotonic()
        try:
            with OPENER.open(self.url, timeout=self.timeout_s) as answer:
                status, body = str(answer.status), answer.read().decode()
        except urllib.error.HTTPError as failure:
            status, body = str(failure.code), ""
        except (OSError, ValueError) as failure:
            status, body = f"error: {type(failure).__name__}", ""
            if len(self.errors) < 20:
                self.errors.append(f"{failure}")
        self.seconds.append(time.monotonic() - started)
        self.statuses[status] += 1
        if status != "200":
            return
        seen = parse(body)
        self.latest = seen
        for label, state in seen.items():
            if state.last_batch is not None:
                self.first_batch.setdefault(label, state.last_batch)
        if self.counting:
            self.answers += 1
            for label, state in seen.items():
                (self.ups if state.up == 1 else self.downs)[label] += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self.scrape_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.seconds)
        return {"statuses": dict(self.statuses),
                "http_5xx": sum(n for s, n in self.statuses.items() if s.startswith("5")),
                "failed": sum(n for s, n in self.statuses.items() if s != "200"),
                "answers": sum(self.statuses.values()),
                "p50_s": round(ordered[len(ordered) // 2], 3) if ordered else None,
                "max_s": round(ordered[-1], 3) if ordered else None,
                "errors": self.errors[:5]}


def query(base: str, promql: str, at: float) -> list[dict[str, Any]]:
    """An instant query (range vectors give raw samples)."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": at})
    with OPENER.open(url, timeout=60) as answer:
        data = json.loads(answer.read())
    if data.get("status") != "success":
        raise RuntimeError(f"Prometheus: {promql}: {data}")
    return list(data["data"]["result"])


def _stamp(value: Any) -> int:
    return round(float(value) * 1000)


def prometheus_view(base: str, job: str, since: float, until: float,
                    healthy: list[str]) -> dict[str, Any]:
    """Scrapes Prometheus made in [since, until], and each healthy label's gaps in them."""
    window = max(1, math.ceil(until - since))
    ups = query(base, f'up{{job="{job}"}}[{window}s]', until)
    scrapes = [(_stamp(t), float(v)) for series in ups for t, v in series.get("values", [])]
    samples = query(base, f'scrape_samples_scraped{{job="{job}"}}[{window}s]', until)
    counts = [float(v) for series in samples for _, v in series.get("values", [])]
    stored = query(base, f"statekit_checkpoint_up[{window}s]", until)
    good: dict[str, set[int]] = {}
    for series in stored:
        label = series["metric"].get("checkpoint", "")
        good.setdefault(label, set()).update(
            _stamp(t) for t, v in series.get("values", []) if float(v) == 1)
    times = [t for t, _ in scrapes]
    gaps = {label: sum(1 for t in times if t not in good.get(label, set()))
            for label in healthy}
    return {"scrapes": len(scrapes), "up": sum(1 for _, v in scrapes if v == 1),
            "samples_min": min(counts) if counts else None,
            "samples_max": max(counts) if counts else None, "gaps": gaps}


def transitions(log: str) -> dict[str, Any]:
    """The exporter's failure-transition lines (one per change, never one per scrape)."""
    lines = [line for line in log.splitlines()
             if DOWN_LINE.search(line) or UP_AGAIN_LINE.search(line)]
    reasons: Counter[str] = Counter()
    for line in lines:
        if found := DOWN_LINE.search(line):
            reasons[found.group(1)] += 1
    return {"down": sum(reasons.values()),
            "up_again": sum(1 for line in lines if UP_AGAIN_LINE.search(line)),
            "down_by_reason": dict(reasons), "first_lines": lines[:12]}
