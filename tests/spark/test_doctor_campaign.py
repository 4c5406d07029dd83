"""``statekit doctor`` judged by Spark: a fixed sample of the doctor campaign, and the named
regressions it (or a user) ever found.

Each case damages a fresh copy of a checkpoint a real query wrote
(:mod:`tests.oracle.campaign`), asks the doctor, runs the fix it prints exactly as printed,
and restarts the query on both the damaged checkpoint and the fix's result. The doctor must
agree with Spark on whether the query restarts; a fix must restart and, the queries being
deterministic, end in the state a restart of the undamaged checkpoint ends in. When the
restart runs, the doctor's *outcome* (same, or loses / repeats / differs) must agree with the
one Spark's restart has, measured against a restart of the undamaged checkpoint, and no
restart may silently end elsewhere on a checkpoint the doctor said restarts the same. The
whole space runs in ``benchmarks/doctor_campaign.py``; this sample draws from the families on
checkpoint kinds that cover both providers, changelogs, format v2 and a join; the kinds with a
``foreachBatch`` and a ``noop`` sink are judged on the named cases of the outcome families.

The outcome axis is judged in tests of its own, on the same verdicts (each fault is judged
once per run), so a doctor without it (``outcomes`` missing from its JSON) fails only those.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.oracle.campaign import KindCampaign, Verdict
from tests.oracle.fault_space import (
    Fault,
    edit_offsets_conf,
    file_damage,
    folder_damage,
    pristine_fault,
    sample_faults,
)
from tests.oracle.kinds import KINDS
from tests.support.oracle import full_oracle

pytestmark = [pytest.mark.spark]

SAMPLE_KINDS = tuple(KINDS) if full_oracle() else ("agg-hdfs", "agg-v2", "join-hdfs")
"""``make test``: three kinds that cover both providers, changelogs, format v2 and a join;
``make test-oracle``: every kind of tests/oracle/kinds.py (every sink), every fault of each."""
SAMPLE_PER_KIND = int(os.environ.get("STATEKIT_CAMPAIGN_SAMPLE", "14"))
SAMPLE_SEED = 35

WARNED = (9, 14)
"""A restart the doctor warns about: 9 (the outcome the same, or a doctor without outcomes),
14 (an outcome other than the same)."""

_VERDICTS: dict[tuple[str, str], Verdict] = {}
"""Each fault judged once per run: the restart axis and the outcome axis are asserted in
separate tests on the same verdict."""


class _Campaigns(dict):
    """Each kind's campaign built the first time a test asks for it."""

    def __init__(self, spark, root: Path) -> None:
        super().__init__()
        self.spark, self.root = spark, root

    def __missing__(self, name: str) -> KindCampaign:
        self[name] = KindCampaign(self.spark, name, self.root / name)
        return self[name]


@pytest.fixture(scope="module")
def campaigns(spark, tmp_path_factory) -> dict[str, KindCampaign]:
    return _Campaigns(spark, tmp_path_factory.mktemp("doctor-campaign"))


def _explain(verdict: Verdict) -> str:
    fix = verdict.fix
    measured = {k: v for k, v in (("loaded", verdict.loaded_state_diff),
                                  ("end", verdict.end_state_diff), ("sink", verdict.sink_diff),
                                  ("re-ran", verdict.rerun_batches),
                                  ("sink error", verdict.sink_error)) if v}
    return (f"{verdict.id}: doctor exit {verdict.doctor_exit} {verdict.doctor_codes} "
            f"outcomes {verdict.doctor_expects} {verdict.doctor_stderr}; Spark "
            + (f"{verdict.spark_outcome} {verdict.spark_outcomes} {measured}"
               if verdict.spark_restarted else str(verdict.spark_error))
            + (f"; fix {fix.command!r} exit {fix.exit_code} {fix.stderr} restarted "
               f"{fix.restarted} {fix.error_line or ''} same state {fix.same_state}"
               if fix else ""))


def _verdict(campaign: KindCampaign, fault: Fault) -> Verdict:
    """The fault's verdict, judged the first time a test asks for it."""
    key = (fault.id, fault.role)
    if key not in _VERDICTS:
        _VERDICTS[key] = campaign.judge(fault)
    return _VERDICTS[key]


def _outcome_wrong(verdict: Verdict) -> str | None:
    """Why the doctor's outcome is wrong (``None``: it is right)."""
    if verdict.outcome_agrees is False:
        return f"outcome disagrees: {_explain(verdict)}"
    if verdict.unwarned_change:
        return f"unwarned change: {_explain(verdict)}"
    return None


_SAMPLES: dict[str, list[Fault]] = {}
"""Each kind's sample drawn once per run: the restart axis and the outcome axis must judge
the same faults (enumerating the faults again after restarts need not give the same list,
and a different draw would judge every fault twice)."""


def _sample(campaign: KindCampaign) -> list[Fault]:
    name = campaign.kind.name
    if name not in _SAMPLES:
        every = campaign.faults()
        _SAMPLES[name] = every if full_oracle() else sample_faults(
            every, SAMPLE_PER_KIND, SAMPLE_SEED + SAMPLE_KINDS.index(name),
            shuffle_families=True)
    return _SAMPLES[name]


def _judged(campaign: KindCampaign, fault: Fault) -> Verdict:
    verdict = _verdict(campaign, fault)
    assert verdict.agrees, _explain(verdict)
    assert not verdict.surfaces, f"{verdict.id}: {verdict.surfaces}"
    if verdict.fix is not None:
        assert verdict.fix.ok, _explain(verdict)
    if verdict.doctor_exit == 11:  # a fatal verdict with a fix printed
        assert verdict.fix is not None, _explain(verdict)
    return verdict


@pytest.mark.parametrize("kind", SAMPLE_KINDS)
def test_a_fixed_sample_of_the_campaign(campaigns, kind):
    """The fixed-seed sample: the families take turns in an order drawn from the seed, a
    different one per kind (the three kinds' samples cover the families between them), none
    repeats before every family had its turn; every disagreement is reported, not only the
    first."""
    campaign = campaigns[kind]
    faults = _sample(campaign)
    assert full_oracle() or len(faults) == SAMPLE_PER_KIND
    wrong = []
    for fault in faults:
        verdict = _verdict(campaign, fault)
        if not verdict.agrees or (verdict.fix is not None and not verdict.fix.ok) or \
                (verdict.doctor_exit == 11 and verdict.fix is None):
            wrong.append(_explain(verdict))
        if verdict.surfaces:  # every surface shows the assessment, on every kind
            wrong.append(f"{verdict.id}: surfaces contradict the assessment: "
                         f"{verdict.surfaces}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("kind", SAMPLE_KINDS)
def test_the_sample_outcomes(campaigns, kind):
    """The same sample's outcome axis: where the restart runs, the doctor's outcome agrees
    with the one Spark's restart has; no restart silently ends elsewhere on a checkpoint the
    doctor said restarts the same."""
    campaign = campaigns[kind]
    wrong = [w for fault in _sample(campaign)
             if (w := _outcome_wrong(_verdict(campaign, fault))) is not None]
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ the named regressions
def _fault(kind: str, family: str, target: str, apply) -> Fault:  # type: ignore[no-untyped-def]
    return Fault(kind, family, target, "regression", apply)


def _write(rel: str, data: bytes):  # type: ignore[no-untyped-def]
    def apply(ckpt: Path) -> None:
        (ckpt / rel).write_bytes(data)
        (ckpt / rel).parent.joinpath(f".{Path(rel).name}.crc").unlink(missing_ok=True)
    return apply


def test_a_damaged_metadata_file_stops_the_restart(campaigns):
    """The query-id file present but empty, or not JSON: Spark fails at start()."""
    campaign = campaigns["agg-hdfs"]
    for name, data in (("empty", b""), ("not-json", b"{not json")):
        verdict = _judged(campaign, _fault("agg-hdfs", name, "metadata",
                                           _write("metadata", data)))
        assert verdict.doctor_exit == 11 and "metadata-corrupt" in verdict.doctor_codes
        assert verdict.fix is not None and "--new-query-id" in verdict.fix.command


@pytest.mark.parametrize("kind", ["agg-hdfs", "agg-v2"])
def test_offsets_pinning_another_partition_count(campaigns, kind):
    """The newest offsets entry pins more shuffle partitions than the state has (a hand edit
    or a copy from another query): CANNOT_LOAD_STATE_STORE for the new partition."""
    campaign = campaigns[kind]
    last = max(int(p.name) for p in (campaign.pristine / "checkpoint/offsets").iterdir()
               if p.name.isdigit())
    rel = f"offsets/{last}"
    verdict = _judged(campaign, _fault(kind, "conf", rel, edit_offsets_conf(
        rel, "spark.sql.shuffle.partitions", "3")))
    assert not verdict.spark_restarted and verdict.doctor_exit == 11


def test_a_deleted_commit_with_its_checksum_left_behind(campaigns):
    """``commits/L`` deleted by hand while ``.L.crc`` stays: Spark re-runs batch L and fails
    writing the commit; with the checksum gone too, Spark restarts — the doctor tells the two
    apart."""
    campaign = campaigns["agg-hdfs"]
    last = max(int(p.name) for p in (campaign.pristine / "checkpoint/commits").iterdir()
               if p.name.isdigit())
    rel = f"commits/{last}"
    kept = _judged(campaign, _fault("agg-hdfs", "delete-keep-crc", rel,
                                    file_damage("delete-keep-crc", rel, 0)))
    assert not kept.spark_restarted and "stale-checksum" in kept.doctor_codes
    gone = _judged(campaign, _fault("agg-hdfs", "delete", rel, file_damage("delete", rel, 0)))
    assert gone.spark_restarted and gone.doctor_exit in (0, 9)


def test_a_lost_partition_folder_gets_no_command_that_cannot_work(campaigns):
    """A whole partition folder deleted: no rollback brings it back, so the doctor prints
    none, says what is lost in words and numbers, and exits 12."""
    campaign = campaigns["agg-hdfs"]
    verdict = _judged(campaign, _fault("agg-hdfs", "delete-folder", "state/0/1",
                                       folder_damage("delete-folder", "state/0/1")))
    assert verdict.doctor_exit == 12 and verdict.fix is None
    assert "partition-missing" in verdict.doctor_codes


def test_a_lost_join_store_folder_gets_no_command_that_cannot_work(campaigns):
    campaign = campaigns["join-hdfs"]
    rel = "state/0/0/left-keyToNumValues"
    verdict = _judged(campaign, _fault("join-hdfs", "delete-folder", rel,
                                       folder_damage("delete-folder", rel)))
    assert verdict.doctor_exit == 12 and verdict.fix is None


def test_a_join_store_schema_copied_from_another_store(campaigns):
    """A join store's schema file replaced by another store's (the campaign's
    ``replace-other``): Spark refuses the schema (``STATE_STORE_*_SCHEMA_NOT_COMPATIBLE``).
    The doctor once failed decoding the join's rows with it (exit 4); it now checks the four
    schema files of the join against each other."""
    campaign = campaigns["join-hdfs"]
    rel = "state/0/0/left-keyToNumValues/_metadata/schema"
    donor = campaign.pristine / "checkpoint/state/0/0/left-keyWithIndexToValue/_metadata/schema"
    verdict = _judged(campaign, _fault("join-hdfs", "replace-other", rel,
                                       _write(rel, donor.read_bytes())))
    assert verdict.doctor_exit == 12 and "schema-mismatch" in verdict.doctor_codes


def test_a_join_schema_deleted_with_its_checksum_left(campaigns):
    """The schema file of one join store deleted, its ``.crc`` left: Spark writes it again
    and the rename fails. The rollback's new checkpoint has no stale checksum; its check
    reads no join store whose schema files are incomplete (Spark's reader needs them all)."""
    campaign = campaigns["join-hdfs"]
    rel = "state/0/0/left-keyToNumValues/_metadata/schema"
    verdict = _judged(campaign, _fault("join-hdfs", "delete-keep-crc", rel,
                                       file_damage("delete-keep-crc", rel, 0)))
    assert verdict.doctor_exit == 11 and verdict.fix is not None and verdict.fix.same_state


def test_the_newest_delta_gone_is_fixed_by_a_rollback_that_keeps_every_row(campaigns):
    """The on-call case of the issue: the newest ``.delta`` of one partition deleted."""
    campaign = campaigns["agg-hdfs"]
    newest = max((p for p in (campaign.pristine / "checkpoint/state/0/1").glob("*.delta")),
                 key=lambda p: int(p.stem))
    rel = os.path.relpath(newest, campaign.pristine / "checkpoint")
    verdict = _judged(campaign, _fault("agg-hdfs", "delete", rel, file_damage("delete", rel,
                                                                                0)))
    assert verdict.doctor_exit == 11 and verdict.fix is not None
    assert verdict.fix.same_state


def test_a_commit_changed_after_it_was_written(campaigns):
    """Bit rot in ``commits/L`` that still parses (its ``.crc`` as Spark wrote it): Spark
    does not check the checksum and restarts on the changed watermark, into another state
    than the first run's. The doctor warns (``log-changed``) and its rollback re-plans the
    batch from the sources, into the healthy state."""
    campaign = campaigns["agg-hdfs"]
    last = max(int(p.name) for p in (campaign.pristine / "checkpoint/commits").iterdir()
               if p.name.isdigit())
    rel = f"commits/{last}"

    def later_watermark(ckpt: Path) -> None:
        version, line = (ckpt / rel).read_text().split("\n", 1)
        entry = json.loads(line)
        entry["nextBatchWatermarkMs"] += 10 * 86_400_000  # ten days on: every row is late
        (ckpt / rel).write_text(f"{version}\n{json.dumps(entry, separators=(',', ':'))}")

    verdict = _judged(campaign, _fault("agg-hdfs", "edit-keep-crc", rel, later_watermark))
    assert verdict.doctor_exit in WARNED and "log-changed" in verdict.doctor_codes
    assert verdict.spark_outcome == "changed", _explain(verdict)
    assert "differs" in (verdict.spark_outcomes or ()), _explain(verdict)
    assert verdict.fix is not None and verdict.fix.same_state


def test_a_snapshot_overwritten_by_an_older_one(campaigns):
    """The base snapshot of a restart replaced by an older snapshot's bytes (its ``.crc``
    too): it decodes, Spark restarts on old state. The doctor finds the snapshot at odds with
    the delta of its version (``state-files-disagree``) and its rollback restores the healthy
    state."""
    campaign = campaigns["agg-hdfs"]
    fault = next(f for f in campaign.faults()
                 if f.family == "replace-other" and f.target.endswith(".snapshot"))
    verdict = _judged(campaign, fault)
    assert verdict.doctor_exit in WARNED and "state-files-disagree" in verdict.doctor_codes
    assert verdict.spark_outcome == "changed", _explain(verdict)
    assert "differs" in (verdict.spark_outcomes or ()), _explain(verdict)
    assert verdict.fix is not None and verdict.fix.same_state


def test_a_damaged_sst_data_block(campaigns):
    """A bit flipped inside an SST's data block, its ``.crc`` gone: RocksDB opens the
    version without reading the block; a batch reading a key in it fails, and scans stop at
    it silently. The doctor calls it fatal (``state-block-damaged``); Spark fails or runs on
    with rows missing, and the rollback restarts into the healthy state."""
    from statekit.checkpoint import open_checkpoint
    from statekit.checkpoint.state_data import zip_metadata, zip_sst_paths
    from statekit.formats.rocksdb_sst import _Table
    from statekit.writes.rollback import state_chain

    campaign = campaigns["agg-v2"]
    pristine = campaign.pristine / "checkpoint"
    model = open_checkpoint(str(pristine))
    version = model.last_committed_batch + 1
    instance = model.inventory.instances[(0, "default", 0)]
    chain = state_chain(model)
    loads = chain(instance, version) if chain else instance.files_to_load(version)
    newest_zip = [f for f in loads or [] if f.kind == "zip"][-1]
    sst = zip_sst_paths(model, newest_zip, zip_metadata(model, [newest_zip])[newest_zip.path])[0]
    with open(sst, "rb") as handle:
        block = _Table(handle, sst).data_handles()[0]
    rel = os.path.relpath(sst, pristine)

    def flip_in_block(ckpt: Path) -> None:
        path = ckpt / rel
        data = bytearray(path.read_bytes())
        data[block.offset + block.size // 2] ^= 0x01
        path.write_bytes(bytes(data))
        path.parent.joinpath(f".{path.name}.crc").unlink(missing_ok=True)

    verdict = _judged(campaign, _fault("agg-v2", "flip-data-block-no-crc", rel, flip_in_block))
    assert verdict.doctor_exit == 11 and "state-block-damaged" in verdict.doctor_codes
    assert verdict.spark_outcome in ("fails", "changed"), _explain(verdict)
    assert verdict.fix is not None and verdict.fix.same_state


# ------------------------------------------------- the outcome of a restart that runs
def _newest(folder: Path) -> int:
    return max(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def _deleted_commit(campaign: KindCampaign) -> Fault:
    rel = f"commits/{_newest(campaign.pristine / 'checkpoint/commits')}"
    return _fault(campaign.kind.name, "delete", rel, file_damage("delete", rel, 0))


def _older_delta(campaign: KindCampaign) -> Fault:
    """The delta after the restart's snapshot replaced by the one before it (its ``.crc``
    too): every file decodes and matches its checksum."""
    return next(f for f in campaign.faults()
                if f.family == "replace-other" and f.role == "delta")


def test_a_delta_after_the_snapshot_replaced_by_an_older_one_runs_on_other_state(campaigns):
    """Spark loads the snapshot and the older delta's changes as this version: it restarts,
    on state the first run never had (the doctor's known limit before outcomes)."""
    verdict = _judged(campaigns["agg-hdfs"], _older_delta(campaigns["agg-hdfs"]))
    assert verdict.spark_restarted and "differs" in (verdict.spark_outcomes or ()), \
        _explain(verdict)


def test_the_doctor_says_a_delta_replaced_by_an_older_one_differs(campaigns):
    verdict = _verdict(campaigns["agg-hdfs"], _older_delta(campaigns["agg-hdfs"]))
    assert "differs" in (verdict.doctor_expects or ()), _explain(verdict)
    assert verdict.outcome_agrees and not verdict.unwarned_change, _explain(verdict)


def test_a_deleted_commit_reaches_a_foreach_batch_sink_again(campaigns):
    """``commits/L`` deleted (with its checksum): Spark runs batch L again, and a
    ``foreachBatch`` sink gets it a second time — the state ends where the healthy restart's
    does, the output does not (at-least-once)."""
    campaign = campaigns["agg-foreach-hdfs"]
    verdict = _judged(campaign, _deleted_commit(campaign))
    last = _newest(campaign.pristine / "checkpoint/commits")
    assert verdict.spark_restarted and verdict.rerun_batches == [last], _explain(verdict)
    assert verdict.spark_outcomes == ["repeats"], _explain(verdict)


def test_the_doctor_says_a_deleted_commit_repeats_into_a_foreach_batch_sink(campaigns):
    campaign = campaigns["agg-foreach-hdfs"]
    verdict = _verdict(campaign, _deleted_commit(campaign))
    assert verdict.doctor_exit == 14 and "repeats" in (verdict.doctor_expects or ()), \
        _explain(verdict)


@pytest.mark.parametrize("kind", ["agg-hdfs", "dedup-noop-changelog"])
def test_a_deleted_commit_with_an_exactly_once_or_no_output_sink_is_the_same(campaigns, kind):
    """The same re-run into a file sink (it skips the batch its log has) or a noop sink (no
    output): the restart's outcome is the healthy one's, and the doctor says so."""
    campaign = campaigns[kind]
    verdict = _judged(campaign, _deleted_commit(campaign))
    assert verdict.spark_restarted and verdict.rerun_batches, _explain(verdict)
    assert verdict.spark_outcomes == [], _explain(verdict)
    assert verdict.doctor_expects == [] and verdict.outcome_agrees, _explain(verdict)


def test_the_pristine_checkpoints_restart(campaigns):
    """No damage: the doctor says it restarts the same, and Spark's restart measures the
    same — state loaded, state at the end, sink output (no noise in the measurement)."""
    for campaign in list(campaigns.values()):
        verdict = _judged(campaign, pristine_fault(campaign.kind.name))
        assert verdict.doctor_exit == 0 and verdict.spark_outcome == "clean", \
            _explain(verdict)
        assert verdict.spark_outcomes == [] and verdict.loaded_state_diff is not None, \
            _explain(verdict)
        assert verdict.outcome_agrees and not verdict.unwarned_change, _explain(verdict)
        shutil.rmtree(campaign.work)
