"""The bloom index (index_type BLOOM): every base file carries Hudi's key bloom filter and key range in its footer,
and upserts and deletes find a key's file group by pruning with them instead of reading every base file's keys of
the affected partitions. hudi-rs (the oracle) reads every table written with it like our reader does."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablecore import Table, TableConfig
from tablecore.exceptions import TableCorruptError
from tablecore.format.bloom_filter import MAX_KEY, MIN_KEY, read_footer_filter
from tablecore.format.file_view import latest_base_files
from tablecore.format.timeline import Timeline
from tablecore.io import file_io_for
from tablecore.metadata_table import table_files
from tablecore.spark import writer as spark_writer
from tablecore.table_properties import read_config, update_properties
from tablecore.tasks.bloom_index import ProbeCounts, keys_in_base_file
from tests.tablecore.oracle import hudi_snapshot, spark_rows
from tests.tablecore.test_replicate import batch, local_rows, play

pytestmark = [pytest.mark.spark]

FIXTURES = Path(__file__).parent.parent / "fixtures"


def create(spark: Any, path: str, table_type: str, version: int = 6, **extra: Any) -> Table:
    return Table.create(path, TableConfig(name="trips", record_key=["id"], ordering_field="ts",
                                          partition_fields=["part"], table_type=table_type, table_version=version,
                                          **extra), spark=spark)


def no_key_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the simple index read the keys of base files")
    monkeypatch.setattr(spark_writer, "scan_keys", refuse)


def latest_bases(uri: str) -> list[Any]:
    io = file_io_for(uri)
    config = read_config(io, uri)
    timeline = Timeline.listed(io, config.table_version)
    return latest_base_files(table_files(io, config, timeline).bases, timeline)


def assert_footers_hold_their_keys(uri: str) -> None:
    for f in latest_bases(uri):  # local tables: the listed paths are absolute
        parquet = pq.ParquetFile(f.path)
        footer = parquet.metadata.metadata
        keys = parquet.read(columns=["_hoodie_record_key"]).column(0)
        bloom = read_footer_filter(footer)
        assert bloom is not None, f.path
        assert bloom.might_contain(keys).all(), f.path
        assert footer[MIN_KEY.encode()].decode() == min(keys.to_pylist())
        assert footer[MAX_KEY.encode()].decode() == max(keys.to_pylist())
        assert len(footer[b"ARROW:schema"]) < 20_000  # the filter is stored once, not again in Arrow's schema


@pytest.mark.parametrize(("table_type", "version"), [("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 8)])
def test_every_operation_with_the_bloom_index_reads_like_hudi_rs_and_never_scans_all_keys(
        spark: Any, tmp_path: Path, table_type: str, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    no_key_scans(monkeypatch)
    uri = str(tmp_path / "t")
    t = create(spark, uri, table_type, version, index_type="BLOOM")
    assert read_config(t.io, uri).index_type == "BLOOM"
    for r in range(10):  # upserts with deletes, compaction, insert_overwrite, clean, clustering, rollback, archival
        play(spark, t, r, mor=table_type == "MERGE_ON_READ")
        found = local_rows(uri)
        assert found == hudi_snapshot(uri), f"round {r}"
        assert len({row["id"] for row in found}) == len(found), f"round {r}: a key twice"
        assert_footers_hold_their_keys(uri)
    assert spark_rows(t.read()) == hudi_snapshot(uri)


def test_a_file_is_read_only_when_its_range_and_filter_admit_a_key(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE", index_type="BLOOM")
    t.upsert(spark.createDataFrame([(i, "p", 1, "a") for i in range(100, 200)], "id int, part string, ts long, "
                                                                               "val string"))
    [base] = latest_bases(uri)
    io = file_io_for(uri)
    counts = ProbeCounts()
    outside = keys_in_base_file(io, base.path, pa.array(["1", "99", "1234", "3"]), counts)  # only "1234" in range
    assert outside.to_pylist() == []
    assert counts.in_range == 1 and counts.maybe == 0 and counts.files_read == 0  # the filter dropped "1234"
    counts = ProbeCounts()
    found = keys_in_base_file(io, base.path, pa.array(["150", "17", "199", "1500"]), counts)
    assert sorted(found.to_pylist()) == ["150", "199"]
    assert counts.files_read == 1 and counts.maybe == 2


@pytest.mark.deployments
def test_files_without_filters_are_checked_by_their_keys(spark: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A table that used the simple index has no filters; once it switches, its old files are read whole."""
    uri = str(tmp_path / "t")
    t = create(spark, uri, "MERGE_ON_READ")
    t.upsert(batch(spark, range(30), 1, "a"))
    assert all(read_footer_filter(pq.ParquetFile(f.path).metadata.metadata) is None for f in latest_bases(uri))
    update_properties(t.io, {"hoodie.index.type": "BLOOM"})
    no_key_scans(monkeypatch)
    t = Table.open(uri, spark=spark)
    t.upsert(batch(spark, [*range(0, 30, 3), 100, 101], 2, "b"))
    t.delete(batch(spark, [1, 2], 3, ""))
    rows = hudi_snapshot(uri)
    assert local_rows(uri) == rows
    assert sorted(r["id"] for r in rows) == sorted({*range(30), 100, 101} - {1, 2})
    assert {r["id"]: r["val"] for r in rows}[3] == "b3"


def test_hudi_written_footers_are_probed_and_a_damaged_file_is_named(tmp_path: Path) -> None:
    with zipfile.ZipFile(FIXTURES / "hudi-v6" / "cow_nonpartitioned.zip") as z:
        z.extractall(tmp_path)
    io = file_io_for(str(tmp_path))
    files = sorted(p for p in tmp_path.rglob("*.parquet") if "__MACOSX" not in p.parts)
    keys = pq.read_table(files[0], columns=["_hoodie_record_key"]).column(0).combine_chunks()
    assert sorted(keys_in_base_file(io, str(files[0]), pa.array([*keys.to_pylist(), "zz"])).to_pylist()) == \
        sorted(keys.to_pylist())
    files[0].write_bytes(b"PAR1 cut short")
    with pytest.raises(TableCorruptError, match="does not open as Parquet"):
        keys_in_base_file(io, str(files[0]), keys)


def test_the_bloom_index_needs_meta_fields_and_bloom_filters_alone_are_a_table_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="populate_meta_fields"):
        TableConfig(name="t", record_key=["id"], index_type="BLOOM", populate_meta_fields=False)
    config = TableConfig(name="t", record_key=["id"], bloom_filters=True)
    props = config.to_properties()
    assert props["hoodie.parquet.bloom.filter.enabled"] == "true"
    assert TableConfig.from_properties(props).writes_bloom_filters
    assert not TableConfig(name="t", record_key=["id"]).writes_bloom_filters
    assert TableConfig.from_properties({**props, "hoodie.index.type": "BLOOM"}).index_type == "BLOOM"


def test_the_bloom_index_on_s3_finds_its_keys_through_the_object_store(spark: Any, s3: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Footers and key columns are read by the executors through the table's FileIO (S3 without Hadoop)."""
    no_key_scans(monkeypatch)
    uri = s3.table_uri()
    t = create(spark, uri, "MERGE_ON_READ", index_type="BLOOM")
    t.upsert(batch(spark, range(40), 1, "a"))
    t.upsert(batch(spark, [*range(0, 40, 4), 41, 42], 2, "b"))
    t.delete(batch(spark, [5], 3, ""))
    rows = hudi_snapshot(uri)
    assert sorted(r["id"] for r in rows) == sorted({*range(40), 41, 42} - {5})
    assert {r["id"]: r["val"] for r in rows}[4] == "b4"
    assert spark_rows(t.read()) == rows


def test_an_arrow_bulk_insert_writes_the_filters_and_upserts_find_its_keys(spark: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    no_key_scans(monkeypatch)
    uri = str(tmp_path / "t")
    t = create(spark, uri, "COPY_ON_WRITE", index_type="BLOOM")
    t.bulk_insert(pa.table({"id": pa.array(range(50), pa.int32()), "part": [f"p{i % 3}" for i in range(50)],
                            "ts": pa.array([1] * 50, pa.int64()), "val": [f"a{i}" for i in range(50)]}))
    assert_footers_hold_their_keys(uri)
    t.upsert(batch(spark, [*range(0, 50, 5), 70], 2, "b"))
    rows = hudi_snapshot(uri)
    assert len(rows) == 51 and {r["id"]: r["val"] for r in rows}[10] == "b10"
