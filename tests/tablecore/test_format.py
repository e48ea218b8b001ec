"""The pure format layer (no JVM): instants, hoodie.properties, commit metadata, file names, key hashing."""

from __future__ import annotations

import json
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tablecore import ConfigError, TableConfig
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.file_naming import BaseFileName, bucket_of_file_id, new_file_id
from tablecore.format.instant import Action, Instant, State, next_instant_time
from tablecore.format.properties import format_properties, parse_properties, table_checksum
from tests.conftest import FIXTURES

HUDI = FIXTURES / "hudi-v6"


def fixture_file(zip_name: str, suffix: str) -> bytes:
    with zipfile.ZipFile(HUDI / zip_name) as z:
        name = next(n for n in z.namelist() if n.endswith(suffix) and "__MACOSX" not in n)
        return z.read(name)


@pytest.mark.parametrize(("name", "instant"), [
    ("20240418173235694.commit", Instant("20240418173235694", Action.COMMIT, State.COMPLETED)),
    ("20240418173235694.inflight", Instant("20240418173235694", Action.COMMIT, State.INFLIGHT)),
    ("20240418173235694.commit.requested", Instant("20240418173235694", Action.COMMIT, State.REQUESTED)),
    ("20240418173235694.replacecommit.inflight",
     Instant("20240418173235694", Action.REPLACE_COMMIT, State.INFLIGHT)),
    ("20240418173235694.deltacommit", Instant("20240418173235694", Action.DELTA_COMMIT, State.COMPLETED)),
])
def test_instant_parse_and_file_name_round_trip(name: str, instant: Instant) -> None:
    assert Instant.parse(name) == instant
    assert instant.file_name == name


@pytest.mark.parametrize("name", ["hoodie.properties", "archived", "x.commit", "20240418173235694.nonsense"])
def test_instant_parse_non_instant_files_is_none(name: str) -> None:
    assert Instant.parse(name) is None


@given(st.lists(st.integers(0, 10**6), min_size=2, max_size=30))
def test_next_instant_time_is_strictly_increasing(deltas: list[int]) -> None:
    last = None
    for _ in deltas:
        t = next_instant_time(last)
        assert len(t) == 17 and (last is None or t > last)
        last = t


def test_checksum_matches_hudi() -> None:
    assert table_checksum("default", "v6_trips_8i3d") == 3180720914
    assert table_checksum("default", "cow_t") == 1767382484


def test_properties_of_fixture_parse_into_config() -> None:
    text = fixture_file("cow_complexkeygen_hivestyle.zip", ".hoodie/hoodie.properties").decode()
    props = parse_properties(text)
    assert props["hoodie.table.create.schema"].startswith('{"type":"record"')
    cfg = TableConfig.from_properties(props)
    assert cfg.record_key == ("id", "name") and cfg.partition_fields == ("byteField", "shortField")
    assert cfg.complex_keys and cfg.hive_style_partitioning and cfg.ordering_field == "longField"


@given(st.dictionaries(st.from_regex(r"[a-z][a-z.]{0,12}", fullmatch=True),
                       st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=20)))
def test_properties_format_parse_round_trip(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props)) == props


def test_config_properties_round_trip() -> None:
    cfg = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt", "city"],
                      hive_style_partitioning=False, url_encode_partitions=True, merge_mode="EVENT_TIME_ORDERING",
                      index_type="BUCKET", bucket_count=8)
    assert TableConfig.from_properties_text(cfg.to_properties_text()) == cfg
    assert cfg.to_properties()["hoodie.table.keygenerator.class"].endswith("ComplexKeyGenerator")
    assert list(cfg.to_properties())[-1] == "hoodie.table.checksum"


def test_config_rejects_bucket_without_count() -> None:
    with pytest.raises(ConfigError, match="bucket_count"):
        TableConfig.build(name="t", record_key=["id"], index_type="BUCKET")


def test_commit_metadata_round_trips_fixture_json() -> None:
    raw = fixture_file("cow_complexkeygen_hivestyle.zip", ".hoodie/20240418173235694.commit")
    meta = CommitMetadata.from_bytes(raw)
    assert meta.operation_type == "UPSERT" and len(meta.write_stats) == 2
    assert json.loads(raw) == meta.to_json()  # field for field, in Hudi's shape (runtime stats aside)


def test_base_file_names() -> None:
    name = "a22e8257-e249-45e9-ba46-115bc85adcba-0_0-161-223_20240418173235694.parquet"
    parsed = BaseFileName.parse(name)
    assert parsed is not None and parsed.name == name and parsed.instant == "20240418173235694"
    assert BaseFileName.parse(".hoodie_partition_metadata") is None
    fid = new_file_id(bucket=7)
    assert fid.startswith("00000007-") and bucket_of_file_id(fid) == 7 and "_" not in fid


def test_bucket_id_is_java_list_hash() -> None:
    from tablecore.spark.keys import bucket_id, java_string_hash

    assert java_string_hash("hello") == 99162322  # "hello".hashCode()
    assert java_string_hash("polygenelubricants") == -2147483648
    # List.of("1").hashCode() = 31 + 49 = 80
    assert bucket_id("1", False, 1000) == 80
    assert bucket_id("id:1,name:a", True, 10_000) == ((31 * (31 + 49) + 97) & 0x7FFFFFFF) % 10_000


def test_vectorized_bucket_ids_equal_the_per_key_hash() -> None:
    import random

    import pyarrow as pa

    from tablecore.spark.keys import bucket_id, bucket_ids

    rnd = random.Random(7)
    alphabet = "abcXYZ0189-_:,/ "
    keys = ["", "1", "polygenelubricants", "x" * 300] + [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 60))) for _ in range(2000)]
    arr = pa.array(keys)
    for n in (1, 2, 7, 64, 10_000):
        expected = [bucket_id(k, False, n) for k in keys]
        assert bucket_ids(arr, False, n).tolist() == expected
        assert bucket_ids(arr.slice(3, 500), False, n).tolist() == expected[3:503]  # an offset into the buffers
    # non-ASCII keys (UTF-16 code units, surrogate pairs) and complex keys take the per-key path
    other = pa.array(["ü", "日本", "😀x", "id:1,name:a", "a"])
    assert bucket_ids(other, False, 97).tolist() == [bucket_id(k, False, 97) for k in other.to_pylist()]
    assert bucket_ids(other, True, 97).tolist() == [bucket_id(k, True, 97) for k in other.to_pylist()]
    assert bucket_ids(pa.array([], pa.string()), False, 5).tolist() == []


def test_iter_groups_splits_sorted_runs_across_batches() -> None:
    import pyarrow as pa

    from tablecore.tasks.write import iter_groups

    b1 = pa.record_batch({"k": ["a", "a", "b"], "v": [1, 2, 3]})
    b2 = pa.record_batch({"k": ["b", "c"], "v": [4, 5]})
    empty = pa.record_batch({"k": pa.array([], pa.string()), "v": pa.array([], pa.int64())})
    groups = [(g.column("k").to_pylist(), g.column("v").to_pylist()) for g in iter_groups(iter([b1, empty, b2]), "k")]
    assert groups == [(["a", "a"], [1, 2]), (["b", "b"], [3, 4]), (["c"], [5])]
    assert list(iter_groups(iter([]), "k")) == []


def test_dedupe_keeps_the_highest_ordering_value_per_key_ties_the_later_row_nulls_lose() -> None:
    import warnings

    import pyarrow as pa

    from tablecore.tasks.write import KEY, ORD, dedupe

    batch = pa.table({KEY: ["a", "a", "b", "a", "c", "c"], ORD: [2, None, 1, 2, None, 0], "v": [1, 2, 3, 4, 5, 6]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated pyarrow option (pyarrow 25 moved null placement to the keys)
        kept = dedupe(batch, "ts")
    assert sorted((r[KEY], r["v"]) for r in kept.to_pylist()) == [("a", 4), ("b", 3), ("c", 6)]


def test_read_schema_maps_local_timestamps_to_timestamp_ntz() -> None:
    from pyspark.sql.types import TimestampNTZType, TimestampType

    from tablecore.spark.schema import table_spark_schema

    avro = {"type": "record", "name": "t_record", "fields": [
        {"name": "utc", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
        {"name": "local", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}], "default": None},
    ]}
    schema = table_spark_schema(avro, with_meta=False)
    assert isinstance(schema["utc"].dataType, TimestampType)
    assert isinstance(schema["local"].dataType, TimestampNTZType)


@pytest.mark.spark
def test_only_plain_deterministic_scans_are_read_again_instead_of_cached(spark, tmp_path) -> None:
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from tablecore import Table
    from tablecore.spark.jvm import recompute_is_cheap

    path = str(tmp_path / "in.parquet")
    spark.range(10).withColumn("v", F.col("id") * 2).write.parquet(path)
    files = spark.read.parquet(path)
    assert recompute_is_cheap(files)
    assert recompute_is_cheap(files.where(F.col("v") > 4).select("id", (F.col("v") + 1).alias("w")))
    assert recompute_is_cheap(spark.createDataFrame(pa.table({"id": [1], "s": ["a"]})))  # a local relation
    # not the same rows each time, or costly to run again: cached
    assert not recompute_is_cheap(spark.createDataFrame([(1, "a")], "id int, s string"))  # an RDD of Python rows
    assert not recompute_is_cheap(files.withColumn("r", F.rand()))
    assert not recompute_is_cheap(files.groupBy("v").count())
    assert not recompute_is_cheap(files.join(files.select("id"), "id"))
    assert not recompute_is_cheap(files.withColumn("u", F.udf(lambda x: x, LongType())("id")))

    # a write from a plain file scan (read again by each job instead of cached) writes every row once
    t = Table.create(str(tmp_path / "t"), TableConfig(name="t", record_key=["id"], ordering_field="v",
                                                      table_type="MERGE_ON_READ"), spark=spark)
    t.upsert(files)
    t.upsert(spark.read.parquet(path).where(F.col("id") < 5).withColumn("v", F.col("v") + 100))
    assert sorted((r.id, r.v) for r in t.read().collect()) == [(i, 2 * i + (100 if i < 5 else 0)) for i in range(10)]
