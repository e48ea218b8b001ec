"""The metadata table's files partition (tablecore.metadata_table): built from storage, kept in step by every
operation, used for listing by our reader and by hudi-rs (the oracle), safe across a publish killed half-way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder
from typer.testing import CliRunner

from governance.cli import app
from tablecore import ConfigError, Table, TableConfig
from tablecore import metadata_table as mdt
from tablecore.commit import CommitProtocol
from tablecore.format.file_view import list_table_files
from tablecore.format.timeline import Timeline
from tablecore.io import file_io_for
from tablecore.table_properties import read_config
from tests.tablecore.oracle import hudi_snapshot, spark_rows
from tests.tablecore.test_replicate import batch, create, local_rows, play

pytestmark = [pytest.mark.spark]


def hudi_lists_through_it(uri: str) -> bool:
    """hudi-rs computes table statistics only from a metadata table's files partition (None when it lists storage)."""
    return HudiTableBuilder.from_base_uri(uri).build().compute_table_stats() is not None


def metadata_files(uri: str) -> list[str]:
    return sorted(p.name for p in Path(uri, ".hoodie", "metadata", "files").iterdir())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_every_operation_keeps_the_metadata_table_in_step_and_readers_list_through_it(
        spark: Any, tmp_path: Path, table_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mdt, "LOGS_PER_SLICE", 3)  # new slices (whole base files) every few commits
    uri = str(tmp_path / "t")
    t = create(spark, uri, table_type, 8)
    play(spark, t, 0, mor=table_type == "MERGE_ON_READ")
    assert mdt.verify(uri)[0].startswith("the table has no metadata table lakegate maintains")
    assert mdt.rebuild(uri) == len(list_table_files(file_io_for(uri)).bases) > 0
    assert read_config(file_io_for(uri), uri).metadata_partitions == ("files",)
    assert hudi_lists_through_it(uri)
    for r in range(1, 10):  # upserts with deletes, compaction, insert_overwrite, clean, clustering, rollback, archival
        play(spark, t, r, mor=table_type == "MERGE_ON_READ")
        assert mdt.verify(uri) == [], f"round {r}"
        assert hudi_lists_through_it(uri), f"round {r}"
        assert local_rows(uri) == hudi_snapshot(uri), f"round {r}"
    assert spark_rows(Table.open(uri, spark=spark).read()) == hudi_snapshot(uri)
    names = metadata_files(uri)
    assert sum(n.endswith(".hfile") for n in names) == 2, names  # the newest two slices are kept
    assert any(".log." in n for n in names)
    # the metadata table's timeline holds the delta commits of those slices only
    kept = {n.rsplit("_", 1)[1].split(".")[0] for n in names if n.endswith(".hfile")}
    kept |= {n.split("_")[1].split(".")[0] for n in names if ".log." in n}
    timeline = Path(uri, ".hoodie", "metadata", ".hoodie", "timeline")
    assert {p.name.split(".")[0].split("_")[0] for p in timeline.iterdir() if p.is_file()} == kept


def test_reads_list_the_metadata_table_not_storage_and_verify_names_what_differs(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE", 8)
    t.upsert(batch(spark, range(9), 1, "a"))
    mdt.rebuild(uri)
    before = hudi_snapshot(uri)
    # a copy of a committed base file under another file group's name: a storage listing sees a second copy of
    # its rows, the metadata table does not list it
    base = next(Path(uri, "part=p0").glob("*.parquet"))
    stray = base.with_name("0" * 8 + base.name[8:])
    shutil.copy(base, stray)
    assert local_rows(uri) == before == hudi_snapshot(uri)
    assert mdt.verify(uri) == [f"part=p0: {stray.name} is in storage but not listed"]
    stray.unlink()
    listed = mdt.MetadataTable(file_io_for(uri), t.config).listing(Timeline.listed(file_io_for(uri), 8))
    victim = listed.bases[0]
    Path(victim.path).unlink()
    assert mdt.verify(uri) == [f"{victim.partition}: {victim.name} is listed but not in storage"]


def test_a_publish_killed_after_the_metadata_commit_is_ignored_then_undone(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "t")
    t = create(spark, uri, "MERGE_ON_READ", 8)
    t.upsert(batch(spark, range(9), 1, "a"))
    mdt.rebuild(uri)
    before = hudi_snapshot(uri)
    real = mdt.MetadataTable.commit

    class Killed(BaseException):
        """Stands for the process dying between the metadata table's delta commit and the data instant's."""

    def commit_then_die(self: mdt.MetadataTable, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        raise Killed

    def dead(*_: Any, **__: Any) -> None:
        raise Killed  # a dead process rolls nothing back

    monkeypatch.setattr(mdt.MetadataTable, "commit", commit_then_die)
    monkeypatch.setattr(CommitProtocol, "rollback_pending", dead)
    with pytest.raises(Killed):
        t.upsert(batch(spark, [1, 20], 2, "b"))
    monkeypatch.undo()
    pending = Timeline.listed(file_io_for(uri), 8).pending()
    assert len(pending) == 1 and any(n.startswith(f".files-0000-0_{pending[0].time}.") for n in metadata_files(uri))
    assert mdt.verify(uri) == [] and local_rows(uri) == before == hudi_snapshot(uri)
    Path(uri, ".hoodie", ".aux", "lakegate", "heartbeat", pending[0].time).unlink(missing_ok=True)  # a dead writer
    assert t.rollback_failed() == [pending[0].time]  # what the next writer does first
    assert not any(pending[0].time in n for n in metadata_files(uri))
    t.upsert(batch(spark, [1, 30], 3, "c"))
    assert mdt.verify(uri) == [] and local_rows(uri) == hudi_snapshot(uri)
    assert {r["id"]: r["val"] for r in hudi_snapshot(uri)}[1] == "c1"


def test_version_6_is_refused_and_the_cli_rebuilds_and_verifies(spark: Any, tmp_path: Path) -> None:
    old, new = str(tmp_path / "v6"), str(tmp_path / "v8")
    create(spark, old, "COPY_ON_WRITE", 6).upsert(batch(spark, range(3), 1, "a"))
    with pytest.raises(ConfigError, match="version 8 and later; this table is version 6"):
        mdt.rebuild(old)
    create(spark, new, "MERGE_ON_READ", 8).upsert(batch(spark, range(6), 1, "a"))
    cli = CliRunner()
    done = cli.invoke(app, ["table", "metadata", "rebuild", new, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"table": new, "files": 3}
    checked = cli.invoke(app, ["table", "metadata", "verify", new, "--json"])
    assert checked.exit_code == 0 and json.loads(checked.stdout)["agrees"] is True
    next(Path(new, "part=p1").glob("*.parquet")).unlink()
    broken = cli.invoke(app, ["table", "metadata", "verify", new])
    assert broken.exit_code == 1 and "is listed but not in storage" in broken.output
    assert cli.invoke(app, ["table", "metadata", "rebuild", old]).exit_code == 2


def test_on_s3_writes_keep_it_and_our_reader_lists_through_it(spark: Any, s3: Any) -> None:
    uri = s3.table_uri("mdt")
    t = create(spark, uri, "MERGE_ON_READ", 8)
    t.upsert(batch(spark, range(8), 0, "a"))
    assert mdt.rebuild(uri) == 3
    t.upsert(batch(spark, range(4, 12), 1, "b"))
    t.compact()
    t.delete(batch(spark, [5], 0, ""))
    assert mdt.verify(uri) == []
    expected = local_rows(uri)
    assert expected == hudi_snapshot(uri) == spark_rows(Table.open(uri, spark=spark).read())
    # a stray copy of a committed base file that only a listing of storage would see: our reader ignores it;
    # hudi-rs 0.5.0 lists storage for a table on S3 (its compute_table_stats() is None there), so it reads the
    # copy's rows too (docs/metadata-table.md)
    io = file_io_for(uri)
    base = next(f for f in list_table_files(io).bases if f.partition == "part=p0")
    stray = "0" * 8 + base.name[8:]
    io.write_bytes(io.join(base.partition, stray), io.read_bytes(base.path))
    assert local_rows(uri) == expected
    copied = pq.read_metadata(pa.BufferReader(io.read_bytes(base.path))).num_rows
    assert len(hudi_snapshot(uri)) == len(expected) + copied
    assert mdt.verify(uri) == [f"part=p0: {stray} is in storage but not listed"]


def test_a_table_created_with_a_metadata_table_keeps_it_from_its_first_write(spark: Any, tmp_path: Path) -> None:
    config = TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                         table_type="MERGE_ON_READ", table_version=8, metadata_partitions=("files",))
    with pytest.raises(ConfigError, match="files partition, and optionally record_index, from table version 8"):
        Table.create(str(tmp_path / "v6"), config.model_copy(update={"table_version": 6}), spark=spark)
    uri = str(tmp_path / "t")
    t = Table.create(uri, config, spark=spark)
    assert t.config.metadata_partitions == ("files",) and mdt.verify(uri) == [] and local_rows(uri) == []
    t.upsert(batch(spark, range(6), 1, "a"))
    t.upsert(batch(spark, range(3, 9), 2, "b"))
    assert mdt.verify(uri) == [] and hudi_lists_through_it(uri)
    assert local_rows(uri) == hudi_snapshot(uri) and len(local_rows(uri)) == 9
