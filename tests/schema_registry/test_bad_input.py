"""Acceptance 5: bad input gets a clear error with the right status and code, and nothing partial is stored."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from schema_registry.settings import Settings
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
    "field aliases not strings": (record("R", field("a", "int", aliases=[["b"]])), "must be an array of strings"),
    "field aliases a string": (record("R", field("a", "int", aliases="b")), "must be an array of strings"),
    "record aliases a number": (record("R", field("a", "int"), aliases=5), "aliases of record 'R'"),
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
    ({"base_type": "string", "constraints": {"pattern": "(a+)+$"}}, "pattern '(a+)+$' can take exponential time"),
    ({"base_type": "string", "constraints": {"pattern": "(?i)[a-z]+"}}, "inline flags"),
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


# --- found by the fuzzer (tests/schema_registry/test_fuzz.py): each answered 500 before ------------------------------

@pytest.fixture
def any_store_server(store_url: str) -> Iterator[LiveServer]:
    """A fresh server on each backend (PostgreSQL refuses NUL in text and ints past 32 bits; SQLite does not)."""
    live = LiveServer(Settings(store_url=store_url, port=0))
    yield live
    live.stop()


@pytest.mark.parametrize("path", ["/schemas/ids/99999999999999999999", "/schemas/ids/2147483648/subjects",
                                  "/schemas/ids/9223372036854775808/versions", "/schemas/ids/4294967296/schema"])
def test_schema_id_past_32_bits_is_40403(any_store_server: LiveServer, path: str) -> None:
    r = any_store_server.http.get(path)
    assert (r.status_code, r.json()["error_code"]) == (404, 40403), r.text


@pytest.mark.parametrize("path,code", [("/subjects/%00/versions", 40401), ("/subjects/a%00b/versions/1", 40401),
                                       ("/config/%00", 40408), ("/mode/%00", 40409), ("/semantic-types/%00", 40450),
                                       ("/subjects/x%00/versions/latest/referencedby", 40401)])
def test_nul_in_a_name_names_nothing(any_store_server: LiveServer, path: str, code: int) -> None:
    r = any_store_server.http.get(path)
    assert (r.status_code, r.json()["error_code"]) == (404, code), r.text
    lookup = any_store_server.http.post("/subjects/%00", json={"schema": '"string"'})
    assert (lookup.status_code, lookup.json()["error_code"]) == (404, 40401), lookup.text


@pytest.mark.parametrize("payload,text", [
    ({"schema": '"string"', "id": 2**31}, "id: Input should be less than or equal to 2147483647"),
    ({"schema": '"string"', "version": 10**30}, "version: Input should be less than or equal to 2147483647"),
    ({"schema": '"string"', "references": [{"name": "a", "subject": "s", "version": 2**40}]}, "references.0.version"),
    ({"schema": '"string"', "references": [{"name": "a\u0000", "subject": "s", "version": 1}]}, "NUL"),
    ({"schema": '"string"', "references": [{"name": "a", "subject": "s\u0000", "version": 1}]}, "NUL"),
])
def test_out_of_range_request_fields_are_42201(any_store_server: LiveServer, subject: str, payload: object,
                                               text: str) -> None:
    r = post(any_store_server, subject, payload)
    assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text
    assert text in r.json()["message"]
    assert_nothing_stored(any_store_server, subject)


NON_JSON_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "1" * 5000]


@pytest.mark.parametrize("token", NON_JSON_NUMBERS)
def test_non_json_numbers_in_bodies_are_400_and_not_stored(shared_server: LiveServer, subject: str,
                                                           token: str) -> None:
    http = shared_server.http
    for method, path, raw in [
        ("PUT", f"/config/{subject}", '{"compatibility": "FULL", "defaultMetadata": {"x": %s}}'),
        ("PUT", "/semantic-types/fuzzed_nan", '{"base_type": "double", "constraints": {"minimum": %s}}'),
        ("POST", f"/subjects/{subject}/versions", '{"schema": "\\"string\\"", "metadata": {"properties": {"a": %s}}}'),
    ]:
        r = http.request(method, path, content=(raw % token).encode(), headers={"Content-Type": "application/json"})
        assert (r.status_code, r.json()["error_code"]) == (400, 400), r.text
        assert "malformed JSON" in r.json()["message"]
    assert http.get(f"/config/{subject}").json()["error_code"] == 40408
    assert http.get("/semantic-types/fuzzed_nan").json()["error_code"] == 40450
    assert_nothing_stored(shared_server, subject)


@pytest.mark.parametrize("raw", ['{"schema": "\\"string\\"", "metadata": {"properties": {"a": "\\ud800"}}}',
                                 '{"compatibility": "FULL", "alias": "x\\udfffy"}', "[" * 5000 + "]" * 5000])
def test_lone_surrogates_and_deep_nesting_are_400(shared_server: LiveServer, subject: str, raw: str) -> None:
    path = f"/config/{subject}" if "compatibility" in raw else f"/subjects/{subject}/versions"
    r = shared_server.http.request("PUT" if "compatibility" in raw else "POST", path, content=raw.encode(),
                                   headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["error_code"]) == (400, 400), r.text
    assert_nothing_stored(shared_server, subject)


@pytest.mark.parametrize("schema", [
    record("R", field("d", "double", default="__NAN__")).replace('"__NAN__"', "NaN"),
    record("R", field("d", "double", default="__INF__")).replace('"__INF__"', "1e999"),
    record("R", field("s", "string", default="__S__")).replace('"__S__"', '"\\ud800"'),
    json.dumps({"type": "fixed", "name": "F", "size": 1}).replace("1}", "1" * 5000 + "}"),
])
def test_schema_text_that_is_not_strict_json_is_42201(shared_server: LiveServer, subject: str, schema: str) -> None:
    r = post(shared_server, subject, {"schema": schema})
    assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text
    assert "not valid JSON" in r.json()["message"]
    assert_nothing_stored(shared_server, subject)


def test_a_nan_constraint_spelt_as_a_string_is_42250_and_the_catalogue_stays_usable(shared_server: LiveServer,
                                                                                     subject: str) -> None:
    # before: pydantic read "NaN" as a float, the type was stored (as null) and every later registration failed
    http = shared_server.http
    for constraints in ({"minimum": "NaN"}, {"maximum": "Infinity"}, {"minimum": "-inf"}):
        r = http.put("/semantic-types/nan_bound", json={"base_type": "double", "constraints": constraints})
        assert (r.status_code, r.json()["error_code"]) == (422, 42250), r.text
    assert http.get("/semantic-types/nan_bound").json()["error_code"] == 40450
    assert post(shared_server, subject, {"schema": record("R", field("a", "int", semanticType="age_years"))}) \
        .status_code == 200


def test_error_types_are_checked_as_records(shared_server: LiveServer, subject: str) -> None:
    # before: the Apache checker raised "Unknown schema type: error" when the new schema (the reader) was an error
    first = post(shared_server, subject, {"schema": record("E", field("a", "int"))})
    assert first.status_code == 200
    as_error = post(shared_server, subject, {"schema": json.dumps(
        {"type": "error", "name": "E", "fields": [{"name": "a", "type": "int"}]})})
    assert as_error.status_code == 200, as_error.text  # Java: an error is a RECORD schema, same fields: compatible
    breaking = post(shared_server, subject, {"schema": json.dumps({"type": "error", "name": "E", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "int"}]})})
    assert (breaking.status_code, breaking.json()["error_code"]) == (409, 409), breaking.text
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in breaking.json()["message"]
    other = post(shared_server, f"{subject}-2", {"schema": '"int"'})
    assert other.status_code == 200
    mismatch = post(shared_server, f"{subject}-2", {"schema": json.dumps({"type": "error", "name": "E", "fields": []})})
    assert (mismatch.status_code, mismatch.json()["error_code"]) == (409, 409), mismatch.text


@pytest.mark.parametrize("aliases", [[["a"]], [{"a": 1}], 5, "ab"])
def test_field_aliases_that_are_not_strings_are_42201_not_a_checker_crash(shared_server: LiveServer, subject: str,
                                                                          aliases: object) -> None:
    # before: the checker looked each alias up in a dict (TypeError on a list) or iterated a number: 500
    assert post(shared_server, subject, {"schema": record("R", field("a", "int"))}).status_code == 200
    r = post(shared_server, subject, {"schema": record("R", field("x", "int", aliases=aliases))})
    assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text
    assert "must be an array of strings" in r.json()["message"]
