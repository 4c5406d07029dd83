"""State on restart: which store instances the first batch loads, and whether each loads.

Spark loads, for every stateful operator, every store of it (a join has four) and every
partition ``0 … spark.sql.shuffle.partitions - 1`` — the count the newest offsets entry pins,
not what the operator metadata or the folders say — at the restart's state version: the
newest snapshot (RocksDB: zip) at or below it and every change file after it (checkpoint
format v2: the files whose ids the commit log names). A missing file fails the load; a
damaged one fails it only where Spark's reader reaches the damage (:mod:`statekit.state.verify`
decides as Spark reads), and a damaged snapshot or zip with an intact older chain is
repaired (Spark 4.3's ``autoSnapshotRepair``).

A store instance with no file left at all cannot be loaded at any version: no rollback
brings it back, and the doctor says what is lost instead of printing a command that fails.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.inventory import StoreInstance
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.logs import CONF_SHUFFLE_PARTITIONS
from statekit.checkpoint.operators import JOIN_STORES, OperatorMetadata
from statekit.doctor.copies import copy_problems
from statekit.doctor.late_files import late_file_problems
from statekit.doctor.lineage import lineage_problems
from statekit.doctor.plan import RestartPlan, hidden_checksum
from statekit.doctor.problems import (
    DIFFERS,
    FATAL,
    INFO,
    LOSES,
    SPARK_LOAD_CORRUPT,
    SPARK_LOAD_MISSING_HDFS,
    SPARK_LOAD_MISSING_ROCKSDB,
    SPARK_OPERATOR_GONE,
    SPARK_RENAME_EXISTS,
    WARNING,
    Problem,
    rollback_before_version,
)
from statekit.doctor.twins import twin_problems
from statekit.state.verify import DamagedFile, Progress, Verification, verify_restart_path
from statekit.state.workers import GroupRunner
from statekit.support.errors import StatekitError
from statekit.writes.rollback import StateChain, state_chain

JOIN_OPERATOR = "symmetricHashJoin"


def pinned_partitions(conf: Mapping[str, str]) -> int | None:
    value = conf.get(CONF_SHUFFLE_PARTITIONS)
    return int(value) if value is not None and str(value).isdigit() and int(value) > 0 \
        else None


def operator_folders(ckpt: Checkpoint) -> list[int]:
    """The operator folders under ``state/`` (empty ones included: a listing of files
    alone does not show them)."""
    try:
        names = [posixpath.basename(p.rstrip("/")) for p in
                 ckpt.fs.ls(ckpt.location.path("state"), detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if n.isdigit())


def operator_names(ckpt: Checkpoint) -> dict[int, str]:
    """Each operator's name as well as the files tell (damaged metadata: from the folders)."""
    names: dict[int, str] = {}
    try:
        operators: dict[int, OperatorMetadata] = ckpt.operators
    except StatekitError:
        operators = {}
    for op_id in sorted({*ckpt.inventory.operator_ids, *operator_folders(ckpt)}):
        meta = operators.get(op_id)
        if meta is not None:
            names[op_id] = meta.name
        elif set(JOIN_STORES) & set(ckpt.inventory.stores(op_id)):
            names[op_id] = JOIN_OPERATOR
        else:
            names[op_id] = "unknown"
    return names


def expected_stores(ckpt: Checkpoint, op_id: int, name: str) -> list[str]:
    """The stores Spark loads for an operator: a join's four, else ``default`` (and any
    other store folder that exists)."""
    present = ckpt.inventory.stores(op_id)
    if name == JOIN_OPERATOR or set(JOIN_STORES) & set(present):
        return list(JOIN_STORES)
    return sorted({"default", *present} - set(JOIN_STORES))


def _provider_of(instance: StoreInstance | None, conf: Mapping[str, str]) -> str:
    if instance is not None and any(f.kind in ("zip", "changelog", "sst")
                                    for f in instance.files):
        return "rocksdb"
    if instance is not None and any(f.kind in ("delta", "snapshot") for f in instance.files):
        return "hdfs"
    return "rocksdb" if "RocksDB" in conf.get(
        "spark.sql.streaming.stateStore.providerClass", "") else "hdfs"


def _first_missing(instance: StoreInstance, version: int, provider: str) -> str:
    """The change file Spark looks for first and does not find."""
    base = instance.latest_snapshot(version) or 0
    present = {f.version for f in instance.files if f.kind in ("delta", "changelog")}
    kind = "changelog" if provider == "rocksdb" else "delta"
    missing = next((v for v in range(base + 1, version + 1) if v not in present), version)
    return f"{missing}.{kind}"


class StateCheck:
    """The state a restart loads, checked once; the fix search asks about older versions."""

    def __init__(self, ckpt: Checkpoint, plan: RestartPlan, conf: Mapping[str, str],
                 query_operators: int | None = None, partitions_before: int | None = None
                 ) -> None:
        self.ckpt = ckpt
        self.plan = plan
        self.conf = conf
        self.query_operators = query_operators
        """How many stateful operators the query runs (its progress log), when known."""
        self.partitions_before = partitions_before
        """The partition count the entry before the newest pins, when the newest (committed)
        entry pins another: a hand edit, or an entry copied from another query."""
        self.partitions = pinned_partitions(conf)
        self.names = operator_names(ckpt) if ckpt.has_state else {}
        self.chain: StateChain | None = state_chain(ckpt) if ckpt.has_state else None

    def expected(self, partitions: int | None = None) -> list[tuple[int, str, int]]:
        """Every (operator, store, partition) the restart loads (with ``partitions``
        pinned: what a restart after a rollback to an entry pinning them loads)."""
        keys: list[tuple[int, str, int]] = []
        for op_id, name in sorted(self.names.items()):
            present = {k[2] for k in self.ckpt.inventory.instances if k[0] == op_id}
            count = partitions or self.partitions or (max(present) + 1 if present else 0)
            for store in expected_stores(self.ckpt, op_id, name):
                keys += [(op_id, store, p) for p in range(count)]
        return keys

    def files_at(self, key: tuple[int, str, int], version: int) -> list[StateFile] | None:
        """The files that load ``version`` of an instance (``None``: it cannot be loaded)."""
        instance = self.ckpt.inventory.instances.get(key)
        if instance is None:
            return None
        files = self.chain(instance, version) if self.chain else \
            instance.files_to_load(version)
        return files or None

    def join_operators(self) -> list[int]:
        return [op for op, name in sorted(self.names.items()) if name == JOIN_OPERATOR]

    def loadable_somewhere(self, key: tuple[int, str, int]) -> bool:
        """Whether any committed version of the instance can still be loaded."""
        return any(self.files_at(key, batch + 1) for batch in self.ckpt.committed_batches)


def state_problems(ckpt: Checkpoint, check: StateCheck, *, decode: bool,
                   progress: Progress | None = None, runner: GroupRunner | None = None
                   ) -> tuple[list[Problem], Verification | None]:
    plan = check.plan
    version = plan.version
    if version is None or version < 1:
        return [], None
    found: list[Problem] = []
    if not ckpt.has_state or not check.names:
        found += _state_folder_missing(ckpt, plan)
        return found, None
    found += _missing_operators(ckpt, check)
    found += _missing_instances(ckpt, check, version)
    verification = None
    if decode:
        verification = verify_restart_path(ckpt, version=version, progress=progress,
                                           runner=runner, chain=check.chain)
        found += _damaged(ckpt, verification.damaged)
        if not verification.fatal:
            found += join_problems(ckpt, check, version)
            chains = [check.files_at(key, version) or [] for key in check.expected()]
            found += twin_problems(ckpt, chains)
            found += copy_problems(ckpt, chains)
            found += lineage_problems(ckpt, chains)
            found += late_file_problems(ckpt, chains, {p.path for p in found})
    found += _extra_partitions(ckpt, check)
    return found, verification


def join_problems(ckpt: Checkpoint, check: StateCheck, version: int) -> list[Problem]:
    """Joins whose two stores of a side disagree at ``version`` (:mod:`.joins`): a counted
    row missing fails the restart; rows not counted restart on another version's rows. The
    fix rolls back before the first version they disagree at."""
    from statekit.doctor.joins import Disagreement, inconsistent_join_keys

    found: list[Problem] = []
    for op_id in check.join_operators():
        for partition in range(check.partitions or 0):
            def at(v: int, p: int = partition, op: int = op_id) -> Disagreement | None:
                return inconsistent_join_keys(ckpt, op, p, lambda key: check.files_at(key, v))

            bad = at(version)
            if bad is None:
                continue
            first = _first_disagreeing(version, at)
            remedy, batch = rollback_before_version(
                first, f"version {first}, the first whose join stores disagree") \
                if first is not None else ("compare with a backup of the checkpoint", None)
            shown = ckpt.display(ckpt.location.path("state", str(op_id), str(partition)))
            said = (f"operator {op_id} (stream-stream join) partition {partition}: the "
                    f"{bad.side} side's two stores disagree at version {version}: "
                    f"{bad.detail} (one store restored from another version?)")
            if bad.fails:
                found.append(Problem(
                    "join-inconsistent", FATAL, shown, said,
                    "the first batch that reaches the key fails (with a watermark, every "
                    "batch scans every key)", "STREAM_STREAM_JOIN_INCONSISTENT_STATE",
                    remedy, batch))
            else:
                found.append(Problem(
                    "join-rows-uncounted", WARNING, shown,
                    f"{said}: Spark never leaves a row its key does not count, so a file of "
                    "one store holds another version's rows",
                    "Spark restarts (it never reads an uncounted row) on the rows of another "
                    "version at the counted indexes: joined output lost or changed, silently",
                    None, remedy, batch, outcome=DIFFERS,
                    affects=f"operator {op_id} partition {partition} (1 of "
                            f"{check.partitions} partitions) of the join's {bad.side} side"))
    return found


JOIN_WALK_BACK = 20
"""How many versions back the join rule looks for the first one whose stores disagree."""


def _first_disagreeing(version: int, disagree_at: Callable[[int], object | None]
                       ) -> int | None:
    """The oldest version of ``version``'s unbroken run back of disagreeing versions
    (``None``: still disagreeing :data:`JOIN_WALK_BACK` versions back, or at version 1)."""
    first = version
    while first > 1 and version - first < JOIN_WALK_BACK:
        if disagree_at(first - 1) is None:
            return first
        first -= 1
    return None


def _state_folder_missing(ckpt: Checkpoint, plan: RestartPlan) -> list[Problem]:
    """No operator folder under ``state/``: a stateless query, or state deleted. Spark
    creates ``state/`` only for stateful queries; without it, a watermark in the logs
    (event-time processing, what stateful operators are there for) is the evidence."""
    if ckpt.has_state:
        what = "the state folder holds no operator folder"
    else:
        try:
            offsets = ckpt.ledger.newest_readable_offset
        except StatekitError:
            offsets = None
        if offsets is None or not offsets.watermark_ms:
            return []
        what = ("the state folder is gone while the logs hold an event-time watermark (a "
                "stateful query)")
    return [Problem(
        "state-missing", FATAL, ckpt.display(ckpt.location.path("state")), what,
        "Spark refuses to restart a query with stateful operators on a missing or empty "
        "state directory (a stateless query restarts)",
        "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY",
        "none from statekit: no state file is left. Start the query on a new checkpoint "
        "(every input is read again) or restore state/ from a backup",
        rollback_fixes=False, lost="all state of every stateful operator")]


def _missing_operators(ckpt: Checkpoint, check: StateCheck) -> list[Problem]:
    """Operator ids are numbered from 0: a gap is an operator whose folder is gone. The
    highest one gone leaves no gap; the query's progress log, when given, says how many
    operators there are."""
    ids = sorted(check.names)
    if not ids:
        return []
    known = check.query_operators or 0
    gone = [op for op in range(max(ids[-1] + 1, known)) if op not in check.names]
    there = f"operators {', '.join(map(str, ids))} are there"
    if known > ids[-1] + 1:
        there += f"; the query's progress log lists {known} stateful operators"
    return [Problem(
        "operator-missing", FATAL, ckpt.display(ckpt.location.path("state", str(op))),
        f"operator {op}'s state folder is gone ({there})",
        "Spark fails: its operators no longer match the state metadata left, or it cannot "
        "load that operator's state", SPARK_OPERATOR_GONE,
        "none from statekit: no file of that operator is left",
        rollback_fixes=False, lost=f"all state of operator {op}") for op in gone]


def _missing_instances(ckpt: Checkpoint, check: StateCheck, version: int) -> list[Problem]:
    found: list[Problem] = []
    total = {op: sum(1 for k in check.expected() if k[0] == op) for op in check.names}
    gone: dict[tuple[int, str], list[int]] = {}
    for key in check.expected():
        if check.files_at(key, version):
            continue
        op_id, store, partition = key
        instance = ckpt.inventory.instances.get(key)
        provider = _provider_of(instance, check.conf)
        folder = ckpt.location.path("state", str(op_id), str(partition),
                                    *([] if store == "default" else [store]))
        if instance is None or not instance.files:
            gone.setdefault((op_id, store), []).append(partition)
            continue
        missing = _first_missing(instance, version, provider)
        recoverable = check.loadable_somewhere(key)
        found.append(Problem(
            "state-file-missing", FATAL, ckpt.display(posixpath.join(folder, missing)),
            f"operator {op_id} store {store} partition {partition}: state version {version} "
            f"cannot be rebuilt, {missing} is missing",
            "Spark fails loading the state of that partition",
            SPARK_LOAD_MISSING_ROCKSDB if provider == "rocksdb" else SPARK_LOAD_MISSING_HDFS,
            "roll back to the newest batch whose state still loads" if recoverable else
            "none from statekit: no retained version of this partition loads",
            None, rollback_fixes=recoverable,
            lost="" if recoverable else
            f"operator {op_id} store {store} partition {partition}: every retained version"))
    for (op_id, store), partitions in sorted(gone.items()):
        count = total.get(op_id, 0) // max(1, len(expected_stores(
            ckpt, op_id, check.names.get(op_id, ""))))
        shown_parts = ", ".join(map(str, partitions[:8])) + (" …" if len(partitions) > 8
                                                             else "")
        folder = ckpt.location.path("state", str(op_id), str(partitions[0]),
                                    *([] if store == "default" else [store]))
        provider = _provider_of(None, check.conf)
        before = check.partitions_before
        if before is not None and min(partitions) >= before and check.plan.last_committed:
            last = check.plan.last_committed
            found.append(Problem(
                "partition-missing", FATAL, ckpt.display(folder),
                f"operator {op_id} store {store}: partition{'s' * (len(partitions) > 1)} "
                f"{shown_parts} never had state: the newest offsets entry pins "
                f"{check.partitions} partitions, the entry before {before} (edited by hand, or "
                "copied from another query)",
                "Spark fails loading the state of the partitions the edit added",
                SPARK_LOAD_MISSING_ROCKSDB if provider == "rocksdb" else
                SPARK_LOAD_MISSING_HDFS,
                f"roll back to batch {last - 1}: the re-planned batch takes that entry's "
                f"{before} partitions (statekit repartition changes the count safely)",
                last - 1))
            continue
        share = f"{len(partitions)} of {count} partition{'s' * (count != 1)}"
        kept = _kept_bytes(ckpt, op_id, store)
        found.append(Problem(
            "partition-missing", FATAL, ckpt.display(folder),
            f"operator {op_id} store {store}: partition{'s' * (len(partitions) > 1)} "
            f"{shown_parts} ha{'ve' if len(partitions) > 1 else 's'} no state file at all "
            "(deleted, or never copied)",
            "Spark fails loading the state of that partition (no version of it exists)",
            SPARK_LOAD_MISSING_ROCKSDB if provider == "rocksdb" else SPARK_LOAD_MISSING_HDFS,
            "none from statekit: no copy of that partition's state is left. Restore it from "
            "a backup, or start the query on a new checkpoint (every input is read again)",
            None, rollback_fixes=False,
            lost=f"operator {op_id} store {store}: {share} "
                 f"({100 * len(partitions) / max(count, 1):.0f} % of its keys); the other "
                 f"partitions keep {kept}"))
    return found


def _kept_bytes(ckpt: Checkpoint, op_id: int, store: str) -> str:
    from statekit.support.presentation import human_bytes

    instances = ckpt.inventory.instances_of(op_id, store)
    return f"{human_bytes(sum(i.total_bytes for i in instances))} in {len(instances)} " \
           f"partition{'s' * (len(instances) != 1)}"


def _damaged(ckpt: Checkpoint, damaged: tuple[DamagedFile, ...]) -> list[Problem]:
    found: list[Problem] = []
    for d in damaged:
        if d.checksum_only or d.beyond_spark:
            found.append(Problem(
                "checksum-mismatch" if d.checksum_only else "damage-spark-skips", INFO,
                d.path, d.message,
                "Spark restarts: it reads this file without the damaged bytes (Hadoop's "
                "checksum files are not checked on read, and the reader stops at the end "
                "marker)", None,
                "nothing needed; the file was changed after Spark wrote it"))
        elif d.repaired_from is not None:
            found.append(Problem(
                "state-file-corrupt", WARNING, d.path, d.message,
                f"Spark 4.3 restarts: its automatic snapshot repair loads version "
                f"{d.repaired_from} and replays the change files after it (older Spark "
                "versions fail)", None,
                "nothing needed on Spark 4.3; on older Spark roll back to a batch before the "
                "damaged file"))
        elif d.after_load:
            found.append(Problem(
                "state-block-damaged", FATAL, d.path, d.message,
                "RocksDB opens the version (it reads data blocks only when keys are read): "
                "a batch that reads a key in the damaged block fails, and every scan — "
                "watermark eviction, session merging, Spark's state reader — silently stops "
                "at it, so the query fails or runs on with rows missing",
                "RocksDBException: Corruption: block checksum mismatch",
                "roll back to the newest batch whose state does not use this SST", None))
        else:
            found.append(Problem(
                "state-file-corrupt", FATAL, d.path, d.message,
                "Spark fails loading the state of that partition", d.spark_error or
                SPARK_LOAD_CORRUPT, "roll back to the newest batch whose state still decodes",
                None))
    return found


def _extra_partitions(ckpt: Checkpoint, check: StateCheck) -> list[Problem]:
    if check.partitions is None:
        return []
    extra = sorted({k[2] for k in ckpt.inventory.instances if k[2] >= check.partitions})
    if not extra:
        return []
    return [Problem(
        "extra-partitions", WARNING,
        ckpt.display(ckpt.location.path("state")),
        f"partitions {', '.join(map(str, extra[:8]))} hold state beyond the "
        f"{check.partitions} partitions the query runs with "
        f"({CONF_SHUFFLE_PARTITIONS})",
        "Spark restarts and never loads them: their keys start from nothing (left over "
        "from a repartition, or the pinned partition count was edited)", None,
        "if the partition count was edited, roll back to a batch before the edit",
        outcome=LOSES, affects=f"the keys of {len(extra)} of "
        f"{len(extra) + check.partitions} partitions (about "
        f"{100 * len(extra) / (len(extra) + check.partitions):.0f} % of the state)")]


def stale_metadata_checksums(ckpt: Checkpoint) -> list[Problem]:
    """Operator-metadata and schema files Spark writes on restart because they are missing,
    whose hidden checksum file was left behind: the rename into place fails."""
    if not ckpt.has_state:
        return []
    found = []
    crcs = ckpt.inventory.checksum_sizes
    wanted: list[str] = []
    for op_id in ckpt.inventory.operator_ids:
        base = ckpt.location.path("state", str(op_id))
        wanted.append(posixpath.join(base, "_metadata", "metadata"))
        for store in ckpt.inventory.stores(op_id) or ["default"]:
            wanted.append(posixpath.join(base, "0", *([] if store == "default" else [store]),
                                         "_metadata", "schema"))
    present = {m.path for m in ckpt.inventory.meta_files}
    strip = ckpt.fs._strip_protocol
    for path in wanted:
        plain = strip(path)
        if plain not in present and strip(hidden_checksum(path)) in crcs:
            found.append(Problem(
                "stale-checksum", FATAL, ckpt.display(hidden_checksum(path)),
                f"{posixpath.basename(path)} was deleted but its hidden checksum file is still "
                "there", "Spark writes the missing file on restart and fails renaming it into "
                "place", SPARK_RENAME_EXISTS,
                "roll back into a new checkpoint (it has no stale checksum files); or delete "
                "the checksum file by hand", None))
    return found
