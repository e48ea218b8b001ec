"""The executor side of the ``files`` source (:mod:`governance.sources`): functions of Arrow batches that run in
Spark's Python workers — reading files through a FileIO where Spark cannot open the storage itself (``s3://``
without a Hadoop connector), scanning the framing of Confluent wire-format files, and decoding Avro container files
and Confluent messages with fastavro. Only file names and small scan rows travel between the driver and these."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from governance.errors import SourceError
from tablecore.format.avro_values import datums_to_arrow
from tablecore.io import FileInfo, FileIO
from tablecore.spark.schema import arrow_to_spark

ROWS_PER_ARROW_BATCH = 4096
"""Decoded Avro records per Arrow record batch handed back to Spark."""

_MAGIC = 0
_HEADER = 5  # magic byte + 4-byte schema id
_FRAME = 4  # big-endian length prefix of each message

BINARY_SCHEMA = pa.schema([("path", pa.string()), ("content", pa.binary())])


def binary_through_io(spark: SparkSession, fio: FileIO, chosen: list[FileInfo]) -> DataFrame:
    """``(path, content)`` rows of ``chosen`` read in executors through ``fio`` (Spark's ``binaryFile`` source for
    storage Spark cannot open); only the file names travel from the driver."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column(0).to_pylist():
                content = fio.read_bytes(path)
                yield pa.RecordBatch.from_arrays([pa.array([fio.uri_of(path)]), pa.array([content], pa.binary())],
                                                 schema=BINARY_SCHEMA)

    return paths_frame(spark, chosen).mapInArrow(read, arrow_to_spark(BINARY_SCHEMA))


def parquet_through_io(spark: SparkSession, fio: FileIO, chosen: list[FileInfo], what: str) -> DataFrame:
    """The rows of Parquet files read in executors through ``fio`` with pyarrow; the schema is the newest file's
    (its footer only is read on the driver), older files are read into it (missing columns null)."""
    try:
        with fio.open_input(chosen[-1].path) as f:
            arrow = pq.read_schema(f)
    except Exception as e:  # any decoding failure of a foreign file
        raise SourceError(f"files source {what}: {chosen[-1].name} is not a Parquet file: {e}") from e
    arrow = pa.schema([f for f in arrow if not f.name.startswith("__index_level_")])

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column(0).to_pylist():
                try:
                    with fio.open_input(path) as f:
                        table = pq.read_table(f)
                except Exception as e:  # name the file in whatever pyarrow raised
                    raise ValueError(f"{fio.uri_of(path)}: cannot read the Parquet file: {type(e).__name__}: {e}") \
                        from e
                columns = [table.column(c.name).cast(c.type) if c.name in table.column_names
                           else pa.nulls(table.num_rows, c.type) for c in arrow]
                yield from pa.Table.from_arrays(columns, schema=arrow).to_batches()

    return paths_frame(spark, chosen).mapInArrow(read, arrow_to_spark(arrow))


def paths_frame(spark: SparkSession, chosen: list[FileInfo]) -> DataFrame:
    """One row (and one partition) per file, so that each file is read by a task of its own."""
    df = spark.createDataFrame(pa.table({"path": [f.path for f in chosen]}))
    return df.repartition(len(chosen)) if len(chosen) > 1 else df


# --- decoding ----------------------------------------------------------------------------------------------------
# Everything below runs in Python workers: functions of arrow batches of (path, content) rows.

SCAN_DDL = "path string, offset long, schema_id int, messages long, error string"


def _frames(content: bytes) -> Iterator[tuple[int, int, int, int]]:
    """``(offset, schema_id, body_start, body_end)`` of each length-framed Confluent message of a file.

    Raises:
        ValueError: with ``(offset, reason)`` args for a truncated frame, a short message or a wrong magic byte.
    """
    size = len(content)
    at = 0
    while at < size:
        if size - at < _FRAME:
            raise ValueError(at, f"truncated frame: {size - at} bytes left, a 4-byte length prefix expected")
        length = int.from_bytes(content[at:at + _FRAME], "big")
        start, end = at + _FRAME, at + _FRAME + length
        if end > size:
            raise ValueError(at, f"truncated frame: length {length}, only {size - start} bytes left")
        if length < _HEADER:
            raise ValueError(at, f"message of {length} bytes is shorter than the 5-byte wire-format header")
        if content[start] != _MAGIC:
            raise ValueError(at, f"wrong magic byte {content[start]} (the Confluent wire format starts with 0)")
        yield at, int.from_bytes(content[start + 1:start + _HEADER], "big"), start + _HEADER, end
        at = end


_SCAN_SCHEMA = pa.schema([("path", pa.string()), ("offset", pa.int64()), ("schema_id", pa.int32()),
                          ("messages", pa.int64()), ("error", pa.string())])


def _scan_file(path: str, content: bytes) -> list[tuple[str, int, int | None, int, str | None]]:
    """Scan rows of one file: per distinct schema id its first offset and message count, or the framing error."""
    seen: dict[int, list[int]] = {}
    try:
        for offset, schema_id, _, _ in _frames(content):
            if schema_id in seen:
                seen[schema_id][1] += 1
            else:
                seen[schema_id] = [offset, 1]
    except ValueError as e:
        return [(path, int(e.args[0]), None, 0, str(e.args[1]))]
    if not seen:
        return [(path, 0, None, 0, None)]
    return [(path, offset, schema_id, count, None) for schema_id, (offset, count) in seen.items()]


def scan_frames(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: the scan rows (:func:`_scan_file`) of every file; no message body leaves the executor."""
    for batch in batches:
        rows = [row for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist(),
                                             strict=True)
                for row in _scan_file(path, content)]
        columns: list[list[Any]] = [[row[i] for row in rows] for i in range(len(_SCAN_SCHEMA))]
        yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, _SCAN_SCHEMA,
                                                                                   strict=True)],
                                         schema=_SCAN_SCHEMA)


def _chunks(records: Iterator[Any], arrow: pa.Schema) -> Iterator[pa.RecordBatch]:
    chunk: list[Any] = []
    for record in records:
        chunk.append(record)
        if len(chunk) >= ROWS_PER_ARROW_BATCH:
            yield from datums_to_arrow(chunk, arrow).to_batches()
            chunk = []
    if chunk:
        yield from datums_to_arrow(chunk, arrow).to_batches()


def decode_container_files(reader: dict[str, Any], arrow: pa.Schema) \
        -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function decoding Avro container files to ``reader`` (fastavro schema resolution)."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro

        parsed = fastavro.parse_schema(reader)
        for batch in batches:
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist(),
                                     strict=True):
                try:
                    yield from _chunks(iter(fastavro.reader(io.BytesIO(content), reader_schema=parsed)), arrow)
                except Exception as e:  # name the file in whatever fastavro raised
                    raise ValueError(f"{path}: cannot decode the Avro file with schema "
                                     f"{reader.get('name')!r}: {type(e).__name__}: {e}") from e

    return decode


def decode_confluent_files(writers: dict[int, dict[str, Any]], reader: dict[str, Any], arrow: pa.Schema) \
        -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function decoding Confluent messages written with ``writers`` (by id) to ``reader``."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro

        parsed_reader = fastavro.parse_schema(reader)
        parsed = {schema_id: fastavro.parse_schema(w) for schema_id, w in writers.items()}

        def records(path: str, content: bytes) -> Iterator[Any]:
            for offset, schema_id, start, end in _frames(content):
                if schema_id not in parsed:
                    raise ValueError(f"{path} at byte offset {offset}: schema id {schema_id} was not in the file "
                                     "when the batch was planned (was the file rewritten?)")
                try:
                    yield fastavro.schemaless_reader(io.BytesIO(content[start:end]), parsed[schema_id],
                                                     parsed_reader)
                except Exception as e:  # name the message in whatever fastavro raised
                    raise ValueError(f"{path} at byte offset {offset}: cannot decode the message (schema id "
                                     f"{schema_id}) to the reader schema: {type(e).__name__}: {e}") from e

        for batch in batches:
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist(),
                                     strict=True):
                yield from _chunks(records(path, content), arrow)

    return decode


