"""The SQLAlchemy store: SQLite (embedded default, WAL) and PostgreSQL (psycopg 3) behind one implementation.

Dialect differences are confined to connection set-up:

- SQLite: WAL journal, ``busy_timeout``, foreign keys on; write transactions start with ``BEGIN IMMEDIATE`` so
  concurrent writers (threads or processes) queue on the database lock instead of failing on upgrade; the writers
  of one process first take turns on a lock, which hands the database on at once where SQLite's busy handler
  would sleep (see ``SqlStore._writer_turn``).
- PostgreSQL: READ COMMITTED; two writers that pick the same next version or id collide on the primary key,
  and the loser retries. Migrations take a transaction-scoped advisory lock.

PostgreSQL text cannot hold NUL characters; lookups by a key with one (a subject, scope or type name) find nothing
on both backends instead of failing the statement, and the registry never stores such a key.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, and_, bindparam, create_engine, delete, event, func, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from schema_registry.errors import SchemaRegistryError, StoreError
from schema_registry.model import (
    STORED,
    SchemaReference,
    SemanticBinding,
    SemanticType,
    SemanticTypeSpec,
    StoredSchema,
    SubjectVersion,
)
from schema_registry.store import tables
from schema_registry.store.migrations import migrate
from schema_registry.store.turns import FifoLock

logger = logging.getLogger(__name__)

_STORED = {STORED: True}  # stored definitions were checked when stored: read them whatever today's checks say

T = TypeVar("T")

MAX_ATTEMPTS = 30
SQLITE_POOL_SIZE = 32
"""Pooled SQLite connections (and as many overflow ones): at least the server's concurrent requests."""
_IN_USE_SQL = "SELECT 1 FROM sr_versions WHERE schema_id = ? LIMIT 1"
_MIGRATION_LOCK_KEY = 7_273_011_404  # arbitrary, constant: "lakegate registry migrations"
_RETRY_SQLSTATES = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available


class SqlStore:
    """A registry store on a SQLAlchemy URL (``sqlite:///path.db`` or ``postgresql+psycopg://...``)."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        """Open (and migrate) the store.

        Args:
            url: a SQLAlchemy URL; ``postgresql://`` and ``postgres://`` are taken to mean psycopg 3.
            echo: log every SQL statement (debugging).

        Raises:
            StoreError: the database cannot be reached or migrated.
        """
        self.url = _normalize_url(url)
        sa_url = make_url(self.url)
        self.dialect = sa_url.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise StoreError(f"unsupported store URL {sa_url.render_as_string(hide_password=True)}: "
                             "use sqlite:///path.db or postgresql+psycopg://user@host/db")
        kwargs: dict[str, Any] = {"echo": echo, "future": True}
        if self.dialect == "sqlite":
            if sa_url.database in (None, "", ":memory:"):
                raise StoreError("an in-memory SQLite store is not durable; give a file: sqlite:///path/registry.db")
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            # enough pooled connections for the server's concurrent requests: an overflow connection is opened
            # (four PRAGMAs) and closed again for each request beyond the pool, which cost more than the request
            kwargs.update(pool_size=SQLITE_POOL_SIZE, max_overflow=SQLITE_POOL_SIZE)
        else:
            kwargs["pool_pre_ping"] = True
        self.engine: Engine = create_engine(self.url, **kwargs)
        self.local_reads = self.dialect == "sqlite"
        self._in_use_sql = _IN_USE_SQL.replace("?", "%s") if self.dialect == "postgresql" else _IN_USE_SQL
        self._write_lock = FifoLock()
        if self.dialect == "sqlite":
            _configure_sqlite(self.engine)
        try:
            with self.engine.connect().execution_options(lakegate_write=True) as conn, conn.begin():
                if self.dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
                version = migrate(conn)
        except SQLAlchemyError as e:
            self.engine.dispose()
            raise StoreError(f"cannot open the registry store ({self.describe()}): {_short(e)}") from e
        logger.info("registry store open: %s (schema version %d)", self.describe(), version)

    def describe(self) -> str:
        """The URL without its password (safe to log)."""
        return make_url(self.url).render_as_string(hide_password=True)

    def run(self, fn: Callable[[SqlSession], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction, retrying it on key collisions and serialization failures.

        Raises:
            StoreError: the database failed, or conflicts persisted after ``MAX_ATTEMPTS`` attempts.
            SchemaRegistryError: whatever ``fn`` raised (after rolling back).
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self._writer_turn(write), self.engine.connect().execution_options(lakegate_write=write) as conn, \
                        conn.begin():
                    return fn(SqlSession(conn))
            except SchemaRegistryError:
                raise
            except (IntegrityError, OperationalError, DBAPIError) as e:
                if not _retryable(e) or attempt == MAX_ATTEMPTS:
                    logger.error("registry store failure: %s", _short(e))
                    raise StoreError(f"Error in the backend data store: {_short(e)}") from e
                delay = min(0.2, 0.002 * 2 ** min(attempt, 7)) * random.random()
                logger.warning("registry store write conflict (attempt %d), retrying: %s", attempt, _short(e))
                time.sleep(delay)
            except SQLAlchemyError as e:
                logger.error("registry store failure: %s", _short(e))
                raise StoreError(f"Error in the backend data store: {_short(e)}") from e
        raise AssertionError("unreachable")  # pragma: no cover

    def schema_in_use(self, schema_id: int) -> bool:
        """Whether a version (soft-deleted included) points at ``schema_id``: one indexed probe, no transaction.

        The hot check of ``GET /schemas/ids/{id}``, whose content comes from a cache (content never changes, but a
        permanent delete can leave an id unused). One statement reads committed state on its own, so it runs on a
        pooled DBAPI connection without a transaction around it: ~8 µs on SQLite against ~150 µs through
        :meth:`run`.

        Raises:
            StoreError: the database failed.
        """
        try:
            conn = self.engine.raw_connection()
            try:
                cur = conn.cursor()
                try:
                    cur.execute(self._in_use_sql, (schema_id,))
                    return cur.fetchone() is not None
                finally:
                    cur.close()
            finally:
                conn.close()
        except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as e:
            logger.error("registry store failure: %s", _short(e))
            raise StoreError(f"Error in the backend data store: {_short(e)}") from e

    def _writer_turn(self, write: bool) -> contextlib.AbstractContextManager[object]:
        """SQLite: the writers of this process take turns, in arrival order, before ``BEGIN IMMEDIATE``.

        SQLite has one writer at a time, and a writer that finds the database locked waits in SQLite's busy
        handler, which sleeps in growing steps (up to 100 ms) and serves no one in order: with 8 concurrent
        registrations the unlucky ones waited seconds. A lock wakes the next writer as soon as the last one
        commits, and a first-come, first-served one (:class:`FifoLock`) bounds the wait by the writers ahead.
        Writers in other processes still meet at ``busy_timeout``; PostgreSQL needs none of this.
        """
        return self._write_lock if write and self.dialect == "sqlite" else contextlib.nullcontext()

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()


def _normalize_url(url: str) -> str:
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # transactions are begun explicitly below
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("lakegate_write", True)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _retryable(e: DBAPIError) -> bool:
    if isinstance(e, IntegrityError):
        return True
    orig = getattr(e, "orig", None)
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate in _RETRY_SQLSTATES:
        return True
    msg = str(orig or e).lower()
    return "database is locked" in msg or "database table is locked" in msg


def _short(e: BaseException) -> str:
    orig = getattr(e, "orig", None)
    return str(orig if orig is not None else e).strip().splitlines()[0][:300]


def _storable(key: str) -> bool:
    """Whether a text key can be stored: PostgreSQL text cannot hold NUL (it fails the statement), and the registry
    validates NUL out of every name it stores, so a key with one names nothing on either backend."""
    return "\x00" not in key


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# Statements of the hot paths (registration, lookups, reads by id), built once: building a statement and its cache
# key costs SQLAlchemy ~100-300 µs a time, executing a prebuilt one ~35 µs.
_V = tables.versions
_S = tables.schemas
_R = tables.references
_VERSION_COLUMNS = (_V.c.subject, _V.c.version, _V.c.schema_id, _V.c.deleted)
_Q_VERSIONS = select(*_VERSION_COLUMNS).where(_V.c.subject == bindparam("subject")).order_by(_V.c.version)
_Q_SCHEMA_BY_ID = select(_S).where(_S.c.id == bindparam("id"))
_Q_SCHEMA_BY_FINGERPRINT = select(_S).where(_S.c.fingerprint == bindparam("fingerprint"))
_Q_SCHEMAS_BY_IDS = select(_S).where(_S.c.id.in_(bindparam("ids", expanding=True))).order_by(_S.c.id)
_Q_REFERENCES = (select(_R.c.schema_id, _R.c.name, _R.c.subject, _R.c.version)
                 .where(_R.c.schema_id.in_(bindparam("ids", expanding=True))).order_by(_R.c.schema_id, _R.c.position))
_Q_MAX_ID = select(func.coalesce(func.max(_S.c.id), 0))
_Q_IN_USE = select(_V.c.schema_id).where(_V.c.schema_id == bindparam("id")).limit(1)
_Q_CONFIG = select(tables.configs.c.config_json).where(tables.configs.c.scope == bindparam("scope"))
_Q_MODE = select(tables.modes.c.mode).where(tables.modes.c.scope == bindparam("scope"))
_T = tables.semantic_types
_LATEST_SEMANTIC = select(_T.c.name, func.max(_T.c.version).label("v")).group_by(_T.c.name).subquery()
_Q_SEMANTIC_LATEST = (select(_T.c.name, _T.c.version, _T.c.spec_json)
                      .join(_LATEST_SEMANTIC, and_(_T.c.name == _LATEST_SEMANTIC.c.name,
                                                   _T.c.version == _LATEST_SEMANTIC.c.v))
                      .order_by(_T.c.name))
_INSERT_SCHEMA = _S.insert()
_INSERT_VERSION = _V.insert()


class SqlSession:
    """The unit of work of :class:`SqlStore` (see :class:`schema_registry.store.base.StoreSession`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    # --- subjects and versions ---------------------------------------------------------------------------------

    def versions(self, subject: str) -> list[SubjectVersion]:
        """Every version of ``subject``, oldest first."""
        if not _storable(subject):
            return []
        rows = self.conn.execute(_Q_VERSIONS, {"subject": subject}).all()
        return [SubjectVersion(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def subjects(self, *, deleted: bool, deleted_only: bool) -> list[str]:
        """Subject names by the state of their versions."""
        v = tables.versions
        live = select(v.c.subject).where(v.c.deleted.is_(False)).distinct()
        if deleted_only:
            any_deleted = select(v.c.subject).where(v.c.deleted.is_(True)).distinct()
            names = set(self.conn.execute(any_deleted).scalars()) - set(self.conn.execute(live).scalars())
            return sorted(names)
        query = select(v.c.subject).distinct() if deleted else live
        return sorted(self.conn.execute(query).scalars())

    def all_versions(self) -> list[SubjectVersion]:
        """Every version row."""
        v = tables.versions
        rows = self.conn.execute(
            select(v.c.subject, v.c.version, v.c.schema_id, v.c.deleted).order_by(v.c.subject, v.c.version)
        ).all()
        return [SubjectVersion(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def insert_version(self, subject: str, version: int, schema_id: int) -> SubjectVersion:
        """Add a version row (a collision on (subject, version) makes the transaction retry)."""
        self.conn.execute(_INSERT_VERSION, {"subject": subject, "version": version, "schema_id": schema_id,
                                            "deleted": False, "created_at": time.time()})
        return SubjectVersion(subject=subject, version=version, schema_id=schema_id)

    def mark_deleted(self, subject: str, version: int) -> None:
        """Soft-delete a version."""
        v = tables.versions
        self.conn.execute(update(v).where(and_(v.c.subject == subject, v.c.version == version)).values(deleted=True))

    def remove_version(self, subject: str, version: int) -> None:
        """Hard-delete a version row."""
        v = tables.versions
        self.conn.execute(delete(v).where(and_(v.c.subject == subject, v.c.version == version)))

    # --- schemas -----------------------------------------------------------------------------------------------

    def _schema_rows(self, query: Any, params: dict[str, Any]) -> list[StoredSchema]:
        rows = self.conn.execute(query, params).mappings().all()
        if not rows:
            return []
        refs: dict[int, list[SchemaReference]] = {}
        for schema_id, name, subject, version in self.conn.execute(_Q_REFERENCES, {"ids": [row["id"] for row in rows]}):
            refs.setdefault(schema_id, []).append(SchemaReference(name=name, subject=subject, version=version))
        return [StoredSchema(
            id=row["id"], schema_type=row["schema_type"], schema_text=row["schema_text"],
            references=tuple(refs.get(row["id"], ())),
            metadata=json.loads(row["metadata_json"]) if row["metadata_json"] else None,
            rule_set=json.loads(row["ruleset_json"]) if row["ruleset_json"] else None,
            fingerprint=row["fingerprint"],
            semantic_bindings={k: SemanticBinding(**b) for k, b in json.loads(row["bindings_json"]).items()},
        ) for row in rows]

    def schema(self, schema_id: int) -> StoredSchema | None:
        """The schema with this id."""
        found = self._schema_rows(_Q_SCHEMA_BY_ID, {"id": schema_id})
        return found[0] if found else None

    def schemas(self, schema_ids: Sequence[int]) -> dict[int, StoredSchema]:
        """The schemas with these ids (two queries per 500 ids)."""
        ids = sorted(set(schema_ids))
        out: dict[int, StoredSchema] = {}
        for start in range(0, len(ids), 500):  # old SQLite builds allow 999 bound parameters per statement
            out.update((st.id, st) for st in self._schema_rows(_Q_SCHEMAS_BY_IDS, {"ids": ids[start:start + 500]}))
        return out

    def schema_by_fingerprint(self, fingerprint: str) -> StoredSchema | None:
        """The schema with this content identity."""
        found = self._schema_rows(_Q_SCHEMA_BY_FINGERPRINT, {"fingerprint": fingerprint})
        return found[0] if found else None

    def schema_by_guid(self, digest: str) -> StoredSchema | None:
        """The schema whose fingerprint starts with the 32 hex digits of a guid."""
        s = tables.schemas
        found = self._schema_rows(select(s).where(s.c.fingerprint.startswith(digest, autoescape=True)).limit(1), {})
        return found[0] if found else None

    def insert_schema(
        self, *, schema_id: int | None, fingerprint: str, schema_type: str, text: str,
        references: tuple[SchemaReference, ...], metadata: dict[str, Any] | None, rule_set: dict[str, Any] | None,
        bindings: dict[str, SemanticBinding],
    ) -> StoredSchema:
        """Insert new content with the next id (or the given one)."""
        if schema_id is None:
            schema_id = int(self.conn.execute(_Q_MAX_ID).scalar_one()) + 1
        self.conn.execute(_INSERT_SCHEMA, {
            "id": schema_id, "fingerprint": fingerprint, "schema_type": schema_type, "schema_text": text,
            "references_json": _dump([r.model_dump() for r in references]), "metadata_json": _dump(metadata),
            "ruleset_json": _dump(rule_set), "bindings_json": _dump({k: b.model_dump() for k, b in bindings.items()}),
            "created_at": time.time(),
        })
        if references:
            self.conn.execute(tables.references.insert(), [
                {"schema_id": schema_id, "position": i, "name": r.name, "subject": r.subject, "version": r.version}
                for i, r in enumerate(references)
            ])
        return StoredSchema(id=schema_id, schema_type="AVRO", schema_text=text,
                            references=references, metadata=metadata, rule_set=rule_set, fingerprint=fingerprint,
                            semantic_bindings=bindings)

    def schema_usages(self, schema_id: int) -> list[SubjectVersion]:
        """Versions that point at ``schema_id``."""
        v = tables.versions
        rows = self.conn.execute(
            select(v.c.subject, v.c.version, v.c.schema_id, v.c.deleted).where(v.c.schema_id == schema_id)
            .order_by(v.c.subject, v.c.version)
        ).all()
        return [SubjectVersion(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def schema_in_use(self, schema_id: int) -> bool:
        """Whether a version points at ``schema_id`` (one indexed probe)."""
        return self.conn.execute(_Q_IN_USE, {"id": schema_id}).first() is not None

    def referrers(self, subject: str, version: int) -> list[SubjectVersion]:
        """Versions whose schema references ``subject``/``version``."""
        if not _storable(subject):
            return []
        v, r = tables.versions, tables.references
        rows = self.conn.execute(
            select(v.c.subject, v.c.version, v.c.schema_id, v.c.deleted)
            .join(r, r.c.schema_id == v.c.schema_id)
            .where(and_(r.c.subject == subject, r.c.version == version))
            .order_by(v.c.schema_id, v.c.subject, v.c.version)
        ).all()
        return [SubjectVersion(subject=a, version=b, schema_id=c, deleted=bool(d)) for a, b, c, d in rows]

    # --- config and mode ---------------------------------------------------------------------------------------

    def config(self, scope: str) -> dict[str, Any] | None:
        """A stored config."""
        if not _storable(scope):
            return None
        raw = self.conn.execute(_Q_CONFIG, {"scope": scope}).scalar()
        return json.loads(raw) if raw else None

    def put_config(self, scope: str, config: dict[str, Any]) -> None:
        """Create or replace a config."""
        self.delete_config(scope)
        self.conn.execute(tables.configs.insert().values(scope=scope, config_json=_dump(config)))

    def delete_config(self, scope: str) -> None:
        """Remove a config."""
        self.conn.execute(delete(tables.configs).where(tables.configs.c.scope == scope))

    def mode(self, scope: str) -> str | None:
        """A stored mode."""
        if not _storable(scope):
            return None
        value = self.conn.execute(_Q_MODE, {"scope": scope}).scalar()
        return str(value) if value is not None else None

    def put_mode(self, scope: str, mode: str) -> None:
        """Create or replace a mode."""
        self.delete_mode(scope)
        self.conn.execute(tables.modes.insert().values(scope=scope, mode=mode))

    def delete_mode(self, scope: str) -> None:
        """Remove a mode."""
        self.conn.execute(delete(tables.modes).where(tables.modes.c.scope == scope))

    # --- semantic types ----------------------------------------------------------------------------------------

    def semantic_versions(self, name: str) -> list[SemanticType]:
        """Every version of a user-defined semantic type."""
        if not _storable(name):
            return []
        t = tables.semantic_types
        rows = self.conn.execute(
            select(t.c.name, t.c.version, t.c.spec_json).where(t.c.name == name).order_by(t.c.version)).all()
        return [SemanticType(name=a, version=b, spec=SemanticTypeSpec.model_validate_json(c, context=_STORED))
                for a, b, c in rows]

    def semantic_latest(self) -> list[SemanticType]:
        """The latest version of every user-defined semantic type."""
        rows = self.conn.execute(_Q_SEMANTIC_LATEST).all()
        return [SemanticType(name=a, version=b, spec=SemanticTypeSpec.model_validate_json(c, context=_STORED))
                for a, b, c in rows]

    def insert_semantic(self, semantic_type: SemanticType) -> None:
        """Store a new version (a collision on (name, version) makes the transaction retry)."""
        self.conn.execute(tables.semantic_types.insert().values(
            name=semantic_type.name, version=semantic_type.version,
            spec_json=semantic_type.spec.model_dump_json(), created_at=time.time()))

    # --- metrics -----------------------------------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(live subjects, schema ids referenced by any version)."""
        v = tables.versions
        subjects = self.conn.execute(
            select(func.count(func.distinct(v.c.subject))).where(v.c.deleted.is_(False))).scalar_one()
        schemas = self.conn.execute(select(func.count(func.distinct(v.c.schema_id)))).scalar_one()
        return int(subjects), int(schemas)
