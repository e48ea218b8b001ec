"""``table.transaction()``: several writes as one commit (one instant), later calls winning per key; staged
transactions; what a transaction refuses. Every table is compared with hudi-rs."""

from __future__ import annotations

import pytest

from tablecore import InvalidInputError, Operation, StagedCommit, StagedCommitError, Table, TableConfig
from tests.tablecore.oracle import assert_same_as_hudi, hudi_completed, spark_rows

pytestmark = pytest.mark.spark

DDL = "id int, part string, ts long, val string"
KEYS = "id int, part string"


@pytest.fixture(params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def table(request: pytest.FixtureRequest, table_path: str, spark) -> Table:
    t = Table.create(table_path, TableConfig(name="x", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"], table_type=request.param), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 2}", 1, "v1") for i in range(6)], DDL))
    return t


def _vals(t: Table) -> dict[int, str]:
    return {r["id"]: r["val"] for r in spark_rows(t.read())}


def test_upserts_and_deletes_commit_as_one_instant(table: Table, spark) -> None:
    before = len(hudi_completed(table.uri))
    with table.transaction(extra_metadata={"source": "t1"}) as tx:
        tx.upsert(spark.createDataFrame([(1, "p1", 2, "v2"), (10, "p0", 2, "new"), (11, "p1", 2, "gone")], DDL))
        tx.delete(spark.createDataFrame([(2, "p0"), (11, "p1"), (99, "p1")], KEYS))  # 99: no such key
        tx.upsert(spark.createDataFrame([(3, "p1", 0, "later call wins")], DDL))  # lower ts, but a later call
    completed = hudi_completed(table.uri)
    assert len(completed) == before + 1, "one transaction, one instant"
    meta = table.commit_metadata(completed[-1])
    assert meta.operation_type == "UPSERT" and meta.extra_metadata["source"] == "t1"
    assert _vals(table) == {0: "v1", 1: "v2", 3: "later call wins", 4: "v1", 5: "v1", 10: "new"}
    assert_same_as_hudi(table)


def test_a_delete_then_an_upsert_of_the_same_key_keeps_it(table: Table, spark) -> None:
    with table.transaction() as tx:
        tx.delete(spark.createDataFrame([(4, "p0")], KEYS))
        tx.upsert(spark.createDataFrame([(4, "p0", 1, "back")], DDL))
    assert _vals(table)[4] == "back"
    assert_same_as_hudi(table)


def test_a_deletes_only_transaction_records_a_delete(table: Table, spark) -> None:
    result = table.transaction().delete(spark.createDataFrame([(0, "p0")], KEYS)).commit()
    assert result is not None and result.operation == "DELETE" and result.deleted == 1
    assert 0 not in _vals(table)


def test_an_exception_in_the_block_writes_nothing(table: Table, spark) -> None:
    before = hudi_completed(table.uri)
    with pytest.raises(RuntimeError, match="stop"), table.transaction() as tx:
        tx.upsert(spark.createDataFrame([(1, "p1", 9, "never")], DDL))
        raise RuntimeError("stop")
    assert hudi_completed(table.uri) == before and _vals(table)[1] == "v1"
    assert all(i.state == "completed" for i in table.timeline())


def test_a_staged_transaction_is_published_as_one_commit(table: Table, spark) -> None:
    tx = table.transaction().upsert(spark.createDataFrame([(1, "p1", 2, "v2")], DDL))
    staged = tx.delete(spark.createDataFrame([(0, "p0")], KEYS)).stage()
    assert isinstance(staged, StagedCommit)
    assert _vals(table)[0] == "v1"  # invisible until published
    assert staged.snapshot_count() == 5
    staged.publish()
    assert 0 not in _vals(table) and _vals(table)[1] == "v2"
    assert_same_as_hudi(table)


def test_what_a_transaction_refuses(table: Table, spark) -> None:
    df = spark.createDataFrame([(1, "p1", 2, "v2")], DDL)
    tx = table.transaction().upsert(df)
    with pytest.raises(InvalidInputError, match="upserts and deletes"):
        tx.insert_overwrite(df)
    tx.commit()
    with pytest.raises(StagedCommitError, match="already"):
        tx.upsert(df)
    assert table.transaction().commit() is None  # nothing added: no instant
    with pytest.raises(InvalidInputError, match="nothing to stage"):
        table.transaction().stage()
    # the typed write is the same as the named method
    r = table.write(Operation.INSERT, spark.createDataFrame([(20, "p0", 1, "i")], DDL))
    assert r.operation == "INSERT" and r.inserted == 1
