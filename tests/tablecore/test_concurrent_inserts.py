"""Two writes planned against the same snapshot, published one after the other (a staged write is the first: its plan
is fixed, then another writer completes, then it publishes): the same new keys are a conflict, never a duplicate;
disjoint keys and partitions both commit. On a local disk and on S3."""

from __future__ import annotations

import pytest

from tablecore import CommitConflictError, Table, TableConfig
from tests.tablecore.oracle import assert_same_as_hudi, spark_rows

pytestmark = pytest.mark.spark

DDL = "id int, part string, ts long, val string"


def _table(path: str, spark, table_type: str) -> Table:
    # no small-file filling: every write's inserts start file groups of their own, so the file groups of the two
    # writes never overlap and only the key check can see the clash
    t = Table.create(path, TableConfig(name="c", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                       table_type=table_type, small_file_limit=0), spark=spark)
    t.upsert(spark.createDataFrame([(i, "p0", 1, "base") for i in range(4)], DDL))
    return t


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_same_new_keys_from_two_writers_conflict_instead_of_duplicating(lake_path: str, spark,
                                                                            table_type: str) -> None:
    t = _table(lake_path, spark, table_type)
    first = t.upsert(spark.createDataFrame([(i, "p0", 2, "first") for i in range(100, 110)], DDL), stage=True)
    # the second writer inserts 3 of the same new keys (and one of its own) and completes first
    t.upsert(spark.createDataFrame([(i, "p0", 3, "second") for i in (100, 105, 109, 200)], DDL))
    with pytest.raises(CommitConflictError, match=r"inserted record key '(100|105|109)' in partition 'part=p0'"):
        first.publish()
    first.abort()  # a staged write stays pending after a conflict until it is aborted (or audited again)
    ids = [r.id for r in t.read().collect()]
    assert len(ids) == len(set(ids)) == 4 + 4, "no key twice, the losing write invisible"
    assert t.protocol.load_timeline().pending() == []
    assert_same_as_hudi(t)


def test_disjoint_new_keys_and_other_partitions_both_commit(lake_path: str, spark) -> None:
    t = _table(lake_path, spark, "COPY_ON_WRITE")
    a = t.upsert(spark.createDataFrame([(i, "p0", 2, "a") for i in range(100, 110)], DDL), stage=True)
    b = t.upsert(spark.createDataFrame([(i, "p1", 2, "b") for i in range(100, 110)], DDL), stage=True)
    t.upsert(spark.createDataFrame([(i, "p0", 3, "c") for i in range(200, 210)], DDL))
    a.publish()
    b.publish()
    rows = spark_rows(t.read())
    assert len(rows) == 4 + 30
    assert len({(r["_hoodie_partition_path"], r["id"]) for r in rows}) == 34
    assert_same_as_hudi(t)
