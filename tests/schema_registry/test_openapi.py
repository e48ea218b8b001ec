"""The OpenAPI document, and a schemathesis run against the app it describes.

``GET /openapi.json`` declares every route, its parameters, the Confluent media types and every status code each
operation can answer. Schemathesis generates requests from that document (valid and invalid ones, a bounded number
per operation) and sends them to the app with auth on; every answer must be no server error, a documented status
code with a documented media type and body, and every protected operation must refuse a request without credentials.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CheckFunction
from starlette.testclient import TestClient

from schema_registry.server import create_app
from schema_registry.server.auth import hash_password, hash_token
from schema_registry.server.http import PRODUCED
from schema_registry.server.openapi import OPERATIONS
from schema_registry.settings import Settings
from tests.schema_registry.conftest import field, record

pytestmark = pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType")

TOKEN = "openapi-admin-token-0123456789"
EXAMPLES = int(os.environ.get("LAKEGATE_OPENAPI_EXAMPLES", "8"))
"""Requests per operation in the positive run (half as many in the negative one); raise it for a long run."""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("openapi")
    auth = tmp / "auth.toml"
    auth.write_text("\n".join([
        "[[users]]", 'name = "alice"', f'password_hash = "{hash_password("a-secret", iterations=1000)}"',
        'role = "read"', "", "[[tokens]]", 'name = "admin"', f'sha256 = "{hash_token(TOKEN)}"', 'role = "admin"',
        "", "[limits]", "failures_per_user = 1000000", "failures_per_client = 1000000"]))
    application = create_app(Settings(store_url=f"sqlite:///{tmp / 'r.db'}", auth_config=auth))
    with TestClient(application, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        seed(client)
        yield application


def seed(client: TestClient) -> None:
    trip = record("Trip", field("a", "string"))
    for subject, schema in (("trips", trip), ("trips", record("Trip", field("a", "string"), field("b", "int",
                                                                                             default=0))),
                            ("other", '"string"')):
        assert client.post(f"/subjects/{subject}/versions", json={"schema": schema}).status_code == 200
    assert client.put("/semantic-types/score", json={"base_type": "int", "constraints": {"minimum": 0}}
                      ).status_code == 201


@pytest.fixture(scope="module")
def api(app: Any) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", app)


CHECKS: list[CheckFunction] = [
    schemathesis.checks.not_a_server_error, schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance, schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance, schemathesis.checks.ignored_auth,
]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_schemathesis_finds_no_server_error_and_no_undocumented_status(api: Any, mode: GenerationMode) -> None:
    """Every operation, ``EXAMPLES`` generated requests each that fit the document (positive), half as many that do
    not (negative)."""
    operations = [result.ok() for result in api.get_all_operations()]
    # every operation but the document itself, which schemathesis leaves out
    assert {op.label for op in operations} == {f"{m} {p}" for m, p in OPERATIONS} - {"GET /openapi.json"}
    examples = EXAMPLES if mode is GenerationMode.POSITIVE else max(1, EXAMPLES // 2)
    for operation in operations:
        @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate])
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)

        try:
            run()
        except Unsatisfiable:  # nothing to make invalid (an operation without parameters or body)
            assert mode is GenerationMode.NEGATIVE, operation.label


def test_document_declares_every_route_media_types_and_gate_statuses(app: Any) -> None:
    with TestClient(app) as client:
        r = client.get("/openapi.json")  # open, with auth on
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        doc = r.json()
    assert doc["openapi"] == "3.1.0" and set(doc["components"]["securitySchemes"]) == {"basic", "bearer"}
    declared = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    assert declared == set(OPERATIONS)
    for (method, path), op in OPERATIONS.items():
        spec = doc["paths"][path][method.lower()]
        statuses = {int(s) for s in spec["responses"]}
        assert {406, 413, 500} <= statuses, (method, path)
        if op.open:
            assert spec["security"] == [] and 401 not in statuses
        else:
            assert {401, 429} <= statuses and "security" not in spec, (method, path)
            assert spec["responses"]["429"]["headers"]["Retry-After"]["required"]
        if "body" in spec.get("requestBody", {}) or op.body is not None:
            assert set(spec["requestBody"]["content"]) == set(PRODUCED), (method, path)
        if path != "/metrics":
            for status, response in spec["responses"].items():
                assert set(response["content"]) == set(PRODUCED), (method, path, status)


def test_every_other_method_is_405_with_the_documented_allow(app: Any) -> None:
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        doc = client.get("/openapi.json").json()
        for path, item in doc["paths"].items():
            concrete = path.replace("{subject}", "trips").replace("{version}", "1").replace("{schema_id}", "1") \
                .replace("{name}", "score").replace("{guid}", "g").replace("{namespace}", "n")
            allowed = sorted(m.upper() for m in item)
            for method in {"GET", "POST", "PUT", "DELETE", "PATCH"} - set(allowed):
                r = client.request(method, concrete)
                assert (r.status_code, r.headers.get("allow")) == (405, ", ".join(allowed)), (method, path)
