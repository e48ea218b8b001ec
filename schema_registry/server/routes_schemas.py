"""``/schemas``: schemas by global id or guid, the subjects and versions that use them, the type list."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from schema_registry.errors import SchemaNotFoundError
from schema_registry.model import INT32_MAX
from schema_registry.server.http import flag, page, respond, respond_raw
from schema_registry.server.routes_subjects import registry
from schema_registry.server.shapes import schema_of_version, schema_string

router = APIRouter()


def _schema_id(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError as e:
        raise SchemaNotFoundError(f"Schema {raw} not found") from e
    if not 0 <= value <= INT32_MAX:  # ids are 32-bit: anything else names no schema (and would overflow a query)
        raise SchemaNotFoundError(f"Schema {raw} not found")
    return value


@router.get("/schemas")
def list_schemas(request: Request) -> JSONResponse:
    """Schemas of every subject (``subjectPrefix``, ``deleted``, ``latestOnly``, ``offset``, ``limit``)."""
    prefix = request.query_params.get("subjectPrefix", "")
    if prefix == ":*:":
        prefix = ""
    rows = registry(request).latest_schemas(prefix=prefix, deleted=flag(request, "deleted"),
                                            latest_only=flag(request, "latestOnly"))
    return respond(request, page(request, [schema_of_version(r, s) for r, s in rows]))


@router.get("/schemas/types")
def schema_types(request: Request) -> JSONResponse:
    """The schema types this registry accepts."""
    return respond(request, ["AVRO"])


@router.get("/schemas/ids/{schema_id}")
def schema_by_id(schema_id: str, request: Request) -> JSONResponse:
    """The schema with a global id (still served after its versions are soft-deleted)."""
    return respond(request, schema_string(registry(request).schema(_schema_id(schema_id))))


@router.get("/schemas/ids/{schema_id}/schema")
def raw_schema_by_id(schema_id: str, request: Request) -> Response:
    """The raw schema text with a global id."""
    return respond_raw(request, registry(request).schema(_schema_id(schema_id)).schema_text)


@router.get("/schemas/ids/{schema_id}/subjects")
def subjects_of_schema(schema_id: str, request: Request) -> JSONResponse:
    """Subjects with a version that uses the id (``deleted``: soft-deleted ones too; ``subject`` filter)."""
    rows = registry(request).schema_usages(_schema_id(schema_id), deleted=flag(request, "deleted"),
                                           subject=request.query_params.get("subject"))
    return respond(request, page(request, sorted({r.subject for r in rows})))


@router.get("/schemas/ids/{schema_id}/versions")
def versions_of_schema(schema_id: str, request: Request) -> JSONResponse:
    """``[{"subject", "version"}]`` pairs that use the id."""
    rows = registry(request).schema_usages(_schema_id(schema_id), deleted=flag(request, "deleted"),
                                           subject=request.query_params.get("subject"))
    return respond(request, page(request, [{"subject": r.subject, "version": r.version} for r in rows]))


@router.get("/schemas/guids/{guid}")
def schema_by_guid(guid: str, request: Request) -> JSONResponse:
    """The schema with a content guid."""
    return respond(request, schema_string(registry(request).schema_by_guid(guid)))


@router.get("/schemas/guids/{guid}/ids")
def ids_of_guid(guid: str, request: Request) -> JSONResponse:
    """``[{"context", "id"}]`` for a guid (one default context here)."""
    return respond(request, [{"context": ".", "id": registry(request).schema_by_guid(guid).id}])
