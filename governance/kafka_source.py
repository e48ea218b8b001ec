"""The ``kafka`` source: mini-batches of Kafka topics (Confluent-Avro or JSON values), exactly once into the lake.

Configured in pipeline YAML (:class:`KafkaSourceConfig`)::

    source:
      kind: kafka
      bootstrap_servers: ${KAFKA_BOOTSTRAP}
      topics: [rides-changelog]            # or topic_pattern: "^rides-.*"
      config: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN,
               sasl.username: "${KAFKA_USER}", sasl.password: "${KAFKA_PASSWORD}"}
      value_format: confluent_avro         # or json
      subject: rides-changelog-value       # the reader schema (its latest version)
      max_records: 100000
      headers: [{name: event_ts, column: _event_ts, type: long}]

**Position and exactly once.** A batch's position is the next offset of every topic-partition it covers
(``{"offsets": {"rides-changelog": {"0": 3412, "1": 3390}}}``). The pipeline commits it in the commit that publishes
the batch (:mod:`governance.checkpoint`) and resumes from the table, never from the consumer group; the group's
offsets are committed after the publish, for monitoring (``kafka-consumer-groups``, Burrow) only.

**Planning.** The driver lists the partitions (metadata only); a first Spark job (one task per partition, see
:mod:`governance.kafka_tasks`) scans each partition from its start offset until the batch's limits or until it is
caught up, and returns the end offsets, the schema ids met and the newest event time; the second job decodes exactly
those ranges in the executors with fastavro. No message reaches the driver.

**Limits.** ``max_records`` and ``max_bytes`` (value bytes) are split evenly over the partitions; ``max_wait_seconds``
bounds how long a partition is read for one batch; a partition is caught up once no message arrives for ``idle_ms``
past its high watermark.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from governance import kafka_tasks
from governance.errors import SourceError
from governance.source_batch import Batch, PartitionLag, arrow_schema, parse_json, schema_dict
from schema_registry import RegistryClient
from schema_registry.errors import SchemaRegistryError
from tablecore.spark.schema import arrow_to_spark

__all__ = ["KafkaHeaderSpec", "KafkaSource", "KafkaSourceConfig"]

logger = logging.getLogger(__name__)

_OWN_SETTINGS = frozenset({"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store",
                           "auto.offset.reset", "enable.partition.eof"})
"""librdkafka settings the source sets itself (``config`` may not)."""

_METADATA_TIMEOUT_S = 15.0


class KafkaHeaderSpec(BaseModel):
    """A Kafka header kept as a column.

    Attributes:
        name: the header's name.
        column: the column it becomes.
        type: ``string`` (UTF-8), ``long`` or ``double`` (decimal text; a value that does not parse is null).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    column: str
    type: Literal["string", "long", "double"] = "string"


class KafkaSourceConfig(BaseModel):
    """Kafka topics, read in mini-batches (see the module docstring).

    Attributes:
        kind: ``kafka``.
        bootstrap_servers: ``host:port[,host:port]`` (``${VAR}`` is expanded from the environment).
        topics: the topics; or ``topic_pattern``, a regular expression on topic names (checked at every batch, so a
            new matching topic joins from its earliest offset).
        group_id: the consumer group whose offsets are committed after each publish, for monitoring (default:
            ``lakegate-<pipeline>``).
        config: more librdkafka settings, as librdkafka spells them (``security.protocol``, ``sasl.mechanism``,
            ``ssl.ca.location``...); string values expand ``${VAR}``.
        value_format: ``confluent_avro`` (the Confluent wire format; writer schemas are resolved by id through the
            registry, then read into ``subject``'s latest version with Avro schema resolution) or ``json``.
        subject: the registry subject of the reader schema (required for ``confluent_avro``).
        max_records / max_bytes: per batch, split evenly over the partitions.
        max_wait_seconds: the longest one partition is read for one batch.
        idle_ms: past its high watermark, a partition is caught up when no message arrives for this long.
        headers: headers kept as columns.
        event_time_header: a header holding the event time in epoch milliseconds, for the event-time lag (default:
            the Kafka timestamp).
        starting_offsets: where a partition the position does not know yet starts: ``earliest`` or ``latest``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["kafka"] = "kafka"
    bootstrap_servers: str
    topics: list[str] | None = None
    topic_pattern: str | None = None
    group_id: str | None = None
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    value_format: Literal["confluent_avro", "json"] = "confluent_avro"
    subject: str | None = None
    max_records: int = Field(default=100_000, ge=1)
    max_bytes: int | None = Field(default=None, ge=1)
    max_wait_seconds: float = Field(default=10.0, gt=0)
    idle_ms: int = Field(default=200, ge=1)
    headers: list[KafkaHeaderSpec] = Field(default_factory=list)
    event_time_header: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"

    @field_validator("config")
    @classmethod
    def _own_settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(set(v) & _OWN_SETTINGS)
        if clash:
            raise ValueError(f"{', '.join(clash)}: set by the source itself (bootstrap_servers, group_id; offsets come "
                             "from the table's checkpoint)")
        return v

    @field_validator("topic_pattern")
    @classmethod
    def _valid_pattern(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSourceConfig:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("give exactly one of topics and topic_pattern")
        if self.topics is not None and not self.topics:
            raise ValueError("topics is empty")
        if self.value_format == "confluent_avro" and not self.subject:
            raise ValueError("value_format confluent_avro requires a subject (its latest version is the reader schema)")
        columns = [h.column for h in self.headers]
        clash = sorted({c for c in columns if columns.count(c) > 1} | (set(columns) & set(kafka_tasks.COORDINATES)))
        if clash:
            raise ValueError(f"header column(s) {', '.join(clash)} given twice or named like a Kafka coordinate")
        return self

    def build(self, registry: RegistryClient | None, base_dir: Any) -> KafkaSource:
        """The source this configuration describes (``base_dir`` is not used).

        Raises:
            SourceError: confluent-kafka is not installed, ``confluent_avro`` without a schema registry, or an
                environment variable that is not set.
        """
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as e:
            raise SourceError("the kafka source needs confluent-kafka: pip install 'lakegate[kafka]'") from e
        if self.value_format == "confluent_avro" and registry is None:
            raise SourceError(f"kafka source: subject {self.subject!r} needs a schema registry (configure `registry` "
                              "in the pipeline)")
        settings = {k: _expand(v, f"config.{k}") for k, v in self.config.items()}
        settings["bootstrap.servers"] = _expand(self.bootstrap_servers, "bootstrap_servers")
        return KafkaSource(self, settings, registry)


def _expand(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    out = os.path.expandvars(value)
    if re.search(r"\$\{?[A-Za-z_]", out):
        raise SourceError(f"kafka source {what}: an environment variable it names is not set")
    return out


@dataclass
class KafkaSource:
    """Kafka topics in mini-batches (see :class:`KafkaSourceConfig`)."""

    config: KafkaSourceConfig
    settings: dict[str, Any]
    registry: RegistryClient | None
    pipeline: str = "lakegate"
    _admin: Any = field(default=None, repr=False)

    @property
    def group_id(self) -> str:
        """The consumer group committed after each publish (monitoring only)."""
        return self.config.group_id or f"lakegate-{self.pipeline}"

    def _consumer(self, group: str | None = None) -> Any:
        from confluent_kafka import Consumer

        return Consumer({**self.settings, "group.id": group or f"{self.group_id}-planner",
                         "enable.auto.commit": False})

    def partitions(self) -> list[tuple[str, int]]:
        """The (topic, partition) pairs the source reads now, sorted.

        Raises:
            SourceError: the cluster cannot be reached, or a listed topic does not exist.
        """
        from confluent_kafka import KafkaException

        consumer = self._consumer()
        try:
            metadata = consumer.list_topics(timeout=_METADATA_TIMEOUT_S)
        except KafkaException as e:
            raise SourceError(f"kafka source {self.settings['bootstrap.servers']}: cannot list topics: {e}") from e
        finally:
            consumer.close()
        found = {name: t for name, t in metadata.topics.items() if t.error is None}
        if self.config.topics is not None:
            missing = [t for t in self.config.topics if t not in found]
            if missing:
                raise SourceError(f"kafka source: no topic {', '.join(repr(t) for t in missing)} on "
                                  f"{self.settings['bootstrap.servers']}")
            names = list(self.config.topics)
        else:
            pattern = re.compile(self.config.topic_pattern or "")
            names = [t for t in found if pattern.fullmatch(t) and not t.startswith("__")]
        return sorted((t, p) for t in names for p in found[t].partitions)

    def _starts(self, pairs: list[tuple[str, int]], after: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int],
                                                                                                      int]:
        from confluent_kafka import TopicPartition

        starts: dict[tuple[str, int], int] = {}
        unknown = [(t, p) for t, p in pairs if str(p) not in after.get(t, {})]
        if unknown:
            consumer = self._consumer()
            try:
                for t, p in unknown:
                    low, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=_METADATA_TIMEOUT_S)
                    starts[(t, p)] = low if self.config.starting_offsets == "earliest" else high
            finally:
                consumer.close()
        for t, p in pairs:
            if (t, p) not in starts:
                starts[(t, p)] = int(after[t][str(p)])
        return starts

    def next_batch(self, spark: SparkSession, after: Any | None, *,
                   schema: StructType | None = None) -> Batch | None:
        """The messages after position ``after``, or None when no partition has new ones (see
        :meth:`governance.sources.Source.next_batch`; ``schema`` is the JSON values' schema).

        Raises:
            SourceError: the cluster or a topic cannot be reached, ``after`` is not a Kafka position, offsets were
                deleted before they were read, or a message is not in the Confluent wire format (the message names
                its topic, partition and offset).
        """
        offsets = _offsets(after)
        pairs = self.partitions()
        dropped = [f"{t}[{p}]" for t, ps in offsets.items() for p in ps if (t, int(p)) not in set(pairs)]
        if dropped:
            raise SourceError(f"kafka source: the position covers {', '.join(dropped)}, which the cluster no longer "
                              "has (a topic was deleted or recreated?)")
        if not pairs:
            return None
        starts = self._starts(pairs, offsets)
        settings = self._read_settings()
        per_records = math.ceil(self.config.max_records / len(pairs))
        per_bytes = math.ceil(self.config.max_bytes / len(pairs)) if self.config.max_bytes else 0
        ranges = pa.table({"topic": [t for t, _ in pairs], "partition": [p for _, p in pairs],
                           "start": [starts[x] for x in pairs], "end": [-1] * len(pairs),
                           "max_records": [per_records] * len(pairs), "max_bytes": [per_bytes] * len(pairs)},
                          schema=kafka_tasks.RANGE_SCHEMA)
        t0 = time.monotonic()
        scan = _tasks(spark, ranges).mapInArrow(kafka_tasks.scan_task(settings),
                                                arrow_to_spark(kafka_tasks.SCAN_SCHEMA)).collect()
        errors = sorted((r["topic"], r["partition"], r["error_offset"], r["error"]) for r in scan if r["error"])
        if errors:
            topic, partition, offset, message = errors[0]
            raise SourceError(f"kafka source: {topic}[{partition}] offset {offset}: {message}")
        scan = sorted(scan, key=lambda r: (r["topic"], r["partition"]))
        messages = sum(r["messages"] for r in scan)
        if messages == 0:
            logger.debug("kafka source: nothing after %s (scan %.2f s)", offsets or "the beginning",
                         time.monotonic() - t0)
            return None
        df = self._read(spark, [r for r in scan if r["messages"]], settings, schema)
        position: dict[str, dict[str, int]] = {}
        for r in scan:
            position.setdefault(r["topic"], {})[str(r["partition"])] = int(r["end"])
        lag = tuple(PartitionLag(topic=r["topic"], partition=r["partition"], start=r["start"], end=r["end"],
                                 offset_lag=max(0, r["high"] - r["end"]), newest_event_ms=r["newest_event_ms"])
                    for r in scan)
        busy = [r for r in scan if r["messages"]]
        span = ", ".join(f"{r['topic']}[{r['partition']}] {r['start']}..{r['end'] - 1}" for r in busy[:4])
        more = f" and {len(busy) - 4} more" if len(busy) > 4 else ""
        description = f"kafka {messages} messages ({span}{more})"
        logger.info("kafka source: batch %s (scan %.2f s)", description, time.monotonic() - t0)
        return Batch(df=df, position={"offsets": position}, description=description, lag=lag)

    def _read_settings(self) -> kafka_tasks.ReadSettings:
        return kafka_tasks.ReadSettings(
            consumer={**self.settings, "group.id": f"{self.group_id}-reader"},
            max_wait_s=self.config.max_wait_seconds, idle_s=self.config.idle_ms / 1000,
            event_time_header=self.config.event_time_header, confluent=self.config.value_format == "confluent_avro")

    def _read(self, spark: SparkSession, scan: list[Any], settings: kafka_tasks.ReadSettings,
              schema: StructType | None) -> DataFrame:
        ranges = pa.table({"topic": [r["topic"] for r in scan], "partition": [r["partition"] for r in scan],
                           "start": [r["start"] for r in scan], "end": [r["end"] for r in scan],
                           "max_records": [0] * len(scan), "max_bytes": [0] * len(scan)},
                          schema=kafka_tasks.RANGE_SCHEMA)
        headers = [kafka_tasks.HeaderColumn(h.name, h.column, h.type) for h in self.config.headers]
        header_fields = [pa.field(h.column, h.arrow_type()) for h in headers]
        if self.config.value_format == "json":
            arrow = pa.schema([pa.field("_kafka_value", pa.string()), *header_fields,
                               *kafka_tasks.COORDINATE_FIELDS])
            raw = _tasks(spark, ranges).mapInArrow(kafka_tasks.read_task(settings, "json", {}, None, arrow, headers),
                                                   arrow_to_spark(arrow))
            parsed = parse_json(raw, "_kafka_value", schema, tuple(f.name for f in arrow if f.name != "_kafka_value"))
            return parsed if parsed is not None else raw.drop("_kafka_value")
        writers = self._writers({int(i) for r in scan for i in r["schema_ids"].split(",") if i})
        reader = self._reader_schema()
        value = arrow_schema(reader, "kafka source")
        clash = sorted(set(value.names) & {f.name for f in [*header_fields, *kafka_tasks.COORDINATE_FIELDS]})
        if clash:
            raise SourceError(f"kafka source: the value schema has field(s) {', '.join(clash)}, which the header "
                              "columns or the Kafka coordinates also use")
        arrow = pa.schema([*value, *header_fields, *kafka_tasks.COORDINATE_FIELDS])
        task = kafka_tasks.read_task(settings, "confluent_avro", writers, reader, arrow, headers)
        return _tasks(spark, ranges).mapInArrow(task, arrow_to_spark(arrow))

    def _writers(self, ids: set[int]) -> dict[int, dict[str, Any]]:
        assert self.registry is not None
        writers = {}
        for schema_id in sorted(ids):
            try:
                registered = self.registry.schema(schema_id)
            except SchemaRegistryError as e:
                raise SourceError(f"kafka source: unknown schema id {schema_id} ({e})") from e
            if registered.references:
                raise SourceError(f"kafka source: schema id {schema_id} has references, which the source does not "
                                  "resolve")
            writers[schema_id] = schema_dict(registered.schema, f"schema id {schema_id}")
        return writers

    def reader_schema(self) -> dict[str, Any] | None:
        """The reader schema (the subject's latest version; None for JSON values)."""
        return self._reader_schema() if self.config.value_format == "confluent_avro" else None

    def _reader_schema(self) -> dict[str, Any]:
        assert self.registry is not None and self.config.subject is not None
        try:
            registered = self.registry.latest(self.config.subject)
        except SchemaRegistryError as e:
            raise SourceError(f"kafka source: cannot get the latest schema of subject {self.config.subject!r}: {e}") \
                from e
        return schema_dict(registered.schema, f"subject {self.config.subject!r}")

    def published(self, position: Any) -> None:
        """After a batch was published: commit its offsets to the consumer group (monitoring only; a failure is
        logged, never raised: the table holds the position that counts)."""
        from confluent_kafka import KafkaException, TopicPartition

        offsets = [TopicPartition(t, int(p), int(o)) for t, ps in _offsets(position).items() for p, o in ps.items()]
        if not offsets:
            return
        consumer = self._consumer(self.group_id)
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            logger.warning("kafka source: could not commit offsets to group %s (monitoring only): %s", self.group_id,
                           e)
        finally:
            consumer.close()


def _tasks(spark: SparkSession, ranges: pa.Table) -> DataFrame:
    """One row and one Spark partition per range, so each topic-partition is read by a task of its own."""
    df = spark.createDataFrame(ranges)
    return df.repartition(ranges.num_rows) if ranges.num_rows > 1 else df


def _offsets(after: Any | None) -> dict[str, dict[str, int]]:
    if after is None:
        return {}
    ok = isinstance(after, Mapping) and set(after) == {"offsets"} and isinstance(after["offsets"], Mapping) and all(
        isinstance(ps, Mapping) and all(isinstance(o, int) and str(p).isdigit() for p, o in ps.items())
        for ps in after["offsets"].values())
    if not ok:
        raise SourceError(f"not a kafka source position: {after!r} (expected {{\"offsets\": {{topic: {{partition: "
                          "next offset}}}}}})")
    return {str(t): {str(p): int(o) for p, o in ps.items()} for t, ps in after["offsets"].items()}
