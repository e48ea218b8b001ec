"""Confluent JSON shapes of responses (empty fields omitted, ``schemaType`` omitted for AVRO)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from schema_registry.errors import InvalidSchemaError
from schema_registry.model import RegisterRequest, StoredSchema, SubjectVersion


def register_request(body: dict[str, Any]) -> RegisterRequest:
    """Parse a RegisterSchemaRequest body.

    Raises:
        InvalidSchemaError: wrong field types (e.g. ``schema`` not a string, bad references).
    """
    try:
        return RegisterRequest.model_validate(body)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise InvalidSchemaError(f"Invalid schema request: {problems}") from e


def _content(stored: StoredSchema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if stored.schema_type != "AVRO":
        out["schemaType"] = stored.schema_type
    if stored.references:
        out["references"] = [r.model_dump() for r in stored.references]
    if stored.metadata:
        out["metadata"] = stored.metadata
    if stored.rule_set:
        out["ruleSet"] = stored.rule_set
    return out


def schema_of_version(row: SubjectVersion, stored: StoredSchema) -> dict[str, Any]:
    """Confluent's ``Schema`` entity (GET version, lookup, ``/schemas`` items)."""
    out: dict[str, Any] = {"subject": row.subject, "version": row.version, "id": stored.id, "guid": stored.guid}
    out.update(_content(stored))
    out["schema"] = stored.schema_text
    if row.deleted:
        out["deleted"] = True
    return out


def register_response(row: SubjectVersion, stored: StoredSchema) -> dict[str, Any]:
    """Confluent's ``RegisterSchemaResponse`` (7.4+ shape: the Schema fields without ``subject``)."""
    out: dict[str, Any] = {"id": stored.id, "version": row.version, "guid": stored.guid}
    out.update(_content(stored))
    out["schema"] = stored.schema_text
    return out


def schema_string(stored: StoredSchema) -> dict[str, Any]:
    """Confluent's ``SchemaString`` (``GET /schemas/ids/{id}``)."""
    out: dict[str, Any] = {"schema": stored.schema_text, "guid": stored.guid}
    out.update(_content(stored))
    return out
