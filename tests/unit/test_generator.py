"""The event generator: deterministic, appendable, realistic, and consistent with its truth."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from statekit.reference_pipeline.generator import (
    EVENTS_DIR,
    MINUTE_MS,
    GeneratorConfig,
    events_file,
    generate,
    read_manifest,
)
from statekit.reference_pipeline.simulate import simulate
from statekit.reference_pipeline.state_machine import Alert, SessionSummary
from statekit.reference_pipeline.truth import (
    expected_sessions,
    fraud_labels,
    max_event_ms,
    sessions,
)

SMALL = GeneratorConfig(seed=11, users=300, new_users_per_batch=3, events_per_batch=120,
                        fraud_per_batch=1.0, near_miss_per_batch=1.5)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "generator.json"}


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("landing")
    generate(path, SMALL, 14)
    return path


def test_same_seed_same_bytes_and_append_equals_one_go(tmp_path, landing):
    halves = tmp_path / "halves"
    first = generate(halves, SMALL, 7)
    second = generate(halves, SMALL, 7)
    assert (first.first_batch, second.first_batch, second.total_batches) == (0, 7, 14)
    assert tree_bytes(halves) == tree_bytes(landing)
    assert read_manifest(halves) == (SMALL, 14)


def test_another_seed_gives_another_stream(tmp_path, landing):
    other = tmp_path / "other"
    generate(other, GeneratorConfig(**{**SMALL.__dict__, "seed": 12}), 2)
    assert events_file(other, 1).read_bytes() != events_file(landing, 1).read_bytes()


def test_append_refuses_a_different_config(tmp_path):
    generate(tmp_path / "l", SMALL, 1)
    with pytest.raises(ValueError, match="different config"):
        generate(tmp_path / "l", GeneratorConfig(**{**SMALL.__dict__, "users": 301}), 1)


def test_refuses_a_non_empty_folder_it_did_not_make(tmp_path):
    (tmp_path / "stray.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        generate(tmp_path, SMALL, 1)


@pytest.mark.parametrize("bad", [{"users": 0}, {"batch_minutes": 0}, {"out_of_order": 2.0},
                                 {"start": "yesterday"}, {"fraud_per_batch": -1}])
def test_invalid_config_is_rejected(tmp_path, bad):
    with pytest.raises(ValueError):
        generate(tmp_path / "l", GeneratorConfig(**{**SMALL.__dict__, **bad}), 1)


def test_files_are_valid_json_lines_with_increasing_mtimes(landing):
    files = sorted((landing / EVENTS_DIR).iterdir())
    assert len(files) == 14
    mtimes = [f.stat().st_mtime for f in files]
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == 14
    record = json.loads(files[3].read_text().splitlines()[0])
    assert set(record) == {"event_id", "event_type", "user_id", "card_id", "amount", "currency",
                           "merchant_category", "country", "event_time"}
    counts = [len(f.read_text().splitlines()) for f in files[1:]]
    assert all(0.6 * SMALL.events_per_batch <= c <= 1.5 * SMALL.events_per_batch for c in counts)


def test_sessions_of_a_user_never_overlap_the_inactivity_gap(landing):
    by_user = defaultdict(list)
    for session, events in sessions(landing):
        if events:
            by_user[session["user_id"]].append(session["events"])
    for user, user_sessions in by_user.items():
        user_sessions.sort(key=lambda evs: evs[0]["ms"])
        for before, after in pairwise(user_sessions):
            closes = max(e["ms"] for e in before)  # case_closed included
            assert after[0]["ms"] > closes, user
            activity = max(e["ms"] for e in before if e["type"] != "case_closed")
            assert after[0]["ms"] - activity > 30 * MINUTE_MS, user


def test_normal_sessions_stay_below_every_threshold(landing):
    for session, _ in sessions(landing):
        if session["pattern"] == "normal":
            txns = [e for e in session["events"] if e["type"] == "txn"]
            assert len(txns) <= 4
            assert sum(e["amount"] for e in txns) < 5000


def test_new_users_appear_every_batch(landing):
    first_seen = {}
    for session, events in sessions(landing):
        for e in events:
            first_seen[session["user_id"]] = min(first_seen.get(session["user_id"], 99), e["file"])
    per_batch = defaultdict(int)
    for batch in first_seen.values():
        per_batch[batch] += 1
    assert all(per_batch[b] >= SMALL.new_users_per_batch for b in range(14))


def test_truth_agrees_with_a_replay_through_the_state_machine(landing):
    """Generator, truth and state machine agree: every fraud user alerted, nobody else;
    every closed session summarised exactly as generated; the rest still open."""
    sim = simulate(landing)
    labels = fraud_labels(landing)
    assert len(labels) >= 5
    alerted = {o.user_id for o in sim.outputs if isinstance(o, Alert)}
    assert alerted == set(labels)
    assert sim.watermark_ms == max_event_ms(landing) - 5 * MINUTE_MS
    truth = expected_sessions(landing, sim.watermark_ms)
    closed = sorted((t.user_id, t.session_start_ms, t.last_event_ms, t.closed_ms, t.txn_count,
                     t.total_amount, t.final_phase, t.close_reason)
                    for t in truth if t.close_reason)
    emitted = sorted((o.user_id, o.session_start_ms, o.last_event_ms, o.closed_ms, o.txn_count,
                      o.total_amount, o.final_phase.value, o.close_reason.value)
                     for o in sim.outputs if isinstance(o, SessionSummary))
    assert emitted == closed
    assert len(sim.state) == sum(1 for t in truth if t.close_reason is None)
    patterns = {t.pattern for t in truth if t.close_reason}
    assert patterns == {"normal", "fraud", "burst_cleared", "burst_unconfirmed"}


def test_late_events_are_behind_the_watermark_and_dropped(landing):
    sim = simulate(landing)
    late = {e["id"] for path in (landing / "truth").glob("*.json")
            for e in json.loads(path.read_text())["late_events"]}
    assert len(late) == 12 * SMALL.late_per_batch
    assert set(sim.dropped_late) == late
