"""Merge-on-read specifics: event-time merging with deletes that carry ordering values, compaction (on demand,
by strategy, inline), and rollback of completed instants (command blocks, ``.rollback`` instants) — always checked
against hudi-rs."""

from __future__ import annotations

from typing import Any

import pytest

from tablecore import RollbackError, Table, TableConfig
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


def _reinserted_after_a_delete(table_path: str, spark: Any) -> Table:
    """Event-time ordering: a row (ts 2900), its delete without ordering value, then the key written again with a
    lower ts (2500): the delete and the re-insert are logs of the base file that still holds the deleted row."""
    t = mor(table_path, spark, merge_mode="EVENT_TIME_ORDERING")
    t.upsert(spark.createDataFrame([(1, "a", 2900, "first", False)], DDL))
    t.delete(spark.createDataFrame([(1, "a")], "id int, city string"))
    t.upsert(spark.createDataFrame([(1, "a", 2500, "again", False)], DDL))
    return t


def test_a_key_written_again_after_a_delete_without_ordering_value_is_a_new_row(table_path: str, spark) -> None:
    # as on copy-on-write: the delete removed the row whatever its ordering value, so the later write is a new row
    # (found by test_model's random sequences, 2026-12-02)
    t = _reinserted_after_a_delete(table_path, spark)
    assert state(t) == {1: (2500, "again")}
    assert t.compact() is not None
    assert state(t) == {1: (2500, "again")}
    # once compacted, hudi-rs reads the merged base file: the same row (time travel to before the compaction does
    # not agree: the test below)
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)


@pytest.mark.xfail(strict=True, reason="known divergence, docs/tablecore.md 'Merge rules': hudi-rs merges a slice's "
                   "logs first (the re-insert replaces the delete), then the base row wins on its higher ts")
def test_a_key_written_again_after_a_delete_reads_the_same_through_hudi_rs_before_compaction(table_path: str,
                                                                                           spark) -> None:
    t = _reinserted_after_a_delete(table_path, spark)
    assert state(t) == {1: (2500, "again")}
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)  # hudi-rs returns the deleted row (ts 2900)


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
