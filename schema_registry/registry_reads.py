"""The registry's reads, independent of HTTP: subjects, versions, schemas by id, guid or metadata, their usages and
referrers. Each is one read-only store transaction; committed schema content is cached by id (it never changes).
:class:`schema_registry.registry.Registry` adds registration, lookup, compatibility tests and deletes.
"""

from __future__ import annotations

import logging
import re

from schema_registry.cache import Lru
from schema_registry.catalogue import SemanticCatalogue
from schema_registry.config import ConfigService
from schema_registry.errors import SchemaNotFoundError, SubjectNotFoundError, VersionNotFoundError
from schema_registry.identifiers import parse_version
from schema_registry.model import StoredSchema, SubjectVersion
from schema_registry.settings import Settings
from schema_registry.store import RegistryStore, StoreSession

logger = logging.getLogger(__name__)

CONTENT_CACHE_BYTES = 64 * 1024 * 1024
"""Budget of the cache of stored schemas by id (lookups by id and version reads), in bytes of schema text."""


def subject_not_found(subject: str) -> SubjectNotFoundError:
    """Confluent's error for a subject without (visible) versions."""
    return SubjectNotFoundError(f"Subject '{subject}' not found.")


class RegistryReads:
    """The read side of the registry service over a store."""

    def __init__(self, store: RegistryStore, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.configs = ConfigService(store, self.settings)
        self.semantic = SemanticCatalogue(store)
        self._content_cache: Lru[int, StoredSchema] = Lru(CONTENT_CACHE_BYTES,
                                                            weigh=lambda st: len(st.schema_text) + 1024)

    def subjects(self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False) -> list[str]:
        """Subject names (live ones unless ``deleted`` / ``deleted_only``), filtered by prefix."""
        names = self.store.run(lambda s: s.subjects(deleted=deleted, deleted_only=deleted_only), write=False)
        return [n for n in names if n.startswith(prefix)]

    def versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False,
                 deleted_as_negative: bool = False) -> list[int]:
        """Version numbers of a subject.

        Raises:
            SubjectNotFoundError: no version matches.
        """
        rows = self.store.run(lambda s: s.versions(subject), write=False)
        if deleted_only:
            rows = [r for r in rows if r.deleted]
        elif not deleted:
            rows = [r for r in rows if not r.deleted]
        if not rows:
            raise subject_not_found(subject)
        return [-r.version if (deleted_as_negative and r.deleted) else r.version for r in rows]

    def version(self, subject: str, version: str, *, deleted: bool = False) -> tuple[SubjectVersion, StoredSchema]:
        """One version of a subject with its schema.

        Raises:
            InvalidVersionError, SubjectNotFoundError, VersionNotFoundError.
        """
        number = parse_version(version)

        def tx(s: StoreSession) -> tuple[SubjectVersion, StoredSchema]:
            row = self._find_version(s, subject, number, deleted=deleted)
            return row, self._committed_schema(s, row.schema_id)

        return self.store.run(tx, write=False)

    def _find_version(self, s: StoreSession, subject: str, number: int | None, *, deleted: bool) -> SubjectVersion:
        rows = s.versions(subject)
        visible = rows if deleted else [r for r in rows if not r.deleted]
        if not visible:
            raise subject_not_found(subject)
        if number is None:
            return visible[-1]
        for r in visible:
            if r.version == number:
                return r
        raise VersionNotFoundError(f"Version {number} not found.")

    def schema(self, schema_id: int) -> StoredSchema:
        """The schema with a global id (soft-deleted versions still serve it).

        Raises:
            SchemaNotFoundError: no version uses the id.
        """
        def tx(s: StoreSession) -> StoredSchema:
            if not s.schema_in_use(schema_id):
                raise SchemaNotFoundError(f"Schema {schema_id} not found")
            return self._committed_schema(s, schema_id)

        return self.store.run(tx, write=False)

    def schema_in_use(self, schema_id: int) -> bool:
        """Whether a version (soft-deleted included) uses the id, i.e. whether :meth:`schema` serves it.

        One statement outside a transaction (see ``RegistryStore.schema_in_use``): for callers that already hold
        the id's content, which never changes.

        Raises:
            StoreError: the database failed.
        """
        return self.store.schema_in_use(schema_id)

    def schema_by_guid(self, guid: str) -> StoredSchema:
        """The schema whose content guid is ``guid``.

        Raises:
            SchemaNotFoundError: unknown guid.
        """
        digest = guid.replace("-", "").lower()
        if not re.fullmatch(r"[0-9a-f]{32}", digest):
            raise SchemaNotFoundError(f"Schema {guid} not found")

        def tx(s: StoreSession) -> StoredSchema:
            stored = s.schema_by_guid(digest)
            if stored is None or not s.schema_usages(stored.id):
                raise SchemaNotFoundError(f"Schema {guid} not found")
            return stored

        return self.store.run(tx, write=False)

    def schema_usages(self, schema_id: int, *, deleted: bool = False,
                      subject: str | None = None) -> list[SubjectVersion]:
        """The subject versions that use a schema id.

        Raises:
            SchemaNotFoundError: no version (of any state) uses the id.
        """
        rows = self.store.run(lambda s: s.schema_usages(schema_id), write=False)
        if not rows:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return [r for r in rows if (deleted or not r.deleted) and (subject is None or r.subject == subject)]

    def latest_schemas(self, *, prefix: str = "", deleted: bool = False,
                       latest_only: bool = False) -> list[tuple[SubjectVersion, StoredSchema]]:
        """Every (version, schema) under subjects starting with ``prefix`` (``GET /schemas``)."""
        def tx(s: StoreSession) -> list[tuple[SubjectVersion, StoredSchema]]:
            rows = [r for r in s.all_versions() if r.subject.startswith(prefix) and (deleted or not r.deleted)]
            if latest_only:
                last: dict[str, SubjectVersion] = {}
                for r in rows:
                    last[r.subject] = r
                rows = list(last.values())
            return [(r, self._schema_or_fail(s, r.schema_id)) for r in rows]

        return self.store.run(tx, write=False)

    def referenced_by(self, subject: str, version: str) -> list[int]:
        """Ids of the live schemas that reference ``subject``/``version``."""
        number = parse_version(version)

        def tx(s: StoreSession) -> list[int]:
            row = self._find_version(s, subject, number, deleted=False)
            return sorted({r.schema_id for r in s.referrers(subject, row.version) if not r.deleted})

        return self.store.run(tx, write=False)

    def latest_with_metadata(self, subject: str, properties: dict[str, str], *,
                             deleted: bool = False) -> tuple[SubjectVersion, StoredSchema]:
        """The latest version whose ``metadata.properties`` contain every given pair.

        Raises:
            SubjectNotFoundError, SchemaNotFoundError.
        """
        def tx(s: StoreSession) -> tuple[SubjectVersion, StoredSchema]:
            rows = [r for r in s.versions(subject) if deleted or not r.deleted]
            if not rows:
                raise subject_not_found(subject)
            for row in reversed(rows):
                stored = self._schema_or_fail(s, row.schema_id)
                props = (stored.metadata or {}).get("properties") or {}
                if all(props.get(k) == v for k, v in properties.items()):
                    return row, stored
            raise SchemaNotFoundError(f"Schema with metadata {properties} not found in subject '{subject}'")

        return self.store.run(tx, write=False)

    def _committed_schema(self, s: StoreSession, schema_id: int) -> StoredSchema:
        """The content of an id, from the content cache when it holds it.

        Only for read-only transactions: what they read is committed, and committed content never changes. (A
        write transaction may read a row it inserted itself and then roll back, after which the id can be given
        to other content.)

        Raises:
            SchemaNotFoundError: no such id.
        """
        hit = self._content_cache.get(schema_id)
        if hit is not None:
            return hit
        stored = self._schema_or_fail(s, schema_id)
        self._content_cache.put(schema_id, stored)
        return stored

    def _known_schema(self, s: StoreSession, schema_id: int) -> StoredSchema:
        """The content of an id the transaction found in a version row: from the content cache when it holds it
        (committed content never changes), else read; for any transaction, as it does not fill the cache.

        Raises:
            SchemaNotFoundError: no such id.
        """
        hit = self._content_cache.get(schema_id)
        return hit if hit is not None else self._schema_or_fail(s, schema_id)

    def _schema_or_fail(self, s: StoreSession, schema_id: int) -> StoredSchema:
        stored = s.schema(schema_id)
        if stored is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return stored
