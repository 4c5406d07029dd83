"""The leaky variant: the same detector written the way the seeds warn against.

It exists so statekit's growth detection has a *real* checkpoint with unbounded state to find.
Every anti-pattern here is deliberate:

* no timeout — a user seen once keeps a state row forever;
* ``remove()`` is never called — not even after a confirmed case;
* the state keeps a list of *every* transaction (as a JSON string), so each row grows with the
  user's history, and the velocity check rescans it all on every batch;
* ``auth_ok`` and ``case_closed`` are ignored.

Pure Python, no Spark: ``statekit.reference_pipeline.pipeline`` adapts it to applyInPandasWithState.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

from statekit.reference_pipeline.state_machine import DEFAULT_RULES, Alert, Event, EventType, Rules

LEAKY_STATE_SCHEMA_DDL = "txn_count LONG, total_amount DOUBLE, txns_json STRING, alerted BOOLEAN"


@dataclass(frozen=True)
class LeakyState:
    """Grows with every transaction; never removed."""

    txn_count: int
    total_amount: float
    txns: tuple[tuple[int, float, str], ...]
    """(event_ms, amount, country) of every transaction ever seen, sorted by time."""
    alerted: bool = False

    def to_row(self) -> tuple:
        return (self.txn_count, self.total_amount, json.dumps([list(t) for t in self.txns]),
                self.alerted)

    @classmethod
    def from_row(cls, row: Iterable) -> LeakyState:
        count, total, txns_json, alerted = tuple(row)
        txns = tuple((int(ms), float(a), str(c)) for ms, a, c in json.loads(txns_json or "[]"))
        return cls(int(count), float(total), txns, bool(alerted))


def _first_confirmed_burst(txns, rules: Rules) -> Alert | None:
    """Scan the whole history for a velocity burst followed by a quick country change."""
    start = 0
    running = 0.0
    for end, (ms, amount, _) in enumerate(txns):
        running += amount
        while txns[start][0] <= ms - rules.velocity_window_ms:
            running -= txns[start][1]
            start += 1
        count = end - start + 1
        if count < rules.velocity_max_txns and running < rules.velocity_max_amount:
            continue
        if end + 1 < len(txns):
            next_ms, _, next_country = txns[end + 1]
            if next_country != txns[end][2] and next_ms - ms <= rules.confirm_window_ms:
                reason = "velocity_count" if count >= rules.velocity_max_txns else "velocity_amount"
                return Alert(user_id="", alert_ms=next_ms, session_start_ms=txns[0][0],
                             reason=f"{reason}+country_change", window_txns=count,
                             window_amount=round(running, 2), from_country=txns[end][2],
                             to_country=next_country)
    return None


def process_leaky(
    user_id: str,
    state: LeakyState | None,
    events: Iterable[Event],
    rules: Rules = DEFAULT_RULES,
) -> tuple[LeakyState, tuple[Alert, ...]]:
    """Append this batch's transactions to the user's history and alert (once) on fraud."""
    new = [(e.event_ms, e.amount, e.country) for e in events if e.event_type is EventType.TXN]
    old = state or LeakyState(0, 0.0, ())
    txns = tuple(sorted((*old.txns, *new)))
    updated = LeakyState(
        txn_count=old.txn_count + len(new),
        total_amount=old.total_amount + sum(a for _, a, _ in new),
        txns=txns,
        alerted=old.alerted,
    )
    if updated.alerted:
        return updated, ()
    alert = _first_confirmed_burst(txns, rules)
    if alert is None:
        return updated, ()
    alert = replace(alert, user_id=user_id)
    return LeakyState(updated.txn_count, updated.total_amount, txns, True), (alert,)
