"""The two hottest routes answered without the framework: ``GET /schemas/ids/{id}`` (every deserializer that meets a
new id asks it) and ``POST /subjects/{subject}/versions`` (every serializer registering its schema).

The framework's routes do the same work inside ~0.5 ms of routing, middleware, dependency solving and response
objects per request. Here the ASGI gate (:mod:`schema_registry.server.app`, which has already negotiated the media
type, checked the declared body size and the credentials) hands matching requests to :class:`FastPaths`, which
answers them with the same validation, the same registry calls, byte-identical bodies and the same Confluent
errors. Anything else (other ids, other methods, trailing slashes, sub-resources, a ``root_path``) goes on to the
framework's routes.

```
GET /schemas/ids/<1..10 digits, <= 2^31-1> ─► body of the id cached? ──no──► Registry.schema (worker thread),
                                                   │ yes                       render, cache ─► 200
                                                   ▼
                                  store.schema_in_use(id) ──no──► 404 / 40403
                                                   │ yes
                                                   ▼
                                                  200 (the cached bytes)

POST /subjects/<subject>/versions ─► Content-Type (415) ─► read the body (413) ─► strict JSON (400)
                                  ─► RegisterRequest (42201) ─► Registry.register (worker thread) ─► 200
```

The body of an id never changes (content rows are never updated or deleted), so its cache cannot go stale, in this
process or any other sharing the store; whether a version still uses the id can change (permanent deletes), so that
is read from the store on every request. On SQLite the probe runs on the event loop (a WAL reader never waits for
writers, and the probe costs ~8 µs against ~70 µs for a worker-thread hand-off); on PostgreSQL it is a network
round trip and goes to a worker thread.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
from starlette.datastructures import QueryParams
from starlette.types import Receive, Scope, Send

from schema_registry.cache import Lru
from schema_registry.errors import SchemaNotFoundError, SchemaRegistryError
from schema_registry.model import INT32_MAX, StoredSchema, SubjectVersion
from schema_registry.registry import Registry
from schema_registry.server.http import check_content_type, decode_json_body, error_response, flag_value, require_object
from schema_registry.server.shapes import register_request, register_response, schema_string

logger = logging.getLogger(__name__)

SCHEMA_BY_ID_ROUTE = "/schemas/ids/{schema_id}"
REGISTER_ROUTE = "/subjects/{subject}/versions"
BODY_CACHE_BYTES = 64 * 1024 * 1024
"""Budget of the prerendered ``GET /schemas/ids/{id}`` bodies, in bytes."""

_SCHEMA_BY_ID = re.compile(r"/schemas/ids/([0-9]{1,10})")
_REGISTER = re.compile(r"/subjects/([^/]+)/versions")

Handler = Callable[[str, Scope, Receive, Send], Awaitable[None]]
"""A fast-path answer: (negotiated media type, scope, receive, send)."""


def render_json(content: object) -> bytes:
    """JSON bytes exactly as the framework's ``JSONResponse`` renders them."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


class _Disconnected(Exception):
    """The client went away before its request body was complete."""


class FastPaths:
    """Answers the hottest routes in front of the framework; :meth:`match` says which requests it takes."""

    def __init__(self, registry: Registry, *, max_body_bytes: int) -> None:
        self.registry = registry
        self.max_body_bytes = max_body_bytes
        self._bodies: Lru[int, bytes] = Lru(BODY_CACHE_BYTES, weigh=lambda body: len(body) + 128)
        self._inline = bool(getattr(registry.store, "local_reads", False))

    def match(self, scope: Scope) -> tuple[str, Handler] | None:
        """The route template (the metrics label) and the handler of a request this path answers, or None."""
        if scope.get("root_path"):
            return None
        method, path = scope["method"], scope["path"]
        if method == "GET":
            m = _SCHEMA_BY_ID.fullmatch(path)
            if m is not None and int(m.group(1)) <= INT32_MAX:
                schema_id = int(m.group(1))
                return SCHEMA_BY_ID_ROUTE, lambda media, sc, rc, sd: self._schema_by_id(schema_id, media, sc, rc, sd)
        elif method == "POST":
            m = _REGISTER.fullmatch(path)
            if m is not None:
                subject = m.group(1)
                return REGISTER_ROUTE, lambda media, sc, rc, sd: self._register(subject, media, sc, rc, sd)
        return None

    # --- GET /schemas/ids/{id} ---------------------------------------------------------------------------------

    async def _schema_by_id(self, schema_id: int, media: str, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(self._schema_body(schema_id), media, scope, receive, send)

    async def _schema_body(self, schema_id: int) -> bytes:
        body = self._bodies.get(schema_id)
        if body is None:
            stored = await anyio.to_thread.run_sync(self.registry.schema, schema_id)
            body = render_json(schema_string(stored))
            self._bodies.put(schema_id, body)
            return body
        in_use = (self.registry.schema_in_use(schema_id) if self._inline
                  else await anyio.to_thread.run_sync(self.registry.schema_in_use, schema_id))
        if not in_use:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return body

    # --- POST /subjects/{subject}/versions ---------------------------------------------------------------------

    async def _register(self, subject: str, media: str, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            check_content_type(_header(scope, b"content-type"))
            body = decode_json_body(await _read_body(receive), self.max_body_bytes)
        except _Disconnected:
            return
        except SchemaRegistryError as e:
            await self._fail(e, media, scope, receive, send)
            return
        query = QueryParams(scope.get("query_string", b""))
        normalize, force = flag_value(query.get("normalize")), flag_value(query.get("force"))
        await self._answer(anyio.to_thread.run_sync(self._register_sync, subject, body, normalize, force),
                           media, scope, receive, send)

    def _register_sync(self, subject: str, body: Any, normalize: bool, force: bool) -> bytes:
        req = register_request(require_object(body, "register"))
        row: SubjectVersion
        stored: StoredSchema
        row, stored = self.registry.register(subject, req, normalize=normalize, force=force)
        return render_json(register_response(row, stored))

    # --- answers -----------------------------------------------------------------------------------------------

    async def _answer(self, body: Awaitable[bytes], media: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the awaited body with 200, or the Confluent error of what it raised."""
        try:
            data = await body
        except SchemaRegistryError as e:
            await self._fail(e, media, scope, receive, send)
            return
        except Exception:
            logger.exception("unexpected error on %s %s", scope["method"], scope["path"])
            await self._fail(SchemaRegistryError("Internal Server Error"), media, scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(data)).encode("latin-1")),
                                (b"content-type", media.encode("latin-1"))]})
        await send({"type": "http.response.body", "body": data})

    async def _fail(self, error: SchemaRegistryError, media: str, scope: Scope, receive: Receive, send: Send) -> None:
        if error.http_status >= 500:
            logger.error("%s %s failed: %s", scope["method"], scope["path"], error.message)
        await error_response(error, media)(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (as Starlette's ``Headers.get``)."""
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


async def _read_body(receive: Receive) -> bytes:
    """The whole request body.

    Raises:
        _Disconnected: the client disconnected first.
    """
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
