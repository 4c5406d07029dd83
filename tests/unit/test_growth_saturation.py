"""Growth verdicts on a saturating population: the store's verdict and evidence, the state's
plateau, projections against limits and ``--fail-on`` — on histories replayed from simulated
key streams (the Spark tier checks the same on checkpoints real queries wrote)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from statekit.checkpoint.progress_log import OperatorProgress, ProgressPoint
from statekit.growth.analysis import (
    GrowthReport,
    analyse,
    analyse_progress,
    analyse_store,
    plateau_of,
)
from statekit.growth.trend import GROWING, SATURATING
from tests.support.histories import finite, history_of


def test_a_finite_population_is_saturating_with_its_plateau_in_the_evidence():
    store = analyse_store(history_of(finite(250_000, 20_000)), {})
    assert store.keys.verdict in (GROWING, "accelerating")  # the count alone: growth
    assert store.verdict == SATURATING
    sat = store.saturation
    assert sat is not None and sat.plateau == pytest.approx(250_000, rel=0.15)
    text = " ".join(store.evidence)
    assert "key count saturates" in text and "Projected plateau" in text
    assert "of it seen" in text
    assert "State at the plateau" in text


def test_an_open_population_stays_growing_and_says_why():
    rng = np.random.default_rng(3)
    batches, known = [], 5_000
    for _ in range(16):  # 4,000 new users a batch, 16,000 events of known ones
        batches.append(np.concatenate([np.arange(known, known + 4_000),
                                       rng.integers(0, known, 16_000)]))
        known += 4_000
    store = analyse_store(history_of(batches), {})
    assert store.verdict in (GROWING, "accelerating")
    assert store.saturation is not None and store.saturation.outcome != "saturating"
    assert any("finite population" in e or "no limit" in e for e in store.evidence)


def report_of(stores, max_keys=None) -> GrowthReport:
    plateau = plateau_of(stores)
    return GrowthReport(None, SATURATING, None, None, tuple(stores), (), (), (), plateau)


def test_the_state_plateau_and_fail_on_limits():
    saturating = analyse_store(history_of(finite(100_000, 10_000)), {})
    assert saturating.verdict == SATURATING
    report = report_of([saturating])
    plateau = report.plateau
    assert plateau is not None
    assert plateau.keys == pytest.approx(saturating.saturation.plateau)
    assert plateau.low <= plateau.keys <= plateau.high
    assert plateau.bytes == pytest.approx(plateau.keys * 40, rel=0.01)
    assert 0 < plateau.fraction_seen < 1
    # --fail-on growing fires on a saturating state only when the plateau is above a limit
    assert report.exceeds(max_keys=plateau.keys / 2, max_bytes=None)
    assert not report.exceeds(max_keys=plateau.keys * 2, max_bytes=None)
    assert report.exceeds(max_keys=None, max_bytes=plateau.bytes / 2)
    assert not report.exceeds(max_keys=None, max_bytes=None)
    data = report.to_dict(with_history=False)
    assert data["projected_plateau_keys"] == plateau.keys
    assert data["projected_plateau_range"] == [plateau.low, plateau.high]
    assert data["fraction_seen"] == plateau.fraction_seen


def progress_of(batches: list[np.ndarray]) -> OperatorProgress:
    """What StreamingQueryProgress reports for a keyed aggregation fed these batches."""
    seen: set[int] = set()
    points = []
    for batch, keys in enumerate(batches):
        touched = set(np.unique(keys).tolist())
        seen |= touched
        points.append(ProgressPoint(batch, 1_700_000_000_000 + batch * 60_000, len(seen),
                                    len(touched), 0, len(seen) * 200, len(keys)))
    return OperatorProgress(0, "stateStoreSave", tuple(points))


def test_a_progress_log_alone_tells_a_saturating_population():
    progress = progress_of(finite(150_000, 15_000))
    grown = analyse_progress(progress)
    assert grown.verdict == SATURATING, grown.evidence
    assert grown.saturation.plateau == pytest.approx(150_000, rel=0.15)
    report = analyse(None, progress=[progress], max_keys=1e6)
    assert report.verdict == SATURATING and report.plateau is not None
    assert report.plateau.keys == pytest.approx(150_000, rel=0.15)
    (projection,) = report.projections
    assert projection.batches is None and "never reached" in (projection.note or "")
    assert any("never reached" in line for line in report.summary)


def test_a_leak_in_a_progress_log_stays_growing():
    rng = np.random.default_rng(5)
    batches = [np.concatenate([rng.integers(0, 30_000, 20_000),
                               np.arange(10**9 + 2_000 * b, 10**9 + 2_000 * (b + 1))])
               for b in range(16)]
    grown = analyse_progress(progress_of(batches))
    assert grown.verdict in (GROWING, "accelerating")
    assert grown.saturation is not None and grown.saturation.outcome == "leak"
    assert grown.saturation.leak_keys_per_batch == pytest.approx(2_000, rel=0.5)


def test_a_byte_limit_is_reached_when_the_keys_it_holds_are():
    """--max-bytes and --max-keys at the same level (bytes = keys × 40 B) project the same
    batches: the discovery curve counts keys, a byte limit is converted, not fed to it."""
    from statekit.growth.analysis import _plateau_projection

    store = analyse_store(history_of(finite(100_000, 10_000)), {})
    plateau = plateau_of([store])
    limit_keys = plateau.keys * plateau.fraction_seen * 1.05  # just above today, below it
    by_keys = _plateau_projection("max_keys", limit_keys, plateau, [store], None, None)
    by_bytes = _plateau_projection("max_bytes", limit_keys * 40, plateau, [store], None,
                                   None)
    assert by_keys.batches is not None and by_keys.batches > 0
    assert by_bytes.batches == pytest.approx(by_keys.batches)


def with_leak(batches: list[np.ndarray], share: float) -> list[np.ndarray]:
    """Each batch plus ``share`` of its events from brand-new keys, never seen again."""
    out, fresh = [], 10**9
    for keys in batches:
        extra = int(share * len(keys))
        out.append(np.concatenate([keys, np.arange(fresh, fresh + extra)]))
        fresh += extra
    return out


def test_a_slow_leak_inside_a_finite_population_is_found_by_its_comebacks():
    """1 % of every batch's events from keys never seen again bends the discovery curve like
    a slightly larger population; the keys written once give it away."""
    population = finite(40_000, 7_500)  # ~95 % seen after 16 batches
    clean = analyse_store(history_of(population), {})
    assert clean.verdict == SATURATING
    assert any(e.startswith("Comebacks agree") for e in clean.evidence)
    leaky = analyse_store(history_of(with_leak(population, 0.01)), {})
    assert leaky.verdict in (GROWING, "accelerating")
    sat = leaky.saturation
    assert sat is not None and sat.method == "touch counts" and sat.touch_f is not None
    assert sat.touch_f >= 10 and sat.leak_keys_per_batch == pytest.approx(75, rel=0.4)
    assert any("(touch counts)" in e and "never coming back" in e for e in leaky.evidence)


def test_deleted_keys_leave_the_comebacks_untested_and_say_so():
    history = history_of(finite(40_000, 7_500))
    versions = tuple(replace(v, deletes=v.inserts // 10) if v.inserts else v
                     for v in history.versions)
    store = analyse_store(replace(history, versions=versions), {})
    assert store.saturation is not None and store.saturation.touch_f is None
    assert any("Comebacks not tested" in e and "deleted" in e for e in store.evidence)
