"""A snapshot and the delta of the same version must agree; when they do not, one of them is
not what Spark wrote.

The HDFS provider writes ``N.delta`` when batch N-1 commits and, later, ``N.snapshot`` from
the same in-memory map, so every key the delta puts last is in the snapshot with the same
value and every key it removes last is absent. A restart loads the newest snapshot and the
deltas after it, so a snapshot overwritten by another version's bytes (a restore from the
wrong backup, a copy script) decodes cleanly and restarts on other state — measured with
pyspark 4.3: the query runs on and ends in another state than its first run. Comparing the
base snapshot of each restart chain with its twin delta catches that without replaying
anything: the delta is one batch's changes, and only its keys are looked up in the
snapshot. A delta with very many keys is checked on its first :data:`SAMPLE_KEYS` keys.

Which of the two is wrong cannot be told from them alone, so this is a warning: the restart
runs either way, on the snapshot. The fix, when a rollback can keep a batch before both
files, plans the batches after it again from the sources.
"""

from __future__ import annotations

from functools import partial

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.layout import StateFile
from statekit.checkpoint.state_data import file_records, replay_files
from statekit.doctor.problems import (
    DIFFERS,
    INFO,
    WARNING,
    Problem,
    rollback_before_version,
)
from statekit.state.decode_cache import remembered
from statekit.support.errors import StatekitError

SAMPLE_KEYS = 200_000
"""The most delta keys looked up in the snapshot (memory: one key and value each)."""


def twin_problems(ckpt: Checkpoint, chains: list[list[StateFile]]) -> list[Problem]:
    """A warning for each chain whose base snapshot disagrees with the delta of its
    version."""
    found: list[Problem] = []
    for chain in chains:
        base = chain[0] if chain else None
        if base is None or base.kind != "snapshot" or base.version is None:
            continue
        instance = ckpt.inventory.instances.get((base.operator_id, base.store, base.partition))
        twin = next((f for f in instance.of_kind("delta") if f.version == base.version),
                    None) if instance is not None else None
        if twin is None:
            continue
        difference = remembered(ckpt, "snapshot-delta-twins", [base, twin],
                                partial(_difference, ckpt, base, twin))
        if difference is None:
            continue
        older = next(instance.older_chains(chain[-1].version or 0, base.version), None) \
            if instance is not None else None
        if older is not None and remembered(
                ckpt, "snapshot-masked", [*chain, *older[1]],
                partial(_same_state, ckpt, chain, older[1])):
            found.append(_masked(ckpt, base, twin, difference))
        else:
            found.append(_problem(ckpt, base, twin, difference))
    return found


def _same_state(ckpt: Checkpoint, chain: list[StateFile], other: list[StateFile]) -> bool:
    """Whether the restart's chain and one that does without its snapshot load the same
    keys and values (the deltas after the snapshot rewrite every key it got wrong)."""
    try:
        mine, theirs = replay_files(ckpt, chain), replay_files(ckpt, other)
    except StatekitError:
        return False
    return mine.keys() == theirs.keys() and all(
        value == theirs[key][0] for key, (value, _) in mine.items())


def _masked(ckpt: Checkpoint, snapshot: StateFile, delta: StateFile, difference: str
            ) -> Problem:
    return Problem(
        "state-files-disagree", INFO, ckpt.display(snapshot.path),
        f"{difference} ({ckpt.display(delta.path)}): one of the two is not what Spark wrote "
        "(a file copied over another?); the deltas after the snapshot rewrite every key the "
        "two disagree on",
        "Spark restarts on the snapshot and loads the same keys and values as from an older "
        "snapshot and every delta: the restart is not changed by it", None,
        "replace the snapshot from a backup before the deltas after it are cleaned up", None)


def _difference(ckpt: Checkpoint, snapshot: StateFile, delta: StateFile) -> str | None:
    """How the snapshot contradicts the delta's changes (``None``: it does not, or one of
    them does not decode — the verification reports that)."""
    try:
        wanted: dict[bytes, bytes | None] = {}
        for record in file_records(ckpt, delta, check_end=False):
            if record.key in wanted or len(wanted) < SAMPLE_KEYS:
                wanted[record.key] = record.value if record.op == "put" else None
        if not wanted:
            return None
        seen: set[bytes] = set()
        for record in file_records(ckpt, snapshot, check_end=False):
            if record.key not in wanted:
                continue
            expected = wanted[record.key]
            if expected is None:
                return "holds a key the delta of the same version removes"
            if record.value != expected:
                return "holds another value for a key the delta of the same version writes"
            seen.add(record.key)
    except StatekitError:
        return None
    missing = sum(1 for key, value in wanted.items() if value is not None and key not in seen)
    if missing:
        return (f"lacks {missing} of the {sum(v is not None for v in wanted.values())} keys "
                "the delta of the same version writes")
    return None


def _problem(ckpt: Checkpoint, snapshot: StateFile, delta: StateFile, difference: str
             ) -> Problem:
    return other_state_warning(
        ckpt, "state-files-disagree", snapshot,
        f"{difference} ({ckpt.display(delta.path)}): one of the two is not what Spark wrote "
        "(a file copied over another?)",
        "Spark restarts on the snapshot: if it is the wrong one, the query runs on other "
        "state than its first run's, silently", "both files")


def other_state_warning(ckpt: Checkpoint, code: str, file: StateFile, what: str, spark: str,
                        before_what: str) -> Problem:
    """The warning for a state file on the restart path that holds another version's state:
    Spark restarts on it (``differs``, the file's partition as its share), and the fix rolls
    back to a batch before ``before_what`` (its version)."""
    remedy, batch = rollback_before_version(file.version or 0, before_what)
    return Problem(code, WARNING, ckpt.display(file.path), what, spark, None, remedy, batch,
                   outcome=DIFFERS, affects=partition_share(ckpt, file))


def partition_share(ckpt: Checkpoint, file: StateFile) -> str:
    """``operator 0 store default partition 3 (1 of 8 partitions)``: the share of the
    state a wrong file in one partition touches."""
    count = len(ckpt.inventory.partitions(file.operator_id, file.store)) or 1
    store = "" if file.store == "default" else f" store {file.store}"
    return (f"operator {file.operator_id}{store} partition {file.partition} (1 of {count} "
            f"partition{'s' * (count != 1)}, about {100 / count:.0f} % of its keys)")
