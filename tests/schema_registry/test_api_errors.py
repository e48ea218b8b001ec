"""Acceptance 3: every error path of the reference answers with Confluent's status, error_code and body shape."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from schema_registry.settings import Settings
from tests.schema_registry.conftest import LiveServer, body, field, record

pytestmark = pytest.mark.integration

S1 = record("R", field("a", "string"))
S2 = record("R", field("a", "string"), field("b", "int", default=0))
BREAKING = record("R", field("a", "int"))


def assert_error(r: httpx.Response, status: int, code: int, text: str = "") -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
    data = r.json()
    assert set(data) == {"error_code", "message"}, data
    assert data["error_code"] == code, data
    assert isinstance(data["message"], str) and text in data["message"], data


def register(server: LiveServer, subject: str, schema: str = S1, **extra: object) -> httpx.Response:
    return server.http.post(f"/subjects/{subject}/versions", json=body(schema, **extra))


def test_error_not_found_codes(shared_server: LiveServer, subject: str) -> None:
    http = shared_server.http
    assert_error(http.get(f"/subjects/{subject}/versions"), 404, 40401, "not found")
    assert_error(http.get(f"/subjects/{subject}/versions/latest"), 404, 40401, f"Subject '{subject}' not found")
    assert_error(http.post(f"/subjects/{subject}", json=body(S1)), 404, 40401)
    assert register(shared_server, subject).status_code == 200
    assert_error(http.get(f"/subjects/{subject}/versions/2"), 404, 40402, "Version 2 not found")
    assert_error(http.delete(f"/subjects/{subject}/versions/5"), 404, 40402)
    assert_error(http.post(f"/subjects/{subject}", json=body(S2)), 404, 40403, "Schema not found")
    assert_error(http.get("/schemas/ids/99999"), 404, 40403, "Schema 99999 not found")
    assert_error(http.get("/schemas/ids/99999/subjects"), 404, 40403)
    assert_error(http.get("/schemas/ids/abc"), 404, 40403)
    assert_error(http.get("/schemas/guids/00000000-0000-0000-0000-000000000000"), 404, 40403)
    assert_error(http.get(f"/config/{subject}"), 404, 40408, "does not have subject-level compatibility")
    assert_error(http.get(f"/mode/{subject}"), 404, 40409, "does not have subject-level mode")
    assert_error(http.delete(f"/config/{subject}"), 404, 40401)
    assert_error(http.get("/associations/resources/-/trips?resourceType=topic"), 404, 40410)
    assert_error(http.post("/compatibility/subjects/nobody-here/versions/3", json=body(S1)), 404, 40401)
    assert_error(http.post(f"/compatibility/subjects/{subject}/versions/3", json=body(S1)), 404, 40402)


def test_error_delete_state_machine(shared_server: LiveServer, subject: str) -> None:
    http = shared_server.http
    register(shared_server, subject)
    register(shared_server, subject, S2)
    assert_error(http.delete(f"/subjects/{subject}/versions/2?permanent=true"), 404, 40407,
                 "was not deleted first before being permanently deleted")
    assert http.delete(f"/subjects/{subject}/versions/2").json() == 2
    assert_error(http.delete(f"/subjects/{subject}/versions/2"), 404, 40406, "was soft deleted")
    assert http.delete(f"/subjects/{subject}/versions/2?permanent=true").json() == 2
    assert_error(http.delete(f"/subjects/{subject}?permanent=true"), 404, 40405,
                 "was not deleted first before being permanently deleted")
    assert http.delete(f"/subjects/{subject}").json() == [1]
    assert_error(http.delete(f"/subjects/{subject}"), 404, 40404, "was soft deleted")
    assert_error(http.get(f"/subjects/{subject}/versions"), 404, 40401)  # all versions soft-deleted
    assert http.get(f"/subjects/{subject}/versions?deleted=true").json() == [1]
    assert http.delete(f"/subjects/{subject}?permanent=true").json() == [1]
    assert_error(http.delete(f"/subjects/{subject}"), 404, 40401)


@pytest.mark.parametrize("version", ["0", "-2", "earliest", "a", "2147483648", "1.5"])
def test_error_invalid_version(shared_server: LiveServer, subject: str, version: str) -> None:
    register(shared_server, subject)
    message = f"The specified version '{version}' is not a valid version id"
    assert_error(shared_server.http.get(f"/subjects/{subject}/versions/{version}"), 422, 42202, message)
    assert_error(shared_server.http.delete(f"/subjects/{subject}/versions/{version}"), 422, 42202)
    assert_error(shared_server.http.post(f"/compatibility/subjects/{subject}/versions/{version}", json=body(S1)),
                 422, 42202)


def test_versions_latest_and_minus_one_mean_newest_live(shared_server: LiveServer, subject: str) -> None:
    register(shared_server, subject)
    register(shared_server, subject, S2)
    for v in ("latest", "LATEST", "-1"):
        assert shared_server.http.get(f"/subjects/{subject}/versions/{v}").json()["version"] == 2
    shared_server.http.delete(f"/subjects/{subject}/versions/2")
    assert shared_server.http.get(f"/subjects/{subject}/versions/latest").json()["version"] == 1


def test_error_incompatible_schema(shared_server: LiveServer, subject: str) -> None:
    register(shared_server, subject)
    r = register(shared_server, subject, BREAKING)
    assert_error(r, 409, 409, f'Schema being registered is incompatible with an earlier schema for subject "{subject}"')
    assert "TYPE_MISMATCH" in r.json()["message"]


def test_incompatible_error_code_40901_when_configured(tmp_path: Path, subject: str) -> None:
    live = LiveServer(Settings(store_url=f"sqlite:///{tmp_path / 'r.db'}", incompatible_error_code=40901))
    try:
        register(live, subject)
        assert_error(register(live, subject, BREAKING), 409, 40901, "incompatible")
    finally:
        live.stop()


def test_error_invalid_config_and_mode(shared_server: LiveServer, subject: str) -> None:
    http = shared_server.http
    message = "Invalid compatibility level. Valid values are none, backward, forward, full"
    assert_error(http.put("/config", json={"compatibility": "SIDEWAYS"}), 422, 42203, message)
    assert_error(http.put(f"/config/{subject}", json={"compatibility": 3}), 422, 42203)
    assert_error(http.put(f"/config/{subject}", json={}), 422, 42203)
    assert_error(http.put(f"/mode/{subject}", json={"mode": "SOMETIMES"}), 422, 42204, "Invalid mode")
    assert_error(http.put("/mode", json={}), 422, 42204)
    # level names are case-insensitive, and a subject need not exist to get a config
    assert http.put(f"/config/{subject}", json={"compatibility": "full_transitive"}).json() == {
        "compatibility": "FULL_TRANSITIVE"}
    assert http.get(f"/config/{subject}").json() == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert http.get(f"/config/{subject}x?defaultToGlobal=true").json() == http.get("/config").json()
    assert http.delete(f"/config/{subject}").json() == {"compatibilityLevel": "FULL_TRANSITIVE"}


def test_error_operation_not_permitted(server: LiveServer, subject: str) -> None:
    http = server.http
    assert_error(register(server, subject, id=5), 422, 42205, "not in import mode")
    register(server, subject)
    assert_error(http.put("/mode", json={"mode": "IMPORT"}), 422, 42205, "Cannot import since found existing subjects")
    assert http.put(f"/mode/{subject}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert_error(register(server, subject, S2), 422, 42205, "read-only mode")
    assert_error(http.delete(f"/subjects/{subject}/versions/1"), 422, 42205)
    assert_error(http.delete(f"/subjects/{subject}"), 422, 42205)
    assert http.get(f"/subjects/{subject}/versions/1").status_code == 200  # reads still work
    assert http.delete(f"/mode/{subject}").json() == {"mode": "READONLY"}
    assert register(server, subject, S2).status_code == 200


def test_error_import_id_mismatch(server: LiveServer, subject: str) -> None:
    http = server.http
    assert http.put("/mode", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    r = register(server, subject, S1, id=42, version=3)
    assert r.status_code == 200 and (r.json()["id"], r.json()["version"]) == (42, 3)
    assert_error(register(server, subject + "-b", S2, id=42), 422, 42207, "Overwrite new schema with id 42")
    assert_error(register(server, subject + "-c", S1, id=43), 422, 42207, "already registered with id 42")


def test_error_reference_exists_and_referencedby(shared_server: LiveServer, subject: str) -> None:
    http = shared_server.http
    address = json.dumps({"type": "record", "name": "Address", "namespace": "geo",
                          "fields": [{"name": "city", "type": "string"}]})
    assert register(shared_server, f"{subject}-address", address).status_code == 200
    person = record("Person", field("home", "geo.Address"))
    ref = [{"name": "geo.Address", "subject": f"{subject}-address", "version": 1}]
    r = register(shared_server, subject, person, references=ref)
    assert r.status_code == 200, r.text
    assert r.json()["references"] == ref
    assert http.get(f"/subjects/{subject}-address/versions/1/referencedby").json() == [r.json()["id"]]
    assert_error(http.delete(f"/subjects/{subject}-address/versions/1"), 422, 42206, "references exist")
    assert_error(http.delete(f"/subjects/{subject}-address"), 422, 42206)
    # an unresolvable reference makes the schema invalid
    bad = [{"name": "geo.Address", "subject": f"{subject}-address", "version": 9}]
    assert_error(register(shared_server, subject + "-x", person, references=bad), 422, 42201, "does not exist")
    assert_error(register(shared_server, subject + "-y", person), 422, 42201)  # geo.Address unknown without refs


@pytest.mark.parametrize("name", [" ", "a\x01b", "tab\there", "__GLOBAL"])
def test_error_invalid_subject(shared_server: LiveServer, name: str) -> None:
    path = quote(name, safe="")
    assert_error(shared_server.http.post(f"/subjects/{path}/versions", json=body(S1)), 422, 42208,
                 "not a valid subject name")
    assert_error(shared_server.http.put(f"/config/{path}", json={"compatibility": "NONE"}), 422, 42208)


def test_error_invalid_rule_set(shared_server: LiveServer, subject: str) -> None:
    cases = [
        {"domainRules": [{"name": "1bad", "type": "CEL", "mode": "WRITE"}]},
        {"domainRules": [{"name": "a", "type": "CEL", "mode": "UPGRADE"}]},
        {"migrationRules": [{"name": "a", "type": "JSONATA", "mode": "WRITE"}]},
        {"domainRules": [{"name": "a", "type": "CEL", "mode": "WRITE"}, {"name": "a", "type": "CEL", "mode": "READ"}]},
        {"domainRules": [{"name": "a", "mode": "WRITE"}]},
        {"domainRules": "nope"},
    ]
    for rule_set in cases:
        assert_error(register(shared_server, subject, ruleSet=rule_set), 422, 42210)
    assert shared_server.http.get(f"/subjects/{subject}/versions").status_code == 404  # nothing stored


def test_error_framework_statuses_are_confluent_shaped(shared_server: LiveServer) -> None:
    http = shared_server.http
    assert_error(http.get("/no/such/route"), 404, 404, "HTTP 404 Not Found")
    assert_error(http.patch("/subjects"), 405, 405, "HTTP 405 Method Not Allowed")
    assert_error(http.get("/subjects", headers={"Accept": "text/html"}), 406, 406, "HTTP 406 Not Acceptable")
    assert_error(http.post("/subjects/x/versions", content=json.dumps(body(S1)),
                           headers={"Content-Type": "text/plain"}), 415, 415, "HTTP 415 Unsupported Media Type")
    assert_error(http.post("/subjects/x/versions", content=b"{not json",
                           headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}), 400, 400,
                 "malformed JSON")


def test_media_types_negotiated(shared_server: LiveServer) -> None:
    http = shared_server.http
    assert http.get("/subjects").headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
    assert http.get("/subjects", headers={"Accept": "application/json"}).headers["content-type"].startswith(
        "application/json")
    r = http.get("/subjects", headers={"Accept": "application/json; q=0.5, application/vnd.schemaregistry+json"})
    assert r.headers["content-type"].startswith("application/vnd.schemaregistry+json")
    # octet-stream and absent content types are read as JSON, as Confluent does
    r = http.post("/compatibility/subjects/none-yet/versions/latest", content=json.dumps(body(S1)),
                  headers={"Content-Type": "application/octet-stream"})
    assert r.json() == {"is_compatible": True}


def test_compatibility_of_missing_subject_and_invalid_schema(shared_server: LiveServer, subject: str) -> None:
    http = shared_server.http
    # Confluent on purpose: nothing to be incompatible with (confluentinc/schema-registry#2624)
    assert http.post(f"/compatibility/subjects/{subject}/versions/latest", json=body(S1)).json() == {
        "is_compatible": True}
    assert_error(http.post(f"/compatibility/subjects/{subject}/versions/latest", json=body("{")), 422, 42201)
    r = http.post(f"/compatibility/subjects/{subject}/versions/latest?verbose=true", json=body("{"))
    assert r.status_code == 200 and r.json()["is_compatible"] is False
    assert "not valid JSON" in r.json()["messages"][0]


@pytest.fixture
def breakable(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    db = tmp_path / "r.db"
    live = LiveServer(Settings(store_url=f"sqlite:///{db}"))
    yield live, db
    live.stop()


def test_error_store_failure_is_50001(breakable: tuple[LiveServer, Path]) -> None:
    live, db = breakable
    assert register(live, "s").status_code == 200
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE sr_references")
    assert_error(live.http.get("/subjects/s/versions/1"), 500, 50001, "Error in the backend data store")
