"""Replay a landing folder through the state machine with Spark's micro-batch semantics.

No JVM: this is what the Spark query *should* do, batch by batch, so the generator, its ground
truth and the state machine can be checked against each other in milliseconds, and the real
Spark run can be checked against this.

The semantics mirrored (FlatMapGroupsWithStateExec with EventTimeTimeout, one file per batch):

* batch *b* runs with the watermark computed after batch *b−1*: ``max event time − delay``;
* input rows at or behind that watermark are dropped;
* keys with data are called with their events; keys without data whose timeout is strictly
  behind the watermark are called with ``hasTimedOut``;
* after the last file, one no-data batch runs with the final watermark.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from statekit.reference_pipeline.generator import EVENTS_DIR
from statekit.reference_pipeline.state_machine import (
    DEFAULT_RULES,
    Event,
    EventType,
    Output,
    Rules,
    UserSession,
    deadline,
    expire,
    process,
)


@dataclass
class Simulation:
    outputs: list[Output] = field(default_factory=list)
    state: dict[str, UserSession] = field(default_factory=dict)
    keys_per_batch: list[int] = field(default_factory=list)
    dropped_late: list[str] = field(default_factory=list)
    watermark_ms: int = 0


def _file_events(path: Path) -> list[tuple[str, Event]]:
    events = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        ms = int(datetime.fromisoformat(record["event_time"].replace("Z", "+00:00"))
                 .timestamp() * 1000)
        events.append((record["user_id"], Event(EventType(record["event_type"]), ms,
                                                 record["event_id"], record["amount"] or 0.0,
                                                 record["country"] or "")))
    return events


def simulate(landing: Path, delay_ms: int = 5 * 60_000, rules: Rules = DEFAULT_RULES,
             files: int | None = None) -> Simulation:
    """Run the first ``files`` batch files (all by default) plus the final no-data batch."""
    sim = Simulation()
    max_event_ms = 0
    paths = sorted((Path(landing) / EVENTS_DIR).glob("batch-*.jsonl"))[:files]
    for path in [*paths, None]:
        by_user: dict[str, list[Event]] = defaultdict(list)
        if path is not None:
            for user, event in _file_events(path):
                if sim.watermark_ms and event.event_ms <= sim.watermark_ms:
                    sim.dropped_late.append(event.event_id)
                    continue
                by_user[user].append(event)
                max_event_ms = max(max_event_ms, event.event_ms)
        for user in sorted(by_user):
            step = process(user, sim.state.get(user), by_user[user], rules)
            _apply(sim, user, step)
        for user in sorted(set(sim.state) - set(by_user)):
            session = sim.state[user]
            if deadline(session, rules)[0] < sim.watermark_ms:
                _apply(sim, user, expire(user, session, rules))
        sim.keys_per_batch.append(len(sim.state))
        sim.watermark_ms = max(sim.watermark_ms, max_event_ms - delay_ms)
    return sim


def _apply(sim: Simulation, user: str, step) -> None:
    sim.outputs.extend(step.outputs)
    if step.state is None:
        sim.state.pop(user, None)
    else:
        sim.state[user] = step.state
