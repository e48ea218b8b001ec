"""The server as a whole: restarts on both stores, metrics, the schema listing endpoints, data contracts."""

from __future__ import annotations

import json
import re

import pytest

from schema_registry.settings import Settings
from tests.schema_registry.conftest import LiveServer, field, free_port, record

pytestmark = pytest.mark.integration

V1 = record("R", field("a", "string"))
V2 = record("R", field("a", "string"), field("b", "int", default=0))


def test_data_survives_server_restart(store_url: str) -> None:
    port = free_port()
    first = LiveServer(Settings(store_url=store_url, port=port))
    try:
        id1 = first.http.post("/subjects/s/versions", json={"schema": V1}).json()["id"]
        first.http.post("/subjects/s/versions", json={"schema": V2})
        first.http.delete("/subjects/s/versions/2")
        first.http.put("/config/s", json={"compatibility": "FULL"})
        first.http.put("/semantic-types/ratio", json={"base_type": "double", "constraints": {"maximum": 1}})
    finally:
        first.stop()
    second = LiveServer(Settings(store_url=store_url, port=port))
    try:
        http = second.http
        assert http.get("/subjects/s/versions").json() == [1]
        assert http.get("/subjects/s/versions?deleted=true").json() == [1, 2]
        assert json.loads(http.get(f"/schemas/ids/{id1}").json()["schema"]) == json.loads(V1)
        assert http.get("/config/s").json()["compatibilityLevel"] == "FULL"
        assert http.get("/semantic-types/ratio").json()["constraints"] == {"maximum": 1}
        assert http.post("/subjects/s/versions", json={"schema": V2}).json()["version"] == 3
    finally:
        second.stop()


def test_metrics_prometheus_text(server: LiveServer) -> None:
    http = server.http
    http.post("/subjects/a/versions", json={"schema": V1})
    http.post("/subjects/b/versions", json={"schema": V1})
    http.get("/subjects/a/versions/latest")
    http.get("/subjects/zzz/versions/latest")
    http.get("/no/route")
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert "lakegate_registry_subjects 2.0" in text
    assert "lakegate_registry_schemas 1.0" in text
    assert re.search(r'lakegate_registry_requests_total\{method="POST",route="/subjects/\{subject\}/versions",'
                     r'status="200"\} 2\.0', text)
    assert re.search(r'lakegate_registry_requests_total\{method="GET",route="/subjects/\{subject\}/versions/'
                     r'\{version\}",status="404"\} 1\.0', text)
    assert 'route="unmatched",status="404"' in text
    assert "lakegate_registry_request_duration_seconds_bucket" in text
    assert "zzz" not in text  # raw subject names never become labels


def test_listing_endpoints(server: LiveServer) -> None:
    http = server.http
    a1 = http.post("/subjects/app-a/versions", json={"schema": V1}).json()
    http.post("/subjects/app-a/versions", json={"schema": V2})
    http.post("/subjects/other/versions", json={"schema": V1})
    assert http.get("/subjects?subjectPrefix=app").json() == ["app-a"]
    assert http.get("/subjects?limit=1&offset=1").json() == ["other"]
    listed = http.get("/schemas?subjectPrefix=app-a").json()
    assert [(s["subject"], s["version"]) for s in listed] == [("app-a", 1), ("app-a", 2)]
    assert [s["version"] for s in http.get("/schemas?latestOnly=true").json()] == [2, 1]
    assert http.get(f"/schemas/ids/{a1['id']}/versions").json() == [
        {"subject": "app-a", "version": 1}, {"subject": "other", "version": 1}]
    assert http.get(f"/schemas/ids/{a1['id']}/subjects?subject=other").json() == ["other"]
    assert json.loads(http.get(f"/schemas/ids/{a1['id']}/schema").text) == json.loads(V1)
    guid = a1["guid"]
    assert http.get(f"/schemas/guids/{guid}").json()["schema"] == a1["schema"]
    assert http.get(f"/schemas/guids/{guid}/ids").json() == [{"context": ".", "id": a1["id"]}]
    assert http.get("/schemas/types").json() == ["AVRO"]
    assert http.get("/contexts").json() == ["."]
    assert http.get("/").json() == {}


def test_canonical_text_and_normalize(server: LiveServer) -> None:
    http = server.http
    spaced = '{ "type" : "record", "name": "R", "fields": [ {"name": "a", "type": {"type": "string"}} ] }'
    r = http.post("/subjects/canon/versions", json={"schema": spaced}).json()
    assert r["schema"] == '{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}'
    # a different key order is different content without normalize, the same with it
    reordered = '{"name": "R", "type": "record", "fields": [{"type": "string", "name": "a"}]}'
    assert http.post("/subjects/canon", json={"schema": reordered}).status_code == 404
    n1 = http.post("/subjects/norm/versions?normalize=true", json={"schema": spaced}).json()
    n2 = http.post("/subjects/norm/versions?normalize=true", json={"schema": reordered}).json()
    assert (n1["id"], n1["version"]) == (n2["id"], n2["version"])
    assert http.post("/subjects/norm?normalize=true", json={"schema": reordered}).json()["version"] == 1


def test_data_contracts_are_stored_verbatim(server: LiveServer) -> None:
    http = server.http
    metadata = {"tags": {"**.ssn": ["PII"]}, "properties": {"owner": "team-trips", "major": "1"},
                "sensitive": ["owner"]}
    rule_set = {"domainRules": [{"name": "checkSsnLen", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
                                 "expr": "size(message.ssn) == 9", "params": {"dlq.topic": "bad"},
                                 "onFailure": "DLQ", "disabled": False}]}
    r = http.post("/subjects/dc/versions", json={"schema": V1, "metadata": metadata, "ruleSet": rule_set})
    assert r.status_code == 200 and r.json()["metadata"] == metadata and r.json()["ruleSet"] == rule_set
    got = http.get("/subjects/dc/versions/1").json()
    assert (got["metadata"], got["ruleSet"]) == (metadata, rule_set)
    assert http.get(f"/schemas/ids/{got['id']}").json()["ruleSet"] == rule_set
    # a different rule set is different content: a new version with a new id
    other = http.post("/subjects/dc/versions", json={"schema": V1, "metadata": metadata, "ruleSet": {}}).json()
    assert other["id"] != got["id"] and other["version"] == 2
    # absent metadata/ruleSet are inherited from the latest version (Confluent)
    inherited = http.post("/subjects/dc/versions", json={"schema": V2}).json()
    assert inherited["metadata"] == metadata
    assert http.get("/subjects/dc/metadata?key=owner&value=team-trips").json()["version"] == 3
    assert http.get("/subjects/dc/metadata?key=owner&value=nobody").json()["error_code"] == 40403
