"""Merge-on-read specifics: event-time merging with deletes that carry ordering values, compaction (on demand,
by strategy, inline), and rollback of completed instants (command blocks, ``.rollback`` instants) — always checked
against hudi-rs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tablecore import RollbackError, Table, TableConfig
from tablecore.arrow_reader import read_arrow
from tablecore.format.file_view import list_table_files
from tablecore.format.log_format import BlockType, read_blocks
from tablecore.format.service_metadata import read_compaction_plan, read_rollback_metadata
from tests.tablecore.oracle import assert_same_as_hudi, hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.deployments, pytest.mark.s3_in_deployments]

DDL = "id int, city string, ts long, v string, _hoodie_is_deleted boolean"


def mor(table_path: str, spark: Any, **kw: Any) -> Table:
    cfg = TableConfig(name="m", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type="MERGE_ON_READ", **kw)
    return Table.create(table_path, cfg, spark=spark)


def state(t: Table) -> dict[int, tuple[int, str]]:
    return {r.id: (r.ts, r.v) for r in t.read().collect()}


def rows(t: Table) -> list[tuple[int, int, str]]:
    """Every row (a key that reads twice shows twice)."""
    return sorted((r.id, r.ts, r.v) for r in t.read().collect())


def test_event_time_ordering_with_stale_updates_and_ordered_deletes(table_path: str, spark) -> None:
    t = mor(table_path, spark, merge_mode="EVENT_TIME_ORDERING")
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 100, f"v{i}", False) for i in range(1, 7)], DDL))
    # a late, stale update (ts 50 < 100) loses; a newer one wins
    t.upsert(spark.createDataFrame([(1, "b", 50, "stale", False), (2, "a", 200, "new", False)], DDL))
    # deletes with ordering values: a stale one (ts 50) is ignored, a newer one (ts 300) applies
    t.upsert(spark.createDataFrame([(3, "b", 50, None, True), (4, "a", 300, None, True)], DDL))
    # a delete without ordering value removes the row whatever its ordering value
    t.delete(spark.createDataFrame([(2, "a")], "id int, city string"))
    # after a delete with ordering value 300, a re-insert at ts 10 is stale; one at ts 400 makes the key visible
    t.upsert(spark.createDataFrame([(4, "a", 10, "stale", False)], DDL))
    assert 4 not in state(t)
    t.upsert(spark.createDataFrame([(4, "a", 400, "back", False)], DDL))
    assert state(t) == {1: (100, "v1"), 3: (100, "v3"), 4: (400, "back"), 5: (100, "v5"), 6: (100, "v6")}
    assert_same_as_hudi(t)
    before = spark_rows(t.read())
    assert t.compact() is not None
    assert spark_rows(t.read()) == before == spark_rows(t.read(view="read_optimized"))
    assert_same_as_hudi(t)


def _reinserted_after_a_delete(table_path: str, spark: Any, *, table_version: int = 6,
                               arrow: bool = False) -> tuple[Table, str]:
    """Event-time ordering: a row (ts 2900), its delete without ordering value (a log), then the key written again
    with a lower ts (2500; from Arrow with ``arrow``) and a second key of the same file group updated. Returns the
    table and the last write's instant."""
    t = mor(table_path, spark, merge_mode="EVENT_TIME_ORDERING", table_version=table_version)
    t.upsert(spark.createDataFrame([(1, "a", 2900, "first", False), (2, "a", 100, "two", False)], DDL))
    t.delete(spark.createDataFrame([(1, "a")], "id int, city string"))
    again = [(1, "a", 2500, "again", False), (2, "a", 200, "two again", False)]
    if arrow:
        schema = pa.schema([("id", pa.int32()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string()),
                            ("_hoodie_is_deleted", pa.bool_())])
        result = t.upsert(pa.table({f.name: [r[i] for r in again] for i, f in enumerate(schema)}, schema=schema))
    else:
        result = t.upsert(spark.createDataFrame(again, DDL))
    return t, result.instant


@pytest.mark.parametrize(("table_version", "arrow"), [(6, False), (8, True)])
def test_a_key_deleted_without_ordering_value_and_written_again_rewrites_its_slice(
        table_path: str, spark, table_version: int, arrow: bool) -> None:
    # as on copy-on-write, the delete removed the row whatever its ordering value: the later write is a new row. As a
    # log, hudi-rs (and Apache Hudi's file group reader) would merge the logs first, the re-insert replacing the
    # delete, and then the base row would win on its higher ts: the deleted row would come back (found by
    # test_model's random sequences, 2026-12-02). So that write merges the slice into a new base file instead.
    t, last = _reinserted_after_a_delete(table_path, spark, table_version=table_version, arrow=arrow)
    assert state(t) == {1: (2500, "again"), 2: (200, "two again")}
    files = list_table_files(t.io)
    assert sorted(b.instant for b in files.bases) == [min(b.instant for b in files.bases), last]
    assert len(files.logs) == 1  # the delete's, in the slice before
    assert_same_as_hudi(t)  # every instant, before the rewrite too
    # the changes: the key comes back as an insert, the other row of the group as an update
    changes = sorted((r.commit_time, r.record_key, r.op, r.before and r.before.ts, r.after and r.after.ts)
                     for r in t.read_cdc().collect())
    assert [c[1:] for c in changes] == [("1", "i", None, 2900), ("2", "i", None, 100), ("1", "d", 2900, None),
                                        ("1", "i", None, 2500), ("2", "u", 100, 200)]
    assert t.compact() is None  # nothing left to merge

    # rolled back, the slice with the delete is the latest again; the write done again rewrites it again
    t.rollback(last)
    assert state(t) == {2: (100, "two")}
    assert len(list_table_files(t.io).bases) == 1
    assert_same_as_hudi(t)
    t.upsert(spark.createDataFrame([(1, "a", 2500, "again", False)], DDL))
    assert state(t) == {1: (2500, "again"), 2: (100, "two")}
    assert len(list_table_files(t.io).bases) == 2
    assert_same_as_hudi(t)


@pytest.mark.parametrize("how", ["record index upsert", "insert"])
def test_a_deleted_key_written_into_another_file_group_reads_once(table_path: str, spark, how: str) -> None:
    # the key's old group keeps its base row and the delete's log; the key is written again into a new group: with a
    # record index an upsert of a deleted key is an insert, and an insert never looks at what the table holds (nor
    # fills a group with logs). A log record replaces base rows of its own group only, in every read and count.
    kw: dict[str, Any] = {"table_version": 8, "index_type": "RECORD_INDEX"} if how != "insert" else {}
    t = mor(table_path, spark, merge_mode="EVENT_TIME_ORDERING", **kw)
    t.upsert(spark.createDataFrame([(1, "a", 2900, "first", False), (2, "a", 100, "two", False)], DDL))
    t.delete(spark.createDataFrame([(1, "a")], "id int, city string"))
    again = spark.createDataFrame([(1, "a", 2500, "again", False)], DDL)
    t.insert(again) if how == "insert" else t.upsert(again)
    files = list_table_files(t.io)
    assert len({b.file_id for b in files.bases}) == 2 and len(files.logs) == 1
    assert state(t) == {1: (2500, "again"), 2: (100, "two")}
    assert t.count() == 2
    assert sorted(read_arrow(t.uri, columns=["id", "ts"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "ts": 2500}, {"id": 2, "ts": 100}]
    assert_same_as_hudi(t)


def _upsert(t: Table, spark: Any, rows: list[tuple[Any, ...]], *, arrow: bool) -> None:
    if not arrow:
        t.upsert(spark.createDataFrame(rows, DDL))
        return
    schema = pa.schema([("id", pa.int32()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string()),
                        ("_hoodie_is_deleted", pa.bool_())])
    t.upsert(pa.table({f.name: [r[i] for r in rows] for i, f in enumerate(schema)}, schema=schema))


# each lookup, merge mode and engine once (test_model adds random sequences with inserts on the simple lookup)
@pytest.mark.parametrize(("index", "merge_mode", "arrow"), [("SIMPLE", "COMMIT_TIME_ORDERING", False),
                                                          ("BLOOM", "EVENT_TIME_ORDERING", True)])
def test_an_upsert_of_a_key_deleted_in_one_group_and_inserted_into_another_writes_it_once(
        table_path: str, spark, index: str, merge_mode: str, arrow: bool) -> None:
    # SIMPLE and BLOOM lookups read base files: the key's first group still holds it in its base file, deleted by a
    # log. The upsert goes to the group where the key is live only (from Spark or Arrow), else it would read twice.
    t = mor(table_path, spark, index_type=index, merge_mode=merge_mode)
    t.upsert(spark.createDataFrame([(1, "a", 2900, "first", False), (2, "a", 100, "two", False)], DDL))
    t.delete(spark.createDataFrame([(1, "a")], "id int, city string"))
    t.insert(spark.createDataFrame([(1, "a", 2500, "again", False)], DDL))
    assert len({b.file_id for b in list_table_files(t.io).bases}) == 2
    _upsert(t, spark, [(1, "a", 3000, "third", False)], arrow=arrow)
    assert rows(t) == [(1, 3000, "third"), (2, 100, "two")]
    assert t.count() == 2
    assert_same_as_hudi(t)
    # deleted in both groups (the delete goes to the live one), then written again: an insert, as with a record index
    t.delete(spark.createDataFrame([(1, "a")], "id int, city string"))
    assert rows(t) == [(2, 100, "two")]
    _upsert(t, spark, [(1, "a", 3100, "fourth", False)], arrow=arrow)
    assert rows(t) == [(1, 3100, "fourth"), (2, 100, "two")]
    assert t.count() == 2
    assert sorted(read_arrow(t.uri, columns=["id", "ts"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "ts": 3100}, {"id": 2, "ts": 100}]
    assert_same_as_hudi(t)


def test_a_slice_with_a_delete_takes_logs_while_no_deleted_key_returns(table_path: str, spark) -> None:
    # the rewrite is for a deleted key's return only: other writes to the slice stay logs
    t = mor(table_path, spark, merge_mode="EVENT_TIME_ORDERING")
    t.upsert(spark.createDataFrame([(1, "a", 2900, "first", False), (2, "a", 100, "two", False)], DDL))
    t.delete(spark.createDataFrame([(1, "a")], "id int, city string"))
    t.upsert(spark.createDataFrame([(2, "a", 200, "two again", False)], DDL))
    files = list_table_files(t.io)
    assert len(files.bases) == 1 and len(files.logs) == 2
    assert state(t) == {2: (200, "two again")}
    assert_same_as_hudi(t)


def test_file_groups_with_and_without_logs_read_together(table_path: str, spark) -> None:
    """Logs in one partition's file group only: the other groups' rows are read as stored, the logged group's rows
    are merged (an update, a stale update, a delete; a new key goes to a new partition), and no key reads twice or
    goes missing."""
    t = mor(table_path, spark, merge_mode="EVENT_TIME_ORDERING")
    t.upsert(spark.createDataFrame([(i, "abc"[i % 3], 100, f"v{i}", False) for i in range(1, 13)], DDL))
    t.upsert(spark.createDataFrame([(3, "a", 200, "new", False), (6, "a", 50, "stale", False),
                                    (9, "a", 300, None, True), (15, "d", 100, "v15", False)], DDL))
    assert {lg.partition for lg in list_table_files(t.io).logs} == {"city=a"}
    expected = {i: (100, f"v{i}") for i in range(1, 13) if i != 9}
    expected |= {3: (200, "new"), 15: (100, "v15")}
    assert rows(t) == sorted((k, ts, v) for k, (ts, v) in expected.items())
    assert_same_as_hudi(t)


def test_commit_time_ordering_newest_write_wins(table_path: str, spark) -> None:
    t = mor(table_path, spark)
    t.upsert(spark.createDataFrame([(1, "a", 100, "first", False), (2, "a", 100, "x", False)], DDL))
    t.upsert(spark.createDataFrame([(1, "a", 5, "lower ts, newer commit", False)], DDL))
    t.upsert(spark.createDataFrame([(2, "a", 1, None, True)], DDL))
    assert state(t) == {1: (5, "lower ts, newer commit")}
    assert_same_as_hudi(t)


def test_compaction_by_strategy_keeps_snapshot_and_history(lake_path: str, spark) -> None:
    t = mor(lake_path, spark)
    t.upsert(spark.createDataFrame([(i, "abc"[i % 3], 1, f"v{i}", False) for i in range(12)], DDL))
    for n in range(2, 5):  # three delta commits on city a, one on city b
        ids = [0, 3] if n < 4 else [0, 1]
        t.upsert(spark.createDataFrame([(i, "abc"[i % 3], n, f"v{i}-{n}", False) for i in ids], DDL))
    before = spark_rows(t.read())
    assert len(list_table_files(t.io).logs) == 4

    assert t.compact(strategy="num_commits", min_delta_commits=4) is None  # no slice has 4 yet
    r = t.compact(strategy="num_commits", min_delta_commits=3)
    assert r is not None and r.files_written == 1  # only city a's group
    plan_file = next(p for p in t.io.list(t.io.join(".hoodie")) if p.name.endswith(".compaction.requested"))
    ops = read_compaction_plan(t.io.read_bytes(plan_file.path))
    assert [(op.partition_path, len(op.delta_file_names)) for op in ops] == [("city=a", 3)]
    assert spark_rows(t.read()) == before
    assert_same_as_hudi(t)  # time travel before the compaction still reads the old slices

    r2 = t.compact(strategy="log_ratio", min_log_ratio=0.0)
    assert r2 is not None and r2.files_written == 1  # the remaining slice with logs (city b)
    assert t.compact() is None
    assert spark_rows(t.read()) == before == spark_rows(t.read(view="read_optimized"))
    # compaction commits add no changes: an incremental read over them is empty
    assert t.read_changes(start=r.instant).count() == 0
    assert_same_as_hudi(t)


def test_inline_compaction_every_n_delta_commits(table_path: str, spark) -> None:
    t = mor(table_path, spark, inline_compaction_delta_commits=2)
    t.upsert(spark.createDataFrame([(1, "a", 1, "x", False)], DDL))
    t.upsert(spark.createDataFrame([(1, "a", 2, "y", False)], DDL))
    ops = [i.operation for i in t.timeline()]
    assert ops == ["UPSERT", "UPSERT", "COMPACT"]
    t.upsert(spark.createDataFrame([(1, "a", 3, "z", False)], DDL))
    assert [i.operation for i in t.timeline()][-1] == "UPSERT"
    assert state(t) == {1: (3, "z")}
    assert_same_as_hudi(t)


def test_rollback_of_completed_delta_commit_writes_command_blocks(lake_path: str, spark) -> None:
    t = mor(lake_path, spark)
    c1 = t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 1, "v1", False) for i in range(6)], DDL)).instant
    c2 = t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 2, "v2", False) for i in range(3)], DDL)).instant
    as_of_c1 = spark_rows(t.read(as_of=c1))

    with pytest.raises(RollbackError, match="newer completed writes"):
        t.rollback(c1)
    result = t.rollback(c2)
    assert result.rolled_back == c2 and result.rollback_blocks == 2  # one per slice c2 appended to
    assert spark_rows(t.read()) == as_of_c1 == hudi_snapshot(t.uri)
    commands = [b for lg in list_table_files(t.io).logs for b in read_blocks(t.io.read_bytes(lg.path))
                if b.block_type is BlockType.COMMAND]
    assert {(b.instant, b.target_instant) for b in commands} == {(result.instant, c2)}
    done = t.io.read_bytes(t.io.join(".hoodie", f"{result.instant}.rollback"))
    rolled, partitions = read_rollback_metadata(done)
    assert rolled == [(c2, "deltacommit")] and set(partitions) == {"city=a", "city=b"}
    assert [(i.action, i.state) for i in t.timeline()] == [("deltacommit", "completed"), ("rollback", "completed")]

    # writing and compacting go on over the voided blocks
    t.upsert(spark.createDataFrame([(0, "a", 3, "v3", False)], DDL))
    t.compact()
    assert state(t) == {0: (3, "v3"), **dict.fromkeys(range(1, 6), (1, "v1"))}
    assert_same_as_hudi(t)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rollback_of_latest_commit_and_of_a_compaction(table_type: str, lake_path: str, spark) -> None:
    t = Table.create(lake_path, TableConfig(name="r", record_key=["id"], ordering_field="ts",
                                             partition_fields=["city"], table_type=table_type), spark=spark)
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 1, "v1", False) for i in range(6)], DDL))
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 2, "v2", False) for i in range(2)], DDL))
    before = spark_rows(t.read())
    c3 = t.upsert(spark.createDataFrame([(0, "a", 3, "v3", False), (9, "b", 3, "new", False)], DDL)).instant
    t.rollback(c3)
    assert spark_rows(t.read()) == before == hudi_snapshot(t.uri)
    if table_type == "MERGE_ON_READ":
        compaction = t.compact()
        assert compaction is not None
        t.rollback(compaction.instant)  # the slices fall back to base + logs
        assert len(list_table_files(t.io).logs) > 0
        assert spark_rows(t.read()) == before
    assert_same_as_hudi(t)
    with pytest.raises(Exception, match="not on the timeline"):
        t.rollback("20000101000000000")
