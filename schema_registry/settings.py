"""Server settings: one typed object, built by the CLI (or a test) and passed down explicitly."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schema_registry.model import CompatibilityLevel

DEFAULT_STORE = "sqlite:///registry.db"


class Settings(BaseModel):
    """How a registry server runs.

    Attributes:
        host: interface to bind.
        port: TCP port.
        store_url: SQLAlchemy URL of the store (``sqlite:///path.db`` or ``postgresql+psycopg://...``).
        auth_config: a TOML file of users and tokens (see ``docs/schema_registry.md``); None: no auth.
        default_compatibility: the global level until ``PUT /config`` sets one (Confluent: BACKWARD).
        incompatible_error_code: ``error_code`` of an incompatible registration: 409 (Confluent before 8.0.4,
            what ``confluent_kafka``'s own tests expect) or 40901 (Confluent 8.0.4 and later).
        max_schema_bytes: schema texts above this size (UTF-8) are rejected with 42209.
        max_body_bytes: request bodies above this size are rejected with 413 before parsing.
    """

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    store_url: str = DEFAULT_STORE
    auth_config: Path | None = None
    default_compatibility: CompatibilityLevel = CompatibilityLevel.BACKWARD
    incompatible_error_code: Literal[409, 40901] = 409
    max_schema_bytes: int = Field(default=1024 * 1024, gt=0)
    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
