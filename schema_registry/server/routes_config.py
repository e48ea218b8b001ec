"""``/config``, ``/mode``, ``/contexts``, ``/associations`` and the liveness root."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from schema_registry.errors import AssociationNotFoundError, InvalidCompatibilityLevelError, InvalidModeError
from schema_registry.model import Mode
from schema_registry.server.http import JsonBody, flag, page, respond
from schema_registry.server.routes_subjects import registry

router = APIRouter()


def _config_body(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidCompatibilityLevelError("Invalid config: the body must be a JSON object with 'compatibility'")
    return body


def _mode_body(body: Any) -> Mode:
    if not isinstance(body, dict):
        raise InvalidModeError("Invalid mode: the body must be a JSON object with 'mode'")
    return Mode.parse(body.get("mode"))


@router.get("/")
def root(request: Request) -> JSONResponse:
    """Liveness: ``{}``."""
    return respond(request, {})


@router.get("/config")
def get_global_config(request: Request) -> JSONResponse:
    """The global config."""
    return respond(request, registry(request).configs.get(None))


@router.put("/config")
def put_global_config(request: Request, body: JsonBody) -> JSONResponse:
    """Update the global config (body ``{"compatibility": "FULL", ...}``)."""
    return respond(request, registry(request).configs.update(None, _config_body(body)))


@router.delete("/config")
def delete_global_config(request: Request) -> JSONResponse:
    """Reset the global config to the server default; answers the previous one."""
    return respond(request, registry(request).configs.delete(None))


@router.get("/config/{subject}")
def get_subject_config(subject: str, request: Request) -> JSONResponse:
    """A subject's own config (40408 without one, unless ``defaultToGlobal=true``)."""
    return respond(request, registry(request).configs.get(subject, default_to_global=flag(request, "defaultToGlobal")))


@router.put("/config/{subject}")
def put_subject_config(subject: str, request: Request, body: JsonBody) -> JSONResponse:
    """Set a subject's config (the subject need not exist yet)."""
    return respond(request, registry(request).configs.update(subject, _config_body(body)))


@router.delete("/config/{subject}")
def delete_subject_config(subject: str, request: Request) -> JSONResponse:
    """Remove a subject's config; answers the previous one."""
    return respond(request, registry(request).configs.delete(subject))


@router.get("/mode")
def get_global_mode(request: Request) -> JSONResponse:
    """The global mode."""
    return respond(request, {"mode": registry(request).configs.mode(None).value})


@router.put("/mode")
def put_global_mode(request: Request, body: JsonBody) -> JSONResponse:
    """Set the global mode (IMPORT with existing subjects needs ``force=true``)."""
    mode = registry(request).configs.update_mode(None, _mode_body(body), force=flag(request, "force"))
    return respond(request, {"mode": mode.value})


@router.delete("/mode")
def delete_global_mode(request: Request) -> JSONResponse:
    """Reset the global mode to READWRITE; answers the previous one."""
    return respond(request, {"mode": registry(request).configs.delete_mode(None).value})


@router.get("/mode/{subject}")
def get_subject_mode(subject: str, request: Request) -> JSONResponse:
    """A subject's own mode (40409 without one, unless ``defaultToGlobal=true``)."""
    mode = registry(request).configs.mode(subject, default_to_global=flag(request, "defaultToGlobal"))
    return respond(request, {"mode": mode.value})


@router.put("/mode/{subject}")
def put_subject_mode(subject: str, request: Request, body: JsonBody) -> JSONResponse:
    """Set a subject's mode."""
    mode = registry(request).configs.update_mode(subject, _mode_body(body), force=flag(request, "force"))
    return respond(request, {"mode": mode.value})


@router.delete("/mode/{subject}")
def delete_subject_mode(subject: str, request: Request) -> JSONResponse:
    """Remove a subject's mode; answers the previous one."""
    return respond(request, {"mode": registry(request).configs.delete_mode(subject).value})


@router.get("/contexts")
def contexts(request: Request) -> JSONResponse:
    """Contexts: only the default one (``.``) exists here."""
    return respond(request, page(request, ["."]))


@router.get("/associations/resources/{namespace}/{name}")
def associations(namespace: str, name: str, request: Request) -> JSONResponse:
    """No topic/subject associations are kept: 40410, which serializers read as "use the default strategy"."""
    raise AssociationNotFoundError(f"No association found for resource '{name}' in namespace '{namespace}'")


@router.get("/v1/metadata/id")
def cluster_id(request: Request) -> JSONResponse:
    """The cluster id document Confluent tools read."""
    return respond(request, {"scope": {"path": [], "clusters": {"schema-registry-cluster": "lakegate"}}})
