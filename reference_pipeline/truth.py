"""Ground truth of a landing folder: fraud labels and the session summaries to expect.

The generator records every session it made (``truth/batch-*.json``). From those records alone
— not from the state machine — this module derives what a correct pipeline must output:

* **labels**: the users the generator made fraudulent (their confirming purchase delivered);
* **expected sessions**: for each complete session, its start, last activity, transaction
  count and total, the phase it ends in and how it closes. A session closes by
  ``case_closed`` (fraud), or by inactivity when ``last activity + 30 min`` is behind the
  final watermark; otherwise it must still be open in state at the end of the run.

Only events already delivered (file index below the number of batches written) count, so
truth stays right for a landing folder that will be appended to later.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from statekit.reference_pipeline.generator import TRUTH_DIR, read_manifest
from statekit.reference_pipeline.state_machine import DEFAULT_RULES, Rules

PHASE_BY_PATTERN = {
    "normal": "Watching",
    "burst_cleared": "Watching",
    "burst_unconfirmed": "Suspicious",
    "fraud": "Flagged",
}


@dataclass(frozen=True)
class ExpectedSession:
    user_id: str
    pattern: str
    session_start_ms: int
    last_event_ms: int
    txn_count: int
    total_amount: float
    final_phase: str
    close_reason: str | None
    """``case_closed`` or ``inactivity``; None when the session must still be open."""
    closed_ms: int | None


def _truth_records(landing: Path) -> Iterator[dict]:
    for path in sorted((Path(landing) / TRUTH_DIR).glob("batch-*.json")):
        yield json.loads(path.read_text())


def delivered_batches(landing: Path) -> int:
    manifest = read_manifest(Path(landing))
    return 0 if manifest is None else manifest[1]


def sessions(landing: Path) -> Iterator[tuple[dict, list[dict]]]:
    """Each generated session with its delivered events (possibly none yet)."""
    delivered = delivered_batches(landing)
    for record in _truth_records(landing):
        for session in record["sessions"]:
            yield session, [e for e in session["events"] if e["file"] < delivered]


def fraud_labels(landing: Path) -> dict[str, list[str]]:
    """Fraudulent users → their fraud session ids, counting only delivered confirmations."""
    labels: dict[str, list[str]] = {}
    for session, events in sessions(landing):
        if session["pattern"] != "fraud":
            continue
        confirmed = len([e for e in events if e["type"] == "txn"]) == len(
            [e for e in session["events"] if e["type"] == "txn"])
        if confirmed:
            labels.setdefault(session["user_id"], []).append(session["session_id"])
    return labels


def all_users(landing: Path) -> set[str]:
    """Every user with a delivered session (late events excluded)."""
    return {s["user_id"] for s, events in sessions(landing) if events}


def max_event_ms(landing: Path) -> int:
    """The largest event time delivered: what Spark's watermark follows."""
    return max((e["ms"] for _, events in sessions(landing) for e in events), default=0)


def expected_sessions(
    landing: Path, final_watermark_ms: int, rules: Rules = DEFAULT_RULES
) -> list[ExpectedSession]:
    """What the normal pipeline must have emitted (closed) or still hold (open)."""
    expected = []
    for session, events in sessions(landing):
        if not events:
            continue
        activity = [e for e in events if e["type"] in ("txn", "auth_ok")]
        txns = [e for e in events if e["type"] == "txn"]
        complete = len(events) == len(session["events"])
        case = [e for e in events if e["type"] == "case_closed"]
        last = max(e["ms"] for e in activity)
        if case:
            reason, closed = "case_closed", case[0]["ms"]
        elif session["pattern"] != "fraud" and last + rules.inactivity_ms < final_watermark_ms:
            reason, closed = "inactivity", last + rules.inactivity_ms
        else:
            reason, closed = None, None
        if reason is not None and not complete:
            raise ValueError(f"session {session['session_id']} closes before all its events")
        expected.append(ExpectedSession(
            user_id=session["user_id"],
            pattern=session["pattern"],
            session_start_ms=min(e["ms"] for e in activity),
            last_event_ms=last,
            txn_count=len(txns),
            total_amount=round(sum(e["amount"] for e in txns), 2),
            final_phase=PHASE_BY_PATTERN[session["pattern"]] if complete else "",
            close_reason=reason,
            closed_ms=closed,
        ))
    return expected
