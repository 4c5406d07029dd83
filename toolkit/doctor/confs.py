"""The SQL confs a restart runs with: the newest offsets entry's, whatever the session says.

Spark pins them once and copies them into every offsets entry, so two entries that disagree
mean a hand edit (or an entry copied from another query) — the restart takes the newest.
What a changed conf does (measured with pyspark 4.3, every pinned conf edited on every kind
of checkpoint by the doctor campaign):

* ``spark.sql.shuffle.partitions``: more partitions than the state has fail the load of the
  new ones; fewer leave the others' state unread (:mod:`statekit.doctor.state`);
* ``…stateStore.providerClass``: the other provider finds none of its files: the load fails;
* ``…stateStore.compression.codec``: change files in the old codec fail to decode (zips do
  not use it);
* ``…aggregation|join|flatMapGroupsWithState.stateFormatVersion``: the operator's state
  schema no longer matches its schema file (``STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE``) —
  only for a query that has that operator;
* ``…stateStore.encodingFormat``: RocksDB rows in the old encoding do not decode;
  transformWithState keeps its encoding in its metadata and restarts, but writes new rows
  in the pinned one: other state and output;
* the rest (``rocksdb.formatVersion``, a ``checkpointFormatVersion`` added by hand, …) do not
  stop a restart.
"""

from __future__ import annotations

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.doctor.problems import DIFFERS, FATAL, WARNING, Problem
from statekit.doctor.query_files import QueryFiles
from statekit.doctor.state import StateCheck

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CODEC = "spark.sql.streaming.stateStore.compression.codec"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
PARTITIONS = "spark.sql.shuffle.partitions"
FORMAT_VERSION_OPERATORS = {
    "spark.sql.streaming.aggregation.stateFormatVersion": ("stateStoreSave",),
    "spark.sql.streaming.join.stateFormatVersion": ("symmetricHashJoin",),
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": (
        "flatMapGroupsWithState", "applyInPandasWithState"),
    "spark.sql.streaming.sessionWindow.stateFormatVersion": (
        "sessionWindowStateStoreSaveExec",),
}
HARMLESS = ("spark.sql.streaming.stateStore.rocksdb.formatVersion",
            "spark.sql.streaming.stateStore.checkpointFormatVersion")


def _changes(files: QueryFiles) -> dict[str, tuple[str | None, str | None]]:
    """``{conf: (before, now)}`` of every pinned conf the newest entry changes."""
    last = files.plan.last_planned
    if last is None or last < 1:
        return {}
    now, before = files.offsets.get(last), files.offsets.get(last - 1)
    if now is None or before is None or now.metadata is None or before.metadata is None:
        return {}
    effective = files.newest_conf
    return {k: (before.conf.get(k), effective.get(k)) for k in sorted(before.conf)
            if before.conf.get(k) != effective.get(k)}


def partitions_before_edit(files: QueryFiles) -> int | None:
    """The partition count the entry before the newest pins, when the newest entry (its
    batch committed) pins another count."""
    if files.plan.last_committed != files.plan.last_planned:
        return None
    was, _now = _changes(files).get(PARTITIONS, (None, None))
    return int(was) if was is not None and str(was).isdigit() else None


def conf_problems(ckpt: Checkpoint, files: QueryFiles, check: StateCheck) -> list[Problem]:
    last = files.plan.last_planned
    if last is None:
        return []
    shown = files.path("offsets", last)
    found: list[Problem] = []
    changes = _changes(files)
    found += _provider_mismatch(ckpt, check, shown)
    found += _codec_mismatch(ckpt, check, shown)
    for key, (before, now) in changes.items():
        if key == PARTITIONS and files.plan.last_committed != last:
            continue  # an uncommitted repartition: the ledger rules say what Spark does
        if key in (PARTITIONS, PROVIDER, CODEC):
            continue  # the state rules and the decode of the restart path see their effect
        operators = FORMAT_VERSION_OPERATORS.get(key)
        what = (f"{key} is {now!r} in the newest offsets entry, {before!r} in the one "
                "before: edited by hand, or copied from another query")
        if operators is not None:
            have = sorted({op for op, name in check.names.items() if name in operators})
            if have:
                found.append(Problem(
                    "conf-changed", FATAL, shown, what,
                    f"the restart runs operator {have[0]} with state format {now}: its "
                    "state schema no longer matches the schema file",
                    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                    f"roll back to batch {last - 1}: the re-planned batch takes its confs",
                    last - 1))
            continue
        if key == ENCODING:
            # transformWithState keeps its own encoding (in its operator metadata): only
            # the other operators' RocksDB rows are read in the pinned one
            rocks = any(f.kind in ("zip", "changelog", "sst") and not
                        ckpt.inventory.meta("operator-metadata-v2", f.operator_id)
                        for f in ckpt.inventory.all_files()) if ckpt.has_state else False
            tws = ckpt.has_state and any(ckpt.inventory.meta("operator-metadata-v2", op)
                                         for op in check.names)
            if rocks:
                found.append(Problem(
                    "conf-changed", FATAL, shown, what,
                    "the RocksDB rows were written in the other encoding: the first batch "
                    "fails decoding them", "a task failure decoding state rows",
                    f"roll back to batch {last - 1}: the re-planned batch takes its confs",
                    last - 1))
            elif tws:
                found.append(Problem(
                    "conf-changed", WARNING, shown, what,
                    "Spark restarts (transformWithState's metadata keeps its encoding), but "
                    "the rows it writes from now on are in the other one: the state it "
                    "reads back and its output are not the first run's (measured)", None,
                    f"roll back to batch {last - 1}: the re-planned batch takes its confs",
                    last - 1, outcome=DIFFERS, affects="the transformWithState operator's "
                    "state and output from the restart on"))
            continue
        if key in HARMLESS:
            continue
        found.append(Problem(
            "conf-changed", WARNING, shown, what,
            "Spark restarts with the newest entry's value (statekit does not know what this "
            "conf changes for existing state)", None,
            f"roll back to batch {last - 1} if the edit was not meant"))
    return found


def _codec_mismatch(ckpt: Checkpoint, check: StateCheck, shown: str) -> list[Problem]:
    """The pinned codec against the first bytes of a change file each store loads (a
    handful of 8-byte reads: what the listing-level check affords)."""
    from statekit.formats.compression import normalize_codec, sniff_codec

    version = check.plan.version
    if not ckpt.has_state or version is None:
        return []
    pinned = normalize_codec(check.conf.get(CODEC))
    seen: set[tuple[int, str]] = set()
    for key in check.expected():
        if key[:2] in seen:
            continue
        files = check.files_at(key, version) or []
        change = next((f for f in reversed(files) if f.kind in ("delta", "snapshot",
                                                                  "changelog")), None)
        if change is None:
            continue
        seen.add(key[:2])
        try:
            with ckpt.fs.open(change.path, "rb") as handle:
                head = handle.read(8)
        except OSError:
            continue
        found = sniff_codec(head)
        if found is not None and found != pinned:
            return [Problem(
                "conf-codec", FATAL, shown,
                f"the newest offsets entry pins state codec {pinned!r} ({CODEC}); the state "
                f"files are {found} ({ckpt.display(change.path)})",
                f"Spark opens every change file with {pinned} and fails", "CANNOT_LOAD_STATE_"
                "STORE.UNCATEGORIZED (Stream is corrupted)",
                "roll back to the newest batch whose offsets entry pins the files' codec",
                (check.plan.last_planned or 0) - 1)]
    return []


def _provider_mismatch(ckpt: Checkpoint, check: StateCheck, shown: str) -> list[Problem]:
    """The pinned provider against the provider whose files the state holds."""
    if not ckpt.has_state or not check.names:
        return []
    pinned = check.conf.get(PROVIDER) or ""
    wants = "rocksdb" if pinned.endswith("RocksDBStateStoreProvider") else \
        "hdfs" if (not pinned or pinned.endswith("HDFSBackedStateStoreProvider")) else None
    if wants is None:
        return [Problem(
            "conf-provider", FATAL, shown, f"the pinned state store provider is {pinned!r}",
            "Spark cannot load a provider class it does not know", "ClassNotFoundException",
            "roll back to a batch before the edit", None)]
    kinds = {f.kind for f in ckpt.inventory.all_files()}
    has = "rocksdb" if kinds & {"zip", "changelog", "sst"} else \
        "hdfs" if kinds & {"delta", "snapshot"} else None
    if has is None or has == wants:
        return []
    return [Problem(
        "conf-provider", FATAL, shown,
        f"the newest offsets entry pins the {wants} provider ({PROVIDER}), the state files "
        f"are the {has} provider's", f"the {wants} provider finds none of its files and "
        "fails loading the state",
        "CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE" if wants == "rocksdb"
        else "CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS",
        "roll back to the newest batch whose offsets entry pins the provider the files "
        "belong to", (check.plan.last_planned or 0) - 1)]
