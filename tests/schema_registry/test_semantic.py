"""Semantic types: the catalogue, binding rules, constraint comparison, and the /semantic-types endpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schema_registry.avro import parse_schema
from schema_registry.errors import InvalidSchemaError
from schema_registry.model import Constraints, SemanticTypeSpec
from schema_registry.semantic import bind_fields, builtin_types, constraint_narrowing, iso_codes
from tests.schema_registry.conftest import LiveServer, field, record

BUILTINS = ["age_years", "email", "iso_country", "iso_currency", "json_object", "latitude", "longitude",
            "non_negative_amount", "percentage", "phone_e164", "timestamp_not_future", "url", "uuid"]


def test_builtin_catalogue_is_complete_and_valid() -> None:
    types = builtin_types()
    assert sorted(types) == BUILTINS
    assert all(t.builtin and t.version == 1 for t in types.values())
    age = types["age_years"].spec
    assert (age.base_type, age.constraints.minimum, age.constraints.maximum) == ("int", 0, 150)
    assert types["timestamp_not_future"].spec.constraints.not_future


def test_iso_code_lists_are_full() -> None:
    codes = iso_codes()
    countries, currencies = codes["iso_3166_1_alpha_2"], codes["iso_4217_alpha_3"]
    assert len(countries) == 249 and len(set(countries)) == 249
    assert {"DE", "US", "JP", "BR", "ZA", "AQ"} <= set(countries)
    assert len(currencies) >= 150 and {"EUR", "USD", "JPY", "CHF", "XAU"} <= set(currencies)
    assert builtin_types()["iso_country"].spec.constraints.enum == countries


@pytest.mark.parametrize(("pattern_type", "good", "bad"), [
    ("email", ["a.b+c@example.co.uk", "x@y.io"], ["no-at.example.com", "a@b", "a b@c.de"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "xyz"]),
    ("url", ["https://example.com/a?b=c", "http://localhost:8081"], ["ftp://x.y", "example.com"]),
    ("phone_e164", ["+14155552671", "+442071838750"], ["004415555", "+0123", "+1234567890123456"]),
])
def test_builtin_patterns_match_in_full(pattern_type: str, good: list[str], bad: list[str]) -> None:
    import re

    pattern = builtin_types()[pattern_type].spec.constraints.pattern
    assert pattern is not None
    assert all(re.fullmatch(pattern, v) for v in good)
    assert not any(re.fullmatch(pattern, v) for v in bad)


def _parse(schema: str) -> Any:
    return parse_schema(schema).avro


def test_bind_fields_resolves_nested_paths_and_promotions() -> None:
    schema = _parse(record("Trip",
                           field("rider_age", "int", semanticType="age_years"),
                           field("fare", ["null", "float"], default=None, semanticType="non_negative_amount"),
                           field("ts", {"type": "long", "logicalType": "timestamp-micros"},
                                 semanticType="timestamp_not_future"),
                           field("stops", {"type": "array", "items": {"type": "record", "name": "Stop", "fields": [
                               field("country", "string", semanticType="iso_country")]}})))
    bindings = bind_fields(schema, builtin_types())
    assert {p: b.name for p, b in bindings.items()} == {
        "rider_age": "age_years", "fare": "non_negative_amount", "ts": "timestamp_not_future",
        "stops[].country": "iso_country"}


def test_not_null_type_cannot_bind_to_nullable_field() -> None:
    catalogue = {"id": builtin_types()["uuid"].model_copy(update={
        "name": "id", "spec": SemanticTypeSpec(base_type="string", constraints=Constraints(not_null=True))})}
    schema = _parse(record("R", field("x", ["null", "string"], default=None, semanticType="id")))
    with pytest.raises(InvalidSchemaError, match="nullable but the semantic type is not_null"):
        bind_fields(schema, catalogue)


@pytest.mark.parametrize(("reader", "writer", "narrowed"), [
    (Constraints(minimum=0, maximum=120), Constraints(minimum=0, maximum=150), ["lowers maximum"]),
    (Constraints(minimum=0, maximum=150), Constraints(minimum=0, maximum=120), []),
    (Constraints(minimum=0, exclusive_minimum=True), Constraints(minimum=0), ["raises minimum"]),
    (Constraints(minimum=-1), Constraints(), ["adds minimum"]),
    (Constraints(), Constraints(minimum=3), []),
    (Constraints(enum=("A", "B")), Constraints(enum=("A", "B", "C")), ["drops enum values C"]),
    (Constraints(enum=("A", "B", "C")), Constraints(enum=("A",)), []),
    (Constraints(pattern="[a-z]+"), Constraints(pattern="[a-z0-9]+"), ["changes pattern"]),
    (Constraints(max_length=10), Constraints(max_length=20), ["lowers max_length"]),
    (Constraints(min_length=2), Constraints(), ["raises min_length"]),
    (Constraints(not_null=True), Constraints(), ["adds not_null"]),
    (Constraints(json_schema={"type": "object"}), Constraints(), ["changes json_schema"]),
])
def test_constraint_narrowing(reader: Constraints, writer: Constraints, narrowed: list[str]) -> None:
    reasons = constraint_narrowing(reader, writer)
    assert len(reasons) == len(narrowed)
    for reason, expected in zip(reasons, narrowed, strict=True):
        assert expected in reason


# --- over HTTP -------------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_semantic_types_endpoints(shared_server: LiveServer) -> None:
    http = shared_server.http
    listed = {t["name"]: t for t in http.get("/semantic-types").json()}
    assert set(BUILTINS) <= set(listed)
    assert listed["age_years"]["constraints"] == {"minimum": 0, "maximum": 150}
    assert http.get("/semantic-types/email/versions").json() == [1]

    spec = {"base_type": "int", "description": "seat count", "constraints": {"minimum": 1, "maximum": 9}}
    r = http.put("/semantic-types/seats", json=spec)
    assert r.status_code == 201 and r.json()["version"] == 1
    assert http.put("/semantic-types/seats", json=spec).status_code == 200  # unchanged: no new version
    r = http.put("/semantic-types/seats", json={**spec, "constraints": {"minimum": 1, "maximum": 12}})
    assert r.status_code == 201 and r.json()["version"] == 2
    assert http.get("/semantic-types/seats/versions").json() == [1, 2]
    assert http.get("/semantic-types/seats").json()["constraints"]["maximum"] == 12
    assert http.get("/semantic-types/seats/versions/1").json()["constraints"]["maximum"] == 9
    assert http.get("/semantic-types/seats/versions/3").json()["error_code"] == 40450
    assert http.get("/semantic-types/nope").status_code == 404


@pytest.mark.integration
def test_narrowing_a_bound_range_breaks_backward_compatibility(shared_server: LiveServer, subject: str) -> None:
    http = shared_server.http
    http.put("/semantic-types/driver_age", json={"base_type": "int", "constraints": {"minimum": 16, "maximum": 99}})
    http.put("/semantic-types/adult_age", json={"base_type": "int", "constraints": {"minimum": 18, "maximum": 99}})
    v1 = record("Driver", field("age", "int", semanticType="driver_age"))
    assert http.post(f"/subjects/{subject}/versions", json={"schema": v1}).status_code == 200
    stored = json.loads(http.get(f"/subjects/{subject}/versions/1/schema").text)
    assert stored["fields"][0]["semanticType"] == "driver_age"  # the attribute survives the round trip

    narrowed = record("Driver", field("age", "int", semanticType="adult_age"))
    r = http.post(f"/compatibility/subjects/{subject}/versions/latest?verbose=true", json={"schema": narrowed})
    assert r.json()["is_compatible"] is False
    assert any("SEMANTIC_CONSTRAINT_NARROWED" in m and "raises minimum from >=16.0 to >=18.0" in m
               for m in r.json()["messages"]), r.json()
    r = http.post(f"/subjects/{subject}/versions", json={"schema": narrowed})
    assert r.status_code == 409 and "SEMANTIC_CONSTRAINT_NARROWED" in r.json()["message"]

    # widening is fine going backward but breaks FORWARD (old readers would reject the new values)
    http.put("/semantic-types/any_age", json={"base_type": "int", "constraints": {"minimum": 0, "maximum": 150}})
    widened = record("Driver", field("age", "int", semanticType="any_age"))
    assert http.post(f"/compatibility/subjects/{subject}/versions/latest", json={"schema": widened}).json() == {
        "is_compatible": True}
    http.put(f"/config/{subject}", json={"compatibility": "FORWARD"})
    assert http.post(f"/compatibility/subjects/{subject}/versions/latest", json={"schema": widened}).json() == {
        "is_compatible": False}


@pytest.mark.integration
def test_new_semantic_type_version_is_checked_against_the_pinned_one(shared_server: LiveServer,
                                                                     subject: str) -> None:
    http = shared_server.http
    name = f"score_{subject.replace('-', '_')}"
    http.put(f"/semantic-types/{name}", json={"base_type": "int", "constraints": {"minimum": 0, "maximum": 100}})
    schema = record("R", field("score", "int", semanticType=name))
    assert http.post(f"/subjects/{subject}/versions", json={"schema": schema}).status_code == 200
    # the type narrows in the catalogue; version 1 of the subject keeps the constraints it was registered with
    http.put(f"/semantic-types/{name}", json={"base_type": "int", "constraints": {"minimum": 0, "maximum": 10}})
    v2 = record("R", field("score", "int", semanticType=name), field("note", "string", default=""))
    r = http.post(f"/subjects/{subject}/versions", json={"schema": v2})
    assert r.status_code == 409 and "lowers maximum from <=100.0 to <=10.0" in r.json()["message"], r.text


def test_json_schema_constraint_names_a_known_draft_or_none() -> None:
    """An unknown ``$schema`` is refused with its name (jsonschema would guess the latest draft and warn that this
    becomes an error); a known draft, or none, is checked against its metaschema."""
    with pytest.raises(ValueError, match="unknown \\$schema 'nope'"):
        Constraints(json_schema={"$schema": "nope", "type": "object"})
    Constraints(json_schema={"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"})
    Constraints(json_schema={"type": "object"})
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        Constraints(json_schema={"type": 12})
