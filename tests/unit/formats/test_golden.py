"""The readers against real files written by pyspark 4.3 (see tests/data/formats/README.md).

The fixtures were fed the same input, so independent files must agree: an HDFS snapshot equals
the older snapshot plus the deltas after it; the RocksDB changelog replay holds the same keys
and values (prefixes stripped) as the HDFS state of the same partition and version; a RocksDB
zip's numKeys equals the key count of that state.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from pathlib import Path

import pytest

from statekit.formats.compression import open_decompressed, sniff_codec
from statekit.formats.records import read_changelog, read_state_file
from statekit.formats.rocksdb_keys import (
    split_multi_values,
    split_prefix_scan_key,
    strip_rocksdb_prefixes,
)
from statekit.formats.rocksdb_zip import read_zip_metadata
from statekit.formats.schema import StructType, simple_string
from statekit.formats.schema_file import read_schema_file
from statekit.formats.unsafe_row import make_decoder

USER_ID = re.compile(r"^u\d{7}$")
EPOCH_MS_2020, EPOCH_MS_2100 = 1_577_836_800_000, 4_102_444_800_000


def replay(fs, paths, codec, kind, *, strip=False):
    state: dict[bytes, bytes] = {}
    for path in paths:
        for rec in read_state_file(fs, str(path), codec, kind):
            key = strip_rocksdb_prefixes(rec.key, column_families=False)[1] if strip else rec.key
            if rec.op == "put":
                value = rec.value
                if strip:
                    value = strip_rocksdb_prefixes(value, column_families=False, what="value")[1]
                state[key] = value
            else:
                assert rec.op == "delete"
                state.pop(key, None)
    return state


def by_version(folder: Path, suffix: str) -> list[Path]:
    return sorted(folder.glob(f"*{suffix}"), key=lambda p: int(re.match(r"\d+", p.name)[0]))


def test_sniffed_codecs(data):
    assert sniff_codec((data / "aipws_hdfs/7.delta").read_bytes()[:8]) == "lz4"
    assert sniff_codec((data / "agg_zstd/1.delta").read_bytes()[:8]) == "zstd"


def test_hdfs_snapshot_equals_older_snapshot_plus_deltas(fs, data):
    d = data / "aipws_hdfs"
    replayed = replay(fs, [d / "6.snapshot"], "lz4", "snapshot")
    assert len(replayed) == 90
    replayed_after = replay(fs, [d / "6.snapshot", d / "7.delta", d / "8.delta", d / "9.delta"],
                            "lz4", "delta")
    snapshot = replay(fs, [d / "9.snapshot"], "lz4", "snapshot")
    assert len(snapshot) == 65
    assert replayed_after == snapshot


def test_rocksdb_changelog_v3_replay_matches_hdfs_state(fs, data):
    files = by_version(data / "aipws_rocksdb_changelog_v3", ".changelog")
    assert len(files) == 9
    rocks = replay(fs, files, "lz4", "changelog", strip=True)
    hdfs = replay(fs, [data / "aipws_hdfs/9.snapshot"], "lz4", "snapshot")
    assert rocks == hdfs  # same keys, byte-identical UnsafeRows once the 0x00 prefix is off


def test_changelog_v3_headers_carry_the_lineage(data):
    files = by_version(data / "aipws_rocksdb_changelog_v3", ".changelog")
    ids = [p.stem.split("_", 1)[1] for p in files]
    for n, path in enumerate(files):
        with path.open("rb") as raw:
            header, _ = read_changelog(open_decompressed(raw, "lz4", path=str(path)),
                                       path=str(path))
        assert header.version == 3
        assert header.lineage == [{"version": v + 1, "checkpointUniqueId": ids[v]}
                                  for v in range(n)]


def test_rocksdb_keys_carry_one_zero_version_byte(fs, data):
    path = next((data / "aipws_rocksdb_changelog_v3").glob("1_*.changelog"))
    hdfs_keys = set(replay(fs, [data / "aipws_hdfs/6.snapshot"], "lz4", "snapshot"))
    for rec in read_state_file(fs, str(path), "lz4", "changelog"):
        assert rec.key[0] == 0 and rec.value[0] == 0
        assert len(rec.key) == 25  # 0x00 + 8 null bits + 8 slot + 8 bytes "u0000123"
        assert rec.key[1:] in hdfs_keys or len(rec.key[1:]) == 24


def test_zip_metadata_num_keys_matches_hdfs_state(fs, data):
    meta = read_zip_metadata(fs, str(data / "aipws_rocksdb/9.zip"))
    assert meta.format_version == "v1"
    assert meta.num_keys == 65 == len(replay(fs, [data / "aipws_hdfs/9.snapshot"], "lz4",
                                              "snapshot"))
    assert [ref.local_name for ref in meta.sst_files] == ["000018.sst", "000017.sst"]
    assert meta.sst_files[0].dfs_name.startswith("000018-") and meta.sst_files[0].size_bytes
    assert meta.log_files == () and meta.column_family_mapping == {}
    assert meta.raw["numInternalKeys"] == 0


def test_apply_in_pandas_with_state_rows_decode(fs, data):
    schema = read_schema_file(fs, str(data / "aipws_hdfs/schema"))
    assert schema.version == 2
    assert simple_string(schema.key_schema) == "struct<user_id:string>"
    assert schema.value_schema.names == ("groupState", "timeoutTimestamp")
    key, value = make_decoder(schema.key_schema), make_decoder(schema.value_schema)
    state = replay(fs, [data / "aipws_hdfs/9.snapshot"], "lz4", "snapshot")
    phases = set()
    for k, v in state.items():
        assert USER_ID.match(key(k)["user_id"])
        row = value(v)
        timeout = row["timeoutTimestamp"]
        assert timeout == -1 or EPOCH_MS_2020 < timeout < EPOCH_MS_2100
        group = row["groupState"]
        phases.add(group["phase"])
        assert group["txn_count"] >= 0 and isinstance(group["total_amount"], float)
        assert EPOCH_MS_2020 < group["last_event_ms"] < EPOCH_MS_2100
    assert phases == {"Watching", "Flagged"}


def test_zstd_deltas_and_snapshot(fs, data):
    d = data / "agg_zstd"
    replayed = replay(fs, [d / "1.delta", d / "2.delta", d / "3.delta"], "zstd", "delta")
    assert replayed == replay(fs, [d / "3.snapshot"], "zstd", "snapshot")
    assert len(replayed) == 77
    schema = read_schema_file(fs, str(d / "schema"))
    assert simple_string(schema.value_schema) == "struct<count:bigint>"
    key, value = make_decoder(schema.key_schema), make_decoder(schema.value_schema)
    for k, v in replayed.items():
        assert USER_ID.match(key(k)["user_id"]) and value(v)["count"] >= 1


def test_rocksdb_changelog_v1_lz4_and_zstd_match_hdfs_deltas(fs, data):
    d = data / "agg_rocksdb_changelog_v1"
    for name, codec in (("1.changelog", "lz4"), ("1.zstd.changelog", "zstd")):
        with (d / name).open("rb") as raw:
            header, _ = read_changelog(open_decompressed(raw, codec, path=name), path=name)
        assert header.version == 1 and header.lineage is None
        assert replay(fs, [d / name], codec, "changelog", strip=True) == replay(
            fs, [data / "agg_zstd/1.delta"], "zstd", "delta")
    two = replay(fs, [d / "1.changelog", d / "2.changelog"], "lz4", "changelog", strip=True)
    assert two == replay(fs, [data / "agg_zstd/1.delta", data / "agg_zstd/2.delta"], "zstd",
                         "delta")
    assert read_zip_metadata(fs, str(d / "2.zip")).num_keys == len(two) == 50


def test_aggregation_buffer_of_many_types(fs, data):
    schema = read_schema_file(fs, str(data / "agg_types/schema"))
    assert simple_string(schema.key_schema) == (
        "struct<window:struct<start:timestamp,end:timestamp>,user_id:string,country:string>")
    assert schema.key_schema["window"].metadata == {"spark.timeWindow": True}
    key, value = make_decoder(schema.key_schema), make_decoder(schema.value_schema)
    rows = list(read_state_file(fs, str(data / "agg_types/3.snapshot"), "lz4", "snapshot"))
    assert len(rows) == 78
    for rec in rows:
        k, v = key(rec.key), value(rec.value)
        start, end = k["window"]["start"], k["window"]["end"]
        assert start.tzinfo is dt.timezone.utc and end - start == dt.timedelta(hours=1)
        assert start <= v["max"] < end
        assert v["max#2"] == v["max"].replace(tzinfo=None, microsecond=0)  # timestamp_ntz
        assert v["min"] == start.date()
        assert isinstance(v["sum"], Decimal) and v["sum"].as_tuple().exponent == -2
        assert v["sum#2"] == v["sum"]  # decimal(38,4): the variable-length big decimal
        assert v["sum#2"].as_tuple().exponent == -4
        # events without an amount (non-transactions) count but leave the sums empty
        assert v["count"] >= v["count#2"] and v["isEmpty"] == (v["count#2"] == 0)
        assert float(v["sum"]) == pytest.approx(v["sum#3"])
        assert (v["max#4"], v["max#5"], v["max#6"]) == (7, 300, 70000)  # byte, short, int
        if v["isEmpty"]:
            assert v["max#3"] is v["max#7"] is v["max#8"] is None  # float, boolean, binary
        else:
            assert isinstance(v["max#3"], float) and isinstance(v["max#7"], bool)
            assert re.fullmatch(rb"[A-Z]{3}", v["max#8"])  # binary: encode(currency)
        assert isinstance(v["buf"], bytes)  # collect_list's serialized buffer


def test_dedup_state_has_a_void_value(fs, data):
    schema = read_schema_file(fs, str(data / "dedup/schema"))
    assert simple_string(schema.value_schema) == "struct<__dummy__:void>"
    key, value = make_decoder(schema.key_schema), make_decoder(schema.value_schema)
    rows = list(read_state_file(fs, str(data / "dedup/3.snapshot"), "lz4", "snapshot"))
    assert len(rows) == 136
    for rec in rows:
        assert re.fullmatch(r"u\d{7}-\d{6}-\d{2}", key(rec.key)["event_id"])
        assert value(rec.value) == {"__dummy__": None}


def test_transform_with_state_column_families(fs, data):
    d = data / "tws_rocksdb"
    schema = read_schema_file(fs, str(d / "schema_v3"))
    assert schema.version == 3 and schema.key_schema is None
    families = {cf.name: cf for cf in schema.column_families}
    assert list(families) == ["$rowCounter_amounts", "amounts", "count", "countries"]
    assert families["countries"].key_encoder_spec == {
        "keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 1}
    assert simple_string(families["countries"].user_key_encoder_schema) == "struct<c:string>"

    meta = read_zip_metadata(fs, str(d / "1.zip"))
    names = {cf_id: name for name, cf_id in meta.column_family_mapping.items()}
    assert meta.column_family_internal["$rowCounter_amounts"] is True

    keys: dict[str, set] = {}
    counts, lists = {}, {}
    with (d / "1.changelog").open("rb") as raw:
        header, recs = read_changelog(open_decompressed(raw, "lz4", path="1.changelog"),
                                      path="1.changelog")
        assert header.version == 2
        for rec in recs:
            cf_id, rest = strip_rocksdb_prefixes(rec.key, column_families=True,
                                                 version_byte=False)
            cf = families[names[cf_id]]
            keys.setdefault(cf.name, set()).add(rec.key)
            if cf.name == "countries":
                prefix, user_key = split_prefix_scan_key(rest)
                outer = make_decoder(StructType(cf.key_schema.fields[:1]))(prefix)
                assert USER_ID.match(outer["key"]["user_id"])
                assert re.fullmatch(r"[A-Z]{2}", make_decoder(
                    StructType(cf.key_schema.fields[1:]))(user_key)["userKey"]["c"])
                continue
            user = make_decoder(cf.key_schema)(rest[1:])["user_id"]
            assert rest[0] == 0 and USER_ID.match(user)
            if cf.name == "amounts":
                assert rec.op == "merge"
                lists[user] = [make_decoder(cf.value_schema)(row)["a"]
                               for row in split_multi_values(rec.value)]
            elif cf.name == "count":
                counts[user] = make_decoder(cf.value_schema)(rec.value[1:])["n"]
    assert counts == {user: len(amounts) for user, amounts in lists.items()}
    user_facing = sum(len(v) for name, v in keys.items() if not name.startswith("$"))
    internal = len(keys["$rowCounter_amounts"])
    assert (meta.num_keys, meta.num_internal_keys) == (user_facing, internal) == (76, 25)


def test_changelog_v4_with_checkpoint_format_v2(data):
    path = next((data / "tws_rocksdb").glob("2_*.changelog"))
    with path.open("rb") as raw:
        header, recs = read_changelog(open_decompressed(raw, "lz4", path=str(path)),
                                      path=str(path))
        ops = [r.op for r in recs]
    assert header.version == 4
    assert header.lineage == [{"version": 1,
                               "checkpointUniqueId": "966a9b1c-b014-449e-a5e7-d33c80011be8"}]
    assert set(ops) == {"put", "merge"} and len(ops) == 169
