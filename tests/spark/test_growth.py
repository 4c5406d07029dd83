"""Growth detection on labelled checkpoints Spark really wrote. The file path's key counts
against Spark's own ``statestore`` reader at every retained batch, and ``growth --deep``'s
comparison: tests/spark/test_state_decoding.py."""

from __future__ import annotations

import json
import re

import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.progress_log import parse_progress
from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.growth.analysis import analyse
from statekit.growth.trend import ACCELERATING, BOUNDED, GROWING, INSUFFICIENT
from statekit.support.errors import EXIT_GROWTH
from tests.spark.real_checkpoints import ALL, SMALL, checkpoint_for

pytestmark = [pytest.mark.spark]

GROWTH = (GROWING, ACCELERATING)

REFERENCE_CASES = [
    # (provider, changelog, leaky, variant, expected)
    ("hdfs", False, False, None, BOUNDED),
    ("hdfs", False, True, None, GROWTH),
    ("rocksdb", False, False, None, BOUNDED),
    ("rocksdb", False, True, None, GROWTH),
    ("rocksdb", True, False, None, BOUNDED),
    ("hdfs", False, False, "bursty", BOUNDED),
]


def _ids(case):
    provider, changelog, leaky, variant, _ = case
    return f"{provider}{'-changelog' if changelog else ''}{'-leaky' if leaky else ''}" \
           f"{'-' + variant if variant else ''}"


def _matches(verdict: str, expected) -> bool:
    return verdict in expected if isinstance(expected, tuple) else verdict == expected


@pytest.mark.parametrize("case", REFERENCE_CASES, ids=_ids)
def test_reference_pipeline_is_classified(reference_checkpoints, case):
    provider, changelog, leaky, variant, expected = case
    run = reference_checkpoints.get(provider, leaky=leaky, changelog=changelog, variant=variant)
    report = analyse(open_checkpoint(str(run.checkpoint)))
    assert _matches(report.verdict, expected), (report.verdict, report.summary,
                                                [s.evidence for s in report.stores])
    (store,) = report.stores
    assert store.operator_name == "applyInPandasWithState"
    if leaky:
        assert store.keys.slope > 0
        if provider == "hdfs":  # files replayed: the anti-patterns are named
            assert store.no_timeout_share == 1.0 and store.history.timeouts == "disabled"
            assert store.deletes_per_version == 0
            assert any("never expire" in e for e in store.evidence)
            assert any("Values grow" in e for e in store.evidence)
            oldest = store.history.oldest_keys
            assert oldest and all(k.key["user_id"].startswith("u") for k in oldest)
            assert oldest[0].age >= oldest[-1].age
    else:  # replayed or read from the SSTs of the newest zip: every key has a timeout
        assert store.no_timeout_share == 0.0 and store.history.timeouts == "per-key"
        assert store.history.versions[-1].value_mean > 100


def test_bursty_traffic_rises_but_is_not_called_growth(reference_checkpoints):
    """The bounded pipeline under bursty traffic: its key count alone *does* test as growing
    over the recent window, so it is the turnover evidence that keeps the verdict bounded."""
    run = reference_checkpoints.get("hdfs", variant="bursty")
    (store,) = analyse(open_checkpoint(str(run.checkpoint))).stores
    assert store.keys.is_growth, store.keys
    assert store.verdict == BOUNDED
    assert store.turnover > 0.5 and store.oldest_age < 6
    assert any("turn over" in e for e in store.evidence)


@pytest.mark.parametrize("name", ["agg-watermark", "agg-no-watermark", "dedup-watermark",
                                  "dedup-no-watermark"])
def test_aggregation_and_dedup_with_and_without_watermark(growth_queries, name):
    query = growth_queries.get(name)
    report = analyse(open_checkpoint(str(query.checkpoint)))
    expected = GROWTH if query.expected == "growing" else BOUNDED
    assert _matches(report.verdict, expected), (name, report.summary,
                                                [s.evidence for s in report.stores])


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_a_finite_population_saturates_and_an_open_one_grows(growth_queries, provider,
                                                              capsys):
    """users-finite: ~75 % of 20,000 users seen after 14 batches — saturating, its plateau
    near the population; users-open: new users every batch — growing, never saturating."""
    from tests.growth_queries import POPULATION

    finite = growth_queries.get("users-finite", provider)
    report = analyse(open_checkpoint(str(finite.checkpoint)))
    assert report.verdict == "saturating", (report.summary, report.stores[0].evidence)
    assert report.plateau is not None
    assert report.plateau.keys == pytest.approx(POPULATION, rel=0.15)
    assert report.plateau.low <= POPULATION * 1.05 and report.plateau.high >= POPULATION * 0.95
    path = str(finite.checkpoint)
    # a warm-up is not a page: --fail-on growing stays quiet on a saturating state …
    assert run_cli(cli, "statekit", ["growth", path, "--json", "--fail-on", "growing"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "saturating"
    assert data["projected_plateau_keys"] == pytest.approx(POPULATION, rel=0.15)
    assert 0.5 < data["fraction_seen"] < 0.95
    # … unless it levels off above the limit
    assert run_cli(cli, "statekit", ["growth", path, "--fail-on", "growing", "--max-keys",
                                     str(POPULATION // 2)]) == EXIT_GROWTH
    out = capsys.readouterr().out
    assert "SATURATING" in out.upper() and "Projected plateau" in out
    # the exporter: the stateset has the new state, and the plateau gauge
    assert run_cli(cli, "statekit", ["metrics", path]) == 0
    text = capsys.readouterr().out
    assert re.search(r'statekit_growth_verdict\{[^}]*verdict="saturating"[^}]*\} 1', text), text
    (plateau,) = re.findall(r"^statekit_growth_projected_plateau_keys\{[^}]*\} (\S+)$", text,
                            re.MULTILINE)
    assert float(plateau) == pytest.approx(POPULATION, rel=0.15)
    assert re.search(r"^statekit_growth_fraction_seen\{[^}]*\} 0\.\d+$", text, re.MULTILINE)
    from tests.prometheus_server import promtool_check  # fails in CI, skips elsewhere

    checked = promtool_check(text)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), checked
    opened = growth_queries.get("users-open", provider)
    report = analyse(open_checkpoint(str(opened.checkpoint)))
    assert report.verdict in GROWTH, report.summary
    assert report.plateau is None
    capsys.readouterr()
    assert run_cli(cli, "statekit", ["growth", str(opened.checkpoint), "--fail-on",
                                     "growing"]) == EXIT_GROWTH
    # a growing verdict ends with the evict dry run that shows what removing stale keys does
    (step,) = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("next: ")]
    assert step.startswith(f"next: statekit evict {opened.checkpoint} --stale-after ")
    assert "--dry-run" in step and "--out " in step


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_a_slow_leak_inside_a_finite_population_is_reported(growth_queries, provider,
                                                            capsys):
    """users-leak: 20,000 users nearly all seen, plus 100 users a batch seen once — the
    discovery curve alone would call it saturating; the keys written once say leak."""
    from tests.growth_queries import LEAKED_PER_BATCH

    leaky = growth_queries.get("users-leak", provider)
    report = analyse(open_checkpoint(str(leaky.checkpoint)))
    assert report.verdict in GROWTH, (report.summary, report.stores[0].evidence)
    assert report.plateau is None
    (store,) = report.stores
    assert store.saturation is not None and store.saturation.outcome == "leak"
    assert store.saturation.leak_keys_per_batch == pytest.approx(LEAKED_PER_BATCH, rel=0.2)
    # the finite population beside the leak
    assert store.saturation.population == pytest.approx(20_000, rel=0.2)
    path = str(leaky.checkpoint)
    assert run_cli(cli, "statekit", ["growth", path, "--json", "--fail-on", "growing",
                                     "--executor-memory", "512m", "--executors", "2"]
                   ) == EXIT_GROWTH
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] in GROWTH and data.get("projected_plateau_keys") is None
    # when it hurts: keys and memory on the busiest executor in 1, 7 and 30 days, and the
    # day the 512 MiB heap is full, from the one analysis every surface renders
    ahead = data["outlook"]
    assert ahead["basis"] == "leak" and ahead["executors"] == 2
    assert ahead["keys_per_batch"] == pytest.approx(LEAKED_PER_BATCH, rel=0.2)
    assert [h["days"] for h in ahead["horizons"]] == [1, 7, 30]
    keys = [h["keys_per_executor"] for h in ahead["horizons"]]
    assert keys[0] < keys[1] < keys[2]
    assert ahead["limit_days"] is not None and ahead["limit_days"] > 0
    assert ahead["limit_days"] == pytest.approx(report_outlook_days(path), rel=1e-6)
    assert run_cli(cli, "statekit", ["growth", path, "--executor-memory", "512m",
                                     "--executors", "2"]) == 0  # no --fail-on: no alert
    out = " ".join(capsys.readouterr().out.split())
    assert "leaks about" in out and "keys per batch" in out
    assert "Projected on the busiest of 2 executors" in out and "30 d:" in out
    assert "Executor memory 512.0 MiB: the state fills its usable" in out
    # the exporter: the leak's rate, the projections and the time to the memory
    assert run_cli(cli, "statekit", ["metrics", path, "--executor-memory", "512m",
                                     "--executors", "2"]) == 0
    text = capsys.readouterr().out
    (rate,) = re.findall(r"^statekit_growth_leak_keys_per_batch\{[^}]*\} (\S+)$", text,
                         re.MULTILINE)
    assert float(rate) == pytest.approx(ahead["keys_per_batch"])
    horizons = re.findall(r'^statekit_growth_projected_keys\{[^}]*horizon_days="(\d+)"[^}]*\} '
                          r"(\S+)$", text, re.MULTILINE)
    assert {d: float(v) for d, v in horizons} == pytest.approx(
        {f"{h['days']:g}": h["keys_per_executor"] for h in ahead["horizons"]})
    (full,) = re.findall(r"^statekit_growth_executor_memory_full_in_seconds\{[^}]*\} (\S+)$",
                         text, re.MULTILINE)
    assert float(full) == pytest.approx(ahead["limit_days"] * 86400)
    from tests.prometheus_server import promtool_check  # fails in CI, skips elsewhere

    checked = promtool_check(text)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, ""), checked


def report_outlook_days(path: str) -> float | None:
    """The days to a 512 MiB heap on 2 executors, as the core computes them."""
    ahead = analyse(open_checkpoint(path), executors=2, executor_memory=512 << 20).outlook
    assert ahead is not None
    return ahead.limit_days


def test_rocksdb_aggregation_without_watermark_grows(growth_queries):
    query = growth_queries.get("agg-no-watermark", "rocksdb")
    report = analyse(open_checkpoint(str(query.checkpoint)))
    assert report.verdict in GROWTH
    assert report.stores[0].history.method == "zip-metadata"


def test_progress_log_extends_history_beyond_retention(reference_checkpoints):
    """Purged (minBatchesToRetain=4), the files hold a few versions; the query's progress log
    holds every batch, and both are judged."""
    run = reference_checkpoints.get("hdfs", variant="purged")
    ckpt = open_checkpoint(str(run.checkpoint))
    files_only = analyse(ckpt)
    retained = len(files_only.stores[0].history.versions)
    assert retained < 10
    progress = parse_progress(run.progress_log.read_text(), shown=str(run.progress_log))
    both = analyse(ckpt, progress=progress)
    assert both.verdict == BOUNDED
    assert both.progress[0].batches >= 14 > retained
    assert both.progress[0].keys.points == both.progress[0].batches


def test_leaky_progress_log_alone_shows_growth(reference_checkpoints):
    run = reference_checkpoints.get("hdfs", leaky=True)
    progress = parse_progress(run.progress_log.read_text(), shown=str(run.progress_log))
    report = analyse(None, progress=progress, max_keys=1e6)
    assert report.verdict in GROWTH
    (projection,) = report.projections
    assert projection.batches > 0 and projection.hours > 0 and projection.at


def test_cli_exit_codes_and_json(reference_checkpoints, capsys):
    leaky = reference_checkpoints.get("hdfs", leaky=True).checkpoint
    normal = reference_checkpoints.get("hdfs").checkpoint
    assert run_cli(cli, "statekit", ["growth", str(leaky), "--fail-on", "growing"]) \
        == EXIT_GROWTH
    out = capsys.readouterr().out
    assert "GROWING" in out or "ACCELERATING" in out
    assert "least recently changed live keys" in out
    assert run_cli(cli, "statekit", ["growth", str(normal), "--fail-on", "growing"]) == 0
    assert "BOUNDED" in capsys.readouterr().out
    assert run_cli(cli, "statekit", ["growth", str(leaky), "--json", "--max-keys", "1e7"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] in GROWTH
    assert data["stores"][0]["history"]["versions"][-1]["keys"] > 0
    assert data["projections"][0]["limit_name"] == "max_keys"


@pytest.mark.parametrize("name", ALL)
def test_every_real_checkpoint_gets_a_history_for_every_store(
        name, reference_checkpoints, small_queries):
    """Every operator kind and format: one history per store, counts that add up, no crash
    (the small queries have 4 batches: too short for a trend, and said so)."""
    ckpt = open_checkpoint(str(checkpoint_for(name, reference_checkpoints, small_queries)))
    report = analyse(ckpt)
    inventory = ckpt.inventory
    assert [(s.operator_id, s.store) for s in report.stores] == [
        (op, store) for op in inventory.operator_ids for store in inventory.stores(op)]
    for store in report.stores:
        history = store.history
        assert history.method in ("replay", "zip-metadata"), (name, history.notes)
        assert history.versions[-1].version == ckpt.last_committed_batch + 1
        for index, stats in enumerate(history.versions):
            assert stats.keys == sum(k[index] for k in history.partition_keys.values())
        if name in SMALL:
            assert store.verdict == INSUFFICIENT
