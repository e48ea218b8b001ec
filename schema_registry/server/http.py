"""HTTP plumbing shared by the routes: media types, query parsing, JSON bodies, Confluent error bodies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse, Response

from schema_registry.errors import HttpError, InvalidSchemaError, SchemaRegistryError, ThrottledError
from schema_registry.jsontext import strict_loads

V1 = "application/vnd.schemaregistry.v1+json"
GENERIC = "application/vnd.schemaregistry+json"
JSON = "application/json"
PRODUCED = (V1, GENERIC, JSON)
ACCEPTED_REQUEST_TYPES = {V1, GENERIC, JSON, "application/octet-stream"}


def negotiate(accept: str | None) -> str | None:
    """The response media type for an Accept header (None: nothing acceptable, answer 406).

    ``*/*``, ``application/*`` and an absent header mean the v1 type; otherwise the highest-q acceptable type.
    """
    if not accept or not accept.strip():
        return V1
    best: tuple[float, int, str] | None = None
    for index, part in enumerate(accept.split(",")):
        pieces = [p.strip() for p in part.split(";")]
        media, q = pieces[0].lower(), 1.0
        for p in pieces[1:]:
            if p.startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        if q <= 0:
            continue
        chosen = V1 if media in ("*/*", "application/*") else media if media in PRODUCED else None
        if chosen is None:
            continue
        rank = (q, -index, chosen)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return best[2] if best else None


def respond(request: Request, content: Any, status_code: int = 200) -> JSONResponse:
    """A JSON response in the negotiated schema-registry media type."""
    media = getattr(request.state, "media_type", None) or V1
    return JSONResponse(content, status_code=status_code, media_type=media)


def respond_raw(request: Request, text: str) -> Response:
    """A raw schema text (``.../schema`` endpoints), already JSON."""
    media = getattr(request.state, "media_type", None) or V1
    return Response(text.encode("utf-8"), media_type=media)


def error_response(error: SchemaRegistryError, media_type: str = V1,
                   headers: Mapping[str, str] | None = None) -> JSONResponse:
    """Confluent's error body ``{"error_code", "message"}`` with the error's HTTP status, and the headers the status
    calls for: ``WWW-Authenticate`` on 401, ``Retry-After`` on 429, and ``headers`` (e.g. ``Allow`` on 405)."""
    out = dict(headers or {})
    if error.http_status == 401:
        out["WWW-Authenticate"] = 'Basic realm="lakegate-registry", Bearer'
    if isinstance(error, ThrottledError) and error.retry_after is not None:
        out["Retry-After"] = str(error.retry_after)
    return JSONResponse(error.body(), status_code=error.http_status, media_type=media_type, headers=out or None)


def flag(request: Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter in any spelling (``true``, ``True``, ``TRUE``); absent means ``default``."""
    return flag_value(request.query_params.get(name), default)


def flag_value(raw: str | None, default: bool = False) -> bool:
    """The value of a boolean query parameter given as ``raw`` (None: absent, meaning ``default``)."""
    if raw is None:
        return default
    return raw.strip().lower() in ("true", "1", "yes")


def integer(request: Request, name: str, default: int) -> int:
    """An integer query parameter.

    Raises:
        HttpError: 400 when it is not an integer.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise HttpError(400, f"Query parameter '{name}' must be an integer, got '{raw}'") from e


def page(request: Request, items: list[Any]) -> list[Any]:
    """Apply ``offset`` and ``limit`` (``-1``: no limit) to a list."""
    offset = max(0, integer(request, "offset", 0))
    limit = integer(request, "limit", -1)
    items = items[offset:]
    return items if limit < 0 else items[:limit]


async def json_body(request: Request) -> Any:
    """The request body parsed as JSON (FastAPI dependency).

    Only standard JSON that can be stored and rendered again is accepted (see :mod:`schema_registry.jsontext`):
    ``NaN``, ``Infinity``, out-of-range numbers and lone surrogates are malformed JSON here.

    Raises:
        HttpError: 415 for an unsupported Content-Type, 413 for an oversized body, 400 for malformed JSON.
    """
    check_content_type(request.headers.get("content-type"))
    return decode_json_body(await request.body(), request.app.state.settings.max_body_bytes)


def check_content_type(content_type: str | None) -> None:
    """Accept a request body's Content-Type (absent, or one of ``ACCEPTED_REQUEST_TYPES``, parameters ignored).

    Raises:
        HttpError: 415 for any other type.
    """
    media = (content_type or "").split(";")[0].strip().lower()
    if media and media not in ACCEPTED_REQUEST_TYPES:
        raise HttpError(415, "HTTP 415 Unsupported Media Type")


def decode_json_body(raw: bytes, limit: int) -> Any:
    """A whole request body parsed as strict JSON (None for an empty or blank body).

    Raises:
        HttpError: 413 when it is over ``limit`` bytes, 400 for malformed JSON.
    """
    if len(raw) > limit:
        raise HttpError(413, f"Request body too large: {len(raw)} bytes, the limit is {limit} bytes")
    if not raw.strip():
        return None
    try:
        return strict_loads(raw)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
        raise HttpError(400, f"Unrecognized request body: malformed JSON ({e})") from e


def require_object(body: Any, what: str) -> dict[str, Any]:
    """The body as a JSON object.

    Raises:
        InvalidSchemaError: (422/42201) when it is not one.
    """
    if not isinstance(body, dict):
        raise InvalidSchemaError(f"Invalid request: the {what} body must be a JSON object")
    return body


JsonBody = Annotated[Any, Depends(json_body)]
"""A route parameter type: the request body parsed by :func:`json_body`."""
