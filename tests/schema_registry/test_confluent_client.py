"""Acceptance 1: the real ``confluent_kafka`` SchemaRegistryClient and Avro serdes against our live server."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schema_registry.conftest import LiveServer, field, record

pytestmark = pytest.mark.integration

V1 = record("Trip", field("id", "string"), field("fare", "double"))
V2 = record("Trip", field("id", "string"), field("fare", "double"), field("city", ["null", "string"], default=None))
BREAKING = record("Trip", field("id", "long"))


@pytest.fixture
def client(server: LiveServer) -> SchemaRegistryClient:
    # no retries: an error must surface at once, not after seconds of backoff
    return SchemaRegistryClient({"url": server.url, "max.retries": 0})


def test_confluent_client_register_lookup_and_read(client: SchemaRegistryClient, subject: str) -> None:
    id1 = client.register_schema(subject, Schema(V1, "AVRO"))
    assert client.register_schema(subject, Schema(V1, "AVRO")) == id1  # idempotent
    id2 = client.register_schema(subject, Schema(V2, "AVRO"))
    assert id2 != id1
    # the same content under another subject keeps its global id
    assert client.register_schema(subject + "-other", Schema(V2, "AVRO")) == id2

    found = client.lookup_schema(subject, Schema(V1, "AVRO"))
    assert (found.schema_id, found.version, found.subject) == (id1, 1, subject)

    client.clear_caches()
    fetched = client.get_schema(id2)
    assert json.loads(fetched.schema_str) == json.loads(V2)
    assert fetched.schema_type == "AVRO"

    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (id2, 2)
    assert client.get_version(subject, 1).schema_id == id1
    assert client.get_versions(subject) == [1, 2]
    assert sorted(client.get_subjects()) == sorted([subject, subject + "-other"])
    assert client.get_subjects_by_schema_id(id2) == sorted([subject, subject + "-other"])
    assert {(v.subject, v.version) for v in client.get_schema_versions(id2)} == {(subject, 2),
                                                                                 (subject + "-other", 1)}
    assert client.get_schema_types() == ["AVRO"]


def test_confluent_client_soft_and_permanent_deletes(client: SchemaRegistryClient, subject: str) -> None:
    id1 = client.register_schema(subject, Schema(V1, "AVRO"))
    client.register_schema(subject, Schema(V2, "AVRO"))

    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    client.clear_caches()
    assert client.get_latest_version(subject).version == 1
    with pytest.raises(SchemaRegistryError) as e:
        client.delete_version(subject, 2)  # already soft-deleted
    assert (e.value.http_status_code, e.value.error_code) == (404, 40406)
    assert client.delete_version(subject, 2, permanent=True) == 2

    with pytest.raises(SchemaRegistryError) as e:
        client.delete_subject(subject, permanent=True)  # not soft-deleted first
    assert (e.value.http_status_code, e.value.error_code) == (404, 40405)
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    assert subject in client.get_subjects(deleted=True)
    # a soft-deleted schema still serves consumers by id
    client.clear_caches()
    assert json.loads(client.get_schema(id1).schema_str) == json.loads(V1)
    assert client.delete_subject(subject, permanent=True) == [1]
    client.clear_caches()
    with pytest.raises(SchemaRegistryError) as e:
        client.get_latest_version(subject)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as e:
        client.get_schema(id1)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40403)


def test_confluent_client_compatibility_config_and_test(client: SchemaRegistryClient, subject: str) -> None:
    assert client.get_compatibility() == "BACKWARD"
    with pytest.raises(SchemaRegistryError) as e:
        client.get_compatibility(subject)  # no subject-level config yet
    assert (e.value.http_status_code, e.value.error_code) == (404, 40408)
    client.register_schema(subject, Schema(V1, "AVRO"))

    assert client.test_compatibility(subject, Schema(V2, "AVRO")) is True
    assert client.test_compatibility(subject, Schema(BREAKING, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subject, Schema(BREAKING, "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "incompatible with an earlier schema" in e.value.error_message

    assert client.set_compatibility(subject, "none") == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    assert client.test_compatibility(subject, Schema(BREAKING, "AVRO")) is True
    assert client.register_schema(subject, Schema(BREAKING, "AVRO")) > 0

    client.set_compatibility(level="FULL")
    assert client.get_compatibility() == "FULL"
    with pytest.raises(SchemaRegistryError) as e:
        client.set_compatibility(subject, "SIDEWAYS")
    assert (e.value.http_status_code, e.value.error_code) == (422, 42203)


def test_confluent_client_errors_have_confluent_codes(client: SchemaRegistryClient, subject: str) -> None:
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subject, Schema('{"type": "recrod"}', "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as e:
        client.get_version(subject, 1)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40401)
    client.register_schema(subject, Schema(V1, "AVRO"))
    with pytest.raises(SchemaRegistryError) as e:
        client.get_version(subject, 7)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40402)
    with pytest.raises(SchemaRegistryError) as e:
        client.lookup_schema(subject, Schema(V2, "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as e:
        client.get_schema(987654)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40403)


def test_avro_serializer_round_trip_through_our_server(client: SchemaRegistryClient, server: LiveServer) -> None:
    topic = "trips"
    serializer = AvroSerializer(client, V2)
    value = {"id": "t-1", "fare": 12.5, "city": "Lisbon"}
    payload = serializer(value, SerializationContext(topic, MessageField.VALUE))
    assert payload is not None and payload[0] == 0  # Confluent framing: magic byte, then the schema id
    schema_id = int.from_bytes(payload[1:5], "big")
    # the serializer auto-registered under the topic strategy's subject
    assert server.http.get("/subjects/trips-value/versions/latest").json()["id"] == schema_id

    fresh = SchemaRegistryClient({"url": server.url, "max.retries": 0})  # no cache: the id comes from us
    deserializer = AvroDeserializer(fresh)
    assert deserializer(payload, SerializationContext(topic, MessageField.VALUE)) == value
