"""``statekit evict`` planning without a JVM: the selection as SQL, the watermark and key age
it uses, and the refusals."""

from __future__ import annotations

import json

import fsspec
import pytest

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.location import resolve
from statekit.support.errors import BadInput, UnsafeOperation, UnsupportedFormat
from statekit.writes.evict import CHANGED_AT, Selection, plan_evict, store_predicate
from tests.unit.checkpoint_builder import commit_text, operator_metadata_text, write_checkpoint

LONG_AGO = 1_700_000_000_000 + 10**9


def source(tmp_path, name: str = "applyInPandasWithState", watermark: int = 0, **kw):
    root = tmp_path / "src"
    write_checkpoint(fsspec.filesystem("file"), str(root), planned=6, committed=6, **kw)
    (root / "commits" / "5").write_text(commit_text(watermark))
    (root / "state" / "0" / "_metadata" / "metadata").write_text(operator_metadata_text(name=name))
    return open_checkpoint(str(root))


def plan(ckpt, tmp_path, selection: Selection, **kw):
    return plan_evict(ckpt, resolve(str(tmp_path / "dst")), selection, now_ms=LONG_AGO, **kw)


def test_predicate_is_the_conditions_anded():
    both = Selection(where="key.user_id = 'u1'", stale_after=3, expired=True, no_timeout=True)
    sql = store_predicate(both, timeout_operator=True, has_timeout_column=True,
                          watermark_ms=5000, stale_before=7)
    assert sql == ("(key.user_id = 'u1') AND (__statekit_changed_at <= 7) AND "
                   "((value.timeoutTimestamp <> -1 AND value.timeoutTimestamp < 5000) OR "
                   "(value.timeoutTimestamp IS NULL OR value.timeoutTimestamp = -1))")
    # no timeout column (a NoTimeout query): every row carries no timeout, none expires
    assert store_predicate(Selection(no_timeout=True), timeout_operator=True,
                           has_timeout_column=False, watermark_ms=None,
                           stale_before=None) == "(true)"
    assert store_predicate(Selection(expired=True), timeout_operator=True,
                           has_timeout_column=False, watermark_ms=1,
                           stale_before=None) == "(false)"
    # an operator without timeouts: --expired selects none of its rows
    assert store_predicate(Selection(where="true", expired=True), timeout_operator=False,
                           has_timeout_column=False, watermark_ms=1,
                           stale_before=None) == "(true) AND false"


def test_plan_uses_the_next_batch_watermark_and_the_key_age(tmp_path):
    ckpt = source(tmp_path, watermark=123_000)
    p = plan(ckpt, tmp_path, Selection(stale_after=2, expired=True))
    assert p.watermark_ms == 123_000  # commits/5's nextBatchWatermarkMs
    assert p.stale_before == 6 - 2  # state version 6 (batch 5) minus K
    assert (p.base.from_partitions, p.base.to_partitions) == (4, 4)
    assert (p.base.repartition_batch, p.base.state_version) == (6, 7)
    (store,) = p.stores
    assert store.touched and CHANGED_AT in store.predicate and "123000" in store.predicate
    assert json.loads(json.dumps(p.to_dict()))["selection"]["stale_after"] == 2


@pytest.mark.parametrize(("selection", "name", "error", "text"), [
    (Selection(), "applyInPandasWithState", BadInput, "nothing selected"),
    (Selection(where="  "), "applyInPandasWithState", BadInput, "--where is empty"),
    (Selection(stale_after=0), "applyInPandasWithState", BadInput, "at least 1"),
    (Selection(where="true", operator=3), "applyInPandasWithState", BadInput, "--operator 3"),
    (Selection(expired=True), "dedupe", UnsupportedFormat, "has none"),
    (Selection(stale_after=3), "transformWithStateInPandasExec", UnsupportedFormat,
     "does not track key ages across transformWithState's column families"),
])
def test_refusals(tmp_path, selection, name, error, text):
    ckpt = source(tmp_path, name=name, provider="rocksdb" if "transform" in name else "hdfs")
    with pytest.raises(error, match=text):
        plan(ckpt, tmp_path, selection)


def test_a_non_empty_target_is_refused_like_a_repartition(tmp_path):
    ckpt = source(tmp_path)
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "x").write_text("x")
    with pytest.raises(UnsafeOperation, match="not empty"):
        plan(ckpt, tmp_path, Selection(where="true"))


def test_operator_filter_and_no_timeout_predicate(tmp_path):
    ckpt = source(tmp_path, name="dedupe")
    p = plan(ckpt, tmp_path, Selection(where="true", operator=0))
    assert p.stores[0].touched
    ckpt = source(tmp_path / "b", name="applyInPandasWithState")
    (store,) = plan(ckpt, tmp_path / "b", Selection(no_timeout=True)).stores
    assert store.predicate.startswith("((value.timeoutTimestamp IS NULL")


def test_transform_with_state_removes_whole_grouping_keys(tmp_path):
    ckpt = source(tmp_path, name="transformWithStateInPandasExec", provider="rocksdb")
    (store,) = plan(ckpt, tmp_path, Selection(where="key.key = 'k1'")).stores
    assert store.whole_keys and store.touched and store.predicate == "(key.key = 'k1')"
    (store,) = plan(ckpt, tmp_path, Selection(where="true", operator=0)).stores
    assert store.whole_keys
