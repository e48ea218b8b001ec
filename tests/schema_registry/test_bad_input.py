"""Acceptance 5: bad input gets a clear error with the right status and code, and nothing partial is stored."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.schema_registry.conftest import LiveServer, field, record

pytestmark = pytest.mark.integration


def assert_nothing_stored(server: LiveServer, subject: str) -> None:
    assert server.http.get(f"/subjects/{subject}/versions?deleted=true").status_code == 404
    assert subject not in server.http.get("/subjects?deleted=true").json()


def post(server: LiveServer, subject: str, payload: object) -> httpx.Response:
    return server.http.post(f"/subjects/{subject}/versions", json=payload)


BAD_SCHEMAS = {
    "not json": ("{'type': 'record'}", "not valid JSON"),
    "unknown type": (record("R", field("a", "strnig")), "strnig"),
    "bad name": (record("1R", field("a", "int")), "not a valid Avro name"),
    "duplicate field": (record("R", field("a", "int"), field("a", "long")), "already in use"),
    "duplicate enum symbol": (json.dumps({"type": "enum", "name": "E", "symbols": ["A", "A"]}), "Duplicate symbol"),
    "bad fixed size": (json.dumps({"type": "fixed", "name": "F", "size": -1}), "size"),
    "int default is a string": (record("R", field("a", "int", default="x")), "default value of field 'a'"),
    "int default is null": (record("R", field("a", "int", default=None)), "expected int"),
    "union default not of first branch": (record("R", field("a", ["null", "int"], default=1)), "expected null"),
    "enum default not a symbol": (record("R", field("e", {"type": "enum", "name": "E", "symbols": ["A"]},
                                                        default="B")), "not a symbol"),
    "fixed default wrong length": (record("R", field("f", {"type": "fixed", "name": "F", "size": 2},
                                                         default="abc")), "expected 2 bytes"),
    "record default missing field": (record("R", field("r", {"type": "record", "name": "In", "fields": [
        field("x", "int")]}, default={})), "field 'x' is missing"),
    "empty schema": ("", "empty schema"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCHEMAS))
def test_bad_schema_is_42201_and_not_stored(shared_server: LiveServer, subject: str, case: str) -> None:
    schema, text = BAD_SCHEMAS[case]
    r = post(shared_server, subject, {"schema": schema})
    assert r.status_code == 422, r.text
    assert r.json()["error_code"] == 42201
    assert text.lower() in r.json()["message"].lower(), r.json()
    assert_nothing_stored(shared_server, subject)


@pytest.mark.parametrize("payload", [[], "schema", 5, {"schema": 5}, {"schema": ["x"]},
                                     {"schema": '"string"', "references": "nope"},
                                     {"schema": '"string"', "schemaType": "PROTOBUF"},
                                     {"schema": '"string"', "metadata": {"tags": "PII"}}])
def test_bad_request_shape_is_42201(shared_server: LiveServer, subject: str, payload: object) -> None:
    r = post(shared_server, subject, payload)
    assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text
    assert_nothing_stored(shared_server, subject)


def test_malformed_json_body_is_400(shared_server: LiveServer, subject: str) -> None:
    r = shared_server.http.post(f"/subjects/{subject}/versions", content=b'{"schema": "\\"string\\""',
                                headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    assert (r.status_code, r.json()["error_code"]) == (400, 400)
    assert "malformed JSON" in r.json()["message"]
    assert_nothing_stored(shared_server, subject)


def test_schema_over_one_megabyte_is_42209(shared_server: LiveServer, subject: str) -> None:
    big = record("R", field("a", "string", doc="x" * (1024 * 1024)))
    r = post(shared_server, subject, {"schema": big})
    assert (r.status_code, r.json()["error_code"]) == (422, 42209), r.text[:300]
    assert "Schema too large" in r.json()["message"]
    assert_nothing_stored(shared_server, subject)
    # the same limit guards lookups and compatibility tests
    assert shared_server.http.post(f"/subjects/{subject}", json={"schema": big}).json()["error_code"] == 42209


def test_body_over_the_request_limit_is_413(shared_server: LiveServer, subject: str) -> None:
    r = shared_server.http.post(f"/subjects/{subject}/versions", content=b" " * (5 * 1024 * 1024),
                                headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["error_code"]) == (413, 413)


def test_unknown_unrelated_properties_are_ignored(shared_server: LiveServer, subject: str) -> None:
    r = post(shared_server, subject, {"schema": '"string"', "schemaTagsToAdd": [], "somethingNew": {"x": 1}})
    assert r.status_code == 200, r.text


def test_unknown_semantic_type_is_42201_and_not_stored(shared_server: LiveServer, subject: str) -> None:
    r = post(shared_server, subject, {"schema": record("R", field("age", "int", semanticType="agee_years"))})
    assert (r.status_code, r.json()["error_code"]) == (422, 42201)
    assert "field 'age' names unknown semantic type 'agee_years'" in r.json()["message"]
    assert_nothing_stored(shared_server, subject)


@pytest.mark.parametrize("type_,name,text", [
    ("string", "age_years", "its type is string, the semantic type needs int"),
    ("double", "age_years", "its type is double, the semantic type needs int"),
    ("long", "timestamp_not_future", "its logicalType is absent"),
    (["int", "string"], "age_years", "a union of int, string"),
    (123, "email", None),
])
def test_semantic_type_on_wrong_base_type_is_42201(shared_server: LiveServer, subject: str, type_: object,
                                                   name: str, text: str | None) -> None:
    f = field("x", type_, semanticType=name) if text else {"name": "x", "type": "string", "semanticType": 123}
    r = post(shared_server, subject, {"schema": record("R", f)})
    assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text
    assert (text or "not a type name") in r.json()["message"]
    assert_nothing_stored(shared_server, subject)


@pytest.mark.parametrize("spec,text", [
    ({"base_type": "int", "constraints": {"minimum": 10, "maximum": 1}}, "admit no value"),
    ({"base_type": "string", "constraints": {"pattern": "([a-z"}}, "not a valid regular expression"),
    ({"base_type": "string", "constraints": {"minimum": 1}}, "need a numeric base type"),
    ({"base_type": "int", "constraints": {"pattern": "x"}}, "need a string or bytes base type"),
    ({"base_type": "int", "constraints": {"enum": ["a"]}}, "is not a number"),
    ({"base_type": "string", "constraints": {"enum": []}}, "at least one value"),
    ({"base_type": "string", "constraints": {"json_schema": {"type": 12}}}, "not a valid JSON Schema"),
    ({"base_type": "long", "constraints": {"not_future": True}}, "not_future needs timestamp"),
    ({"base_type": "string", "constraints": {"min_length": 5, "max_length": 2}}, "greater than max_length"),
    ({"base_type": "string", "constraints": {"colour": "red"}}, "Extra inputs are not permitted"),
    ({"base_type": "uuid"}, "base_type"),
    ({"base_type": "int", "constraints": {"exclusive_minimum": True}}, "exclusive_minimum needs minimum"),
    ("not an object", "valid dictionary"),
])
def test_invalid_semantic_type_is_42250_and_not_stored(shared_server: LiveServer, spec: object, text: str) -> None:
    r = shared_server.http.put("/semantic-types/bad_type", json=spec)
    assert (r.status_code, r.json()["error_code"]) == (422, 42250), r.text
    assert text in r.json()["message"], r.json()
    assert shared_server.http.get("/semantic-types/bad_type").json()["error_code"] == 40450


def test_semantic_type_names_and_builtins_are_guarded(shared_server: LiveServer) -> None:
    r = shared_server.http.put("/semantic-types/9lives", json={"base_type": "int"})
    assert (r.status_code, r.json()["error_code"]) == (422, 42250)
    r = shared_server.http.put("/semantic-types/email", json={"base_type": "string"})
    assert (r.status_code, r.json()["error_code"]) == (422, 42205)
    assert "built in" in r.json()["message"]
