"""Schema migrations of the registry's own tables, applied in order when a store opens.

The applied version lives in ``sr_meta['schema_version']``. Each migration runs in the opening transaction,
which is serialised across processes (SQLite ``BEGIN IMMEDIATE``, PostgreSQL an advisory lock), so several
servers starting at once against one database apply each migration exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import Connection, select

from schema_registry.store import tables

logger = logging.getLogger(__name__)


def _v1_initial(conn: Connection) -> None:
    tables.metadata.create_all(conn, checkfirst=True)


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "initial tables: schemas, versions, references, configs, modes, semantic types", _v1_initial),
]
LATEST = MIGRATIONS[-1][0]


def migrate(conn: Connection) -> int:
    """Apply the pending migrations on ``conn`` (inside its transaction) and return the schema version."""
    tables.meta.create(conn, checkfirst=True)
    row = conn.execute(select(tables.meta.c.value).where(tables.meta.c.key == "schema_version")).first()
    current = int(row[0]) if row else 0
    for version, description, apply in MIGRATIONS:
        if version > current:
            logger.info("applying registry store migration %d: %s", version, description)
            apply(conn)
            if current == 0:
                conn.execute(tables.meta.insert().values(key="schema_version", value=str(version)))
            else:
                conn.execute(tables.meta.update().where(tables.meta.c.key == "schema_version")
                             .values(value=str(version)))
            current = version
    return current
