"""The relational layout of the registry (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Concurrency rests on the primary keys and unique constraints below, not on process-local locks:
``sr_versions (subject, version)`` makes two writers that picked the same next version collide,
``sr_schemas.id`` and ``sr_schemas.fingerprint`` do the same for global ids and content; the loser's
transaction rolls back and is retried (see ``SqlStore.run``).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

meta = Table(
    "sr_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

schemas = Table(
    "sr_schemas", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("fingerprint", String(64), nullable=False, unique=True),
    Column("schema_type", String(16), nullable=False),
    Column("schema_text", Text, nullable=False),
    Column("references_json", Text, nullable=False),
    Column("metadata_json", Text, nullable=True),
    Column("ruleset_json", Text, nullable=True),
    Column("bindings_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

versions = Table(
    "sr_versions", metadata,
    Column("subject", Text, primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("schema_id", Integer, ForeignKey("sr_schemas.id"), nullable=False),
    Column("deleted", Boolean, nullable=False, default=False),
    Column("created_at", Float, nullable=False),
    Index("ix_sr_versions_schema_id", "schema_id"),
)

references = Table(
    "sr_references", metadata,
    Column("schema_id", Integer, ForeignKey("sr_schemas.id"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("name", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Index("ix_sr_references_target", "subject", "version"),
)

configs = Table(
    "sr_configs", metadata,
    Column("scope", Text, primary_key=True),
    Column("config_json", Text, nullable=False),
)

modes = Table(
    "sr_modes", metadata,
    Column("scope", Text, primary_key=True),
    Column("mode", String(32), nullable=False),
)

semantic_types = Table(
    "sr_semantic_types", metadata,
    Column("name", String(128), primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("spec_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
