"""``Table.count`` / ``StagedCommit.snapshot_count``: the exact row count of a snapshot without reading its rows,
checked against the rows our reader returns and against hudi-rs (the Hudi-written fixtures are counted in
``test_hudi_fixtures.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tablecore import Table, TableConfig, TableCoreError
from tablecore.format.avro_columnar import decode_avro_columns, encode_avro_columns
from tablecore.format.log_format import BlockType, encode_block, read_blocks
from tablecore.read_planning import plan_incremental
from tablecore.spark.counting import _holds_only, count_plan
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

DDL = "id int, city string, ts long, v string, _hoodie_is_deleted boolean"


def same_count(t: Table, *, as_of: str | None = None) -> int:
    """The count, asserted equal to the rows our reader and hudi-rs return."""
    n = t.count(as_of=as_of)
    assert n == t.read(as_of=as_of).count() == len(hudi_snapshot(t.uri, as_of=as_of))
    return n


def test_count_follows_event_time_merging_deletes_and_rollback(table_path: str, spark) -> None:
    # footers alone (copy-on-write, compacted slices) and time travel: test_count_of_copy_on_write_table and the
    # Hudi-written fixtures (test_hudi_fixtures.py)
    cfg = TableConfig(name="m", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type="MERGE_ON_READ", merge_mode="EVENT_TIME_ORDERING")
    t = Table.create(table_path, cfg, spark=spark)
    assert t.count() == 0
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 100, f"v{i}", False) for i in range(1, 9)], DDL))
    # a stale update loses, a newer one wins, a new key in an existing group (9 rows); a stale ordered delete is
    # ignored, a newer one applies, a delete without ordering value always applies, one of a missing key nothing
    t.upsert(spark.createDataFrame([(1, "b", 50, "stale", False), (2, "a", 200, "new", False),
                                    (20, "a", 100, "new key", False)], DDL))
    t.upsert(spark.createDataFrame([(3, "b", 50, None, True), (4, "a", 300, None, True)], DDL))
    t.delete(spark.createDataFrame([(2, "a"), (99, "b")], "id int, city string"))
    assert same_count(t) == 7
    # a stale re-insert of the ordered-deleted key stays deleted; a newer one brings it back
    t.upsert(spark.createDataFrame([(4, "a", 10, "stale", False)], DDL))
    last = t.upsert(spark.createDataFrame([(4, "a", 400, "back", False), (5, "b", 10, "stale", False)], DDL)).instant
    assert same_count(t) == 8
    t.rollback(last)  # a command block voids the last delta commit's blocks
    assert same_count(t) == 7


def test_count_of_bucket_index_table_with_log_only_groups(table_path: str, spark) -> None:
    cfg = TableConfig(name="b", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type="MERGE_ON_READ", index_type="BUCKET", bucket_count=2)
    t = Table.create(table_path, cfg, spark=spark)
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 1, "x", False) for i in range(10)], DDL))
    t.upsert(spark.createDataFrame([(i, "abc"[i % 3], 2, "y", False) for i in range(5, 16)], DDL))
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 3, None, True) for i in (0, 1, 2)]
                                   + [(7, "b", 3, "z", False)], DDL))
    assert same_count(t) == len({(i, "ab"[i % 2]) for i in range(3, 10)} | {(i, "abc"[i % 3]) for i in range(5, 16)})


def test_count_decodes_delete_flags_inside_data_blocks(table_path: str, spark) -> None:
    # Hudi writers may leave a record flagged _hoodie_is_deleted in a data block (ours write a delete block): the
    # count, which builds only a few columns of the log records, must still see the flag, as the reader does
    cfg = TableConfig(name="f", record_key=["id"], partition_fields=["city"], table_type="MERGE_ON_READ",
                      index_type="BUCKET", bucket_count=1)
    t = Table.create(table_path, cfg, spark=spark)
    t.bulk_insert(spark.createDataFrame([(i, "a", 1, "x", False) for i in (1, 2, 3)], DDL))
    t.upsert(spark.createDataFrame([(1, "a", 2, "y", False), (4, "a", 2, "y", False)], DDL))
    [log] = Path(table_path, "city=a").glob(".*.log.*")
    [block] = read_blocks(log.read_bytes())
    assert block.block_type is BlockType.AVRO_DATA and block.schema is not None
    schema = json.loads(block.schema)
    records = decode_avro_columns(block.content, schema)
    assert records is not None
    flagged = pc.equal(records.column("_hoodie_record_key"), "1")
    records = records.set_column(records.schema.get_field_index("_hoodie_is_deleted"), "_hoodie_is_deleted",
                                 pc.or_(flagged, records.column("_hoodie_is_deleted")))
    content = encode_avro_columns(records, schema)
    assert content is not None
    log.write_bytes(encode_block(BlockType.AVRO_DATA, list(block.header.items()), content))
    # as a Hudi writer records it: the new size, no lakegate checksum
    commit = Path(table_path, ".hoodie", f"{block.instant}.deltacommit")
    meta = json.loads(commit.read_text())
    for stat in meta["partitionToWriteStats"]["city=a"]:
        stat.pop("lakegateCrc32", None)
        stat["totalWriteBytes"] = stat["fileSizeInBytes"] = log.stat().st_size
    commit.write_text(json.dumps(meta))
    assert t.count() == t.read().count() == 3  # 2, 3 and 4: the flagged update of 1 deletes it


def test_the_partition_column_is_skipped_only_when_the_footer_proves_it_constant(tmp_path: Path) -> None:
    def footer(values: list[str | None], **kw: Any) -> pq.FileMetaData:
        path = tmp_path / f"f{len(list(tmp_path.iterdir()))}.parquet"
        pq.write_table(pa.table({"_hoodie_partition_path": pa.array(values, pa.string())}), path, **kw)
        return pq.ParquetFile(path).metadata

    assert _holds_only(footer(["a", "a"], row_group_size=1), "_hoodie_partition_path", "a")
    assert not _holds_only(footer(["a", "b"], row_group_size=1), "_hoodie_partition_path", "a")  # one group differs
    assert not _holds_only(footer(["a", None]), "_hoodie_partition_path", "a")
    assert not _holds_only(footer(["a", "a"], write_statistics=False), "_hoodie_partition_path", "a")
    assert not _holds_only(footer(["a"]), "other", "a")


def test_count_of_copy_on_write_table(table_path: str, spark) -> None:
    cfg = TableConfig(name="c", record_key=["id"], ordering_field="ts", partition_fields=["city"])
    t = Table.create(table_path, cfg, spark=spark)
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 1, "x", False) for i in range(6)], DDL))
    t.upsert(spark.createDataFrame([(0, "a", 2, "y", False), (6, "a", 2, "new", False)], DDL))
    t.delete(spark.createDataFrame([(1, "b")], "id int, city string"))
    assert same_count(t) == 6


def test_staged_snapshot_count_before_publish(table_path: str, spark) -> None:
    cfg = TableConfig(name="s", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type="MERGE_ON_READ")
    t = Table.create(table_path, cfg, spark=spark)
    t.upsert(spark.createDataFrame([(i, "ab"[i % 2], 1, "x", False) for i in range(6)], DDL))
    staged = t.upsert(spark.createDataFrame([(0, "a", 2, "y", False), (6, "a", 2, "new", False),
                                             (1, "b", 2, None, True)], DDL), stage=True)
    assert staged.snapshot_count() == staged.snapshot().count() == 6
    assert t.count() == 6 == t.read().count()  # not published: readers see the table before it
    staged.abort()
    assert t.count() == 6


def test_count_plan_refuses_a_commit_time_range(table_path: str, spark) -> None:
    t = Table.create(table_path, TableConfig(name="i", record_key=["id"], ordering_field="ts"), spark=spark)
    first = t.upsert(spark.createDataFrame([(1, "a", 1, "x", False)], DDL)).instant
    plan: Any = plan_incremental(t.io, t.protocol.load_timeline(), t.config, start=None, end=first)
    with pytest.raises(TableCoreError, match="counts snapshots"):
        count_plan(spark, t.io, plan)


def test_a_read_of_some_partitions_reads_only_them(table_path: str, spark) -> None:
    # Table.read(partitions=...): the snapshot of those partitions, logs merged, nothing of the others
    cfg = TableConfig(name="p", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type="MERGE_ON_READ")
    t = Table.create(table_path, cfg, spark=spark)
    t.upsert(spark.createDataFrame([(i, "abc"[i % 3], 1, "x", False) for i in range(9)], DDL))
    t.upsert(spark.createDataFrame([(0, "a", 2, "y", False), (1, "b", 2, "y", False)], DDL))  # logs in a and b
    everything = {r["id"]: r["v"] for r in t.read().collect()}
    some = t.read(partitions=["city=a", "city=c", "city=nowhere"])
    got = {r["id"]: r["v"] for r in some.collect()}
    assert got == {i: v for i, v in everything.items() if i % 3 in (0, 2)}
    assert got[0] == "y"  # the log's update is merged
    assert {r["_hoodie_partition_path"] for r in some.collect()} == {"city=a", "city=c"}
    assert t.read(partitions=[]).count() == 0
