"""Bulk inserts of Arrow tables without Spark (tablecore.arrow_writer): the same keys, partition paths, files and
commits as a Spark bulk insert, read back by hudi-rs and by our readers, and refused with a clear error where the
two would differ."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablecore import InvalidInputError, Table, TableConfig, read_arrow
from tablecore.engine import MetadataOnlyEngine
from tablecore.format.record_keys import partition_paths, record_keys
from tablecore.metadata_table import verify as verify_metadata
from tests.tablecore.oracle import hudi_snapshot, rows, spark_rows

pytestmark = [pytest.mark.spark]


def trips(n: int, *, start: int = 0, ts: int = 1) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int32()), "part": [f"p{i % 3}" for i in ids],
                     "ts": pa.array([ts] * n, pa.int64()), "val": [f"v{i}" for i in ids],
                     "fare": [i * 1.5 for i in ids]})


def config(table_type: str, version: int, **kw: Any) -> TableConfig:
    return TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                       table_type=table_type, table_version=version, **kw)


@pytest.mark.parametrize(("table_type", "version"), [("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6),
                                                     ("COPY_ON_WRITE", 8), ("MERGE_ON_READ", 8)])
def test_an_arrow_bulk_insert_reads_as_hudi_rs_and_spark_read_it_and_takes_spark_upserts(
        spark: Any, tmp_path: Path, table_type: str, version: int) -> None:
    uri = str(tmp_path / "t")
    # a tiny target file size: several file groups per partition
    t = Table.create(uri, config(table_type, version, target_file_size=50 * 1024, small_file_limit=1024),
                     spark=spark)
    data = trips(300)
    r = t.bulk_insert(data)
    assert (r.operation, r.inserted, r.input_rows) == ("BULK_INSERT", 300, 300)
    assert r.files_written == 6  # 100 rows a partition, 50 a file at the default estimate of 1 KiB a record
    data_columns = data.column_names
    assert sorted(read_arrow(uri, columns=data_columns).to_pylist(), key=lambda r: r["id"]) == data.to_pylist()
    assert rows(read_arrow(uri)) == hudi_snapshot(uri) == spark_rows(t.read())
    keys = {(r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in read_arrow(uri).to_pylist()}
    prefix = "part=" if t.config.hive_style_partitioning else ""
    assert keys == {(str(i), f"{prefix}p{i % 3}") for i in range(300)}
    # Spark upserts find the rows an Arrow load wrote: the keys and partition paths are the same strings
    update = spark.createDataFrame([(i, f"p{i % 3}", 2, f"u{i}", 0.0) for i in range(0, 300, 7)],
                                   "id int, part string, ts long, val string, fare double")
    u = t.upsert(update)
    assert (u.updated, u.inserted) == (len(range(0, 300, 7)), 0)
    assert t.read().count() == 300
    assert rows(read_arrow(uri)) == hudi_snapshot(uri) == spark_rows(t.read())

def test_with_the_metadata_table(spark: Any, tmp_path: Path) -> None:
    """The metadata table records the files of an Arrow load as of a Spark write: it agrees with storage."""
    uri = str(tmp_path / "t")
    t = Table.create(uri, config("MERGE_ON_READ", 8, metadata_partitions=("files",)), spark=spark)
    t.bulk_insert(trips(120))
    t.upsert(spark.createDataFrame([(1, "p1", 5, "u1", 0.0)], "id int, part string, ts long, val string, fare double"))
    assert verify_metadata(uri) == []
    assert rows(read_arrow(uri)) == hudi_snapshot(uri) == spark_rows(t.read())


def test_keys_and_partition_paths_are_the_strings_spark_computes(spark: Any) -> None:
    from pyspark.sql import functions as F

    from tablecore.spark.keys import partition_path_column, record_key_column

    data = pa.table({
        "s": ["a", "", None, "x/y", "é=1", "100%", "tab\t", "a:b,c"],
        "i": pa.array([1, -2, None, 0, 2**40, 7, 8, 9], pa.int64()),
        "b": [True, False, None, True, False, True, False, True],
        "d": pa.array([dt.date(2024, 1, 2), None, dt.date(1970, 1, 1), dt.date(2000, 2, 29), None,
                       dt.date(2024, 12, 31), dt.date(1999, 9, 9), dt.date(2024, 1, 2)], pa.date32()),
    })
    df = spark.createDataFrame(data.to_pandas(), "s string, i long, b boolean, d date")
    for keys, parts, hive, encode in [(["s"], ["s"], True, True), (["i"], ["d", "b"], False, False),
                                      (["s", "i"], ["s", "i"], True, False), (["d", "b"], ["i"], False, True)]:
        cfg = TableConfig(name="k", record_key=keys, partition_fields=parts, hive_style_partitioning=hive,
                          url_encode_partitions=encode)
        paths, codes = partition_paths(data, cfg.partition_fields, hive_style=hive, url_encode=encode)
        keys_ = record_keys(data, cfg.record_key, complex_keys=cfg.complex_keys)[0]
        ours = list(zip(keys_.to_pylist(), [paths[c] for c in codes], strict=True))
        theirs = [(r["k"], r["p"]) for r in df.select(record_key_column(cfg).alias("k"),
                                                       partition_path_column(cfg).alias("p"), F.col("s")).collect()]
        assert ours == theirs, (keys, parts, hive, encode)


def test_bad_input_is_refused_and_nothing_is_written(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, config("COPY_ON_WRITE", 8), spark=spark)
    null_key = trips(5).set_column(0, "id", pa.array([1, None, 3, 4, 5], pa.int32()))
    with pytest.raises(InvalidInputError, match="1 input rows have a null or empty record key"):
        t.bulk_insert(null_key)
    with pytest.raises(InvalidInputError, match="no ordering column 'ts'"):
        t.bulk_insert(trips(5).drop_columns(["ts"]))
    stamped = trips(5).set_column(1, "part", pa.array([dt.datetime(2024, 1, 1)] * 5, pa.timestamp("us", tz="UTC")))
    with pytest.raises(InvalidInputError, match="partition field 'part' is timestamp"):
        t.bulk_insert(stamped)
    naive = trips(5).append_column("seen", pa.array([dt.datetime(2024, 1, 1)] * 5, pa.timestamp("us")))
    with pytest.raises(InvalidInputError, match="column 'seen' holds timestamp_ntz values"):
        t.bulk_insert(naive)
    with pytest.raises(InvalidInputError, match="written by bulk_insert or upsert"):
        t.insert(trips(5))
    with pytest.raises(InvalidInputError, match="holds that one write, not 2"):
        t.transaction().bulk_insert(trips(5)).bulk_insert(trips(5, start=5)).commit()
    assert t.latest_instant() is None
    assert not list(Path(uri).rglob("*.parquet"))


def test_without_spark(tmp_path: Path) -> None:
    """A table opened for its metadata only (no compute engine) takes an Arrow bulk insert; a Spark write refuses."""
    uri = str(tmp_path / "t")
    t = Table.create(uri, config("MERGE_ON_READ", 8), engine=MetadataOnlyEngine())
    t.bulk_insert(trips(50))  # partitions interleaved: reordered once
    t.bulk_insert(trips(50, start=50, ts=2).sort_by("part"))  # each partition's rows together: written as they are
    assert rows(read_arrow(uri)) == hudi_snapshot(uri)
    assert sorted(read_arrow(uri, columns=["id", "part", "val"]).to_pylist(), key=lambda r: r["id"]) == \
        [{"id": i, "part": f"p{i % 3}", "val": f"v{i}"} for i in range(100)]


def test_on_s3(s3: Any) -> None:
    """On the S3 test server, without Spark: hudi-rs reads what the Arrow load wrote, as our reader does."""
    uri = s3.table_uri("arrow-load")
    t = Table.create(uri, config("COPY_ON_WRITE", 8, metadata_partitions=("files",)), engine=MetadataOnlyEngine())
    t.bulk_insert(trips(90))
    assert read_arrow(uri).num_rows == 90
    assert rows(read_arrow(uri)) == hudi_snapshot(uri)
    assert verify_metadata(uri, storage_options=None) == []
