"""Operator metadata and schema files on restart.

Spark 4.3 reads each store's schema file (``<p>/[<store>/]_metadata/schema``, v1/v2) when the
query starts, to check the query's state schema against it — a file that does not parse
stops the restart, a missing one is written again. The v1 operator metadata
(``_metadata/metadata``) is written again when missing and otherwise hardly matters to a
restart (measured: a truncated or garbled one restarts), but Spark's and statekit's state
readers fail on a damaged one.
"""

from __future__ import annotations

import re

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.operators import JOIN_STORES
from statekit.checkpoint.spark_reads import SparkReadError, jackson_value, java_lines, java_text
from statekit.doctor.problems import FATAL, INFO, WARNING, Problem
from statekit.formats.schema import spark_type_error
from statekit.formats.schema_file import parse_schema_bytes, v3_raw_entries
from statekit.support.errors import CorruptFile, StatekitError

SPARK_OPERATOR_NAMES = frozenset({
    "stateStoreSave", "dedupe", "dedupeWithinWatermark", "symmetricHashJoin",
    "sessionWindowStateStoreSaveExec", "flatMapGroupsWithState", "applyInPandasWithState",
    "transformWithStateExec", "transformWithStateInPandasExec",
    "transformWithStateInPySparkExec", "globalLimit"})
"""The names Spark's stateful operators write into their metadata (``shortName``)."""


def _spark_names(ckpt: Checkpoint) -> list[Problem]:
    """A v1 operator metadata file Spark can parse is checked against the running
    operator: a name no stateful operator has (a flipped bit in it) fails the restart
    (``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``); one it cannot parse is
    skipped."""
    found: list[Problem] = []
    named: dict[str, object] = {}  # file -> the operator id inside it
    for meta in ckpt.inventory.meta("operator-metadata"):
        shown = ckpt.display(meta.path)
        try:
            lines = java_lines(java_text(ckpt.read_bytes(meta.path)))
            value = jackson_value("\n".join(lines[1:])) if len(lines) > 1 else None
        except (StatekitError, SparkReadError):
            continue
        if not _extractable_v1(value):
            continue  # json4s fails on it: Spark skips the file (and the id check)
        info = value.get("operatorInfo") if isinstance(value, dict) else None
        name = info.get("operatorName") if isinstance(info, dict) else None
        if isinstance(info, dict):
            named[shown] = info.get("operatorId")
        if isinstance(info, dict) and info.get("operatorId") != meta.operator_id:
            continue  # Spark compares the metadata of the operator it names, not this one
        if isinstance(name, str) and name not in SPARK_OPERATOR_NAMES:
            found.append(Problem(
                "operator-metadata-mismatch", FATAL, shown,
                f"the operator metadata names operator {name!r}, which no stateful operator "
                "is (a damaged name?)",
                "Spark compares the running operator with the metadata and refuses to start",
                "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
                "none from statekit (a rollback copies the file): in a copy of the "
                "checkpoint, delete this file — Spark writes it again on restart",
                rollback_fixes=False, lost="nothing once the file is rewritten"))
    return found + _ids_that_miss_an_operator(ckpt, named)


def _extractable_v1(value: object) -> bool:
    """Whether json4s extracts ``OperatorStateMetadataV1`` from ``value``: an
    ``operatorInfo`` with a numeric ``operatorId`` and a string ``operatorName``, and a
    ``stateStoreInfo`` list of stores with a string ``storeName`` and numeric
    ``numColsPrefixKey`` and ``numPartitions`` (a key whose name rotted is a missing value:
    ``MappingException``)."""
    if not isinstance(value, dict):
        return False
    info, stores = value.get("operatorInfo"), value.get("stateStoreInfo")
    if not isinstance(info, dict) or not isinstance(stores, list):
        return False
    if not _number(info.get("operatorId")) or not isinstance(info.get("operatorName"), str):
        return False
    return all(isinstance(store, dict) and isinstance(store.get("storeName"), str)
               and _number(store.get("numColsPrefixKey"))
               and _number(store.get("numPartitions")) for store in stores)


def _number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ids_that_miss_an_operator(ckpt: Checkpoint, named: dict[str, object]) -> list[Problem]:
    """Spark maps operator id → name from the ids *inside* the v1 metadata files (when every
    operator's file reads; one that does not read skips the check) and fails when an
    operator of the query is not in the map: a file copied from another operator's folder
    leaves its own operator out (measured on a query with two operators)."""
    operators = {op for op in ckpt.inventory.operator_ids if ckpt.inventory.stores(op)}
    files = ckpt.inventory.meta("operator-metadata")
    if (len(named) != len(files) or {m.operator_id for m in files} != operators
            or ckpt.inventory.meta("operator-metadata-v2")):
        return []
    ids = set(named.values())
    missing = sorted(operators - {i for i in ids if isinstance(i, int)})
    if not missing:
        return []
    return [Problem(
        "operator-metadata-mismatch", FATAL, shown,
        f"this operator metadata names operator {op_id!r}, but sits in operator "
        f"{meta.operator_id}'s folder: Spark reads the operator ids from the files and finds "
        f"no operator {', '.join(map(str, missing))}",
        "Spark compares the query's operators with the ids in the metadata files and "
        "refuses to start", "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
        "none from statekit (a rollback copies the file): in a copy of the checkpoint, "
        "delete this file — Spark writes it again on restart",
        rollback_fixes=False, lost="nothing once the file is rewritten")
        for meta in files
        for shown, op_id in [(ckpt.display(meta.path), named.get(ckpt.display(meta.path)))]
        if op_id != meta.operator_id]


def operator_metadata_problems(ckpt: Checkpoint) -> list[Problem]:
    found: list[Problem] = []
    if not ckpt.has_state:
        return found
    found += _spark_names(ckpt)
    for op_id in ckpt.inventory.operator_ids:
        if not ckpt.inventory.stores(op_id):
            continue
        metas = [*ckpt.inventory.meta("operator-metadata", op_id),
                 *ckpt.inventory.meta("operator-metadata-v2", op_id)]
        if not metas:
            found.append(Problem(
                "operator-metadata-missing", INFO,
                ckpt.display(ckpt.location.path("state", str(op_id), "_metadata",
                                                "metadata")),
                f"operator {op_id} has no operator metadata (Spark 3.5 wrote none; or it was "
                "deleted)", "Spark restarts and writes it again", None,
                "nothing needed; Spark's state-metadata reader needs it until then"))
    try:
        ckpt.operators  # noqa: B018 - parses every operator metadata file
    except StatekitError as error:
        found.append(Problem(
            "operator-metadata-corrupt", WARNING, error.path or ckpt.location.url,
            error.message,
            "Spark restarts (a v1 operator metadata file it cannot read does not stop it)",
            None, "Spark's and statekit's state readers fail on it: restore it from a "
                  "backup, or let a new checkpoint write it"))
    return found


def schema_problems(ckpt: Checkpoint) -> list[Problem]:
    found: list[Problem] = []
    if not ckpt.has_state:
        return found
    joins: dict[int, dict[str, tuple[str, object]]] = {}
    for meta in ckpt.inventory.meta("schema"):
        shown = ckpt.display(meta.path)
        data = b""
        try:
            data = ckpt.read_bytes(meta.path)
            parsed = parse_schema_bytes(data, path=shown)
            for part in ("key", "value"):
                text = parsed.raw.get(part) if isinstance(parsed.raw, dict) else None
                problem = spark_type_error(jackson_value(text)) if isinstance(text, str) \
                    else None
                if problem:
                    raise CorruptFile(f"the {part} schema does not parse as Spark reads it: "
                                      f"{problem}", path=shown)
            if meta.store in JOIN_STORES and meta.operator_id is not None and \
                    meta.partition == 0:
                joins.setdefault(meta.operator_id, {})[meta.store] = (shown, parsed)
            mismatch = _schema_of_another_operator(ckpt, meta.operator_id, meta.store, parsed)
            if mismatch:
                found.append(Problem(
                    "schema-mismatch", FATAL, shown, mismatch,
                    "Spark compares the operator's state schema with this file and refuses "
                    "to start", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE / "
                    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                    "none from statekit (a rollback copies the file): restore it from a "
                    "backup, or in a copy of the checkpoint delete it (Spark writes the "
                    "query's schema again, unchecked)", rollback_fixes=False,
                    lost="nothing once the file is right"))
        except (StatekitError, SparkReadError) as error:
            error = error if isinstance(error, StatekitError) else CorruptFile(
                str(error), path=shown)
            found.append(Problem(
                "schema-corrupt", FATAL, shown, error.message,
                "Spark fails reading the state schema when the query starts",
                schema_error(data),
                "none from statekit (a rollback copies the file): in a copy of the "
                "checkpoint, delete this schema file — Spark 4.3 writes it again on restart "
                "(measured)", rollback_fixes=False,
                lost="nothing once the file is rewritten; the schema check of that first "
                     "restart is skipped"))
    for stores in joins.values():
        for shown, mismatch in _join_schema_mismatches(stores):
            found.append(Problem(
                "schema-mismatch", FATAL, shown, mismatch,
                "Spark compares the join's state schemas with these files and refuses to "
                "start", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE / "
                "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                "none from statekit (a rollback copies the file): restore it from a backup, "
                "or in a copy of the checkpoint delete it (Spark writes the query's schema "
                "again, unchecked)", rollback_fixes=False,
                lost="nothing once the file is right"))
    return found


def _types(struct: object) -> tuple[str, ...] | None:
    """A schema's field types without names (Spark's check ignores names)."""
    from statekit.formats.schema import ArrayType, MapType, StructType, simple_string

    def shape(t: object) -> str:
        if isinstance(t, StructType):
            return "struct<" + ",".join(shape(f.data_type) for f in t.fields) + ">"
        if isinstance(t, ArrayType):
            return f"array<{shape(t.element_type)}>"
        if isinstance(t, MapType):
            return f"map<{shape(t.key_type)},{shape(t.value_type)}>"
        return simple_string(t)  # type: ignore[arg-type]

    if not isinstance(struct, StructType):
        return None
    return tuple(shape(f.data_type) for f in struct.fields)


def _join_schema_mismatches(stores: dict[str, tuple[str, object]]) -> list[tuple[str, str]]:
    """A stream-stream join's four schema files against each other: every count store's
    value is one long, every row store's key is its join key plus a long index, and the
    join key has the same types in all four (the one that disagrees with the others is
    the copy). Decisive shapes only."""
    found: list[tuple[str, str]] = []
    join_keys: dict[str, tuple[str, ...]] = {}
    for store, (shown, parsed) in stores.items():
        key = _types(getattr(parsed, "key_schema", None))
        value = _types(getattr(parsed, "value_schema", None))
        if key is None or value is None:
            continue
        if store.endswith("keyToNumValues"):
            if value != ("bigint",):
                found.append((shown, f"{store}'s value schema is ({', '.join(value)}), not "
                                     "the one count (bigint) a join keeps there (copied from "
                                     "another store or query?)"))
                continue
            join_keys[store] = key
        else:
            if not key or key[-1] != "bigint":
                found.append((shown, f"{store}'s key schema ({', '.join(key)}) does not end "
                                     "with the join's bigint row index (copied from another "
                                     "store or query?)"))
                continue
            join_keys[store] = key[:-1]
    if len(join_keys) >= 3:
        votes: dict[tuple[str, ...], int] = {}
        for key in join_keys.values():
            votes[key] = votes.get(key, 0) + 1
        common, count = max(votes.items(), key=lambda item: item[1])
        if count >= len(join_keys) - 1 and count > 1:
            for store, key in join_keys.items():
                if key != common:
                    found.append((stores[store][0], (
                        f"{store}'s join key is ({', '.join(key)}), the join's other stores "
                        f"say ({', '.join(common)}) (copied from another store or query?)")))
    return found


_SCHEMA_SHAPED = {"dedupe": "dedupe", "dedupeWithinWatermark": "dedupeWithinWatermark",
                  "flatMapGroupsWithState": "groupState", "applyInPandasWithState": "groupState",
                  "sessionWindowStateStoreSaveExec": "session"}
"""Operators whose state schema says which operator wrote it (see
:func:`statekit.checkpoint.operators.derive_operator`)."""


def _schema_of_another_operator(ckpt: Checkpoint, op_id: int | None, store: str | None,
                                parsed: object) -> str | None:
    """Why a schema file cannot be the named operator's (one copied from another operator
    of the query, or another query), or ``None``: only shapes that are decisive count."""
    from statekit.checkpoint.operators import derive_operator
    from statekit.formats.schema import StructType

    if op_id is None or store != "default":
        return None
    try:
        declared = ckpt.operators.get(op_id)
    except StatekitError:
        return None
    if declared is None or declared.version == 0 or declared.operator_id != op_id:
        return None  # (metadata naming another operator id is not compared by Spark)
    value = getattr(parsed, "value_schema", None)
    key = getattr(parsed, "key_schema", None)
    if value is None or key is None:
        return None
    window = any(isinstance(f.data_type, StructType) and f.data_type.names == ("start", "end")
                 for f in value.fields)
    derived = derive_operator(op_id, ["default"], 1, [f.name for f in value.fields],
                              [f.name for f in key.fields], window).name
    shape_of = {"flatMapGroupsWithState": "groupState", "applyInPandasWithState": "groupState",
                "sessionWindowStateStoreSaveExec": "session"}
    wanted = _SCHEMA_SHAPED.get(declared.name)
    got = shape_of.get(derived, derived)
    if wanted is not None and got != wanted:
        return (f"the operator metadata says {declared.name}, whose state schema this is "
                "not (copied from another operator or query?)")
    if wanted is None and got in _SCHEMA_SHAPED.values() and declared.name != "unknown":
        return (f"the state schema is a {derived}'s, the operator metadata says "
                f"{declared.name} (copied from another operator or query?)")
    return None


def tws_metadata_problems(ckpt: Checkpoint) -> list[Problem]:
    """transformWithState reads its newest v2 operator metadata on restart to find its
    schema files, and reads those (measured: either one missing or damaged fails the
    restart, and Spark writes neither again)."""
    found: list[Problem] = []
    if not ckpt.has_state:
        return found
    for op_id in ckpt.inventory.operator_ids:
        v2 = ckpt.inventory.meta("operator-metadata-v2", op_id)
        v3 = ckpt.inventory.meta("schema-v3", op_id)
        if not v2 and not v3:
            continue
        folder = ckpt.location.path("state", str(op_id), "_metadata", "v2")
        if not v2:
            found.append(Problem(
                "tws-metadata-missing", FATAL, ckpt.display(folder),
                f"operator {op_id} (transformWithState) has no v2 operator metadata",
                "Spark reads it on restart to find the state schema and fails",
                "STDS_FAILED_TO_READ_OPERATOR_METADATA",
                "none from statekit: restore the file from a backup", rollback_fixes=False,
                lost=f"operator {op_id}'s record of its state variables and schema files"))
            continue
        newest = max(v2, key=lambda m: m.batch_id or 0)
        shown = ckpt.display(newest.path)
        try:
            lines = java_lines(java_text(ckpt.read_bytes(newest.path)))
            value = jackson_value("\n".join(lines[1:])) if len(lines) > 1 else None
            stores = value.get("stateStoreInfo") if isinstance(value, dict) else None
            if not isinstance(stores, list):
                raise SparkReadError("no stateStoreInfo")
            paths = [str(p) for store in stores if isinstance(store, dict)
                     for p in (store.get("stateSchemaFilePaths") or
                               [store.get("stateSchemaFilePath")]) if p]
        except (StatekitError, SparkReadError) as error:
            message = error.message if isinstance(error, StatekitError) else str(error)
            found.append(Problem(
                "tws-metadata-corrupt", FATAL, shown,
                f"transformWithState's operator metadata does not parse as Spark reads it: "
                f"{message}", "Spark reads it on restart and fails", message,
                "none from statekit: restore the file from a backup", rollback_fixes=False,
                lost=f"operator {op_id}'s record of its state variables and schema files"))
            continue
        for path in paths:
            found += _tws_schema(ckpt, op_id, path)
    return found


def _tws_schema(ckpt: Checkpoint, op_id: int, uri: str) -> list[Problem]:
    """One schema file the v2 metadata names (an absolute URI: a copied checkpoint still
    names the original's, which Spark then reads)."""
    from urllib.parse import unquote, urlparse

    local = unquote(urlparse(uri).path) if uri.startswith("file:") else uri
    inside = ckpt.fs._strip_protocol(local)
    try:
        data = ckpt.fs.cat_file(inside)
    except (OSError, ValueError):
        return [Problem(
            "tws-schema-missing", FATAL, uri,
            f"the schema file operator {op_id}'s metadata names does not exist",
            "Spark reads it on restart and fails", "File … does not exist",
            "none from statekit: restore the file from a backup", rollback_fixes=False,
            lost=f"operator {op_id}'s state schema")]
    try:
        for family in v3_raw_entries(data, path=uri):
            for part in ("keySchema", "valueSchema"):
                problem = spark_type_error(jackson_value(family[part]))
                if problem:
                    raise CorruptFile(f"a {part} does not parse as Spark reads it: {problem}",
                                      path=uri)
            spec = jackson_value(family["keyStateEncoderSpec"])
            if not isinstance(spec, dict):
                raise CorruptFile("a key encoder spec is not a JSON object", path=uri)
            _check_encoder_spec(spec, uri)
    except (StatekitError, SparkReadError) as error:
        message = error.message if isinstance(error, StatekitError) else str(error)
        return [Problem(
            "tws-schema-corrupt", FATAL, uri,
            f"the schema file of operator {op_id} (transformWithState) does not parse: "
            f"{message}", "Spark reads it on restart and fails", message,
            "none from statekit: restore the file from a backup", rollback_fixes=False,
            lost=f"operator {op_id}'s state schema")]
    return []


# Spark's KeyStateEncoderSpec.fromJson: the type, and the field each type reads
_ENCODER_FIELDS = {"NoPrefixKeyStateEncoderSpec": None,
                   "PrefixKeyScanStateEncoderSpec": ("numColsPrefixKey", int),
                   "RangeKeyScanStateEncoderSpec": ("orderingOrdinals", list)}


def _check_encoder_spec(spec: dict[str, object], uri: str) -> None:
    """A key encoder spec as Spark reads it: a known type and the field that type needs
    (a flipped bit in a name fails the restart: ``key not found: numColsPrefixKey``)."""
    kind = spec.get("keyStateEncoderType")
    if kind not in _ENCODER_FIELDS:
        raise CorruptFile(f"a key encoder spec has type {kind!r}, which Spark does not know",
                          path=uri)
    needed = _ENCODER_FIELDS[str(kind)]
    if needed is not None:
        name, wanted = needed
        value = spec.get(name)
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise CorruptFile(f"key not found: {name} (the {kind} needs it)", path=uri)


def schema_error(data: bytes) -> str:
    """What Spark's schema reader fails with: the file starts with the version tag as Java's
    ``writeUTF`` writes it (a two-byte length, then ``v<N>``)."""
    size = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
    if size is None or len(data) < 2 + size:  # readUTF runs out of bytes
        return "an exception without a message (EOFException reading the version tag)"
    if not re.fullmatch(rb"v\d+", data[2:2 + size]):
        return "MALFORMED_LOG_FILE (failed to read correct log version)"
    return "an error parsing the schema's JSON"
