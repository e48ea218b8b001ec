"""Acceptance 1: every table we write reads through hudi-rs with the same rows as ``Table.read()`` — snapshot,
incremental per commit and ``as_of`` per commit — for partitioned and non-partitioned tables, simple and complex
keys, all types, after upserts, deletes and insert_overwrite."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tablecore import Table, TableConfig
from tablecore.spark.keys import bucket_id
from tests.tablecore.data import frame, row
from tests.tablecore.oracle import assert_same_as_hudi, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.deployments]

CONFIGS = {
    "nonpartitioned_simple": {"record_key": ["id"], "ordering_field": "ts"},
    "hive_one_partition": {"record_key": ["id"], "ordering_field": "ts", "partition_fields": ["city"]},
    "plain_two_partitions_complex_key_urlencoded": {
        "record_key": ["id", "name"], "ordering_field": "ts", "partition_fields": ["region", "city"],
        "hive_style_partitioning": False, "url_encode_partitions": True},
    "hive_bucket_index": {"record_key": ["id"], "ordering_field": "ts", "partition_fields": ["city"],
                              "index_type": "BUCKET", "bucket_count": 4},
}


TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


@pytest.fixture(params=[6, 8], ids=["v6", "v8"])
def table_version(request: pytest.FixtureRequest) -> int:
    """Every case on a version-6 table and on a Hudi 1.x version-8 table."""
    return int(request.param)


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("case", sorted(CONFIGS))
@pytest.mark.s3_in_deployments(keep={"case": "plain_two_partitions_complex_key_urlencoded",  # escaped object keys
                                     "table_type": "MERGE_ON_READ"})
def test_written_table_reads_the_same_through_hudi_rs(case: str, table_type: str, lake_path: str, table_version: int,
                                                      spark) -> None:
    cfg = TableConfig(name=f"t_{case}", table_type=table_type, table_version=table_version, **CONFIGS[case])
    t = Table.create(lake_path, cfg, spark=spark)
    cities = ["sf", "san/francisco", None, "ny"]
    r1 = t.upsert(frame(spark, [row(i, city=cities[i % 4]) for i in range(8)]))
    assert (r1.inserted, r1.updated) == (8, 0)
    r2 = t.upsert(frame(spark, [row(i, version=1, city=cities[i % 4]) for i in (1, 2, 9, 10)]))
    new_keys_in_new_groups = 2
    if table_type == "MERGE_ON_READ" and cfg.index_type == "BUCKET":
        # bucket index on merge-on-read: rows appended to an existing group's log count as updates (as in Hudi's
        # write stats: no key lookup); only new keys that start a new (partition, bucket) group are inserts
        groups = {(cities[i % 4], bucket_id(str(i), False, 4)) for i in range(8)}
        new_keys_in_new_groups = sum((cities[i % 4], bucket_id(str(i), False, 4)) not in groups for i in (9, 10))
    assert (r2.inserted, r2.updated) == (new_keys_in_new_groups, 4 - new_keys_in_new_groups)
    keys = frame(spark, [row(3, city=cities[3])]).select("id", "name", "city", "region")
    r3 = t.delete(keys)
    assert r3.deleted == 1
    # a batch with a duplicate key: the higher ordering value wins
    r4 = t.upsert(frame(spark, [row(4, version=5, city=cities[0]), row(4, version=2, city=cities[0])]))
    assert r4.updated == 1
    got = t.read().where(F.col("id") == 4).select("ts").collect()
    assert [r.ts for r in got] == [100 * 6 + 4]
    r5 = t.insert_overwrite(frame(spark, [row(20, city="sf"), row(21, city="sf")]))
    assert r5.replaced_file_groups >= 1
    t.upsert(frame(spark, [row(20, version=3, city="sf"), row(30, city="la")]))
    assert_same_as_hudi(t)
    # the data source reads the same as Table.read
    assert spark_rows(spark.read.format("tablecore").load(lake_path)) == spark_rows(t.read())
    first = t.timeline()[0].instant
    assert spark_rows(spark.read.format("tablecore").option("as_of", first).load(lake_path)) == \
        spark_rows(t.read(as_of=first))
    assert spark_rows(spark.read.format("tablecore").option("start", first).load(lake_path)) == \
        spark_rows(t.read_changes(start=first))


@pytest.mark.v8_on_s3
@pytest.mark.s3_in_deployments(keep={"table_version": 8})  # version 8 on S3 runs in make test only
@pytest.mark.parametrize("table_type", TYPES)
def test_insert_overwrite_table_and_bulk_insert_read_the_same_through_hudi_rs(table_type: str, lake_path: str,
                                                                              table_version: int, spark) -> None:
    t = Table.create(lake_path, TableConfig(name="t", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                                             table_type=table_type, table_version=table_version), spark=spark)
    t.bulk_insert(frame(spark, [row(i, city=["a", "b"][i % 2]) for i in range(10)]))
    t.insert(frame(spark, [row(i, city="c") for i in range(10, 14)]))
    r = t.insert_overwrite_table(frame(spark, [row(100, city="a")]))
    assert r.replaced_file_groups == 3
    assert [x.id for x in t.read().collect()] == [100]
    assert_same_as_hudi(t)


@pytest.mark.s3_in_deployments
@pytest.mark.parametrize("table_type", TYPES)
def test_schema_evolution_new_column_and_promotion_read_the_same(table_type: str, lake_path: str, table_version: int,
                                                                 spark) -> None:
    t = Table.create(lake_path, TableConfig(name="t", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                                             table_type=table_type, table_version=table_version), spark=spark)
    t.upsert(spark.createDataFrame([(1, "a", 1, 10), (2, "b", 1, 20)], "id int, city string, ts int, v int"))
    r = t.upsert(spark.createDataFrame([(1, "a", 2, 11, "x")], "id int, city string, ts long, v long, extra string"))
    assert r.updated == 1
    schema = {f.name: f.dataType.simpleString() for f in t.schema().fields}  # type: ignore[union-attr]
    assert schema == {"id": "int", "city": "string", "ts": "bigint", "v": "bigint", "extra": "string"}
    rows = {x.id: (x.ts, x.v, x.extra) for x in t.read().collect()}
    assert rows == {1: (2, 11, "x"), 2: (1, 20, None)}
    assert_same_as_hudi(t)
