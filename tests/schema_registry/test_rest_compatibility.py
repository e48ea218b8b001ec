"""Acceptance 2: every avro-compat vector through the REST compatibility endpoints of a live server."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from tests.schema_registry.conftest import LiveServer, load_vectors

pytestmark = pytest.mark.integration

PAIRS = load_vectors("pairs.json")
LEVELS = load_vectors("levels.json")


def _register(server: LiveServer, subject: str, schema: Any) -> int:
    r = server.http.post(f"/subjects/{quote(subject)}/versions", json={"schema": json.dumps(schema)})
    assert r.status_code == 200, r.text
    return int(r.json()["version"])


def _set_level(server: LiveServer, subject: str, level: str) -> None:
    r = server.http.put(f"/config/{quote(subject)}", json={"compatibility": level})
    assert r.status_code == 200 and r.json() == {"compatibility": level}, r.text


@pytest.mark.parametrize("index", range(len(PAIRS)), ids=[v["name"][:90] for v in PAIRS])
def test_pair_through_compatibility_endpoint(shared_server: LiveServer, index: int) -> None:
    vector = PAIRS[index]
    expected = vector["reader_can_read_writer"]
    # BACKWARD: the new schema (reader) must read the registered one (writer)
    backward = f"pair-{index}-backward"
    _register(shared_server, backward, vector["writer"])
    _set_level(shared_server, backward, "BACKWARD")
    r = shared_server.http.post(f"/compatibility/subjects/{backward}/versions/latest?verbose=true",
                                json={"schema": json.dumps(vector["reader"])})
    assert r.status_code == 200, r.text
    assert r.json()["is_compatible"] is expected, r.json()
    assert bool(r.json()["messages"]) is not expected
    # FORWARD: the registered schema (reader) must read the new one (writer)
    forward = f"pair-{index}-forward"
    _register(shared_server, forward, vector["reader"])
    _set_level(shared_server, forward, "FORWARD")
    r = shared_server.http.post(f"/compatibility/subjects/{forward}/versions/1",
                                json={"schema": json.dumps(vector["writer"])})
    assert r.status_code == 200 and r.json() == {"is_compatible": expected}, r.text


@pytest.mark.parametrize("index", range(len(LEVELS)),
                         ids=[f"{i}-{v['level']}-{v.get('notes', '')[:50]}" for i, v in enumerate(LEVELS)])
def test_level_scenario_through_check_and_register(shared_server: LiveServer, index: int) -> None:
    vector = LEVELS[index]
    subject = f"level-{index}"
    _set_level(shared_server, subject, "NONE")
    for schema in vector["existing"]:
        _register(shared_server, subject, schema)
    for schema in vector.get("deleted_versions", []):
        version = _register(shared_server, subject, schema)
        assert shared_server.http.delete(f"/subjects/{subject}/versions/{version}").json() == version
    _set_level(shared_server, subject, vector["level"])
    new = {"schema": json.dumps(vector["new"])}

    r = shared_server.http.post(f"/compatibility/subjects/{subject}/versions?verbose=true", json=new)
    assert r.status_code == 200, r.text
    assert r.json()["is_compatible"] is vector["compatible"], r.json()

    r = shared_server.http.post(f"/subjects/{subject}/versions", json=new)
    if vector["new"] in vector["existing"]:
        # Confluent idempotency (confluentinc/schema-registry#1685): content already live under the subject
        # answers its existing version, without a compatibility check
        assert r.status_code == 200, r.text
        assert r.json()["version"] == vector["existing"].index(vector["new"]) + 1
    elif vector["compatible"]:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 409, r.text
        assert r.json()["error_code"] == 409
        assert "Schema being registered is incompatible with an earlier schema" in r.json()["message"]
