"""Acceptance 5: a property-based fuzz of every route over real HTTP finds no 5xx.

Hypothesis builds requests against a live server (real uvicorn, real sockets), once per store backend:

- ``test_fuzz_every_route_finds_no_5xx``: every route of the app (read from ``app.routes``, so a new route is fuzzed
  without editing this file) plus unknown paths, with odd path segments (version strings, ids, guids, subject and
  type names, raw percent escapes), any method, query parameters, bodies, and random Content-Type, Accept and
  Authorization headers (valid ones most of the time, so that the gate's refusals leave the routes enough requests);
- ``test_fuzz_schema_writes_find_no_5xx``: well-addressed registrations, lookups, compatibility tests, semantic types
  and subject configs, where most of the logic is, with bodies of the right shape and random or hostile contents:
  generated Avro-ish schemas (names, defaults, unions, named types, logical types, semantic types), plausible next
  versions of the seeded subjects, and JSON text with ``NaN``, ``Infinity``, ``1e999``, 5000-digit numbers, lone
  surrogates, NUL characters, deep nesting, invalid UTF-8.

Every answer must be

- below 500, from a server that is still up (a dropped connection fails the test);
- for 4xx: Confluent's body ``{"error_code": <int>, "message": <str>}`` whose code starts with the status;
- for a failed write: the store is unchanged, row for row.

The server runs with auth on (a bearer admin token on most requests), so the auth gate is fuzzed as well. The state
carries over from request to request (seeded subjects, versions, configs, semantic types; a successful ``PUT /mode``
is undone at once, so that READONLY or IMPORT do not turn every later write away).
``LAKEGATE_FUZZ_EXAMPLES`` sets the requests of each fuzz test per backend (default 600; e.g. 20000 for a long run),
``LAKEGATE_FUZZ_STATS=1`` prints the statuses answered per route (with ``pytest -s``).
"""

from __future__ import annotations

import json
import os
import string
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, create_engine, select
from starlette.routing import Route

from schema_registry.server.auth import hash_password, hash_token
from schema_registry.server.http import PRODUCED
from schema_registry.settings import Settings
from schema_registry.store import tables
from tests.schema_registry.conftest import PG_ENV, LiveServer, PgSchema, pg_base_url, record
from tests.schema_registry.conftest import field as avro_field

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::avro.errors.IgnoredLogicalType")]

EXAMPLES = int(os.environ.get("LAKEGATE_FUZZ_EXAMPLES", "600"))
TOKEN = "fuzz-admin-token-0123456789"
READ_TOKEN = "fuzz-read-token-0123456789"
WRITE_METHODS = {"POST", "PUT", "DELETE", "PATCH"}


# --- the server under test ---------------------------------------------------------------------------------------

@dataclass
class Target:
    """A live server with auth on, seeded data, and a row-level snapshot of its store."""

    live: LiveServer
    store_url: str
    routes: list[tuple[str, tuple[str, ...]]]
    subjects: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    guids: list[str] = field(default_factory=list)
    semantic_names: list[str] = field(default_factory=list)
    statuses: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    engine: Engine | None = None
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.live.url, timeout=30,
                                   limits=httpx.Limits(max_keepalive_connections=0))

    @cached_property
    def weighted_routes(self) -> list[tuple[str, tuple[str, ...]]]:
        """The routes, each repeated by its :func:`_weight`."""
        return [r for r in self.routes for _ in range(_weight(r[0], r[1]))]

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every registry table (``created_at`` included), in key order."""
        if self.engine is None:
            self.engine = create_engine(self.store_url)
        with self.engine.connect() as conn:
            return {t.name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
                    for t in tables.metadata.sorted_tables}


def _weight(template: str, methods: tuple[str, ...]) -> int:
    """How often a route is drawn: schema writes hold most of the logic (parsing, defaults, references, semantic
    types, compatibility checks, storing), other writes some, reads little."""
    if "POST" in methods and template.startswith(("/subjects/", "/compatibility/")):
        return 8
    return 3 if set(methods) & WRITE_METHODS else 1


def _auth_file(tmp: Path) -> Path:
    path = tmp / "auth.toml"
    path.write_text("\n".join([
        "[[users]]", 'name = "alice"', f'password_hash = "{hash_password("a-secret", iterations=1000)}"',
        'role = "write"', "",
        "[[tokens]]", 'name = "fuzz-admin"', f'sha256 = "{hash_token(TOKEN)}"', 'role = "admin"', "",
        "[[tokens]]", 'name = "fuzz-reader"', f'sha256 = "{hash_token(READ_TOKEN)}"', 'role = "read"',
    ]))
    return path


def _seed(target: Target) -> None:
    http = target.live.http
    trip = record("Trip", avro_field("a", "string"))
    trip2 = record("Trip", avro_field("a", "string"), avro_field("b", "int", default=0))
    outer = record("Outer", avro_field("t", "Trip"))
    aged = record("Person", avro_field("age", "int", semanticType="age_years"),
                  avro_field("score", "int", semanticType="fuzz_score"))
    seeds: list[tuple[str, dict[str, Any]]] = [
        ("fuzz-a", {"schema": trip}),
        ("fuzz-a", {"schema": trip2}),
        ("fuzz-b", {"schema": outer, "references": [{"name": "Trip", "subject": "fuzz-a", "version": 1}]}),
        ("fuzz-c", {"schema": '"string"'}),
        ("fuzz-d", {"schema": '"long"', "metadata": {"properties": {"owner": "x"}},
                    "ruleSet": {"domainRules": [{"name": "r1", "type": "CEL", "kind": "CONDITION"}]}}),
    ]
    assert http.put("/semantic-types/fuzz_score", json={"base_type": "int", "constraints": {"minimum": 0}}).is_success
    seeds.append(("fuzz-sem", {"schema": aged}))
    for subject, payload in seeds:
        r = http.post(f"/subjects/{subject}/versions", json=payload)
        assert r.status_code == 200, r.text
        target.ids.append(r.json()["id"])
        target.guids.append(r.json()["guid"])
        if subject not in target.subjects:
            target.subjects.append(subject)
    assert http.delete("/subjects/fuzz-c/versions/1").status_code == 200
    assert http.put("/config/fuzz-a", json={"compatibility": "BACKWARD_TRANSITIVE"}).is_success
    target.semantic_names += ["fuzz_score", "age_years", "email", "iso_currency"]


def _routes(live: LiveServer) -> list[tuple[str, tuple[str, ...]]]:
    def walk(routes: list[Any]) -> Iterator[tuple[str, tuple[str, ...]]]:
        for r in routes:
            if isinstance(r, Route):
                yield r.path, tuple(sorted(r.methods or {"GET"}))
            elif getattr(r, "original_router", None) is not None:  # FastAPI >= 0.13x keeps included routers whole
                yield from walk(r.original_router.routes)

    out = list(walk(live.app.routes))
    assert len(out) > 40, out  # the whole Confluent surface, /semantic-types and /metrics
    return sorted(out)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A seeded server with auth on, once per store backend (PostgreSQL needs ``LAKEGATE_TEST_PG_URL``)."""
    tmp = tmp_path_factory.mktemp("fuzz")
    pg: PgSchema | None = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'registry.db'}"
    else:
        base = pg_base_url()
        if base is None:
            pytest.skip(f"the PostgreSQL fuzz run needs {PG_ENV}")
        pg = PgSchema(base)
        url = pg.url
    live = LiveServer(Settings(store_url=url, port=0, auth_config=_auth_file(tmp)))
    live.http.headers["Authorization"] = f"Bearer {TOKEN}"
    t = Target(live=live, store_url=url, routes=_routes(live))
    try:
        _seed(t)
        yield t
    finally:
        t.client.close()
        if t.engine is not None:
            t.engine.dispose()
        live.stop()
        if pg is not None:
            pg.drop()


# --- JSON with hostile tokens --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Raw:
    """A token written verbatim into JSON text (NaN, 1e999, a lone surrogate escape, a deep nest, ...)."""

    text: str


def render(value: Any) -> str:
    """JSON text of ``value``, with :class:`Raw` tokens written verbatim."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render(v) for v in value) + "]"
    return json.dumps(value)


_HOSTILE = [
    "NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 5000, "-" + "9" * 400, '"\\ud800"', '"a\\udfff"',
    '"\\u0000"', '"\\ud83d\\ude00"', "[" * 3000 + "]" * 3000, "[" * 900 + "]" * 900, '{"a":' * 600 + "1" + "}" * 600,
    "2147483648", "-2147483649", "9223372036854775808", "1.5", "-0", "true", "null", '""', '" "',
]
HOSTILE = st.integers(0, len(_HOSTILE) - 1).map(lambda i: Raw(_HOSTILE[i]))  # (a sampled_from would repr 20 kB)

TEXT = st.text(max_size=12) | st.sampled_from(["", " ", "a", "R", "__GLOBAL", "__EMPTY", "x/y", "\x00", "\n",
                                              "é", "😀", ":.ctx:s", "latest", "-1"])
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
           | TEXT)
JSON_VALUES = st.recursive(SCALARS | HOSTILE, lambda c: st.lists(c, max_size=4) | st.dictionaries(TEXT, c, max_size=4),
                           max_leaves=12)
AVRO_NAMES = st.sampled_from(["a", "b", "c", "R", "Trip", "Outer", "E", "F", "ns.R", "1bad", "", "a-b", "string",
                              "_x", "é"])
PRIMITIVE_NAMES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
TYPE_NAMES = st.sampled_from([*PRIMITIVE_NAMES, "strnig", "record", "enum", "Trip", "array", "map", "fixed"])
LOGICAL = st.sampled_from(["timestamp-millis", "timestamp-micros", "date", "decimal", "uuid", "local-timestamp-millis",
                           "nonsense"])
SEMANTIC_NAMES = st.sampled_from(["age_years", "email", "iso_currency", "timestamp_not_future", "fuzz_score",
                                  "nope", "", "latitude"])


def _extend_avro(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    fields = st.lists(st.fixed_dictionaries(
        {"name": AVRO_NAMES, "type": children},
        optional={"default": JSON_VALUES, "semanticType": SEMANTIC_NAMES | JSON_VALUES, "doc": TEXT,
                  "aliases": st.lists(AVRO_NAMES, max_size=2) | JSON_VALUES,
                  "order": st.sampled_from(["ascending", "x"])}),
        max_size=4)
    return st.one_of(
        st.lists(children, max_size=3),  # a union
        st.fixed_dictionaries({"type": st.just("array"), "items": children}),
        st.fixed_dictionaries({"type": st.just("map"), "values": children}),
        st.fixed_dictionaries({"type": st.sampled_from(["record", "error"]), "name": AVRO_NAMES, "fields": fields},
                              optional={"namespace": TEXT, "aliases": st.lists(AVRO_NAMES, max_size=2) | JSON_VALUES,
                                        "default": JSON_VALUES}),
        st.fixed_dictionaries({"type": st.just("enum"), "name": AVRO_NAMES,
                               "symbols": st.lists(AVRO_NAMES, max_size=3) | JSON_VALUES},
                              optional={"default": JSON_VALUES}),
        st.fixed_dictionaries({"type": st.just("fixed"), "name": AVRO_NAMES,
                               "size": st.integers(-2, 2**40) | JSON_VALUES}),
    )


AVRO_LEAVES = (TYPE_NAMES | st.fixed_dictionaries({"type": TYPE_NAMES},
                                                  optional={"logicalType": LOGICAL, "precision": JSON_VALUES,
                                                            "scale": JSON_VALUES})
               | HOSTILE)
AVRO = st.recursive(AVRO_LEAVES, _extend_avro, max_leaves=8)


@st.composite
def schema_texts(draw: st.DrawFn, target: Target) -> str:
    """A schema text: a generated Avro-ish document, a plausible next version of a seeded subject, or junk."""
    kind = draw(st.sampled_from(["avro", "avro", "evolve", "evolve", "evolve", "json", "text"]))
    if kind == "avro":
        return render(draw(AVRO))
    if kind == "evolve":
        # the seeded Trip record plus fields with (mostly valid) defaults: often a real new, compatible version
        extra = draw(st.lists(st.fixed_dictionaries(
            {"name": st.sampled_from(["c", "d", "e", "f"]),
             "type": st.sampled_from(["int", "long", "string", "double", ["null", "string"]])},
            optional={"default": mostly(st.sampled_from([0, "", None, 1.5, "x"]), JSON_VALUES),
                      "semanticType": SEMANTIC_NAMES, "aliases": mostly(st.just(["b"]), JSON_VALUES)}),
            max_size=2, unique_by=lambda f: f["name"]))
        base = [{"name": "a", "type": "string"}, {"name": "b", "type": "int", "default": 0}]
        return render({"type": "record", "name": "Trip", "fields": base + extra})
    if kind == "json":
        return render(draw(JSON_VALUES))
    return draw(TEXT)


# --- requests ------------------------------------------------------------------------------------------------------

@dataclass
class Request:
    """One generated HTTP request."""

    template: str
    method: str
    path: str
    params: list[tuple[str, str]]
    headers: dict[str, str]
    content: bytes | None

    def describe(self) -> str:
        body = None if self.content is None else self.content[:300]
        return f"{self.method} {self.path} params={self.params} headers={self.headers} body={body!r}"


RAW_ESCAPES = st.sampled_from(["%00", "%FF", "%2F", "%25", "%20", "%C3%A9", "%ED%A0%80", "..", ".", "%2e%2e",
                               "a%00b", "%0A", "~", "%7B%7D"])
VERSIONS = st.sampled_from(["latest", "LATEST", " latest", "-1", "0", "1", "2", "3", "-2", "2147483647",
                            "2147483648", "99999999999999999999", "1.5", "1e3", "+1", " 1", "0x1", "\u0661",
                            "\uff11", "1_0", "", "-0", "NaN", "null"]) | st.integers(-(2**70), 2**70).map(str)


def _segment(draw: st.DrawFn, param: str, target: Target, *, tame: bool) -> str:
    """One path segment for a route parameter, URL-encoded (or a raw escape); ``tame``: mostly a valid one."""
    if not tame and draw(st.integers(0, 9)) == 0:
        return draw(RAW_ESCAPES)
    if param == "subject" and tame:
        text = draw(mostly(st.sampled_from([*target.subjects, "fuzz-new", "fuzz-new-2", "trips-value"]), TEXT))
    elif param == "version":
        text = draw(mostly(st.sampled_from(["latest", "1", "2", "-1"]), VERSIONS | TEXT) if tame else VERSIONS | TEXT)
    elif param == "schema_id":
        text = draw(st.sampled_from([str(i) for i in target.ids]) | VERSIONS | TEXT)
    elif param == "guid":
        text = draw(st.sampled_from(target.guids) | st.uuids().map(str) | TEXT
                    | st.sampled_from([g.replace("-", "").upper() for g in target.guids]))
    elif param == "subject":
        text = draw(st.sampled_from(target.subjects) | TEXT)
    elif param == "name":
        text = draw(st.sampled_from(target.semantic_names) | SEMANTIC_NAMES | TEXT)
    else:
        text = draw(TEXT)
    return quote(text, safe="") or "%20"


def _fill(draw: st.DrawFn, template: str, target: Target, *, tame: bool = False) -> str:
    parts = []
    for part in template.split("/"):
        braced = part.startswith("{") and part.endswith("}")
        parts.append(_segment(draw, part[1:-1], target, tame=tame) if braced else part)
    return "/".join(parts)


QUERY_KEYS = st.sampled_from(["deleted", "deletedOnly", "deletedAsNegative", "permanent", "normalize", "force",
                              "verbose", "offset", "limit", "subjectPrefix", "defaultToGlobal", "latestOnly",
                              "subject", "key", "value", "format", "fetchMaxId", "lookupDeletedSchema"]) | TEXT
QUERY_VALUES = st.sampled_from(["true", "false", "TRUE", "True", "1", "0", "", "-1", "5", "99999999999999999999",
                                "abc", ":*:", "fuzz-", "1e3", "yes", "\x00"]) | TEXT
HEADER_CHARS = string.ascii_letters + string.digits + string.punctuation + " \t"


def mostly(good: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` about seven times in eight, else ``odd`` (so the gate's refusals leave the routes enough requests).

    The odd branch sits on an inner value: Hypothesis favours the bounds of an integer range.
    """
    return st.integers(0, 7).flatmap(lambda i: odd if i == 3 else good)


CONTENT_TYPES = mostly(
    st.sampled_from([None, "application/vnd.schemaregistry.v1+json", "application/json",
                     "application/vnd.schemaregistry+json", "application/octet-stream"]),
    st.sampled_from(["application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "application/xml",
                     "multipart/form-data; boundary=x", "", ";", "application/json;;", "*/*"])
    | st.text(alphabet=HEADER_CHARS, max_size=20).map(str.strip))
ACCEPTS = mostly(
    st.sampled_from([None, "*/*", "application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                     "application/json", "application/*"]),
    st.sampled_from(["text/html", "application/json;q=0", "application/json;q=abc", "application/xml, */*;q=0.1",
                     "application/json;q=nan", "application/json;q=1e999, text/plain", "", ",",
                     "application/vnd.schemaregistry.v1+json;q=0.5, application/json;q=0.9", "*/*;q=-1"])
    | st.text(alphabet=HEADER_CHARS, max_size=30).map(str.strip))
AUTHS = mostly(
    st.just(f"Bearer {TOKEN}"),
    st.sampled_from([f"Bearer {READ_TOKEN}", None, "Bearer", "Bearer nope", "Basic", "Basic !!!",
                     "Basic YWxpY2U6YS1zZWNyZXQ=", "Basic YWxpY2U6d3Jvbmc=", "Basic bm9jb2xvbg==", "Basic //79",
                     "Digest x", f"bearer   {TOKEN}", f"BEARER {TOKEN}"])
    | st.text(alphabet=HEADER_CHARS, max_size=30).map(str.strip))


def extras(draw: st.DrawFn, value: dict[str, Any], optional: dict[str, st.SearchStrategy[Any]]) -> None:
    """Add each optional key to ``value`` one time in eight."""
    for key, strategy in optional.items():
        if draw(st.integers(0, 7)) == 3:
            value[key] = draw(strategy)


@st.composite
def bodies(draw: st.DrawFn, template: str, target: Target) -> bytes | None:
    """A request body for a route: mostly its own shape with random contents, sometimes anything."""
    kind = draw(mostly(st.just("shaped"), st.sampled_from(["json", "bytes", "none"])))
    if kind == "none":
        return None
    if kind == "bytes":
        return draw(st.binary(max_size=64) | st.sampled_from([
            b"{", b'{"schema": "\\"string\\""', b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"   ", b"[]", b"null", b'"x"',
            b'{"schema": "\\"string\\"", "schema": 5}', b'{"compatibility": "FULL"}\x00',
        ]))
    if kind == "json":
        return render(draw(JSON_VALUES)).encode()
    value: Any
    if template.startswith(("/subjects", "/compatibility")):
        value = {"schema": draw(mostly(schema_texts(target), JSON_VALUES))} if draw(st.integers(0, 9)) else {}
        extras(draw, value, {
            "schemaType": st.sampled_from(["AVRO", "avro", "JSON", "PROTOBUF", None]) | JSON_VALUES,
            "references": st.lists(st.fixed_dictionaries({}, optional={
                "name": st.sampled_from(["Trip", "Outer"]) | TEXT | JSON_VALUES,
                "subject": st.sampled_from(target.subjects) | TEXT | JSON_VALUES,
                "version": st.sampled_from([1, 2, -1, 0]) | st.integers(-(2**70), 2**70) | JSON_VALUES}),
                max_size=2) | JSON_VALUES,
            "metadata": st.fixed_dictionaries({}, optional={
                "properties": st.dictionaries(TEXT, TEXT | JSON_VALUES, max_size=2) | JSON_VALUES,
                "tags": JSON_VALUES, "sensitive": JSON_VALUES}) | JSON_VALUES,
            "ruleSet": st.fixed_dictionaries({}, optional={
                "domainRules": st.lists(st.fixed_dictionaries({}, optional={
                    "name": TEXT, "type": TEXT, "kind": JSON_VALUES, "mode": JSON_VALUES}), max_size=2)
                | JSON_VALUES, "migrationRules": JSON_VALUES}) | JSON_VALUES,
            "id": st.integers(-(2**70), 2**70) | JSON_VALUES,
            "version": st.integers(-(2**70), 2**70) | JSON_VALUES,
            "extra": JSON_VALUES,
        })
    elif template.startswith("/config"):
        value = {"compatibility": draw(mostly(
            st.sampled_from(["BACKWARD", "full", "NONE", "FORWARD_TRANSITIVE", "BACKWARD_TRANSITIVE"]),
            st.sampled_from(["nope", "", " full ", None]) | JSON_VALUES))}
        extras(draw, value, {
            "compatibilityLevel": JSON_VALUES, "normalize": st.booleans() | JSON_VALUES,
            "alias": JSON_VALUES, "defaultMetadata": JSON_VALUES, "overrideRuleSet": JSON_VALUES,
            "defaultRuleSet": JSON_VALUES, "validateFields": JSON_VALUES, "compatibilityGroup": JSON_VALUES})
    elif template.startswith("/mode"):
        value = {"mode": draw(mostly(st.sampled_from(["READWRITE", "import", "READONLY", "FORWARD"]),
                                     st.sampled_from(["nope", "", None]) | JSON_VALUES))}
    elif template.startswith("/semantic-types"):
        value = {"base_type": draw(mostly(st.sampled_from(["int", "long", "double", "string", "bytes"]),
                                          st.sampled_from(["uuid", "", None]) | JSON_VALUES))}
        constraints: dict[str, Any] = {}
        extras(draw, constraints, {
            "minimum": st.integers(-(2**70), 2**70) | st.floats() | JSON_VALUES,
            "maximum": st.integers(-(2**70), 2**70) | st.floats() | JSON_VALUES,
            "exclusive_minimum": st.booleans() | JSON_VALUES,
            "pattern": st.sampled_from(["[a-z]+", "([", "\\d{2}"]) | TEXT,
            "enum": st.lists(TEXT | st.floats() | st.integers(), max_size=3) | JSON_VALUES,
            "min_length": st.integers(-(2**70), 2**70) | JSON_VALUES, "max_length": JSON_VALUES,
            "not_null": st.booleans() | JSON_VALUES, "not_future": st.booleans() | JSON_VALUES,
            "json_schema": st.sampled_from([{"type": "object"}, {"type": 12}, {"$schema": "nope"}]) | JSON_VALUES,
        })
        value["constraints"] = constraints
        extras(draw, value, {"logical_types": st.lists(LOGICAL, max_size=2) | JSON_VALUES,
                             "description": TEXT | JSON_VALUES, "name": JSON_VALUES, "version": JSON_VALUES,
                             "constraints": JSON_VALUES})
    else:
        value = draw(JSON_VALUES)
    return render(value).encode()


@st.composite
def requests(draw: st.DrawFn, target: Target) -> Request:
    """A request for a route of the app (or an unknown path), with random method, query, body and headers."""
    template, methods = draw(st.sampled_from(target.weighted_routes))
    if draw(st.integers(0, 14)) == 0:
        template = "/" + "/".join(draw(st.lists(st.sampled_from(["subjects", "schemas", "ids", "versions", "x",
                                                                 "{subject}", "config", "mode", ""]), max_size=4)))
    method = draw(st.sampled_from(methods) if draw(st.integers(0, 5)) else
                  st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]))
    headers = {}
    for name, strategy in (("Content-Type", CONTENT_TYPES), ("Accept", ACCEPTS), ("Authorization", AUTHS)):
        value = draw(strategy)
        if value is not None:
            headers[name] = value
    content = draw(bodies(template, target)) if method in WRITE_METHODS or draw(st.integers(0, 9)) == 0 else None
    params = draw(st.lists(st.tuples(QUERY_KEYS, QUERY_VALUES), max_size=3))
    return Request(template, method, _fill(draw, template, target), params, headers, content)


SCHEMA_WRITES = [("POST", "/subjects/{subject}/versions"), ("POST", "/subjects/{subject}"),
                 ("POST", "/compatibility/subjects/{subject}/versions"),
                 ("POST", "/compatibility/subjects/{subject}/versions/{version}"),
                 ("PUT", "/semantic-types/{name}"), ("PUT", "/config/{subject}")]


@st.composite
def schema_writes(draw: st.DrawFn, target: Target) -> Request:
    """A well-addressed request that carries a schema (or a type or config) to the logic behind the gate:
    registrations, lookups, compatibility tests, semantic types and subject configs, with valid headers."""
    method, template = draw(st.sampled_from(SCHEMA_WRITES))
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json", "Authorization": f"Bearer {TOKEN}"}
    params = draw(st.lists(st.tuples(st.sampled_from(["normalize", "force", "verbose", "deleted", "permanent"]),
                                     st.sampled_from(["true", "false"])), max_size=2))
    return Request(template, method, _fill(draw, template, target, tame=True), params, headers,
                   draw(bodies(template, target)))


# --- the property --------------------------------------------------------------------------------------------------

def send(target: Target, req: Request) -> httpx.Response:
    """Send on a fresh connection (no keep-alive: one request's fate cannot leak into the next)."""
    client = target.client
    # an absolute URL: httpx refuses a relative one whose path starts with '//' (generated unknown paths can)
    request = client.build_request(req.method, target.live.url + req.path, params=tuple(req.params),
                                   content=req.content)
    # build_request adds its own Accept / Content-Type defaults; ours replace them exactly
    for name in ("Content-Type", "Accept", "Authorization"):
        request.headers.pop(name, None)
    for name, value in req.headers.items():
        request.headers[name] = value
    return client.send(request)


def check(target: Target, req: Request) -> None:
    """Send one request and assert the fuzz property."""
    before = target.snapshot() if req.method in WRITE_METHODS else None
    try:
        r = send(target, req)
    except (httpx.LocalProtocolError, httpx.InvalidURL):
        reject()  # a request the client refuses to send (h11's header rules, URL rules): nothing reached the server
    except httpx.HTTPError as e:
        raise AssertionError(f"the server dropped the request ({e!r}): {req.describe()}") from e
    target.statuses[f"{req.method} {req.template}"][r.status_code] += 1
    if r.is_success and req.method == "PUT" and req.template.startswith("/mode"):
        target.live.http.delete(req.path)  # READONLY or IMPORT would turn every later write away
    where = f"{r.status_code} {r.text[:300]!r} for {req.describe()}"
    assert r.status_code < 500, where
    if r.status_code >= 400:
        if req.method != "HEAD":
            assert r.headers.get("content-type", "").split(";")[0] in PRODUCED, where
            data = r.json()
            assert isinstance(data, dict) and set(data) == {"error_code", "message"}, where
            assert isinstance(data["error_code"], int) and isinstance(data["message"], str), where
            assert str(data["error_code"]).startswith(str(r.status_code)), where
        if before is not None:
            assert target.snapshot() == before, f"a failed write changed the store: {where}"
    elif 200 <= r.status_code < 300 and req.method != "HEAD" and not req.path.startswith("/metrics"):
        json.loads(r.content)  # every success is a JSON document


FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                HealthCheck.filter_too_much])


def _report(target: Target) -> None:
    if os.environ.get("LAKEGATE_FUZZ_STATS"):  # where the requests went: method and route -> status counts
        for route, counts in sorted(target.statuses.items()):
            print(f"{route:<60} {dict(sorted(counts.items()))}")
    # the server survived and still answers normally
    assert target.live.http.get("/").status_code == 200
    assert target.live.http.post("/subjects/fuzz-after/versions", json={"schema": '"string"'}).status_code == 200


@pytest.mark.slow
def test_fuzz_every_route_finds_no_5xx(target: Target) -> None:
    """Anything on any route: methods, segments, query, bodies, Content-Type, Accept, credentials."""
    @FUZZ_SETTINGS
    @given(req=requests(target))
    def fuzz(req: Request) -> None:
        check(target, req)

    fuzz()
    _report(target)


@pytest.mark.slow
def test_fuzz_schema_writes_find_no_5xx(target: Target) -> None:
    """Well-addressed registrations, lookups, compatibility tests, semantic types and configs with hostile bodies."""
    @FUZZ_SETTINGS
    @given(req=schema_writes(target))
    def fuzz(req: Request) -> None:
        check(target, req)

    fuzz()
    _report(target)


def test_generated_requests_cover_every_route(target: Target) -> None:
    """Every route template of the app is in the fuzzer's catalogue, including the lakegate extensions."""
    paths = {p for p, _ in target.routes}
    for expected in ("/subjects/{subject}/versions/{version}", "/schemas/ids/{schema_id}", "/config/{subject}",
                     "/mode/{subject}", "/semantic-types/{name}/versions/{version}", "/metrics",
                     "/compatibility/subjects/{subject}/versions/{version}", "/schemas/guids/{guid}/ids"):
        assert expected in paths
    assert uuid.UUID(target.guids[0])
