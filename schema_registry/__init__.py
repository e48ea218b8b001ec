"""schema_registry: a central schema service, wire-compatible with the Confluent Schema Registry REST API.

Versioned Avro schemas per subject, the seven compatibility levels, data contracts stored verbatim, and
semantic types (named value constraints bound to fields with ``"semanticType": "<name>"``).

- ``schema_registry.server.create_app(settings)`` / ``serve(settings)``: the FastAPI server;
- ``RegistryClient``: the httpx client;
- ``schema_registry.model`` / ``avro`` / ``compatibility`` / ``semantic``: the pure parts (no I/O).
"""

from __future__ import annotations

from schema_registry.client import CompatibilityReport, RegisteredSchema, RegistryClient
from schema_registry.errors import SchemaRegistryError
from schema_registry.model import CompatibilityLevel, Constraints, SemanticType, SemanticTypeSpec
from schema_registry.settings import Settings

__all__ = [
    "CompatibilityLevel",
    "CompatibilityReport",
    "Constraints",
    "RegisteredSchema",
    "RegistryClient",
    "SchemaRegistryError",
    "SemanticType",
    "SemanticTypeSpec",
    "Settings",
]
