"""Reads into Arrow without Spark (tablecore.read_arrow, read_changes_arrow, Table.to_arrow) against hudi-rs, the
Spark reader and Apache Hudi's own tables."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablecore import InvalidInputError, Table, TableConfig, read_arrow, read_changes_arrow
from tablecore.format.timeline import Timeline
from tablecore.io import file_io_for
from tablecore.read_planning import plan_incremental, plan_snapshot
from tablecore.table_properties import read_config
from tablecore.tasks import mor
from tablecore.tasks import read as read_module
from tablecore.tasks.write import read_base_file
from tests.tablecore.oracle import hudi_snapshot, rows, spark_rows
from tests.tablecore.test_replicate import HUDI_WRITTEN, batch, create, extract, ordered, play

pytestmark = [pytest.mark.spark]
BLOCK_RECORDS, DECODE_GROUPED = mor.block_records, mor.decode_avro_columns_by_schema


def test_rounds_of_writes_read_as_hudi_rs_and_spark_read_them(spark: Any, tmp_path: Path) -> None:
    """Merge-on-read, version 8: upserts with deletes, a compaction, an insert_overwrite, an upsert left in logs."""
    uri = str(tmp_path / "t")
    t = create(spark, uri, "MERGE_ON_READ", 8)
    instants = []
    for r in (0, 1, 2, 3, 4, 5):
        play(spark, t, r, mor=True)
        instants.append(t.latest_instant())
        assert rows(read_arrow(uri)) == hudi_snapshot(uri), f"round {r}"
    assert rows(read_arrow(uri, max_workers=1)) == rows(t.to_arrow()) == spark_rows(t.read())
    assert rows(read_arrow(uri, view="read_optimized")) == spark_rows(t.read(view="read_optimized"))
    assert rows(read_arrow(uri, as_of=instants[2])) == spark_rows(t.read(as_of=instants[2]))
    assert rows(read_arrow(uri, partitions=["part=p1"])) == spark_rows(t.read(partitions=["part=p1"]))
    assert rows(read_changes_arrow(uri, instants[3])) == spark_rows(t.read_changes(instants[3]))
    projected = read_arrow(uri, columns=["val", "id"])
    assert projected.column_names == ["val", "id"]
    assert sorted(projected.to_pylist(), key=lambda r: r["id"]) == sorted(
        ({"val": r["val"], "id": r["id"]} for r in hudi_snapshot(uri)), key=lambda r: r["id"])
    changed = read_changes_arrow(uri, instants[4], columns=["id"])
    assert sorted(changed.column("id").to_pylist()) == sorted(r["id"] for r in spark_rows(t.read_changes(instants[4])))
    with pytest.raises(InvalidInputError, match="no column 'fare' in the table"):
        read_arrow(uri, columns=["id", "fare"])


def test_a_column_added_later_reads_as_null_from_older_files(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE", 8)
    t.upsert(batch(spark, range(6), 1, "a"))
    t.upsert(spark.createDataFrame([(0, "p0", 2, "b0", 1.5)], "id int, part string, ts long, val string, tip double"))
    got = {r["id"]: r["tip"] for r in read_arrow(uri, columns=["id", "tip"]).to_pylist()}
    assert got == {0: 1.5, 1: None, 2: None, 3: None, 4: None, 5: None}


def test_a_projected_read_of_merged_slices_reads_only_the_columns_the_merge_needs(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Event-time ordering: stale updates in the logs lose to the base rows, which the merge can only tell from the
    base files' ordering column, read although the caller did not ask for it."""
    uri = str(tmp_path / "t")
    t = Table.create(uri, TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                      table_type="MERGE_ON_READ", table_version=8, merge_mode="EVENT_TIME_ORDERING"),
                     spark=spark)
    t.upsert(batch(spark, range(12), 5, "a"))
    loaded = next(i.completed for i in reversed(t.timeline()) if i.completed)
    t.upsert(batch(spark, range(0, 12, 2), 3, "stale"))  # lower ts: the base rows stay
    t.upsert(batch(spark, [1, 3, 20], 9, "new"))
    whole = spark_rows(t.read())
    assert {r["id"]: r["val"] for r in whole if r["id"] in (0, 1)} == {0: "a0", 1: "new1"}
    asked: list[list[str] | None] = []
    reads = read_module.read_base_file
    monkeypatch.setattr(read_module, "read_base_file", lambda io, path, columns=None, **kw: asked.append(columns)
                        or reads(io, path, columns, **kw))
    projected = read_arrow(uri, columns=["val", "id"])
    assert sorted(projected.to_pylist(), key=lambda r: r["id"]) == sorted(
        ({"val": r["val"], "id": r["id"]} for r in whole), key=lambda r: r["id"])
    assert asked and all(c == ["_hoodie_record_key", "id", "ts", "val"] for c in asked), asked
    changed = read_changes_arrow(uri, loaded, columns=["val"])
    assert sorted(changed.column("val").to_pylist()) == sorted(r["val"] for r in spark_rows(t.read_changes(loaded)))
    asked.clear()
    assert rows(read_arrow(uri)) == whole  # every column: the base files are read whole
    assert asked and all(c is None for c in asked)


def test_base_files_read_with_meta_columns_as_dictionaries_give_the_stored_strings(spark: Any, tmp_path: Path) -> None:
    """The low-cardinality meta columns are decoded as dictionaries and expanded: same values and types as a plain
    Parquet read, whatever columns are asked for."""
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE", 8)
    t.upsert(batch(spark, range(40), 1, "a"))
    t.upsert(batch(spark, range(0, 40, 4), 2, "b"))  # two commit times in a file
    io = file_io_for(uri)
    files = [b for *_, b, _ in plan_snapshot(io, Timeline.listed(io, 8), read_config(io, uri)).slices()]
    assert files
    for path in files:
        plain = pq.read_table(path)
        assert read_base_file(io, path).equals(plain)
        some = ["_hoodie_file_name", "id", "_hoodie_commit_time", "absent"]
        assert read_base_file(io, path, some, present_only=True).equals(plain.select(some[:3]))
    assert any(len(set(pq.read_table(p).column("_hoodie_commit_time").to_pylist())) == 2 for p in files)


@pytest.mark.parametrize(("folder", "name"), HUDI_WRITTEN)
def test_tables_apache_hudi_wrote_read_as_hudi_rs_reads_them(folder: str, name: str, tmp_path: Path) -> None:
    uri = extract(folder, name, tmp_path)
    assert ordered(rows(read_arrow(uri))) == ordered(hudi_snapshot(uri))


def test_on_s3(spark: Any, s3: Any) -> None:
    uri = s3.table_uri("arrow")
    t = create(spark, uri, "MERGE_ON_READ", 8)
    t.upsert(batch(spark, range(12), 1, "a"))
    t.upsert(batch(spark, range(6, 18), 2, "b"))
    assert rows(read_arrow(uri)) == hudi_snapshot(uri) == spark_rows(Table.open(uri, spark=spark).read())


@pytest.mark.parametrize("version", [6, 8])
def test_a_pull_of_delta_commits_reads_their_logs_not_the_base_files(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """Nor their footers: a base file written before the range is known by its name to hold no row in it."""
    uri = str(tmp_path / "t")
    t = create(spark, uri, "MERGE_ON_READ", version)
    t.upsert(batch(spark, range(30), 1, "a"))  # base files
    loaded = t.latest_instant() if version == 6 else next(i.completed for i in reversed(t.timeline()) if i.completed)
    t.upsert(batch(spark, [*range(0, 30, 4), 40], 2, "b"))  # logs over every base file, and a new key
    expected = spark_rows(t.read_changes(loaded))
    assert {r["id"] for r in expected} == {*range(0, 30, 4), 40}

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a base file was read")

    monkeypatch.setattr(read_module, "read_base_file", refuse)
    monkeypatch.setattr(read_module, "pq", SimpleNamespace(ParquetFile=refuse))
    assert rows(read_changes_arrow(uri, loaded)) == expected
    with pytest.raises(AssertionError, match="a base file was read"):
        read_changes_arrow(uri)  # from the start: the base files' rows are in range
    monkeypatch.undo()
    # every slice's rows are its logs: answered at once, and again (slice by slice) when a key has two records
    answers: list[bool] = []
    together = read_module._logs_alone
    monkeypatch.setattr(read_module, "_logs_alone", lambda *a: answers.append((r := together(*a)) is not None) or r)
    assert rows(read_changes_arrow(uri, loaded)) == expected
    t.upsert(batch(spark, range(0, 30, 8), 3, "c"))
    assert rows(read_changes_arrow(uri, loaded)) == spark_rows(t.read_changes(loaded))
    assert answers == [True, False]


@pytest.mark.parametrize("version", [6, 8])
def test_a_pull_of_a_copy_on_write_merge_reads_the_rows_it_wrote_not_the_files_it_rewrote(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """A merge writes the rows it keeps and its own rows in separate row groups; a pull of the merge reads the
    row groups whose commit-time statistics meet its range, and nothing else."""
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE", version)
    t.upsert(batch(spark, range(60), 1, "a"))
    loaded = t.latest_instant() if version == 6 else next(i.completed for i in reversed(t.timeline()) if i.completed)
    t.upsert(batch(spark, [*range(0, 60, 7), 70], 2, "b"))  # updates in every file group, and a new key
    merged = t.latest_instant()
    expected = spark_rows(t.read_changes(loaded))
    assert {r["id"] for r in expected} == {*range(0, 60, 7), 70}
    newest = [f for f in Path(uri).rglob("*.parquet") if f.name.endswith(f"_{merged}.parquet")]
    assert len(newest) == 3
    for f in newest:  # kept rows, then the merge's own, each in row groups of their own
        meta = pq.ParquetFile(f).metadata
        times = [meta.row_group(g).column(meta.schema.names.index("_hoodie_commit_time")).statistics
                 for g in range(meta.num_row_groups)]
        assert [(s.min, s.max) for s in times] == [(times[0].min, times[0].max), (merged, merged)]
        assert times[0].max < merged
    read_rows: list[int] = []
    original = pq.ParquetFile.read_row_groups

    def counted(self: pq.ParquetFile, groups: list[int], **kwargs: Any) -> Any:
        table = original(self, groups, **kwargs)
        read_rows.append(table.num_rows)
        return table

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counted)
    assert rows(read_changes_arrow(uri, loaded)) == expected
    assert sum(read_rows) == len(expected)  # only the merge's own rows were decoded
    # a range that also holds the first commit reads every row group
    read_rows.clear()
    assert rows(read_changes_arrow(uri)) == spark_rows(t.read_changes())
    assert sum(read_rows) == 0  # whole files: no row group left out


def test_the_logs_of_many_slices_decoded_together_are_the_logs_of_each_slice(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Data blocks of two writer schemas (a column added), deletes, several partitions; snapshot and ranged plans."""
    uri = str(tmp_path / "t")
    t = create(spark, uri, "MERGE_ON_READ", 8)
    for r in (0, 1, 2):
        play(spark, t, r, mor=True)
    ranged_from = next(i.completed for i in reversed(t.timeline()) if i.completed)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", 9, f"e{i}", 0.5 * i) for i in range(0, 12, 2)],
                                   "id int, part string, ts long, val string, tip double"))
    io = file_io_for(uri)
    config = read_config(io, uri)
    timeline = Timeline.listed(io, config.table_version)
    decoded_alone: list[Any] = []
    monkeypatch.setattr(mor, "block_records", lambda b, s: decoded_alone.append(b) or BLOCK_RECORDS(b, s))
    ranged = plan_incremental(io, timeline, config, start=ranged_from, end=None)
    for plan in (plan_snapshot(io, timeline, config), ranged):
        job = read_module.slice_job(io, plan)
        logs = [list(paths) for *_, paths in plan.slices() if paths]
        assert len(logs) >= 3
        one_by_one = [mor.log_records(io, paths, job) for paths in logs]
        decoded_alone.clear()
        together = mor.log_records_many(io, logs, job)
        assert decoded_alone == []  # every data block came out of the batched decoding
        assert [x.to_pylist() for x in together] == [x.to_pylist() for x in one_by_one]
        # blocks the batched decoder declines are decoded one by one, to the same records
        monkeypatch.setattr(mor, "decode_avro_columns_by_schema", lambda *_, **__: [])
        assert [x.to_pylist() for x in mor.log_records_many(io, logs, job)] == [x.to_pylist() for x in one_by_one]
        assert decoded_alone
        monkeypatch.setattr(mor, "decode_avro_columns_by_schema", DECODE_GROUPED)
    monkeypatch.undo()
    assert rows(read_arrow(uri)) == hudi_snapshot(uri) == spark_rows(t.read())
    assert rows(read_changes_arrow(uri, ranged_from)) == spark_rows(t.read_changes(ranged_from))


def test_the_commit_range_filter_keeps_rows_in_range_drops_null_times_and_copies_nothing_when_all_are_in() -> None:
    """``mor.filter_commit_range``: ``(start, end]`` or a set of instants; a table whose rows are all in range is
    returned as it is (row groups picked by their statistics usually are), not copied column by column."""
    times = ["20260101", "20260102", None, "20260103"]
    table = pa.table({mor.TIME_COL: times, "v": [1, 2, 3, 4]})
    assert mor.filter_commit_range(table, "20260101", "20260102", None)["v"].to_pylist() == [2]
    assert mor.filter_commit_range(table, "20260101", None, None)["v"].to_pylist() == [2, 4]
    assert mor.filter_commit_range(table, None, "20260102", None)["v"].to_pylist() == [1, 2]
    assert mor.filter_commit_range(table, None, None, frozenset({"20260101", "20260103"}))["v"].to_pylist() == [1, 4]
    # a null commit time is in no range, even an open one
    assert mor.filter_commit_range(table, "2025", None, None)["v"].to_pylist() == [1, 2, 4]
    inside = pa.table({mor.TIME_COL: pa.chunked_array([["20260102"], ["20260102", "20260103"]]), "v": [1, 2, 3]})
    assert mor.filter_commit_range(inside, "20260101", "20260103", None) is inside
    assert mor.filter_commit_range(inside, None, None, frozenset({"20260102", "20260103"})) is inside
    assert mor.filter_commit_range(inside, None, None, None) is inside
