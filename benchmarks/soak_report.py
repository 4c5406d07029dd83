"""The soak's bounds, and its results as a markdown table.

Kept apart from the run so that the script and the test judge the same numbers by the same
rules; only the resource bound differs with the run's length (:class:`Bounds`).

What a pass means: no healthy checkpoint's series ever missing from Prometheus after the
warm-up, no 5xx and no failed answer, no traceback in any service's output, every checkpoint
showing what it should (faulty ones ``up 0`` with a reason, damaged ones the verdict
will-not-restart, healthy ones ``up 1``), growing checkpoints followed, every browser visit
served and its app ended, each service's process tree as large at the end as after the
warm-up (RSS, file descriptors, threads, processes), and each service wholly gone within
seconds of SIGTERM with no process left behind.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from soak_fleet import ANY, DOWN, UP, WILL_NOT_RESTART


@dataclass(frozen=True)
class Bounds:
    growth: float = 0.10
    """RSS, file descriptors and threads at the end: at most this share above the start."""
    extra_fds: int = 0
    extra_threads: int = 0
    """Absolute slack on top of ``growth`` (the 1-minute test: see tests/soak/test_soak.py)."""
    extra_processes: int = 0
    exit_s: float = 5.0
    """Every process of a service gone within this long after SIGTERM."""
    min_browser_cycles: int = 20
    growth_lag_batches: int = 3
    """A growing checkpoint's last batch in the exporter's last answer: at most this many
    behind the last one written (the cache and the scrape interval delay it)."""


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    bound: str
    ok: bool


def _limit(start: float, share: float, extra: float) -> float:
    return start * (1 + share) + extra


def _seen_ok(state: dict[str, Any]) -> bool:
    expect = state["expect"]
    if expect == UP:
        return bool(state["up"] == 1)
    if expect == DOWN:
        return bool(state["up"] == 0 and state["reason"])
    if expect == WILL_NOT_RESTART:
        return bool(state["up"] == 1 and state["verdict"] == "will-not-restart")
    return bool(expect == ANY)


def checks(result: dict[str, Any], bounds: Bounds) -> list[Check]:
    found: list[Check] = []

    def add(name: str, value: object, bound: str, ok: bool) -> None:
        found.append(Check(name, str(value), bound, bool(ok)))

    prometheus = result.get("prometheus", {})
    gaps = prometheus.get("gaps")
    if gaps is None:
        add("Prometheus record", prometheus.get("error", "missing"), "readable", False)
    else:
        worst = [f"{n}: {g}" for n, g in sorted(gaps.items(), key=lambda x: -x[1]) if g][:3]
        add("series gaps, healthy+growing (Prometheus)",
            f"{sum(gaps.values())} in {prometheus['scrapes']} scrapes"
            + (f" ({'; '.join(worst)})" if worst else ""), "0", sum(gaps.values()) == 0)
    scraper = result.get("scraper", {})
    add("HTTP 5xx (own scrapes)", scraper.get("http_5xx"), "0", scraper.get("http_5xx") == 0)
    add("failed answers (own scrapes)",
        f"{scraper.get('failed')} of {scraper.get('answers')}", "0", scraper.get("failed") == 0)
    wrong = [f"{name}: {_shown(state)} (expected {state['expect']})"
             for name, state in result.get("checkpoints", {}).items() if not _seen_ok(state)]
    add("checkpoints showing what they should", f"{len(wrong)} wrong" +
        (f": {'; '.join(wrong[:4])}" if wrong else ""), "0 wrong", not wrong)
    add("warm-up: every healthy checkpoint up", result.get("warmup", {}).get("all_healthy_up"),
        "True", result.get("warmup", {}).get("all_healthy_up"))
    for name, grown in result.get("growing", {}).items():
        written, first, last = grown["written"], grown["first_seen"], grown["last_seen"]
        followed = (last is not None and first is not None and last > first and written
                    is not None and last >= written - bounds.growth_lag_batches)
        add(f"growth followed: {name}", f"batch {first} → {last} (written {written})",
            f"moves, ≥ written − {bounds.growth_lag_batches}", followed)
    errors = {n: c["errors"] for n, c in result.get("churn", {}).items() if c["errors"]}
    add("harness churn errors", sum(len(e) for e in errors.values()) or 0, "0", not errors)
    cycles = result.get("browser", {}).get("cycles", [])
    served = sum(1 for c in cycles if c["ok"])
    add("browser cycles served (text shown, keys answered)", f"{served} of {len(cycles)}",
        f"all, ≥ {bounds.min_browser_cycles}",
        served == len(cycles) and len(cycles) >= bounds.min_browser_cycles)
    lingering = sum(1 for c in cycles if c["settled_s"] is None)
    add("browser tabs whose app outlived them (15 s)", lingering, "0", lingering == 0)
    add("tmux TUI shows the fleet at the end", result.get("tui_screen", {}).get("fleet_shown"),
        "True", result.get("tui_screen", {}).get("fleet_shown"))
    for name, service in result.get("services", {}).items():
        add(f"{name}: running until the end", service["alive_at_end"], "True",
            service["alive_at_end"])
        add(f"{name}: tracebacks", service["tracebacks"], "0", service["tracebacks"] == 0)
        start, end = service["start"], service["end"]
        for key, extra in (("rss_mb", 0.0), ("fds", bounds.extra_fds),
                           ("threads", bounds.extra_threads)):
            limit = _limit(start[key], bounds.growth, extra)
            add(f"{name}: {key} end vs start", f"{start[key]} → {end[key]}",
                f"≤ {limit:.1f}", end[key] <= limit)
        add(f"{name}: processes end vs start", f"{start['processes']} → {end['processes']}",
            f"≤ {start['processes'] + bounds.extra_processes}",
            end["processes"] <= start["processes"] + bounds.extra_processes)
        exit_s = service["exit_s"]
        add(f"{name}: all processes gone after SIGTERM",
            "never" if exit_s is None else f"{exit_s:.2f} s",
            f"≤ {bounds.exit_s:g} s", exit_s is not None and exit_s <= bounds.exit_s)
        add(f"{name}: survivors", len(service["survivors"]) or 0, "0",
            not service["survivors"])
    return found


def _shown(state: dict[str, Any]) -> str:
    up = "?" if state["up"] is None else f"{state['up']:g}"
    return f"up {up}" + (f" {state['reason']}" if state["reason"] else "") + (
        f" {state['verdict']}" if state["verdict"] else "")


def failed(found: list[Check]) -> list[Check]:
    return [check for check in found if not check.ok]


def _fmt(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:g}"


def markdown(result: dict[str, Any], found: list[Check]) -> str:
    """The whole report: the run, the fleet by kind, each service, every check."""
    config = result["config"]
    fleet = result.get("fleet", [])
    prometheus = result.get("prometheus", {})
    scraper = result.get("scraper", {})
    lines = [f"statekit soak: {config['seconds'] / 60:g} min, {len(fleet)} checkpoints "
             f"({sum(1 for e in fleet if e['where'] == 's3')} on S3), warm-up "
             f"{result.get('warmup', {}).get('seconds', '–')} s, setup "
             f"{result.get('setup_s', '–')} s", ""]
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    lines += ["| scrapes | answered (up=1) | samples per scrape | own scrapes | own p50 / max s "
              "| status codes |", "|---:|---:|---|---:|---|---|",
              f"| {prometheus.get('scrapes', '–')} | {prometheus.get('up', '–')} | "
              f"{_fmt(prometheus.get('samples_min'))}–{_fmt(prometheus.get('samples_max'))} | "
              f"{scraper.get('answers', '–')} | {scraper.get('p50_s', '–')} / "
              f"{scraper.get('max_s', '–')} | "
              f"{', '.join(f'{k}: {v}' for k, v in scraper.get('statuses', {}).items())} |", ""]
    lines += ["| kind | where | count | expected | shown at the end |", "|---|---|---:|---|---|"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for state in result.get("checkpoints", {}).values():
        groups.setdefault((state["kind"], state["where"]), []).append(state)
    for (kind, where), states in groups.items():
        shown = Counter(_shown(s) for s in states)
        lines.append(f"| {kind} | {where} | {len(states)} | {states[0]['expect']} | "
                     + ", ".join(f"{n}× {text}" for text, n in shown.most_common()) + " |")
    lines += ["", "| service | RSS MB start → end (peak) | fds | threads | processes "
              "(peak) | exit after SIGTERM | survivors | tracebacks |",
              "|---|---|---|---|---|---:|---:|---:|"]
    for name, s in result.get("services", {}).items():
        a, b, peak = s["start"], s["end"], s["peak"]
        exit_text = "never" if s["exit_s"] is None else f"{s['exit_s']:.2f} s"
        lines.append(
            f"| {name} | {a['rss_mb']} → {b['rss_mb']} ({peak['rss_mb']}) | {a['fds']} → "
            f"{b['fds']} | {a['threads']} → {b['threads']} | {a['processes']} → "
            f"{b['processes']} ({peak['processes']:g}) | {exit_text} | "
            f"{len(s['survivors'])} | {s['tracebacks']} |")
    transitions = result.get("transitions", {})
    reasons = ", ".join(f"{k}: {v}" for k, v in transitions.get("down_by_reason", {}).items())
    lines += ["", f"exporter's failure-transition lines: {transitions.get('down', 0)} down "
                  f"({reasons or '–'}), {transitions.get('up_again', 0)} up again", ""]
    lines += ["| check | value | bound | ok |", "|---|---|---|---|"]
    lines += [f"| {c.name} | {c.value} | {c.bound} | {'yes' if c.ok else '**NO**'} |"
              for c in found]
    return "\n".join(lines)
