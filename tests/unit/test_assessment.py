"""The assessment's own rules, without a JVM: one RTO rule, *not checked* without decoding,
the loaded version's keys from the history at that version, words that read right.

The surfaces' agreement over generated faults is tests/oracle/surfaces.py's (the fault
corpus, the golden checkpoints, the Spark campaign) and tests/tui/test_surfaces_agree.py's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from statekit.assess.assessment import NOT_CHECKED, EstimateOptions, assess, loaded_version
from statekit.assess.words import duration_words, range_words, rto_words
from statekit.checkpoint import open_checkpoint
from statekit.recovery.rto import judge_rto, within_rto

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ROOT / "tests" / "data" / "fault_corpus"


def test_the_rto_rule_judges_the_high_end_of_the_range():
    assert within_rto(2.0, 2.0) and within_rto(1.9, 2.0) and not within_rto(2.1, 2.0)
    # a range straddling the RTO (estimate 2 s, high end 3 s, RTO 2.5 s) misses it
    judged = judge_rto(3.0, 2.5)
    assert judged is not None and not judged.meets and judged.word == "misses"
    assert judge_rto(None, 2.5) is None and judge_rto(3.0, None) is None
    assert rto_words(judged) == "MISSES the RTO of 2.5 s (high end of the range 3.0 s)"
    assert rto_words(judge_rto(2.0, 2.5)) == "meets the RTO of 2.5 s"


def test_sub_second_estimates_read_as_such():
    assert duration_words(0.0) == duration_words(0.999) == "under 1 s"
    assert duration_words(1.0) == "1.0 s" and duration_words(90) == "90.0 s"


def test_one_place_compares_a_time_with_the_rto():
    """`grep` finds the RTO comparison in one function (recovery/rto.py's ``within_rto``);
    the CLI, the TUI, the fleet list and metrics render its answer."""
    comparison = re.compile(r"(<=?|>=?)\s*(self\.)?rto(_s)?\b|\brto(_s)?\s*(<=?|>=?)")
    # not a judgement: the what-if chart leaves the RTO's line out when it is far above
    # every value (the chart's scale)
    scale = "tui/screen_charts.py: if rto_s and rto_s > RTO_FAR * highest:"
    found = []
    for folder in ("toolkit", "tui", "jobs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line in path.read_text().splitlines():
                if comparison.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert sorted(set(found) - {scale}) == ["toolkit/recovery/rto.py: return high_s <= rto_s"]


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """The frozen HDFS checkpoint with the newest delta of partition 1 cut in half: the
    listing sees nothing wrong, decoding does."""
    copy = tmp_path / "hdfs"
    shutil.copytree(FROZEN / "hdfs", copy)
    version = max(int(p.stem) for p in (copy / "state/0/1").glob("*.delta"))
    delta = copy / "state/0/1" / f"{version}.delta"
    delta.write_bytes(delta.read_bytes()[: delta.stat().st_size // 2])
    return copy


def test_without_decoding_the_verdict_is_not_checked(damaged: Path):
    listed = assess(open_checkpoint(str(damaged)), decode=False, growth=False)
    assert listed.verdict == NOT_CHECKED and listed.restarts is None
    assert "not decoded" in listed.headline and listed.next_command.startswith("statekit doctor")
    decoded = assess(open_checkpoint(str(damaged)), growth=False,
                     estimate=EstimateOptions(cores=2), rto_s=3600)
    assert decoded.verdict == "will not restart" and decoded.restarts is False
    assert decoded.exit_code in (11, 12)
    # no estimate, so no RTO judgement either: the verdict says it
    assert decoded.estimate is None and decoded.rto is None and not decoded.estimate_applies


def test_the_loaded_version_is_the_doctors_and_its_keys_the_history_at_it(tmp_path: Path):
    copy = tmp_path / "hdfs"
    shutil.copytree(FROZEN / "hdfs", copy)
    # a crashed batch: its files are there, its commit is not — the restart re-runs it on
    # the version before
    last = max(int(p.name) for p in (copy / "offsets").iterdir() if p.name.isdigit())
    (copy / "commits" / str(last)).unlink()
    (copy / "commits" / f".{last}.crc").unlink(missing_ok=True)  # a crash leaves none
    assessment = assess(open_checkpoint(str(copy)), estimate=EstimateOptions(cores=2),
                        rto_s=60)
    version = assessment.diagnosis.restart_version
    assert assessment.loaded.version == version == assessment.estimate.version
    store = assessment.growth.stores[0]
    at = next(v for v in store.history.versions if v.version == version)
    assert version == last  # the re-run batch loads the last commit's version, not its own
    assert assessment.loaded.keys == at.keys and assessment.loaded.bytes == at.bytes
    # the memory figure counts the loaded version's rows (one executor holds them all)
    assert assessment.estimate.memory.rows == pytest.approx(at.keys)
    assert "MISSES" not in range_words(assessment.estimate)


def test_keys_are_unknown_when_the_history_does_not_reach_the_version():
    from statekit.growth.analysis import analyse

    growth = analyse(open_checkpoint(str(FROZEN / "hdfs")))
    last = growth.stores[0].history.versions[-1].version
    beyond = loaded_version(last + 5, growth)
    assert beyond.keys is None and f"ends at version {last}" in beyond.why_unknown
    assert loaded_version(last, growth).keys == growth.stores[0].history.versions[-1].keys
    assert loaded_version(None, growth).keys is None


def test_a_listed_report_completed_with_the_decoding_equals_one_built_with_it(damaged: Path):
    """The fleet list and the TUI build the report from the listing first; the assessment
    adds what decoding found instead of listing again — the same report."""
    from dataclasses import replace

    from statekit.doctor import diagnose
    from statekit.report.checkpoint_report import build_report, with_verification

    ckpt = open_checkpoint(str(damaged))
    verification = diagnose(ckpt, fix=False).verification
    assert verification is not None and verification.damaged
    completed = with_verification(build_report(ckpt), verification)
    built = build_report(ckpt, verification=verification)
    assert replace(completed, elapsed_s=0) == replace(built, elapsed_s=0)
    assert "damaged-file" in {f.code for f in completed.findings}
