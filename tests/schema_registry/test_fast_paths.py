"""The two routes answered in front of the framework (``GET /schemas/ids/{id}``, ``POST /subjects/{s}/versions``,
see ``schema_registry/server/fastpath.py``) answer exactly as the framework's routes: same bytes, same media types,
same errors, same metrics, and never a stale answer when another server on the same store changes things."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from schema_registry.server.http import GENERIC, JSON, V1
from schema_registry.settings import Settings
from tests.schema_registry.conftest import LiveServer, body, field, record

pytestmark = pytest.mark.integration

S1 = record("R", field("a", "string"))
S2 = record("R", field("a", "string"), field("b", "int", default=0))
BREAKING = record("R", field("a", "int"))


@pytest.fixture
def live(store_url: str) -> Iterator[LiveServer]:
    """A server on each store backend."""
    server = LiveServer(Settings(store_url=store_url, port=0, max_body_bytes=64 * 1024))
    yield server
    server.stop()


@pytest.mark.parametrize("accept", [None, V1, GENERIC, JSON, "*/*"])
def test_schema_by_id_matches_the_framework_route(live: LiveServer, accept: str | None) -> None:
    """``/schemas/ids/+<id>`` is not a plain id, so the framework's route answers it: the bytes must be the same."""
    sid = live.http.post("/subjects/s/versions", json=body(S1, metadata={"properties": {"owner": "x"}})).json()["id"]
    headers = {"Accept": accept} if accept else {}
    for _ in range(2):  # the first answer fills the body cache, the second comes from it
        fast = live.http.get(f"/schemas/ids/{sid}", headers=headers)
        framework = live.http.get(f"/schemas/ids/+{sid}", headers=headers)
        assert fast.status_code == framework.status_code == 200
        assert fast.content == framework.content
        assert fast.headers["content-type"] == framework.headers["content-type"]
        assert fast.headers["content-length"] == framework.headers["content-length"]
    missing = live.http.get("/schemas/ids/424242", headers=headers)
    assert missing.status_code == 404 and missing.json() == {"error_code": 40403, "message": "Schema 424242 not found"}
    assert live.http.get("/schemas/ids/4294967296", headers=headers).json()["error_code"] == 40403  # > 32 bits
    assert live.http.get("/schemas/ids/abc", headers=headers).json()["error_code"] == 40403


def test_schema_by_id_follows_deletes(live: LiveServer) -> None:
    http = live.http
    sid = http.post("/subjects/s/versions", json=body(S1)).json()["id"]
    assert http.get(f"/schemas/ids/{sid}").status_code == 200  # cached now
    assert http.delete("/subjects/s/versions/1").status_code == 200
    assert http.get(f"/schemas/ids/{sid}").status_code == 200  # soft-deleted versions still serve the id
    assert http.delete("/subjects/s/versions/1?permanent=true").status_code == 200
    r = http.get(f"/schemas/ids/{sid}")
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    assert http.post("/subjects/t/versions", json=body(S1)).json()["id"] == sid  # the same content, the same id
    assert json.loads(http.get(f"/schemas/ids/{sid}").json()["schema"]) == json.loads(S1)


def test_two_servers_on_one_store_never_serve_stale_answers(store_url: str) -> None:
    """Each server has its own caches (as separate processes would); what one changes, the other answers at once."""
    a = LiveServer(Settings(store_url=store_url, port=0))
    b = LiveServer(Settings(store_url=store_url, port=0))
    try:
        sid = a.http.post("/subjects/s/versions", json=body(S1)).json()["id"]
        assert b.http.get(f"/schemas/ids/{sid}").status_code == 200
        assert a.http.get(f"/schemas/ids/{sid}").status_code == 200
        assert b.http.delete("/subjects/s").status_code == 200
        assert b.http.delete("/subjects/s?permanent=true").status_code == 200
        assert a.http.get(f"/schemas/ids/{sid}").status_code == 404
        # config and history written through one server apply to registrations through the other
        assert a.http.post("/subjects/u/versions", json=body(S1)).status_code == 200
        assert b.http.put("/config/u", json={"compatibility": "BACKWARD_TRANSITIVE"}).status_code == 200
        assert b.http.post("/subjects/u/versions", json=body(S2)).json()["version"] == 2
        r = a.http.post("/subjects/u/versions", json=body(BREAKING))
        assert r.status_code == 409, r.text
        assert b.http.put("/mode/u", json={"mode": "READONLY"}).status_code == 200
        assert a.http.post("/subjects/u/versions", json=body(record("R", field("x", "int", default=1)))
                           ).json()["error_code"] == 42205
    finally:
        a.stop()
        b.stop()


def test_register_errors_match_the_framework(live: LiveServer) -> None:
    http = live.http
    r = http.post("/subjects/s/versions", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.json() == {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"}
    r = http.post("/subjects/s/versions", content=b'{"schema": NaN}', headers={"Content-Type": JSON})
    assert r.status_code == 400 and r.json()["error_code"] == 400
    for raw in (b"", b"  ", b"[]", b'"x"'):
        r = http.post("/subjects/s/versions", content=raw, headers={"Content-Type": V1})
        assert r.status_code == 422 and r.json()["error_code"] == 42201, raw
    r = http.post("/subjects/s/versions", json={"schema": 5})
    assert r.status_code == 422 and r.json()["error_code"] == 42201
    # a chunked body (no Content-Length for the gate to refuse early) over the limit
    big = json.dumps({"schema": S1, "pad": "x" * 70_000}).encode()
    r = http.post("/subjects/s/versions", content=iter([big[:1000], big[1000:]]), headers={"Content-Type": V1})
    assert r.status_code == 413 and r.json()["error_code"] == 413
    r = http.post("/subjects/s/versions", json=body(S1), headers={"Accept": "text/html"})
    assert r.status_code == 406
    assert http.get("/subjects").json() == []  # nothing was stored by any of these


def test_register_flags_and_media_types(live: LiveServer) -> None:
    http = live.http
    spaced = '{ "fields": [{"type": "string", "name": "a"}], "name": "R", "type": "record" }'
    r = http.post("/subjects/s/versions?normalize=TRUE", json=body(spaced), headers={"Accept": JSON})
    assert r.status_code == 200 and r.headers["content-type"] == JSON
    assert r.json()["schema"] == '{"name":"R","type":"record","fields":[{"name":"a","type":"string"}]}'
    plain = http.post("/subjects/p/versions", json=body(spaced)).json()["schema"]  # not normalized: key order kept
    assert plain == '{"fields":[{"type":"string","name":"a"}],"name":"R","type":"record"}'
    assert set(r.json()) == {"id", "version", "guid", "schema"}
    assert http.post("/subjects/s/versions", json=body(BREAKING)).status_code == 409
    forced = http.post("/subjects/s/versions?force=true", json=body(BREAKING))
    assert forced.status_code == 200 and forced.json()["version"] == 2
    again = http.post("/subjects/s/versions", json=body(BREAKING))  # already live: the existing version
    assert again.json()["version"] == 2 and again.json()["id"] == forced.json()["id"]


def test_fast_paths_are_counted_in_metrics(live: LiveServer) -> None:
    http = live.http
    sid = http.post("/subjects/s/versions", json=body(S1)).json()["id"]
    http.get(f"/schemas/ids/{sid}")
    http.get(f"/schemas/ids/{sid}")
    http.get("/schemas/ids/999")
    text = http.get("/metrics").text
    assert re.search(r'lakegate_registry_requests_total\{method="GET",route="/schemas/ids/\{schema_id\}",'
                     r'status="200"\} 2\.0', text)
    assert re.search(r'lakegate_registry_requests_total\{method="GET",route="/schemas/ids/\{schema_id\}",'
                     r'status="404"\} 1\.0', text)
    assert re.search(r'lakegate_registry_requests_total\{method="POST",route="/subjects/\{subject\}/versions",'
                     r'status="200"\} 1\.0', text)
