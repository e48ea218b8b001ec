"""The registry's OpenAPI 3.1 document (``GET /openapi.json``): every route, its query parameters, request and
response bodies in the Confluent media types, and every status code each operation can answer.

The routes parse their own query parameters and bodies (Confluent's API is lenient: booleans in any case, unknown
properties ignored), so the framework cannot see them; :data:`OPERATIONS` declares them, one entry per route and
method, and :func:`openapi_document` joins it with the app's routes (a route without an entry fails the build).
What every operation can answer besides its own codes comes from the ASGI gate: 406 (``Accept``), 413
(``Content-Length`` over the limit), 500 (the store failed), and with auth on 401, 429 and, for operations above
the ``read`` role, 403. A path that names no route answers 404 and a method the path does not take 405 (with
``Allow``); those are properties of paths, not operations, and only 404 is declared, on operations whose path
parameters can name something that does not exist.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from starlette.routing import Route

from schema_registry.model import SemanticTypeSpec
from schema_registry.server.auth import Role, required_role
from schema_registry.server.http import PRODUCED

logger = logging.getLogger(__name__)

JSON_TYPES = PRODUCED
"""The media types of request and response bodies: Confluent's v1 and generic types, and plain JSON."""

_ERROR = {"type": "object", "required": ["error_code", "message"],
          "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}}}
_INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_INTS = {"type": "array", "items": {"type": "integer"}}
_OBJECT: dict[str, Any] = {"type": "object"}
_REFERENCE = {"type": "object", "properties": {"name": {"type": "string"}, "subject": {"type": "string"},
                                               "version": _INT32}}
_SCHEMA_STRING = {"type": "object", "required": ["schema"],
                  "properties": {"schema": {"type": "string"}, "schemaType": {"type": "string"},
                                 "references": {"type": "array", "items": _REFERENCE}}}
_VERSION = {"type": "object", "required": ["subject", "version", "id", "schema"],
            "properties": {"subject": {"type": "string"}, "version": {"type": "integer"}, "id": {"type": "integer"},
                           "guid": {"type": "string"}, "schema": {"type": "string"},
                           "schemaType": {"type": "string"},
                           "references": {"type": "array", "items": _REFERENCE}}}
_REGISTERED = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"},
                                                                    "version": {"type": "integer"},
                                                                    "guid": {"type": "string"}}}
_SCHEMA_REQUEST = {
    "type": "object",
    "description": "Confluent's RegisterSchemaRequest; unknown properties are ignored.",
    "properties": {"schema": {"type": ["string", "null"], "description": "the Avro schema as JSON text"},
                   "schemaType": {"type": ["string", "null"], "enum": ["AVRO", None]},
                   "references": {"type": ["array", "null"], "items": _REFERENCE},
                   "metadata": {"type": ["object", "null"]}, "ruleSet": {"type": ["object", "null"]},
                   "id": _INT32, "version": _INT32},
}
_CONFIG_REQUEST = {"type": "object", "properties": {"compatibility": {"type": "string", "enum": [
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"]},
    "normalize": {"type": "boolean"}}}
_MODE_REQUEST = {"type": "object", "required": ["mode"], "properties": {"mode": {"type": "string", "enum": [
    "READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT", "FORWARD"]}}}
_MODE = {"type": "object", "required": ["mode"], "properties": {"mode": {"type": "string"}}}
_COMPATIBILITY = {"type": "object", "required": ["is_compatible"],
                  "properties": {"is_compatible": {"type": "boolean"}, "messages": _STRINGS}}
_SEMANTIC_TYPE = {"type": "object", "required": ["name", "version", "builtin", "base_type"],
                  "properties": {"name": {"type": "string"}, "version": {"type": "integer"},
                                 "builtin": {"type": "boolean"}, "base_type": {"type": "string"},
                                 "constraints": _OBJECT}}

_DESCRIPTIONS = {
    200: "OK", 201: "Created (a new version of the semantic type)",
    400: "Malformed JSON body, or a query parameter that must be an integer is not",
    401: "Missing or wrong credentials (40101)", 403: "The role does not allow the operation (40301)",
    404: "Not found (404xx)", 406: "No acceptable media type in Accept", 409: "Incompatible schema (409 or 40901)",
    413: "Request body over the size limit", 415: "Unsupported Content-Type",
    422: "Unprocessable content (422xx)", 429: "Too many failed logins from this client (42901), see Retry-After",
    500: "The store failed (50001)",
}


@dataclass(frozen=True)
class Operation:
    """What one route and method takes and answers, besides the gate's statuses.

    Attributes:
        summary: one line.
        statuses: the error statuses of the operation itself.
        query: query parameters, name -> JSON schema.
        body: JSON schema of the request body (None: no body).
        response: JSON schema of the success body.
        success: the success status (or statuses).
        open: needs no credentials.
    """

    summary: str
    statuses: tuple[int, ...] = ()
    query: dict[str, dict[str, Any]] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    response: dict[str, Any] = field(default_factory=lambda: _OBJECT)
    success: tuple[int, ...] = (200,)
    open: bool = False


_BOOL = {"type": "boolean"}
_PAGE = {"offset": {"type": "integer"}, "limit": {"type": "integer"}}
_BODY = (400, 415, 422)  # malformed JSON, Content-Type, invalid content
_VERSION_PATH = (404, 422)  # no subject or version; a version that is not 1..2^31-1, latest or -1 (42202)

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "/"): Operation("Liveness", open=True),
    ("GET", "/openapi.json"): Operation("This document", open=True),
    ("GET", "/metrics"): Operation("Prometheus metrics (text)"),
    ("GET", "/config"): Operation("The global config"),
    ("PUT", "/config"): Operation("Update the global config", _BODY, body=_CONFIG_REQUEST),
    ("DELETE", "/config"): Operation("Reset the global config"),
    ("GET", "/config/{subject}"): Operation("A subject's config", (404,), {"defaultToGlobal": _BOOL}),
    ("PUT", "/config/{subject}"): Operation("Set a subject's config", (*_BODY, 404), body=_CONFIG_REQUEST),
    ("DELETE", "/config/{subject}"): Operation("Remove a subject's config", (404,)),
    ("GET", "/mode"): Operation("The global mode", response=_MODE),
    ("PUT", "/mode"): Operation("Set the global mode", _BODY, {"force": _BOOL}, body=_MODE_REQUEST, response=_MODE),
    ("DELETE", "/mode"): Operation("Reset the global mode", response=_MODE),
    ("GET", "/mode/{subject}"): Operation("A subject's mode", (404,), {"defaultToGlobal": _BOOL}, response=_MODE),
    ("PUT", "/mode/{subject}"): Operation("Set a subject's mode", (*_BODY, 404), {"force": _BOOL},
                                          body=_MODE_REQUEST, response=_MODE),
    ("DELETE", "/mode/{subject}"): Operation("Remove a subject's mode", (404,), response=_MODE),
    ("GET", "/contexts"): Operation("Contexts", (400,), dict(_PAGE), response=_STRINGS),
    ("GET", "/associations/resources/{namespace}/{name}"): Operation("Associations (none are kept)", (404,)),
    ("GET", "/v1/metadata/id"): Operation("Cluster id"),
    ("GET", "/subjects"): Operation("Subjects", (400,), {"subjectPrefix": {"type": "string"}, "deleted": _BOOL,
                                                         "deletedOnly": _BOOL, **_PAGE}, response=_STRINGS),
    ("GET", "/subjects/{subject}/versions"): Operation(
        "Versions of a subject", (400, 404), {"deleted": _BOOL, "deletedOnly": _BOOL, "deletedAsNegative": _BOOL,
                                              **_PAGE}, response=_INTS),
    ("POST", "/subjects/{subject}/versions"): Operation(
        "Register a schema", (*_BODY, 404, 409), {"normalize": _BOOL, "force": _BOOL}, body=_SCHEMA_REQUEST,
        response=_REGISTERED),
    ("GET", "/subjects/{subject}/versions/{version}"): Operation(
        "One version", _VERSION_PATH, {"deleted": _BOOL}, response=_VERSION),
    ("GET", "/subjects/{subject}/versions/{version}/schema"): Operation(
        "The raw schema text of a version", _VERSION_PATH, {"deleted": _BOOL}, response={}),
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"): Operation(
        "Ids of schemas referencing a version", (400, *_VERSION_PATH), dict(_PAGE), response=_INTS),
    ("DELETE", "/subjects/{subject}/versions/{version}"): Operation(
        "Delete a version (soft, or permanent after a soft delete)", _VERSION_PATH, {"permanent": _BOOL},
        response={"type": "integer"}),
    ("POST", "/subjects/{subject}"): Operation(
        "Look up a schema under a subject", (*_BODY, 404), {"normalize": _BOOL, "deleted": _BOOL},
        body=_SCHEMA_REQUEST, response=_VERSION),
    ("DELETE", "/subjects/{subject}"): Operation(
        "Delete a subject (soft, or permanent after a soft delete)", (404, 422), {"permanent": _BOOL},
        response=_INTS),
    ("GET", "/subjects/{subject}/metadata"): Operation(
        "Latest version with the given metadata properties", (404,),
        {"key": {"type": "string"}, "value": {"type": "string"}, "deleted": _BOOL}, response=_VERSION),
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): Operation(
        "Test a schema against one version", (*_BODY, 404), {"verbose": _BOOL, "normalize": _BOOL},
        body=_SCHEMA_REQUEST, response=_COMPATIBILITY),
    ("POST", "/compatibility/subjects/{subject}/versions"): Operation(
        "Test a schema as registration would", (*_BODY, 404), {"verbose": _BOOL, "normalize": _BOOL},
        body=_SCHEMA_REQUEST, response=_COMPATIBILITY),
    ("GET", "/schemas"): Operation("Schemas of every subject", (400,), {
        "subjectPrefix": {"type": "string"}, "deleted": _BOOL, "latestOnly": _BOOL, **_PAGE},
        response={"type": "array", "items": _VERSION}),
    ("GET", "/schemas/types"): Operation("Schema types", response=_STRINGS),
    ("GET", "/schemas/ids/{schema_id}"): Operation("A schema by global id", (404,), response=_SCHEMA_STRING),
    ("GET", "/schemas/ids/{schema_id}/schema"): Operation("The raw schema text by id", (404,), response={}),
    ("GET", "/schemas/ids/{schema_id}/subjects"): Operation(
        "Subjects using an id", (400, 404), {"deleted": _BOOL, "subject": {"type": "string"}, **_PAGE},
        response=_STRINGS),
    ("GET", "/schemas/ids/{schema_id}/versions"): Operation(
        "Subject versions using an id", (400, 404), {"deleted": _BOOL, "subject": {"type": "string"}, **_PAGE},
        response={"type": "array", "items": {"type": "object", "properties": {"subject": {"type": "string"},
                                                                              "version": {"type": "integer"}}}}),
    ("GET", "/schemas/guids/{guid}"): Operation("A schema by guid", (404,), response=_SCHEMA_STRING),
    ("GET", "/schemas/guids/{guid}/ids"): Operation("Ids of a guid", (404,), response={"type": "array"}),
    ("GET", "/semantic-types"): Operation("Semantic types (lakegate)", (400,), dict(_PAGE),
                                          response={"type": "array", "items": _SEMANTIC_TYPE}),
    ("GET", "/semantic-types/{name}"): Operation("A semantic type", (404,), response=_SEMANTIC_TYPE),
    ("GET", "/semantic-types/{name}/versions"): Operation("Versions of a semantic type", (404,), response=_INTS),
    ("GET", "/semantic-types/{name}/versions/{version}"): Operation(
        "One version of a semantic type", (404, 422), response=_SEMANTIC_TYPE),
    ("PUT", "/semantic-types/{name}"): Operation(
        "Create or update a semantic type", _BODY, body={"$ref": "#/components/schemas/SemanticTypeSpec"},
        response=_SEMANTIC_TYPE,
        success=(200, 201)),
}


def openapi_document(routes: list[Route], *, title: str, version: str, auth: bool) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes``.

    Args:
        routes: the app's routes (one per path and method set).
        title: the API title.
        version: the API version.
        auth: whether the server checks credentials (declares the security schemes and 401/403/429).

    Raises:
        KeyError: a route has no entry in :data:`OPERATIONS`.
    """
    spec = SemanticTypeSpec.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = {"ErrorMessage": _ERROR, **spec.pop("$defs", {}), "SemanticTypeSpec": spec}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        for method in sorted(route.methods or ()):
            if method == "HEAD":
                continue
            op = OPERATIONS[(method, route.path)]
            paths.setdefault(route.path, {})[method.lower()] = _operation(route.path, method, op, auth)
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version,
                 "description": "A Confluent-compatible schema registry (Avro) with lakegate's semantic types."},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if auth:
        doc["components"]["securitySchemes"] = {"basic": {"type": "http", "scheme": "basic"},
                                                "bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"basic": []}, {"bearer": []}]
    return doc


def _operation(path: str, method: str, op: Operation, auth: bool) -> dict[str, Any]:
    params = [{"name": name, "in": "path", "required": True,
               "schema": {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}}
              for name in re.findall(r"{(\w+)}", path)]
    params += [{"name": name, "in": "query", "required": False, "schema": schema} for name, schema in op.query.items()]
    statuses = set(op.statuses) | {406, 413, 500}
    if params and any(p["in"] == "path" for p in params):
        statuses.add(404)  # a path segment can name nothing
    if auth and not op.open:
        statuses |= {401, 429}
        if (required_role(method, path, "") or Role.READ) > Role.READ or method == "DELETE":
            statuses.add(403)
    out: dict[str, Any] = {"summary": op.summary, "operationId": _operation_id(method, path), "parameters": params}
    if op.open and auth:
        out["security"] = []
    if op.body is not None:
        out["requestBody"] = {"required": False, "content": {t: {"schema": op.body} for t in JSON_TYPES}}
    responses: dict[str, Any] = {}
    for status in op.success:
        if path == "/metrics":
            content = {"text/plain": {"schema": {"type": "string"}}}
        else:
            content = {t: {"schema": op.response} for t in JSON_TYPES}
        responses[str(status)] = {"description": _DESCRIPTIONS[status], "content": content}
    for status in sorted(statuses):
        response: dict[str, Any] = {
            "description": _DESCRIPTIONS[status],
            "content": {t: {"schema": {"$ref": "#/components/schemas/ErrorMessage"}} for t in JSON_TYPES}}
        if status == 429:
            response["headers"] = {"Retry-After": {"required": True, "schema": {"type": "integer"},
                                                   "description": "seconds to wait"}}
        if status == 401:
            response["headers"] = {"WWW-Authenticate": {"required": True, "schema": {"type": "string"}}}
        responses[str(status)] = response
    out["responses"] = responses
    return out


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[{}]", "", path).strip("/").replace("-", "_").replace(".", "_").split("/")
    return "_".join([method.lower(), *[w for w in words if w]]) or method.lower()
