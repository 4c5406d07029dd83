"""Every transition of the fraud/session state machine, without Spark."""

from __future__ import annotations

import json

import pytest

from statekit.reference_pipeline.state_machine import (
    DEFAULT_RULES,
    HOUR_MS,
    MINUTE_MS,
    Alert,
    CloseReason,
    Event,
    EventType,
    Phase,
    SessionSummary,
    UserSession,
    deadline,
    expire,
    process,
)

T0 = 1_767_600_000_000  # an arbitrary event-time origin (ms)
USER = "u1"


def txn(minute: float, amount: float = 50.0, country: str = "DE", eid: str = "") -> Event:
    ms = T0 + int(minute * MINUTE_MS)
    return Event(EventType.TXN, ms, eid or f"t{ms}", amount, country)


def auth(minute: float) -> Event:
    return Event(EventType.AUTH_OK, T0 + int(minute * MINUTE_MS), f"a{minute}")


def case_closed(minute: float) -> Event:
    return Event(EventType.CASE_CLOSED, T0 + int(minute * MINUTE_MS), f"c{minute}")


def feed(*batches: list[Event], state: UserSession | None = None):
    """Run several micro-batches; return the final step and all outputs."""
    outputs = []
    step = None
    for events in batches:
        step = process(USER, state, events)
        state = step.state
        outputs.extend(step.outputs)
    return step, outputs


def burst(start_minute: float, n: int = 5, gap_s: int = 40, amount: float = 100.0):
    return [txn(start_minute + k * gap_s / 60, amount) for k in range(n)]


# -- Inactive -----------------------------------------------------------------------------

def test_first_transaction_opens_a_watching_session():
    step = process(USER, None, [txn(0, 42.5)])
    assert step.state is not None
    assert step.state.phase is Phase.WATCHING
    assert (step.state.txn_count, step.state.total_amount) == (1, 42.5)
    assert step.state.session_start_ms == step.state.last_event_ms == T0
    assert step.outputs == ()
    assert step.timeout_ms == T0 + 30 * MINUTE_MS


@pytest.mark.parametrize("event", [auth(0), case_closed(0)])
def test_non_transactions_do_not_create_state(event):
    step = process(USER, None, [event])
    assert step.state is None
    assert step.outputs == ()
    assert step.timeout_ms is None


# -- Watching -----------------------------------------------------------------------------

def test_watching_tracks_count_total_and_window():
    step, outputs = feed([txn(0, 10), txn(3, 20)], [txn(6, 30.25)])
    state = step.state
    assert state.phase is Phase.WATCHING
    assert state.txn_count == 3
    assert state.total_amount == pytest.approx(60.25)
    assert [a for _, a in state.window] == [10, 20, 30.25]
    assert state.last_event_ms == T0 + 6 * MINUTE_MS
    assert outputs == []


def test_window_forgets_transactions_older_than_ten_minutes():
    step, _ = feed([txn(0), txn(1), txn(2), txn(3)], [txn(12.5)])
    assert step.state.phase is Phase.WATCHING
    assert len(step.state.window) == 2  # minutes 3 and 12.5


def test_five_transactions_in_ten_minutes_make_the_user_suspicious():
    step, outputs = feed(burst(0, n=4), [txn(4)])
    assert step.state.phase is Phase.SUSPICIOUS
    assert step.state.suspicious_reason == "velocity_count"
    assert step.state.suspicious_since_ms == T0 + 4 * MINUTE_MS
    assert outputs == []


def test_four_transactions_stay_watching():
    step, _ = feed(burst(0, n=4))
    assert step.state.phase is Phase.WATCHING


def test_spending_5000_in_ten_minutes_makes_the_user_suspicious():
    step, _ = feed([txn(0, 2600), txn(3, 2400)])
    assert step.state.phase is Phase.SUSPICIOUS
    assert step.state.suspicious_reason == "velocity_amount"


def test_4999_stays_watching():
    step, _ = feed([txn(0, 2600), txn(3, 2399)])
    assert step.state.phase is Phase.WATCHING


def test_window_is_bounded_even_for_a_long_session():
    state = None
    for k in range(200):  # one purchase every 4 minutes for 13 hours: never suspicious
        state = process(USER, state, [txn(k * 4, 10)]).state
    assert state.phase is Phase.WATCHING
    assert state.txn_count == 200
    assert len(state.window) <= DEFAULT_RULES.velocity_max_txns
    assert len(state.to_row()) == 12  # a fixed number of scalar fields


def test_events_within_a_batch_are_processed_in_event_time_order():
    events = burst(0, n=5)
    step_sorted = process(USER, None, events)
    step_shuffled = process(USER, None, list(reversed(events)))
    assert step_sorted == step_shuffled


# -- Suspicious ---------------------------------------------------------------------------

def suspicious_state() -> UserSession:
    step, _ = feed(burst(0, n=5, gap_s=40))  # suspicious at minute 2:40
    assert step.state.phase is Phase.SUSPICIOUS
    return step.state


def test_country_change_within_two_minutes_flags_and_alerts_once():
    state = suspicious_state()
    step = process(USER, state, [txn(4.0, 900, "BR"), txn(4.5, 300, "BR")])
    assert step.state.phase is Phase.FLAGGED
    alerts = [o for o in step.outputs if isinstance(o, Alert)]
    assert len(alerts) == 1
    alert = alerts[0]
    assert (alert.from_country, alert.to_country) == ("DE", "BR")
    assert alert.reason == "velocity_count+country_change"
    assert alert.alert_ms == T0 + 4 * MINUTE_MS
    assert alert.window_txns == 5
    assert step.state.flagged_at_ms == alert.alert_ms
    assert step.state.txn_count == 7


def test_country_change_after_more_than_two_minutes_does_not_confirm():
    state = suspicious_state()  # last txn at 2:40
    step = process(USER, state, [txn(4.75, 900, "BR")])  # 2:05 later
    assert step.state.phase is Phase.SUSPICIOUS
    assert step.outputs == ()


def test_same_country_does_not_confirm():
    step = process(USER, suspicious_state(), [txn(3.0, 500, "DE")])
    assert step.state.phase is Phase.SUSPICIOUS


def test_auth_ok_within_two_minutes_clears_suspicion():
    state = suspicious_state()
    step = process(USER, state, [auth(3.5)])
    assert step.state.phase is Phase.WATCHING
    assert step.state.window == ()
    assert step.state.suspicious_since_ms == -1
    assert step.state.last_event_ms == T0 + int(3.5 * MINUTE_MS)
    # A later foreign purchase is no longer a confirmation.
    step = process(USER, step.state, [txn(4.0, 100, "BR")])
    assert step.state.phase is Phase.WATCHING
    assert step.outputs == ()


def test_auth_ok_after_two_minutes_does_not_clear():
    step = process(USER, suspicious_state(), [auth(5.0)])  # 2:20 after becoming suspicious
    assert step.state.phase is Phase.SUSPICIOUS


def test_suspicious_session_times_out_after_inactivity():
    state = suspicious_state()
    assert deadline(state) == (state.last_event_ms + 30 * MINUTE_MS, CloseReason.INACTIVITY)
    step = expire(USER, state)
    assert step.state is None
    (summary,) = step.outputs
    assert isinstance(summary, SessionSummary)
    assert summary.final_phase is Phase.SUSPICIOUS
    assert summary.close_reason is CloseReason.INACTIVITY
    assert summary.closed_ms == state.last_event_ms + 30 * MINUTE_MS
    assert not summary.alerted


# -- Flagged ------------------------------------------------------------------------------

def flagged_state() -> UserSession:
    step = process(USER, suspicious_state(), [txn(3.5, 900, "BR")])
    assert step.state.phase is Phase.FLAGGED
    return step.state


def test_flagged_keeps_state_for_24_hours():
    state = flagged_state()
    assert deadline(state) == (state.flagged_at_ms + 24 * HOUR_MS, CloseReason.FLAG_EXPIRED)
    # An hour of silence does not close a flagged session.
    step = process(USER, state, [txn(3.5 + 60, 10, "BR")])
    assert step.state.phase is Phase.FLAGGED
    assert step.outputs == ()


def test_case_closed_removes_a_flagged_session():
    state = flagged_state()
    step = process(USER, state, [case_closed(40)])
    assert step.state is None
    (summary,) = step.outputs
    assert summary.close_reason is CloseReason.CASE_CLOSED
    assert summary.final_phase is Phase.FLAGGED
    assert summary.closed_ms == T0 + 40 * MINUTE_MS
    assert summary.alerted
    assert summary.txn_count == 6


def test_case_closed_is_ignored_unless_flagged():
    state = suspicious_state()
    step = process(USER, state, [case_closed(5)])
    assert step.state == state


def test_flag_hold_expiry_removes_state():
    state = flagged_state()
    step = expire(USER, state)
    assert step.state is None
    assert step.outputs[0].close_reason is CloseReason.FLAG_EXPIRED
    assert step.outputs[0].closed_ms == state.flagged_at_ms + 24 * HOUR_MS


def test_auth_ok_does_not_unflag():
    step = process(USER, flagged_state(), [auth(4)])
    assert step.state.phase is Phase.FLAGGED


# -- timeouts, the safety cap, and batch-boundary independence -------------------------------

def test_watching_session_times_out_and_is_removed():
    step = process(USER, None, [txn(0, 10), txn(5, 15)])
    closed = expire(USER, step.state)
    assert closed.state is None
    (summary,) = closed.outputs
    assert (summary.txn_count, summary.total_amount) == (2, 25)
    assert summary.final_phase is Phase.WATCHING
    assert summary.closed_ms == T0 + 35 * MINUTE_MS
    assert summary.session_start_ms == T0


def test_safety_cap_ends_a_session_that_never_goes_quiet():
    state = None
    for k in range(48 * 3 + 1):  # a purchase every 20 minutes for 48 hours
        state = process(USER, state, [txn(k * 20, 10)]).state
    end, reason = deadline(state)
    assert reason is CloseReason.SAFETY_CAP
    assert end == T0 + 48 * HOUR_MS
    closed = expire(USER, state)
    assert closed.state is None
    assert closed.outputs[0].close_reason is CloseReason.SAFETY_CAP


def test_safety_cap_also_bounds_a_flagged_session():
    state = flagged_state()
    state = type(state)(**{**state.__dict__, "session_start_ms": T0 - 40 * HOUR_MS})
    assert deadline(state) == (T0 + 8 * HOUR_MS, CloseReason.SAFETY_CAP)


def test_event_after_the_deadline_closes_the_old_session_first():
    """Same result whether the timeout fired in a batch between or not (exactly-once)."""
    first = process(USER, None, [txn(0, 10)])
    late_txn = txn(31, 20)
    # Path A: the timeout fired in a no-data batch, then the new event arrived.
    timed_out = expire(USER, first.state)
    path_a = process(USER, timed_out.state, [late_txn])
    outputs_a = list(timed_out.outputs) + list(path_a.outputs)
    # Path B: no batch in between; the new event arrives while the old state still exists.
    path_b = process(USER, first.state, [late_txn])
    assert outputs_a == list(path_b.outputs)
    assert path_a.state == path_b.state
    assert path_b.state.session_start_ms == late_txn.event_ms
    assert path_b.outputs[0].closed_ms == T0 + 30 * MINUTE_MS


def test_event_exactly_at_the_deadline_still_belongs_to_the_session():
    first = process(USER, None, [txn(0, 10)])
    step = process(USER, first.state, [txn(30, 20)])
    assert step.outputs == ()
    assert step.state.txn_count == 2


def test_out_of_order_event_extends_the_session_backwards():
    first = process(USER, None, [txn(5, 10)])
    step = process(USER, first.state, [txn(3, 20)])
    assert step.state.session_start_ms == T0 + 3 * MINUTE_MS
    assert step.state.last_event_ms == T0 + 5 * MINUTE_MS
    assert step.timeout_ms == T0 + 35 * MINUTE_MS


def test_every_terminal_path_removes_state():
    """Walk every close path and check the state is gone and a summary was emitted."""
    paths = {
        "inactivity": expire(USER, process(USER, None, [txn(0)]).state),
        "suspicious inactivity": expire(USER, suspicious_state()),
        "case closed": process(USER, flagged_state(), [case_closed(30)]),
        "flag expired": expire(USER, flagged_state()),
        "new session after gap": process(USER, process(USER, None, [txn(0)]).state,
                                         [case_closed(45)]),
    }
    for name, step in paths.items():
        assert step.state is None, name
        assert step.timeout_ms is None, name
        assert any(isinstance(o, SessionSummary) for o in step.outputs), name


def test_state_round_trips_through_a_spark_row():
    state = flagged_state()
    row = state.to_row()
    assert UserSession.from_row(row) == state
    assert isinstance(json.loads(row[5]), list)
