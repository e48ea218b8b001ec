"""The executor side of the ``kafka`` source (:mod:`governance.kafka_source`): functions of Arrow batches that run
in Spark's Python workers, one task per topic-partition range, each with a consumer of its own (``assign()``, never
a group member, never committing).

Two passes, as Spark's own Kafka source plans offsets before it reads: the **scan** reads a partition from its start
offset until the batch's limits or until it is caught up, and returns only numbers (the end offset, counts, bytes,
the schema ids met, the newest event time, the partition's high watermark); the **read** then decodes exactly the
planned ``[start, end)`` of each partition. A task that is retried, or a batch that is read again after a crash,
therefore sees the same messages: the batch's position is fixed before a row is written.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablecore.format.avro_values import datums_to_arrow

ROWS_PER_ARROW_BATCH = 4096
"""Decoded messages per Arrow record batch handed back to Spark."""

_MAGIC = 0
_HEADER = 5  # magic byte + 4-byte schema id
_CONSUME_CHUNK = 1000

COORDINATES = ("_kafka_topic", "_kafka_partition", "_kafka_offset", "_kafka_timestamp")
"""Columns every Kafka batch carries: where each message came from, and its Kafka timestamp."""

COORDINATE_FIELDS = [pa.field("_kafka_topic", pa.string()), pa.field("_kafka_partition", pa.int32()),
                     pa.field("_kafka_offset", pa.int64()), pa.field("_kafka_timestamp", pa.timestamp("us", "UTC"))]

RANGE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()),
                          ("end", pa.int64()), ("max_records", pa.int64()), ("max_bytes", pa.int64())])
"""One row per task: a topic-partition and its range (``end`` -1 for a scan: open-ended)."""

SCAN_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()),
                         ("end", pa.int64()), ("messages", pa.int64()), ("bytes", pa.int64()),
                         ("schema_ids", pa.string()), ("newest_event_ms", pa.int64()), ("high", pa.int64()),
                         ("low", pa.int64()), ("error", pa.string()), ("error_offset", pa.int64())])


@dataclass(frozen=True)
class HeaderColumn:
    """A Kafka header kept as a column: header ``name`` -> ``column`` of ``type`` (``string``, ``long``, ``double``;
    a value that does not parse is null)."""

    name: str
    column: str
    type: str = "string"

    def arrow_type(self) -> pa.DataType:
        """The column's Arrow type."""
        return {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}[self.type]

    def parse(self, raw: bytes | None) -> Any:
        """The column value of a header value (None when absent or not parseable)."""
        if raw is None:
            return None
        text = raw.decode("utf-8", errors="replace")
        if self.type == "string":
            return text
        try:
            return int(text) if self.type == "long" else float(text)
        except ValueError:
            return None


@dataclass(frozen=True)
class ReadSettings:
    """What every task needs: the consumer configuration and the limits of waiting.

    Attributes:
        consumer: librdkafka configuration (bootstrap servers, security settings, a ``group.id`` that never joins).
        max_wait_s: the longest a scan task reads one partition.
        idle_s: a partition is caught up when no message arrives for this long once its high watermark is reached.
        event_time_header: a header holding the event time in epoch milliseconds (None: the Kafka timestamp).
    """

    consumer: Mapping[str, Any]
    max_wait_s: float
    idle_s: float
    event_time_header: str | None = None
    confluent: bool = True
    """Values are in the Confluent wire format (the scan checks the magic byte and collects schema ids)."""


def _consumer(settings: ReadSettings, topic: str, partition: int, start: int) -> Any:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**settings.consumer, "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, partition, start)])
    return consumer


def _event_ms(message: Any, header: str | None) -> int | None:
    if header is not None:
        for name, value in message.headers() or ():
            if name == header and value is not None:
                try:
                    return int(value)
                except ValueError:
                    return None
    kind, ms = message.timestamp()
    return int(ms) if kind != 0 and ms >= 0 else None


def _check(message: Any, topic: str, partition: int) -> None:
    error = message.error()
    if error is not None:
        raise ValueError(f"kafka {topic}[{partition}]: {error.str()}")


def _scan_partition(settings: ReadSettings, topic: str, partition: int, start: int, max_records: int,
                    max_bytes: int) -> tuple[Any, ...]:
    """The scan row of one partition from ``start``: where the batch ends and what it holds."""
    consumer = _consumer(settings, topic, partition, start)
    try:
        low, high = consumer.get_watermark_offsets(_tp(topic, partition), timeout=max(10.0, settings.max_wait_s))
        if start < low:
            return (topic, partition, start, start, 0, 0, "", None, high, low,
                    f"offsets {start}..{low - 1} were deleted (retention or compaction) before the pipeline read "
                    "them", start)
        end, messages, size, newest = start, 0, 0, None
        ids: set[int] = set()
        deadline = time.monotonic() + settings.max_wait_s
        while messages < max_records and time.monotonic() < deadline:
            # until the high watermark, messages are known to exist; past it, a short wait tells caught-up
            wait = settings.idle_s if end >= high else max(0.0, min(1.0, deadline - time.monotonic()))
            batch = consumer.consume(num_messages=min(_CONSUME_CHUNK, max_records - messages), timeout=wait)
            if not batch:
                if end >= high:
                    break
                continue
            for message in batch:
                _check(message, topic, partition)
                value = message.value() or b""
                if max_bytes and messages and size + len(value) > max_bytes:
                    return (topic, partition, start, end, messages, size, _ids(ids), newest, high, low, None, None)
                if settings.confluent and value:
                    if len(value) < _HEADER or value[0] != _MAGIC:
                        return (topic, partition, start, end, messages, size, _ids(ids), newest, high, low,
                                f"not in the Confluent wire format (magic byte {value[0]}, {len(value)} bytes)",
                                message.offset())
                    ids.add(int.from_bytes(value[1:_HEADER], "big"))
                event = _event_ms(message, settings.event_time_header)
                if event is not None:
                    newest = event if newest is None else max(newest, event)
                end, messages, size = message.offset() + 1, messages + 1, size + len(value)
                if messages >= max_records:
                    break
        return (topic, partition, start, end, messages, size, _ids(ids), newest, high, low, None, None)
    finally:
        consumer.close()


def _ids(ids: set[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def _tp(topic: str, partition: int) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition)


def scan_task(settings: ReadSettings) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: the scan row (:data:`SCAN_SCHEMA`) of each range row; no message body leaves the
    executor."""

    def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = [_scan_partition(settings, r["topic"], r["partition"], r["start"], r["max_records"],
                                    r["max_bytes"]) for r in batch.to_pylist()]
            columns = [[row[i] for row in rows] for i in range(len(SCAN_SCHEMA))]
            yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, SCAN_SCHEMA,
                                                                                       strict=True)],
                                             schema=SCAN_SCHEMA)

    return scan


def _messages(settings: ReadSettings, topic: str, partition: int, start: int, end: int) -> Iterator[Any]:
    """The messages of ``[start, end)`` of one partition (offsets a transaction marker or compaction removed are
    skipped); fails when they do not arrive within ``max(30 s, max_wait)``."""
    if end <= start:
        return
    consumer = _consumer(settings, topic, partition, start)
    try:
        position = start
        patience = max(30.0, settings.max_wait_s)
        last_progress = time.monotonic()
        while position < end:
            batch = consumer.consume(num_messages=min(_CONSUME_CHUNK, end - position), timeout=1.0)
            if not batch:
                if time.monotonic() - last_progress > patience:
                    raise ValueError(f"kafka {topic}[{partition}]: offsets {position}..{end - 1} of the batch did "
                                     f"not arrive within {patience:.0f} s (deleted since the batch was planned?)")
                continue
            last_progress = time.monotonic()
            for message in batch:
                _check(message, topic, partition)
                if message.offset() >= end:
                    position = end
                    break
                position = message.offset() + 1
                yield message
    finally:
        consumer.close()


def read_task(settings: ReadSettings, value_format: str, writers: Mapping[int, dict[str, Any]],
              reader: dict[str, Any] | None, arrow: pa.Schema, headers: list[HeaderColumn]) \
        -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: the rows of each planned range, as ``arrow`` (the value's columns — or one
    ``_kafka_value`` string column for ``json`` — then the header columns, then :data:`COORDINATES`)."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro

        parsed_reader = fastavro.parse_schema(reader) if reader is not None else None
        parsed = {schema_id: fastavro.parse_schema(w) for schema_id, w in writers.items()}
        for batch in batches:
            for r in batch.to_pylist():
                topic, partition = r["topic"], r["partition"]
                chunk: list[dict[str, Any]] = []
                for message in _messages(settings, topic, partition, r["start"], r["end"]):
                    chunk.append(_row(message, value_format, parsed, parsed_reader, headers, topic, partition))
                    if len(chunk) >= ROWS_PER_ARROW_BATCH:
                        yield from datums_to_arrow(chunk, arrow).to_batches()
                        chunk = []
                if chunk:
                    yield from datums_to_arrow(chunk, arrow).to_batches()

    return read


def _row(message: Any, value_format: str, writers: Mapping[int, Any], reader: Any, headers: list[HeaderColumn],
         topic: str, partition: int) -> dict[str, Any]:
    import datetime as dt

    import fastavro

    value = message.value()
    where = f"kafka {topic}[{partition}] offset {message.offset()}"
    if value_format == "json":
        row: dict[str, Any] = {"_kafka_value": value.decode("utf-8", errors="replace") if value else None}
    elif not value:
        row = {}  # a tombstone (null value): every value column null
    else:
        schema_id = int.from_bytes(value[1:_HEADER], "big")
        if schema_id not in writers:
            raise ValueError(f"{where}: schema id {schema_id} was not met when the batch was planned")
        try:
            decoded = fastavro.schemaless_reader(io.BytesIO(value[_HEADER:]), writers[schema_id], reader)
        except Exception as e:  # name the message in whatever fastavro raised
            raise ValueError(f"{where}: cannot decode the message (schema id {schema_id}) to the reader schema: "
                             f"{type(e).__name__}: {e}") from e
        if not isinstance(decoded, dict):
            raise ValueError(f"{where}: the message is not a record")
        row = decoded
    present = dict(message.headers() or ())
    for h in headers:
        row[h.column] = h.parse(present.get(h.name))
    kind, ms = message.timestamp()
    row["_kafka_topic"] = topic
    row["_kafka_partition"] = partition
    row["_kafka_offset"] = message.offset()
    row["_kafka_timestamp"] = (dt.datetime.fromtimestamp(ms / 1000, dt.UTC) if kind != 0 and ms >= 0 else None)
    return row

