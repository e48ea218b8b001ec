"""``/subjects`` and ``/compatibility``: list, register, look up, read and delete versions, test compatibility."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from schema_registry.errors import InvalidSchemaError
from schema_registry.registry import Registry
from schema_registry.server.http import JsonBody, flag, page, require_object, respond, respond_raw
from schema_registry.server.shapes import register_request, register_response, schema_of_version

router = APIRouter()


def registry(request: Request) -> Registry:
    """The app's registry service."""
    reg: Registry = request.app.state.registry
    return reg


@router.get("/subjects")
def list_subjects(request: Request) -> JSONResponse:
    """Subjects (``subjectPrefix``, ``deleted``, ``deletedOnly``, ``offset``, ``limit``)."""
    prefix = request.query_params.get("subjectPrefix", "")
    if prefix == ":*:":
        prefix = ""
    names = registry(request).subjects(prefix=prefix, deleted=flag(request, "deleted"),
                                       deleted_only=flag(request, "deletedOnly"))
    return respond(request, page(request, names))


@router.get("/subjects/{subject}/versions")
def list_versions(subject: str, request: Request) -> JSONResponse:
    """Version numbers of a subject."""
    versions = registry(request).versions(
        subject, deleted=flag(request, "deleted"), deleted_only=flag(request, "deletedOnly"),
        deleted_as_negative=flag(request, "deletedAsNegative"))
    return respond(request, page(request, versions))


@router.post("/subjects/{subject}/versions")
def register(subject: str, request: Request, body: JsonBody) -> JSONResponse:
    """Register a schema (idempotent: the same content answers the existing id and version)."""
    req = register_request(require_object(body, "register"))
    row, stored = registry(request).register(subject, req, normalize=flag(request, "normalize"),
                                             force=flag(request, "force"))
    return respond(request, register_response(row, stored))


@router.get("/subjects/{subject}/versions/{version}")
def get_version(subject: str, version: str, request: Request) -> JSONResponse:
    """One version (``latest`` and ``-1`` mean the newest live one)."""
    row, stored = registry(request).version(subject, version, deleted=flag(request, "deleted"))
    return respond(request, schema_of_version(row, stored))


@router.get("/subjects/{subject}/versions/{version}/schema")
def get_version_schema(subject: str, version: str, request: Request) -> Response:
    """The raw schema text of one version."""
    _, stored = registry(request).version(subject, version, deleted=flag(request, "deleted"))
    return respond_raw(request, stored.schema_text)


@router.get("/subjects/{subject}/versions/{version}/referencedby")
def referenced_by(subject: str, version: str, request: Request) -> JSONResponse:
    """Ids of the schemas that reference this version."""
    return respond(request, page(request, registry(request).referenced_by(subject, version)))


@router.delete("/subjects/{subject}/versions/{version}")
def delete_version(subject: str, version: str, request: Request) -> JSONResponse:
    """Soft-delete a version, or hard-delete a soft-deleted one with ``permanent=true``."""
    return respond(request, registry(request).delete_version(subject, version, permanent=flag(request, "permanent")))


@router.post("/subjects/{subject}")
def lookup(subject: str, request: Request, body: JsonBody) -> JSONResponse:
    """Find the version of this subject that holds the given schema."""
    req = register_request(require_object(body, "lookup"))
    row, stored = registry(request).lookup(subject, req, normalize=flag(request, "normalize"),
                                           deleted=flag(request, "deleted"))
    return respond(request, schema_of_version(row, stored))


@router.delete("/subjects/{subject}")
def delete_subject(subject: str, request: Request) -> JSONResponse:
    """Soft-delete every version, or hard-delete a soft-deleted subject with ``permanent=true``."""
    return respond(request, registry(request).delete_subject(subject, permanent=flag(request, "permanent")))


@router.get("/subjects/{subject}/metadata")
def latest_with_metadata(subject: str, request: Request) -> JSONResponse:
    """The latest version whose metadata properties hold every ``key``/``value`` pair given."""
    keys, values = request.query_params.getlist("key"), request.query_params.getlist("value")
    row, stored = registry(request).latest_with_metadata(subject, dict(zip(keys, values, strict=False)),
                                                         deleted=flag(request, "deleted"))
    return respond(request, schema_of_version(row, stored))


def _compatibility(subject: str, version: str | None, request: Request, body: Any) -> JSONResponse:
    verbose = flag(request, "verbose")
    try:
        req = register_request(require_object(body, "compatibility"))
        result = registry(request).test_compatibility(subject, req, version, normalize=flag(request, "normalize"))
    except InvalidSchemaError as e:
        if not verbose:
            raise
        return respond(request, {"is_compatible": False, "messages": [e.message]})
    out: dict[str, Any] = {"is_compatible": result.is_compatible}
    if verbose:
        out["messages"] = list(result.messages)
    return respond(request, out)


@router.post("/compatibility/subjects/{subject}/versions/{version}")
def compatibility_with_version(subject: str, version: str, request: Request,
                               body: JsonBody) -> JSONResponse:
    """Test a schema against one version (``latest``: the newest live one)."""
    return _compatibility(subject, version, request, body)


@router.post("/compatibility/subjects/{subject}/versions")
def compatibility_with_all(subject: str, request: Request, body: JsonBody) -> JSONResponse:
    """Test a schema exactly as registration would check it."""
    return _compatibility(subject, None, request, body)
