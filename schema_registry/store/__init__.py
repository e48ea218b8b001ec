"""Durable stores of the registry: SQLite (embedded default) and PostgreSQL, one interface.

Example:
    >>> from schema_registry.store import open_store
    >>> store = open_store("sqlite:///registry.db")  # doctest: +SKIP
"""

from __future__ import annotations

from schema_registry.store.base import GLOBAL_SCOPE, RegistryStore, StoreSession
from schema_registry.store.sql import SqlSession, SqlStore


def open_store(url: str) -> SqlStore:
    """Open the store at a SQLAlchemy URL (``sqlite:///path.db`` or ``postgresql+psycopg://user@host/db``).

    Raises:
        StoreError: unsupported URL, or the database cannot be reached or migrated.
    """
    return SqlStore(url)


__all__ = ["GLOBAL_SCOPE", "RegistryStore", "SqlSession", "SqlStore", "StoreSession", "open_store"]
