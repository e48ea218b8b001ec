"""The store interface: what the registry needs from a database, as one transactional unit of work.

```
store.run(fn, write=True) ──► BEGIN ──► fn(session) ──► COMMIT
                                 ▲            │ unique-key collision / serialization failure
                                 └── retry ◄──┘ (ROLLBACK first; registry errors roll back and propagate)
```

``fn`` must be safe to run more than once: everything it decides is re-read inside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from schema_registry.identifiers import GLOBAL_SCOPE
from schema_registry.model import SchemaReference, SemanticBinding, SemanticType, StoredSchema, SubjectVersion

T = TypeVar("T")

__all__ = ["GLOBAL_SCOPE", "RegistryStore", "StoreSession"]


class StoreSession(Protocol):
    """Reads and writes inside one transaction."""

    def versions(self, subject: str) -> list[SubjectVersion]:
        """Every version of ``subject`` (soft-deleted ones included), oldest first."""
        ...

    def subjects(self, *, deleted: bool, deleted_only: bool) -> list[str]:
        """Subjects with a live version (``deleted``: or a soft-deleted one; ``deleted_only``: only those)."""
        ...

    def all_versions(self) -> list[SubjectVersion]:
        """Every version of every subject, ordered by subject then version."""
        ...

    def schema(self, schema_id: int) -> StoredSchema | None:
        """The schema with this global id."""
        ...

    def schema_in_use(self, schema_id: int) -> bool:
        """Whether any version (soft-deleted included) points at this schema id."""
        ...

    def schemas(self, schema_ids: Sequence[int]) -> dict[int, StoredSchema]:
        """The schemas with these global ids (missing ids are absent from the answer), in one round of queries."""
        ...

    def schema_by_fingerprint(self, fingerprint: str) -> StoredSchema | None:
        """The schema with this content identity."""
        ...

    def schema_by_guid(self, digest: str) -> StoredSchema | None:
        """The schema whose fingerprint starts with the 32 hex digits of a guid."""
        ...

    def insert_schema(
        self, *, schema_id: int | None, fingerprint: str, schema_type: str, text: str,
        references: tuple[SchemaReference, ...], metadata: dict[str, Any] | None, rule_set: dict[str, Any] | None,
        bindings: dict[str, SemanticBinding],
    ) -> StoredSchema:
        """Insert new content; the id is ``max(id) + 1`` unless ``schema_id`` is given (import)."""
        ...

    def insert_version(self, subject: str, version: int, schema_id: int) -> SubjectVersion:
        """Add a version row."""
        ...

    def mark_deleted(self, subject: str, version: int) -> None:
        """Soft-delete a version."""
        ...

    def remove_version(self, subject: str, version: int) -> None:
        """Hard-delete a version row (the content row stays, so its id can be reused by the same content)."""
        ...

    def schema_usages(self, schema_id: int) -> list[SubjectVersion]:
        """The versions (soft-deleted included) that point at this schema id."""
        ...

    def referrers(self, subject: str, version: int) -> list[SubjectVersion]:
        """The versions whose schema references ``subject``/``version``."""
        ...

    def config(self, scope: str) -> dict[str, Any] | None:
        """The stored config of a subject (or of ``GLOBAL_SCOPE``)."""
        ...

    def put_config(self, scope: str, config: dict[str, Any]) -> None:
        """Create or replace a config."""
        ...

    def delete_config(self, scope: str) -> None:
        """Remove a config."""
        ...

    def mode(self, scope: str) -> str | None:
        """The stored mode of a subject (or of ``GLOBAL_SCOPE``)."""
        ...

    def put_mode(self, scope: str, mode: str) -> None:
        """Create or replace a mode."""
        ...

    def delete_mode(self, scope: str) -> None:
        """Remove a mode."""
        ...

    def semantic_versions(self, name: str) -> list[SemanticType]:
        """Every stored version of a user-defined semantic type, oldest first."""
        ...

    def semantic_latest(self) -> list[SemanticType]:
        """The latest version of every user-defined semantic type."""
        ...

    def insert_semantic(self, semantic_type: SemanticType) -> None:
        """Store a new version of a semantic type."""
        ...

    def counts(self) -> tuple[int, int]:
        """(subjects with a live version, schema ids in use)."""
        ...


class RegistryStore(Protocol):
    """A durable store behind the registry."""

    url: str
    local_reads: bool
    """Whether a one-statement read is local and brief (SQLite in WAL mode: readers never wait for writers), so
    the server may run it on its event loop instead of handing it to a worker thread."""

    def schema_in_use(self, schema_id: int) -> bool:
        """Whether any version (soft-deleted included) points at this schema id: one statement, outside ``run``.

        Raises:
            StoreError: the database failed.
        """
        ...

    def run(self, fn: Callable[[StoreSession], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction, retrying on write conflicts.

        Raises:
            StoreError: the database failed or conflicts persisted.
            SchemaRegistryError: whatever ``fn`` raised (the transaction is rolled back).
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...
