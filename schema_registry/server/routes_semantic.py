"""``/semantic-types``: the catalogue of semantic types (lakegate extension of the Confluent API).

```
GET  /semantic-types                          every type (latest versions), built-ins included
GET  /semantic-types/{name}                   latest version
GET  /semantic-types/{name}/versions          [1, 2, ...]
GET  /semantic-types/{name}/versions/{v}      one version ("latest" allowed)
PUT  /semantic-types/{name}                   create, or add a version when the definition changed
                                              (201 when a version was stored, 200 when unchanged)
```
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from schema_registry.server.http import JsonBody, page, respond
from schema_registry.server.routes_subjects import registry

router = APIRouter()


@router.get("/semantic-types")
def list_semantic_types(request: Request) -> JSONResponse:
    """Every semantic type."""
    return respond(request, page(request, [t.to_json() for t in registry(request).semantic.all()]))


@router.get("/semantic-types/{name}")
def get_semantic_type(name: str, request: Request) -> JSONResponse:
    """The latest version of a semantic type."""
    return respond(request, registry(request).semantic.get(name).to_json())


@router.get("/semantic-types/{name}/versions")
def semantic_type_versions(name: str, request: Request) -> JSONResponse:
    """The version numbers of a semantic type."""
    return respond(request, registry(request).semantic.versions(name))


@router.get("/semantic-types/{name}/versions/{version}")
def semantic_type_version(name: str, version: str, request: Request) -> JSONResponse:
    """One version of a semantic type."""
    return respond(request, registry(request).semantic.get(name, version).to_json())


@router.put("/semantic-types/{name}")
def put_semantic_type(name: str, request: Request, body: JsonBody) -> JSONResponse:
    """Create or update a user-defined semantic type."""
    st, created = registry(request).semantic.put(name, body)
    return respond(request, st.to_json(), status_code=201 if created else 200)
