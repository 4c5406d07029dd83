"""The fraud/session state machine, per user, in pure Python (no Spark import).

Drawn the way a fraud team draws it::

    Inactive ──txn──▶ Watching ──velocity burst──▶ Suspicious ──country change ≤2 min──▶ Flagged
       ▲                 ▲                            │  (alert)                         │
       │                 └──── auth_ok ≤2 min ────────┘                                  │
       │                                                                                 │
       └── closed: 30 min event-time inactivity (Watching/Suspicious), case_closed or    ┘
           24 h hold expiry (Flagged), 48 h safety cap (any phase) — each emits a session
           summary and removes the state.

*Inactive* is the absence of state; *closed* is its removal. Every terminal path returns
``state=None`` so the Spark adapter calls ``state.remove()``: nothing lives forever.

State is bounded: scalars plus a velocity window of at most ``VELOCITY_MAX_TXNS`` entries —
once that many transactions sit in the window the user is Suspicious and the window stops
mattering, so it never needs more.

Semantics do not depend on micro-batch boundaries. A session ends at its *deadline* (last
activity + 30 min, flag time + 24 h, or start + 48 h), and an event that arrives after the
deadline first closes the old session at the deadline, exactly as the event-time timeout would
have done had a batch fallen in between. That makes a run split across restarts produce the
same output as one uninterrupted run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


class Phase(str, Enum):
    """The live phases. Inactive (no state) and closed (state removed) have no row."""

    WATCHING = "Watching"
    SUSPICIOUS = "Suspicious"
    FLAGGED = "Flagged"


class CloseReason(str, Enum):
    """Why a session ended; every one of them removes the state."""

    INACTIVITY = "inactivity"
    CASE_CLOSED = "case_closed"
    FLAG_EXPIRED = "flag_expired"
    SAFETY_CAP = "safety_cap"


class EventType(str, Enum):
    TXN = "txn"
    AUTH_OK = "auth_ok"
    CASE_CLOSED = "case_closed"


@dataclass(frozen=True)
class Rules:
    """Thresholds of the machine. The defaults are the reference pipeline's."""

    velocity_window_ms: int = 10 * MINUTE_MS
    """Sliding event-time window for velocity checks."""
    velocity_max_txns: int = 5
    """This many transactions in the window makes the user Suspicious."""
    velocity_max_amount: float = 5000.0
    """This much spent in the window makes the user Suspicious."""
    confirm_window_ms: int = 2 * MINUTE_MS
    """A country change within this time of the previous transaction confirms fraud."""
    auth_grace_ms: int = 2 * MINUTE_MS
    """An ``auth_ok`` within this time of becoming Suspicious clears the suspicion."""
    inactivity_ms: int = 30 * MINUTE_MS
    """Event-time inactivity that ends a Watching or Suspicious session."""
    flag_hold_ms: int = 24 * HOUR_MS
    """How long a Flagged session waits for ``case_closed``."""
    max_session_ms: int = 48 * HOUR_MS
    """Safety cap: no session outlives this, whatever its phase."""


DEFAULT_RULES = Rules()


@dataclass(frozen=True)
class Event:
    """One input event as the state machine needs it."""

    event_type: EventType
    event_ms: int
    event_id: str = ""
    amount: float = 0.0
    country: str = ""

    @property
    def order(self) -> tuple[int, str]:
        """Processing order within a batch: event time, then id (deterministic ties)."""
        return (self.event_ms, self.event_id)


@dataclass(frozen=True)
class UserSession:
    """The per-user state: one open session. Bounded by construction."""

    phase: Phase
    session_start_ms: int
    last_event_ms: int
    txn_count: int = 0
    total_amount: float = 0.0
    window: tuple[tuple[int, float], ...] = ()
    """(event_ms, amount) of recent transactions, sorted, at most ``velocity_max_txns``."""
    suspicious_since_ms: int = -1
    suspicious_reason: str = ""
    last_txn_ms: int = -1
    last_txn_country: str = ""
    flagged_at_ms: int = -1
    alerts: int = 0

    # -- Spark row conversion (arrays in applyInPandasWithState state fail in pyspark 4.3,
    #    so the window travels as a JSON string) -------------------------------------------
    def to_row(self) -> tuple:
        return (
            self.phase.value,
            self.session_start_ms,
            self.last_event_ms,
            self.txn_count,
            self.total_amount,
            json.dumps([[ms, amount] for ms, amount in self.window]),
            self.suspicious_since_ms,
            self.suspicious_reason,
            self.last_txn_ms,
            self.last_txn_country,
            self.flagged_at_ms,
            self.alerts,
        )

    @classmethod
    def from_row(cls, row: Iterable) -> UserSession:
        (phase, start, last, count, total, window_json, since, reason, last_txn, country,
         flagged_at, alerts) = tuple(row)
        window = tuple((int(ms), float(amount)) for ms, amount in json.loads(window_json or "[]"))
        return cls(
            phase=Phase(phase),
            session_start_ms=int(start),
            last_event_ms=int(last),
            txn_count=int(count),
            total_amount=float(total),
            window=window,
            suspicious_since_ms=int(since),
            suspicious_reason=str(reason or ""),
            last_txn_ms=int(last_txn),
            last_txn_country=str(country or ""),
            flagged_at_ms=int(flagged_at),
            alerts=int(alerts),
        )


# The same fields as ``UserSession.to_row``, as a Spark DDL schema.
STATE_SCHEMA_DDL = (
    "phase STRING, session_start_ms LONG, last_event_ms LONG, txn_count LONG, "
    "total_amount DOUBLE, window_json STRING, suspicious_since_ms LONG, "
    "suspicious_reason STRING, last_txn_ms LONG, last_txn_country STRING, "
    "flagged_at_ms LONG, alerts LONG"
)


@dataclass(frozen=True)
class Alert:
    """Emitted once when a session becomes Flagged."""

    user_id: str
    alert_ms: int
    session_start_ms: int
    reason: str
    window_txns: int
    window_amount: float
    from_country: str
    to_country: str


@dataclass(frozen=True)
class SessionSummary:
    """Emitted when a session closes, whatever the path."""

    user_id: str
    session_start_ms: int
    last_event_ms: int
    closed_ms: int
    txn_count: int
    total_amount: float
    final_phase: Phase
    close_reason: CloseReason
    alerted: bool


Output = Alert | SessionSummary


@dataclass(frozen=True)
class Step:
    """Result of feeding events (or a timeout) to the machine for one user."""

    state: UserSession | None
    """The state to keep, or None: remove it."""
    outputs: tuple[Output, ...] = field(default_factory=tuple)
    timeout_ms: int | None = None
    """The event-time timeout to register (the state's deadline); None when removed."""


def deadline(state: UserSession, rules: Rules = DEFAULT_RULES) -> tuple[int, CloseReason]:
    """When this session ends if nothing else happens, and why."""
    if state.phase is Phase.FLAGGED:
        phase_deadline = state.flagged_at_ms + rules.flag_hold_ms
        reason = CloseReason.FLAG_EXPIRED
    else:
        phase_deadline, reason = state.last_event_ms + rules.inactivity_ms, CloseReason.INACTIVITY
    safety = state.session_start_ms + rules.max_session_ms
    if safety < phase_deadline:
        return safety, CloseReason.SAFETY_CAP
    return phase_deadline, reason


def _summary(
    user_id: str, state: UserSession, closed_ms: int, reason: CloseReason
) -> SessionSummary:
    return SessionSummary(
        user_id=user_id,
        session_start_ms=state.session_start_ms,
        last_event_ms=state.last_event_ms,
        closed_ms=closed_ms,
        txn_count=state.txn_count,
        total_amount=round(state.total_amount, 2),
        final_phase=state.phase,
        close_reason=reason,
        alerted=state.alerts > 0,
    )


def _touch(state: UserSession, event_ms: int) -> UserSession:
    """Record user activity (any txn or auth_ok) in the session's time span."""
    return replace(
        state,
        session_start_ms=min(state.session_start_ms, event_ms),
        last_event_ms=max(state.last_event_ms, event_ms),
    )


def _slide(window: tuple[tuple[int, float], ...], event: Event, rules: Rules):
    entries = sorted((*window, (event.event_ms, event.amount)))
    newest = entries[-1][0]
    recent = [e for e in entries if e[0] > newest - rules.velocity_window_ms]
    return tuple(recent[-rules.velocity_max_txns:])


def _apply_txn(user_id: str, state: UserSession, event: Event, rules: Rules):
    state = _touch(state, event.event_ms)
    state = replace(state, txn_count=state.txn_count + 1,
                    total_amount=state.total_amount + event.amount)
    outputs: list[Output] = []
    if state.phase is Phase.WATCHING:
        window = _slide(state.window, event, rules)
        amount = sum(a for _, a in window)
        reason = ""
        if len(window) >= rules.velocity_max_txns:
            reason = "velocity_count"
        elif amount >= rules.velocity_max_amount:
            reason = "velocity_amount"
        state = replace(state, window=window)
        if reason:
            state = replace(state, phase=Phase.SUSPICIOUS, suspicious_since_ms=event.event_ms,
                            suspicious_reason=reason)
    elif state.phase is Phase.SUSPICIOUS:
        changed_country = bool(state.last_txn_country) and event.country != state.last_txn_country
        gap = event.event_ms - state.last_txn_ms
        if changed_country and 0 <= gap <= rules.confirm_window_ms:
            window_amount = round(sum(a for _, a in state.window), 2)
            outputs.append(Alert(
                user_id=user_id,
                alert_ms=event.event_ms,
                session_start_ms=state.session_start_ms,
                reason=f"{state.suspicious_reason}+country_change",
                window_txns=len(state.window),
                window_amount=window_amount,
                from_country=state.last_txn_country,
                to_country=event.country,
            ))
            state = replace(state, phase=Phase.FLAGGED, flagged_at_ms=event.event_ms,
                            alerts=state.alerts + 1)
    if event.event_ms >= state.last_txn_ms:
        state = replace(state, last_txn_ms=event.event_ms, last_txn_country=event.country)
    return state, outputs


def _open_session(event: Event) -> UserSession:
    return UserSession(phase=Phase.WATCHING, session_start_ms=event.event_ms,
                       last_event_ms=event.event_ms)


def process(
    user_id: str,
    state: UserSession | None,
    events: Iterable[Event],
    rules: Rules = DEFAULT_RULES,
) -> Step:
    """Feed one micro-batch of a user's events (any order) to the machine."""
    outputs: list[Output] = []
    for event in sorted(events, key=lambda e: e.order):
        if state is not None:
            end_ms, end_reason = deadline(state, rules)
            if event.event_ms > end_ms:
                outputs.append(_summary(user_id, state, end_ms, end_reason))
                state = None
        if state is None:
            if event.event_type is not EventType.TXN:
                continue  # auth_ok / case_closed with no open session: stay Inactive
            state = _open_session(event)
        if event.event_type is EventType.TXN:
            state, emitted = _apply_txn(user_id, state, event, rules)
            outputs.extend(emitted)
        elif event.event_type is EventType.AUTH_OK:
            state = _touch(state, event.event_ms)
            if (state.phase is Phase.SUSPICIOUS
                    and 0 <= event.event_ms - state.suspicious_since_ms <= rules.auth_grace_ms):
                state = replace(state, phase=Phase.WATCHING, window=(), suspicious_since_ms=-1,
                                suspicious_reason="")
        elif event.event_type is EventType.CASE_CLOSED and state.phase is Phase.FLAGGED:
            outputs.append(_summary(user_id, state, event.event_ms, CloseReason.CASE_CLOSED))
            state = None
    timeout_ms = None if state is None else deadline(state, rules)[0]
    return Step(state=state, outputs=tuple(outputs), timeout_ms=timeout_ms)


def expire(user_id: str, state: UserSession, rules: Rules = DEFAULT_RULES) -> Step:
    """The event-time timeout fired: close the session at its deadline and remove it."""
    end_ms, reason = deadline(state, rules)
    return Step(state=None, outputs=(_summary(user_id, state, end_ms, reason),))
