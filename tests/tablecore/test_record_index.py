"""The record-level index (tablecore.record_index): kept by every operation, used by upserts and deletes instead of
reading the keys of the partitions a batch touches, built from a table's rows, and safe across a write that dies
before its commit. hudi-rs (the oracle) reads every table written with it like our reader does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from governance.cli import app
from tablecore import Table, TableConfig
from tablecore import metadata_table as mdt
from tablecore import record_index as ri
from tablecore.commit import CommitProtocol
from tablecore.format.timeline import Timeline
from tablecore.io import file_io_for
from tablecore.metadata_table import record_index_in_use
from tablecore.metadata_table import verify as verify_files
from tablecore.services.record_index_build import rebuild_with_record_index, verify_record_index
from tablecore.spark import writer as spark_writer
from tablecore.table_properties import read_config
from tests.tablecore.oracle import hudi_snapshot, spark_rows
from tests.tablecore.test_replicate import DDL, batch, local_rows, play

pytestmark = [pytest.mark.spark]


def create(spark: Any, path: str, table_type: str, **extra: Any) -> Table:
    return Table.create(path, TableConfig(name="trips", record_key=["id"], ordering_field="ts",
                                          partition_fields=["part"], table_type=table_type, table_version=8,
                                          index_type="RECORD_INDEX", record_index_file_groups=4, **extra),
                        spark=spark)


def index_files(uri: str) -> list[str]:
    return sorted(p.name for p in Path(uri, ".hoodie", "metadata", "record_index").iterdir())


def no_key_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the simple index read the keys of base files")
    monkeypatch.setattr(spark_writer, "scan_keys", refuse)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_operation_keeps_the_record_index_and_writes_look_keys_up_in_it(
        spark: Any, tmp_path: Path, table_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ri, "MAX_LOGS", 3)  # groups are compacted into new base files every few writes
    no_key_scans(monkeypatch)
    uri = str(tmp_path / "t")
    t = create(spark, uri, table_type)
    assert read_config(t.io, uri).metadata_partitions == ("files", "record_index")
    assert read_config(t.io, uri).index_type == "RECORD_INDEX"
    for r in range(10):  # upserts with deletes, compaction, insert_overwrite, clean, clustering, rollback, archival
        play(spark, t, r, mor=table_type == "MERGE_ON_READ")
        assert verify_record_index(uri) == [], f"round {r}"
        assert verify_files(uri) == [], f"round {r}"
        found = local_rows(uri)
        assert found == hudi_snapshot(uri), f"round {r}"
        assert len({row["id"] for row in found}) == len(found), f"round {r}: a key twice"
    assert spark_rows(t.read()) == hudi_snapshot(uri)
    names = index_files(uri)
    assert any(n.endswith(".hfile") and not n.endswith("_00000000000000000.hfile") for n in names), names
    assert any(".log." in n for n in names)


def test_an_update_stays_in_the_partition_its_record_is_in_and_a_delete_finds_it_anywhere(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_key_scans(monkeypatch)
    uri = str(tmp_path / "t")
    t = create(spark, uri, "MERGE_ON_READ")
    t.upsert(spark.createDataFrame([(1, "p1", 1, "a"), (2, "p2", 1, "b")], DDL))
    # the key is global: id 1 arrives with another partition value; it is updated where it lives (Hudi's default)
    t.upsert(spark.createDataFrame([(1, "p2", 2, "moved?"), (3, "p3", 2, "c")], DDL))
    got = {r["id"]: (r["_hoodie_partition_path"], r["val"]) for r in hudi_snapshot(uri)}
    assert got == {1: ("part=p1", "moved?"), 2: ("part=p2", "b"), 3: ("part=p3", "c")}
    t.delete(spark.createDataFrame([(1, "p9", 3, "")], DDL))  # the partition value does not matter either
    assert sorted(r["id"] for r in hudi_snapshot(uri)) == [2, 3]
    assert verify_record_index(uri) == []


def test_a_write_killed_after_the_metadata_commit_leaves_index_files_nobody_reads_and_recovery_removes_them(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ri, "MAX_LOGS", 3)  # the killed (third) write merges its groups into new base files
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE")
    t.upsert(batch(spark, range(20), 1, "a"))
    t.upsert(batch(spark, range(20, 40), 2, "b"))
    before = hudi_snapshot(uri)
    real = mdt.MetadataTable.commit

    class Killed(BaseException):
        """Stands for the process dying between the metadata table's delta commit and the data instant's."""

    def commit_then_die(self: mdt.MetadataTable, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        raise Killed

    def dead(*_: Any, **__: Any) -> None:
        raise Killed  # a dead process rolls nothing back

    with monkeypatch.context() as m:
        m.setattr(mdt.MetadataTable, "commit", commit_then_die)
        m.setattr(CommitProtocol, "rollback_pending", dead)
        with pytest.raises(Killed):
            t.upsert(batch(spark, [*range(100, 120), 3], 3, "new"))
    pending = Timeline.listed(t.io, 8).pending()
    assert len(pending) == 1
    dead_time = pending[0].time
    mine = [n for n in index_files(uri) if dead_time in n]
    assert any(n.endswith(".hfile") for n in mine), mine  # it merged groups into new base files, uncommitted
    assert local_rows(uri) == before == hudi_snapshot(uri)
    assert verify_record_index(uri) == []  # nobody applies them
    Path(uri, ".hoodie", ".aux", "lakegate", "heartbeat", dead_time).unlink(missing_ok=True)  # a dead writer
    assert t.rollback_failed() == [dead_time]  # what the next writer does first
    assert not any(dead_time in n for n in index_files(uri))
    t.upsert(batch(spark, [*range(120, 125), 3], 4, "next"))
    assert verify_record_index(uri) == []
    found = hudi_snapshot(uri)
    assert sorted(r["id"] for r in found) == [*range(40), *range(120, 125)]


def test_built_from_a_tables_rows_it_agrees_with_them_and_later_writes_use_it(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                      table_type="MERGE_ON_READ", table_version=8), spark=spark)
    t.upsert(batch(spark, range(50), 1, "a"))
    t.upsert(batch(spark, range(0, 50, 5), 2, "b"))  # log files: the build merges them
    assert verify_record_index(uri) == ["the table has no record index lakegate maintains"]
    assert rebuild_with_record_index(uri, file_groups=3) == 50
    assert verify_record_index(uri) == []
    assert {n.split("_")[0] for n in index_files(uri) if n.endswith(".hfile")} == \
        {f"record-index-000{g}-0" for g in range(3)}
    config = read_config(file_io_for(uri), uri)
    assert record_index_in_use(config) and config.index_type == "RECORD_INDEX"
    no_key_scans(monkeypatch)
    t = Table.open(uri, spark=spark)
    t.upsert(batch(spark, [1, 2, 99], 3, "c"))
    assert verify_record_index(uri) == []
    assert sorted(r["id"] for r in hudi_snapshot(uri)) == sorted([*range(50), 99])


def test_an_arrow_bulk_insert_indexes_its_rows(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE")
    t.bulk_insert(pa.table({"id": pa.array(range(200), pa.int32()), "part": [f"p{i % 3}" for i in range(200)],
                            "ts": pa.array([1] * 200, pa.int64()), "val": [f"a{i}" for i in range(200)]}))
    assert verify_record_index(uri) == []
    no_key_scans(monkeypatch)
    t.upsert(batch(spark, [5, 500], 2, "b"))
    assert verify_record_index(uri) == []
    assert len(hudi_snapshot(uri)) == 201


def test_the_cli_builds_and_verifies_it_and_names_a_missing_key(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                      table_version=8), spark=spark)
    t.upsert(batch(spark, range(30), 1, "a"))
    runner = CliRunner()
    built = runner.invoke(app, ["table", "metadata", "rebuild", uri, "--record-index", "--file-groups", "2", "--json"])
    assert built.exit_code == 0, built.output
    assert json.loads(built.output) == {"table": uri, "keys": 30, "file_groups": 2}
    assert runner.invoke(app, ["table", "metadata", "verify", uri]).exit_code == 0
    Table.open(uri, spark=spark).upsert(batch(spark, [77], 2, "b"))
    log = next(p for p in Path(uri, ".hoodie", "metadata", "record_index").iterdir() if ".log." in p.name)
    log.unlink()  # the entry of key 77 is lost
    found = runner.invoke(app, ["table", "metadata", "verify", uri, "--json"])
    assert found.exit_code == 1
    problems = json.loads(found.output)["problems"]
    assert len(problems) == 1 and re.fullmatch(r"key '77' \(part=p2/[0-9a-f-]{36}-0\) is not in the record index",
                                                problems[0]), problems


def test_a_key_in_two_partitions_is_refused_and_nothing_is_changed(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                      table_version=8), spark=spark)
    t.upsert(spark.createDataFrame([(1, "p1", 1, "a"), (2, "p1", 1, "b")], DDL))
    t.upsert(spark.createDataFrame([(1, "p2", 2, "a again")], DDL))  # the simple index: another record in p2
    result = CliRunner().invoke(app, ["table", "metadata", "rebuild", uri, "--record-index"])
    assert result.exit_code == 2
    assert "keys are in several: '1'" in result.output
    config = read_config(file_io_for(uri), uri)
    assert config.metadata_partitions == () and config.index_type == "SIMPLE"
    assert not Path(uri, ".hoodie", "metadata").exists()
