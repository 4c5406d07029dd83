"""The leaky variant really leaks: state grows with every transaction and is never removed."""

from __future__ import annotations

from statekit.reference_pipeline.leaky import LeakyState, process_leaky
from statekit.reference_pipeline.state_machine import MINUTE_MS, Event, EventType

T0 = 1_767_600_000_000


def txn(minute: float, amount: float = 50.0, country: str = "DE") -> Event:
    ms = T0 + int(minute * MINUTE_MS)
    return Event(EventType.TXN, ms, f"t{ms}", amount, country)


def test_history_grows_without_bound_and_ignores_closing_events():
    state = None
    for day in range(30):
        batch = [txn(day * 1440 + 1, 10), Event(EventType.CASE_CLOSED, T0 + day * 1440 * MINUTE_MS)]
        state, _ = process_leaky("u1", state, batch)
    assert state.txn_count == 30
    assert len(state.txns) == 30
    assert len(state.to_row()[2]) > 30 * 10  # the JSON list grows with history
    assert LeakyState.from_row(state.to_row()) == state


def test_alerts_once_on_burst_followed_by_country_change():
    burst = [txn(k * 0.5, 100) for k in range(5)] + [txn(3.5, 900, "BR")]
    state, alerts = process_leaky("u1", None, burst)
    assert len(alerts) == 1
    assert alerts[0].user_id == "u1"
    assert alerts[0].to_country == "BR"
    assert state.alerted
    state, again = process_leaky("u1", state, [txn(5, 10, "US")])
    assert again == ()


def test_no_alert_without_confirmation():
    _, alerts = process_leaky("u1", None, [txn(k * 0.5, 100) for k in range(6)])
    assert alerts == ()
