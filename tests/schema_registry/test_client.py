"""``RegistryClient``: typed errors and caching by id and by subject/version, against a live server."""

from __future__ import annotations

import httpx
import pytest

from schema_registry import RegistryClient, SemanticTypeSpec
from schema_registry.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    SchemaNotFoundError,
    SubjectNotFoundError,
    TransportError,
    VersionNotFoundError,
)
from schema_registry.model import Constraints
from tests.schema_registry.conftest import LiveServer, field, free_port, record

pytestmark = pytest.mark.integration

V1 = record("R", field("a", "string"))
V2 = record("R", field("a", "string"), field("b", "int", default=0))


class CountingTransport(httpx.HTTPTransport):
    """A real HTTP transport that counts the requests that reach the network."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


@pytest.fixture
def counted(server: LiveServer) -> tuple[RegistryClient, CountingTransport]:
    transport = CountingTransport()
    return RegistryClient(server.url, transport=transport), transport


def test_client_register_and_caches(counted: tuple[RegistryClient, CountingTransport], server: LiveServer,
                                    subject: str) -> None:
    client, transport = counted
    first = client.register(subject, V1)
    assert (first.version, first.subject) == (1, subject)
    assert client.register(subject, V1) == first  # cached by content
    second = client.register(subject, V2)
    assert second.id != first.id and second.version == 2
    sent = len(transport.paths)

    assert client.schema(first.id).schema == first.schema  # filled by register: no request
    assert client.version(subject, 1).id == first.id
    assert len(transport.paths) == sent
    assert client.latest(subject).version == 2  # latest is always asked
    assert client.latest(subject).version == 2
    assert len(transport.paths) == sent + 2

    fresh = RegistryClient(server.url, transport=transport)
    fresh.schema(second.id)
    fresh.schema(second.id)
    assert transport.paths.count(f"GET /schemas/ids/{second.id}") == 1


def test_client_typed_errors(counted: tuple[RegistryClient, CountingTransport], subject: str) -> None:
    client, _ = counted
    with pytest.raises(SubjectNotFoundError) as e:
        client.latest(subject)
    assert (e.value.http_status, e.value.error_code) == (404, 40401)
    client.register(subject, V1)
    with pytest.raises(VersionNotFoundError):
        client.version(subject, 9)
    with pytest.raises(SchemaNotFoundError):
        client.schema(424242)
    with pytest.raises(InvalidSchemaError):
        client.register(subject, "{")
    with pytest.raises(IncompatibleSchemaError) as inc:
        client.register(subject, record("R", field("a", "int")))
    assert inc.value.error_code == 409
    report = client.test_compatibility(subject, record("R", field("a", "int")))
    assert not report.is_compatible and any("TYPE_MISMATCH" in m for m in report.messages)
    assert client.test_compatibility(subject, V2).is_compatible


def test_client_deletes_config_and_semantic_types(counted: tuple[RegistryClient, CountingTransport],
                                                 subject: str) -> None:
    client, _ = counted
    client.register(subject, V1)
    client.register(subject, V2)
    assert client.delete_version(subject, 2) == 2
    assert client.versions(subject) == [1]
    assert client.versions(subject, deleted=True) == [1, 2]
    assert client.set_compatibility("FULL", subject) == "FULL"
    assert client.compatibility(subject) == "FULL"
    assert client.compatibility() == "BACKWARD"
    assert subject in client.subjects(prefix=subject[:4])
    assert client.delete_subject(subject) == [1]
    assert client.subjects() == []

    spec = SemanticTypeSpec(base_type="double", constraints=Constraints(minimum=0, maximum=1))
    stored = client.put_semantic_type("ratio", spec)
    assert stored.version == 1 and client.semantic_type("ratio").spec == spec
    assert "ratio" in {t.name for t in client.semantic_types()}


def test_client_unreachable_server_is_transport_error() -> None:
    with pytest.raises(TransportError):
        RegistryClient(f"http://127.0.0.1:{free_port()}", timeout=2).subjects()
