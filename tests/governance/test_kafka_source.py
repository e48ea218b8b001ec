"""The ``kafka`` source on its own: a real broker (Tansu), JSON and Confluent values, topic patterns, positions, and
bad input named by its Kafka coordinates."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from pydantic import ValidationError
from pyspark.sql import SparkSession

from governance.errors import SourceError
from governance.kafka_source import KafkaSourceConfig
from tests.kafka_broker import TansuBroker

pytestmark = pytest.mark.spark


def _send(bootstrap: str, topic: str, values: list[bytes], *, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=partition, headers=[("seq", str(i).encode())])
    assert producer.flush(30) == 0


def test_a_topic_pattern_takes_new_topics_from_their_start(spark: SparkSession, kafka_broker: TansuBroker) -> None:
    kafka_broker.create_topic("orders-eu", 2)
    _send(kafka_broker.bootstrap, "orders-eu", [json.dumps({"id": i, "amount": i * 1.5}).encode() for i in range(5)])
    source = KafkaSourceConfig(bootstrap_servers=kafka_broker.bootstrap, topic_pattern="orders-.*",
                               value_format="json", idle_ms=200,
                               headers=[{"name": "seq", "column": "seq", "type": "long"}]).build(None, None)
    first = source.next_batch(spark, None, schema=None)
    assert first is not None
    assert first.position == {"offsets": {"orders-eu": {"0": 5, "1": 0}}}
    rows = sorted((r["id"], r["amount"], r["seq"], r["_kafka_offset"]) for r in first.df.collect())
    assert rows == [(i, i * 1.5, i, i) for i in range(5)]
    assert source.next_batch(spark, first.position) is None  # nothing new
    # a topic created later that matches the pattern joins from its earliest offset
    kafka_broker.create_topic("orders-us", 1)
    _send(kafka_broker.bootstrap, "orders-us", [json.dumps({"id": 100, "amount": 2.0}).encode()])
    second = source.next_batch(spark, first.position, schema=None)
    assert second is not None
    assert second.position == {"offsets": {"orders-eu": {"0": 5, "1": 0}, "orders-us": {"0": 1}}}
    assert [(r["_kafka_topic"], r["id"]) for r in second.df.collect()] == [("orders-us", 100)]


def test_bad_input_is_named(spark: SparkSession, kafka_broker: TansuBroker) -> None:
    kafka_broker.create_topic("payments", 1)
    _send(kafka_broker.bootstrap, "payments", [b"\x00\x00\x00\x00\x01\x02", b"not avro at all"])

    class NoRegistry:  # the scan fails before any schema is asked for
        pass

    source = KafkaSourceConfig(bootstrap_servers=kafka_broker.bootstrap, topics=["payments"],
                               subject="payments-value", idle_ms=200).build(NoRegistry(), None)  # type: ignore[arg-type]
    with pytest.raises(SourceError, match=r"payments\[0\] offset 1: not in the Confluent wire format"):
        source.next_batch(spark, None)
    with pytest.raises(SourceError, match="not a kafka source position"):
        source.next_batch(spark, {"last_file": "x.json"})
    with pytest.raises(SourceError, match=r"covers payments\[7\], which the cluster no longer has"):
        source.next_batch(spark, {"offsets": {"payments": {"7": 3}}})
    missing = KafkaSourceConfig(bootstrap_servers=kafka_broker.bootstrap, topics=["nope"], value_format="json")
    with pytest.raises(SourceError, match="no topic 'nope'"):
        missing.build(None, None).next_batch(spark, None)


def test_configuration_errors_name_the_entry() -> None:
    with pytest.raises(ValidationError, match="exactly one of topics and topic_pattern"):
        KafkaSourceConfig(bootstrap_servers="h:1", topics=["a"], topic_pattern="b.*", value_format="json")
    with pytest.raises(ValidationError, match=r"bootstrap\.servers, group\.id: set by the source itself"):
        KafkaSourceConfig(bootstrap_servers="h:1", topics=["a"], value_format="json",
                          config={"group.id": "g", "bootstrap.servers": "x"})
    with pytest.raises(ValidationError, match="requires a subject"):
        KafkaSourceConfig(bootstrap_servers="h:1", topics=["a"])
    with pytest.raises(SourceError, match="needs a schema registry"):
        KafkaSourceConfig(bootstrap_servers="h:1", topics=["a"], subject="a-value").build(None, None)
    with pytest.raises(SourceError, match="bootstrap_servers: an environment variable it names is not set"):
        KafkaSourceConfig(bootstrap_servers="${LAKEGATE_NO_SUCH_VAR}", topics=["a"],
                          value_format="json").build(None, None)
