"""Reads into Arrow without Spark (tablecore.read_arrow, read_changes_arrow, Table.to_arrow) against hudi-rs, the
Spark reader and Apache Hudi's own tables."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tablecore import InvalidInputError, Table, read_arrow, read_changes_arrow
from tablecore.tasks import read as read_module
from tests.tablecore.oracle import hudi_snapshot, rows, spark_rows
from tests.tablecore.test_replicate import HUDI_WRITTEN, batch, create, extract, ordered, play

pytestmark = [pytest.mark.spark]


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
