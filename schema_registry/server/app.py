"""The FastAPI application: Confluent REST API, ``/semantic-types``, ``/metrics``, auth, Confluent error bodies.

Each request passes one ASGI gate before routing::

    request ─► media type (406) ─► body size (413) ─► auth (401/403/429, when configured) ─► route ─► response
                                                      metrics: count + latency by route template ◄─┘

where ``GET /schemas/ids/{id}`` and ``POST /subjects/{subject}/versions`` are answered right after the gate
(:mod:`schema_registry.server.fastpath`), and everything else by the framework's routes.

Every error, ours or the framework's (unknown route, wrong method), leaves as Confluent's
``{"error_code": <int>, "message": "<text>"}``.
"""

from __future__ import annotations

import http
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schema_registry.errors import HttpError, SchemaRegistryError
from schema_registry.registry import Registry
from schema_registry.server import routes_config, routes_schemas, routes_semantic, routes_subjects
from schema_registry.server.auth import Authenticator, required_role
from schema_registry.server.fastpath import FastPaths
from schema_registry.server.http import V1, error_response, negotiate
from schema_registry.server.metrics import CONTENT_TYPE, Metrics
from schema_registry.server.openapi import openapi_document
from schema_registry.settings import Settings
from schema_registry.store import RegistryStore, open_store

logger = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, store: RegistryStore | None = None,
               authenticator: Authenticator | None = None) -> FastAPI:
    """Build the registry app.

    Args:
        settings: server settings (store URL, auth config, limits); defaults to ``Settings()``.
        store: an already open store to use instead of opening ``settings.store_url``.
        authenticator: the auth to use instead of loading ``settings.auth_config`` (auth is on when either is set).

    Returns:
        The ASGI app; the store is closed when the app shuts down.

    Raises:
        StoreError: the store cannot be opened; SettingsError: the auth config is invalid.
    """
    settings = settings or Settings()
    if authenticator is None and settings.auth_config:
        authenticator = Authenticator.from_file(settings.auth_config)
    store = store or open_store(settings.store_url)
    registry = Registry(store, settings)
    metrics = Metrics(registry.counts)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        store.close()

    app = FastAPI(title="lakegate schema registry", version="0.1.0", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None)
    app.state.settings = settings
    app.state.registry = registry
    app.state.metrics = metrics

    for module in (routes_config, routes_subjects, routes_schemas, routes_semantic):
        app.include_router(module.router)

    @app.get("/metrics", include_in_schema=False)
    def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_json() -> JSONResponse:
        return JSONResponse(app.openapi())

    # every route as one flat list, to say which methods a path allows (a 405's Allow header)
    app.state.leaf_routes = [route for module in (routes_config, routes_subjects, routes_schemas, routes_semantic)
                             for route in module.router.routes if isinstance(route, Route)]
    app.state.leaf_routes += [route for route in app.router.routes if isinstance(route, Route)]
    document = openapi_document(app.state.leaf_routes, title=app.title, version=app.version,
                                auth=authenticator is not None)
    app.openapi = lambda: document  # type: ignore[method-assign]

    _install_error_handlers(app)
    app.add_middleware(_Gate, settings=settings, authenticator=authenticator, metrics=metrics,
                       fast=FastPaths(registry, max_body_bytes=settings.max_body_bytes))
    return app


def allowed_methods(request: Request) -> str:
    """The ``Allow`` header of a 405: every method some route of the request's path takes (RFC 9110 §15.5.6).

    Starlette's own 405 names only the methods of the first route whose path matched, while e.g. ``/config`` has
    one route per method.
    """
    methods: set[str] = set()
    for route in request.app.state.leaf_routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= route.methods or {"GET", "HEAD"}
    return ", ".join(sorted(methods))


def _media(request: Request) -> str:
    return getattr(request.state, "media_type", None) or V1


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SchemaRegistryError)
    async def registry_error(request: Request, exc: SchemaRegistryError) -> JSONResponse:
        if exc.http_status >= 500:
            logger.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return error_response(exc, _media(request))

    @app.exception_handler(StarletteHTTPException)
    async def framework_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = http.HTTPStatus(exc.status_code).phrase if exc.status_code in http.HTTPStatus._value2member_map_ \
            else "Error"
        headers = {"Allow": allowed_methods(request)} if exc.status_code == 405 else None
        return error_response(HttpError(exc.status_code, f"HTTP {exc.status_code} {phrase}"), _media(request),
                              headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(HttpError(422, f"Unprocessable request: {exc.errors()}"), _media(request))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(SchemaRegistryError("Internal Server Error"), _media(request))


_GATE_HEADERS = frozenset({b"accept", b"content-length", b"authorization"})


class _Gate:
    """Pure ASGI middleware: content negotiation, body-size limit, auth, request metrics, and the fast paths of
    the hottest routes (:mod:`schema_registry.server.fastpath`) in front of the framework's routes."""

    def __init__(self, app: ASGIApp, *, settings: Settings, authenticator: Authenticator | None,
                 metrics: Metrics, fast: FastPaths) -> None:
        self.app = app
        self.settings = settings
        self.authenticator = authenticator
        self.metrics = metrics
        self.fast = fast
        self._negotiated: dict[str | None, str | None] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]
        label: str | None = None

        async def send_and_note(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            headers = {k.lower().decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                       if k.lower() in _GATE_HEADERS}
            media = self._negotiate(headers.get("accept"))
            refusal = await self._refusal(scope, headers, media)
            if refusal is not None:
                await error_response(refusal, media or V1)(scope, receive, send_and_note)
                return
            assert media is not None  # no refusal: something acceptable
            fast = self.fast.match(scope)
            if fast is not None:
                label, handler = fast
                await handler(media, scope, receive, send_and_note)
                return
            scope.setdefault("state", {})["media_type"] = media
            await self.app(scope, receive, send_and_note)
        finally:
            if label is None:
                route: Any = scope.get("route")
                label = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(scope["method"], label, status[0], time.perf_counter() - started)

    def _negotiate(self, accept: str | None) -> str | None:
        # clients send the same few Accept headers again and again: remember the answers (a bounded memo)
        try:
            return self._negotiated[accept]
        except KeyError:
            pass
        media = negotiate(accept)
        if len(self._negotiated) >= 256:
            self._negotiated.clear()
        self._negotiated[accept] = media
        return media

    async def _refusal(self, scope: Scope, headers: dict[str, str], media: str | None) -> SchemaRegistryError | None:
        if media is None:
            return HttpError(406, "HTTP 406 Not Acceptable")
        length = headers.get("content-length")
        if length and length.isdigit() and int(length) > self.settings.max_body_bytes:
            return HttpError(413, f"Request body too large: {length} bytes, the limit is "
                                  f"{self.settings.max_body_bytes} bytes")
        if self.authenticator is None:
            return None
        path, method = scope["path"], scope["method"]
        needed = required_role(method, path, scope.get("query_string", b"").decode("latin-1"))
        if needed is None:
            return None
        try:
            client = scope.get("client")
            principal = await self.authenticator.authenticate_request(headers.get("authorization"),
                                                                      client[0] if client else None)
            self.authenticator.authorize(principal, needed, method, path)
        except SchemaRegistryError as e:
            return e
        return None
