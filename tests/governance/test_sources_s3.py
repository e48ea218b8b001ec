"""The ``files`` source on object storage Spark cannot open itself (``s3://`` on the test server, no Hadoop S3
connector): every format reads the same rows, positions and descriptions from S3 as from the same files on a local
disk (the executors read the files through tablecore's FileIO), and errors still name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from governance.errors import SourceError
from governance.sources import FilesSource, FilesSourceConfig
from schema_registry import RegistryClient
from tablecore.io import file_io_for
from tests.governance.conftest import TRIP_COLUMNS, TRIPS_SCHEMA
from tests.governance.test_sources import record, rows, trips_v2, write_avro, write_json
from tests.governance.wire import message, write_confluent_file
from tests.s3server import S3Server

pytestmark = pytest.mark.spark

COLUMNS = ("uuid", "driver", "dt", "ts", "rider_age", "fare", "currency")


def upload(folder: Path, s3: S3Server) -> str:
    """Copy the files of ``folder`` to a new S3 prefix; returns its URI."""
    uri = s3.table_uri(folder.name)
    store = file_io_for(uri)
    for f in sorted(folder.iterdir()):
        store.write_bytes(store.join(f.name), f.read_bytes())
    return uri


def batches(source: FilesSource, spark: SparkSession, schema: StructType | None = None) -> list[tuple[Any, ...]]:
    """Every batch of ``source``: (position, description, sorted rows of the common columns)."""
    out: list[tuple[Any, ...]] = []
    after = None
    while (batch := source.next_batch(spark, after, schema=schema)) is not None:
        present = [c for c in COLUMNS if c in batch.df.columns]
        out.append((batch.position, batch.description, rows(batch.df, *present)))
        after = batch.position
    return out


def same_on_s3(source: FilesSource, folder: Path, s3: S3Server, spark: SparkSession,
               schema: StructType | None = None) -> list[tuple[Any, ...]]:
    local = batches(source, spark, schema)
    remote = FilesSource(upload(folder, s3), source.format, pattern=source.pattern,
                         max_files_per_batch=source.max_files_per_batch, subject=source.subject,
                         registry=source.registry)
    assert not file_io_for(remote.path).hadoop_compatible  # the executors read through the FileIO
    assert batches(remote, spark, schema) == local
    return local


@pytest.mark.parametrize("with_schema", [True, False])
def test_json_lines_from_s3(spark: SparkSession, tmp_path: Path, s3: S3Server, with_schema: bool) -> None:
    folder = tmp_path / "json"
    write_json(folder, "b-001.json", [record(1), record(2, rider_age=None)])
    write_json(folder, "b-002.json", [record(3)])
    (folder / "b-003.json").write_text("\n" + json.dumps(record(4)) + "\r\n\n" + json.dumps(record(5)))  # blank lines
    write_json(folder, "skip.txt", [record(9)])
    schema = spark.createDataFrame([], TRIP_COLUMNS).schema if with_schema else None
    got = same_on_s3(FilesSource(str(folder), "json", pattern="b-*.json", max_files_per_batch=2), folder, s3, spark,
                     schema)
    assert [g[0] for g in got] == [{"last_file": "b-002.json"}, {"last_file": "b-003.json"}]
    assert [r[0] for g in got for r in g[2]] == [f"trip-{i:05d}" for i in range(1, 6)]


def test_parquet_from_s3(spark: SparkSession, tmp_path: Path, s3: S3Server) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    for n, ids in ((1, [1, 2]), (2, [3]), (3, [4, 5])):
        pq.write_table(pa.Table.from_pylist([record(i, fare=float(i)) for i in ids]), folder / f"p-{n:03d}.parquet")
    got = same_on_s3(FilesSource(str(folder), "parquet", max_files_per_batch=2), folder, s3, spark)
    assert len(got) == 2 and len(got[0][2]) == 3


def test_avro_and_confluent_from_s3(spark: SparkSession, tmp_path: Path, s3: S3Server,
                                    registry: RegistryClient) -> None:
    avro = tmp_path / "avro"
    avro.mkdir()
    write_avro(avro / "a-001.avro", TRIPS_SCHEMA, [record(1), record(2, rider_age=None)])
    write_avro(avro / "a-002.avro", trips_v2(), [{k: v for k, v in record(3).items() if k != "tip"} | {"city": "Oslo"}])
    got = same_on_s3(FilesSource(str(avro), "avro", max_files_per_batch=5), avro, s3, spark)
    assert len(got[0][2]) == 3

    v1 = registry.latest("trips-value").id
    kafka = tmp_path / "kafka"
    kafka.mkdir()
    write_confluent_file(kafka / "k-001.bin", [message(v1, TRIPS_SCHEMA, record(i)) for i in (1, 2)])
    write_confluent_file(kafka / "k-002.bin", [message(v1, TRIPS_SCHEMA, record(3))])
    source = FilesSourceConfig(path=str(kafka), format="confluent_avro", subject="trips-value",
                               max_files_per_batch=2).build(registry, None)
    got = same_on_s3(source, kafka, s3, spark)
    assert got[0][1] == "files k-001.bin..k-002.bin (2 files, 3 messages)"


def test_damaged_files_on_s3_are_named(spark: SparkSession, tmp_path: Path, s3: S3Server,
                                       registry: RegistryClient) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "x.avro").write_bytes(b"not avro at all")
    with pytest.raises(SourceError, match=r"x\.avro is not an Avro container file"):
        FilesSource(upload(folder, s3), "avro").next_batch(spark, None)
    kafka = tmp_path / "kafka"
    kafka.mkdir()
    (kafka / "k.bin").write_bytes(b"\x00\x00\x00\x05\x01\x00\x00\x00\x01")  # a frame with a wrong magic byte
    source = FilesSource(upload(kafka, s3), "confluent_avro", subject="trips-value", registry=registry)
    with pytest.raises(SourceError, match=r"k\.bin at byte offset 0: wrong magic byte 1"):
        source.next_batch(spark, None)
