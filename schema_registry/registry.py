"""The registry's behaviour, independent of HTTP: subjects, versions, schemas, deletes, compatibility.

Every operation is one store transaction (``store.run``), so it either happens whole or not at all, and the
rules below are re-checked against what the transaction reads (several server processes may share a
PostgreSQL store). Registration follows Confluent's order:

```
mode check ─► parse + validate (size, Avro, defaults, references, ruleSet, semantic types)
   ─► same content already live under the subject? ─► return it (no check, no new version)
   ─► compatibility against the live versions (unless force / IMPORT)
   ─► id: same content anywhere ─► reuse its id, else max(id)+1
   ─► version: max(all versions, soft-deleted included)+1
```
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import avro.schema

from schema_registry.avro import ParsedSchema, fingerprint, normalized_text, parse_schema
from schema_registry.cache import Lru
from schema_registry.compatibility import (
    BoundField,
    CompatibilityResult,
    RecordShape,
    VersionedSchema,
    check_level,
    record_shape,
)
from schema_registry.errors import (
    IdMismatchError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SchemaTooLargeError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from schema_registry.history import HistoryIndex
from schema_registry.identifiers import parse_version, validate_subject
from schema_registry.model import (
    CompatibilityLevel,
    Mode,
    RegisterRequest,
    SchemaReference,
    SemanticBinding,
    StoredSchema,
    SubjectVersion,
)
from schema_registry.registry_reads import RegistryReads, subject_not_found
from schema_registry.rules import validate_rule_set
from schema_registry.semantic import bind_fields, declared_bindings
from schema_registry.settings import Settings
from schema_registry.store import RegistryStore, StoreSession

logger = logging.getLogger(__name__)


PREPARED_CACHE_SIZE = 1000
"""Stored schemas kept parsed for compatibility checks (by global id)."""
HISTORY_CACHE_SIZE = 128
"""History indexes kept (by the tuple of schema ids they index): about two per actively registering subject."""

@dataclass(frozen=True)
class _Prepared:
    """A stored schema ready for level checks: parsed, its record shape, its semantic bindings resolved."""

    avro: avro.schema.Schema
    shape: RecordShape | None
    bound: dict[str, BoundField]


@dataclass(frozen=True)
class _Candidate:
    parsed: ParsedSchema
    text: str
    references: tuple[SchemaReference, ...]
    metadata: dict[str, Any] | None
    rule_set: dict[str, Any] | None
    bindings: dict[str, SemanticBinding]
    fingerprint: str


class Registry(RegistryReads):
    """The registry service over a store: the reads of :class:`RegistryReads`, registration, lookup, compatibility
    tests and deletes.

    Example:
        >>> from schema_registry.store import open_store  # doctest: +SKIP
        >>> reg = Registry(open_store("sqlite:///r.db"))  # doctest: +SKIP
        >>> v, s = reg.register("trips-value", RegisterRequest(schema='"string"'))  # doctest: +SKIP
    """

    def __init__(self, store: RegistryStore, settings: Settings | None = None) -> None:
        super().__init__(store, settings)
        self._prepared_cache: Lru[int, _Prepared] = Lru(PREPARED_CACHE_SIZE)
        self._prepared_by_content: Lru[str, _Prepared] = Lru(64)  # candidates just checked, by fingerprint
        self._histories: Lru[tuple[int, ...], HistoryIndex] = Lru(HISTORY_CACHE_SIZE)


    # --- registration and lookup -----------------------------------------------------------------------------

    def register(self, subject: str, request: RegisterRequest, *, normalize: bool = False,
                 force: bool = False) -> tuple[SubjectVersion, StoredSchema]:
        """Register a schema under a subject (idempotent for content already live there).

        Returns:
            The version row and the stored schema.

        Raises:
            InvalidSubjectError, OperationNotPermittedError (mode), SchemaTooLargeError, InvalidSchemaError,
            InvalidRuleSetError, IncompatibleSchemaError, IdMismatchError, StoreError.
        """
        validate_subject(subject)
        self._precheck_size(request)

        def tx(s: StoreSession) -> tuple[SubjectVersion, StoredSchema]:
            mode = self.configs.mode_in(s, subject)
            if not mode.writable:
                raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
            importing = mode is Mode.IMPORT
            if request.id is not None and not importing:
                raise OperationNotPermittedError(f"Subject {subject} is not in import mode")
            rows = s.versions(subject)
            live = [r for r in rows if not r.deleted]
            next_version = (rows[-1].version + 1) if rows else 1
            latest = self._known_schema(s, live[-1].schema_id) if live else None
            effective = self.configs.effective_in(s, subject)
            cand = self._candidate(s, subject, request, normalize=normalize or effective.normalize,
                                   inherit_from=latest)
            existing = s.schema_by_fingerprint(cand.fingerprint)
            if existing is not None:
                for r in reversed(live):
                    if r.schema_id == existing.id and (request.id is None or request.id == existing.id):
                        return r, existing
            if request.version is not None and not importing and request.version != next_version:
                raise InvalidVersionError(
                    f"Version {request.version} is not the next version {next_version} of subject {subject}")
            if not force and mode is not Mode.IMPORT and mode is not Mode.FORWARD:
                result = self._check(s, cand, live, effective.level)
                if not result.is_compatible:
                    raise IncompatibleSchemaError(
                        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                        f"details: [{', '.join(result.messages)}]",
                        messages=list(result.messages), error_code=self.settings.incompatible_error_code)
            stored = self._store_content(s, cand, existing, request.id if importing else None)
            version = request.version if (importing and request.version is not None) else next_version
            if any(r.version == version for r in rows):
                raise InvalidVersionError(f"Version {version} of subject {subject} already exists")
            row = s.insert_version(subject, version, stored.id)
            for r in rows:  # Confluent: a soft-deleted older version of the same content is tombstoned
                if r.deleted and r.schema_id == stored.id and not s.referrers(subject, r.version):
                    s.remove_version(subject, r.version)
            logger.info("registered subject=%s version=%d id=%d", subject, version, stored.id)
            return row, stored

        row, stored = self.store.run(tx, write=True)
        # committed: the id's content is settled for good, so the cache of prepared schemas may learn it by id (the
        # next registration of the subject then finds this version prepared without a query)
        prepared = self._prepared_by_content.get(stored.fingerprint)
        if prepared is not None:
            self._prepared_cache.put(stored.id, prepared)
        return row, stored

    def _store_content(self, s: StoreSession, cand: _Candidate, existing: StoredSchema | None,
                       import_id: int | None) -> StoredSchema:
        """The content row of the candidate: ``existing`` (the row with its fingerprint, read in this transaction),
        or a new one."""
        if existing is not None:
            if import_id is not None and import_id != existing.id:
                raise IdMismatchError(
                    f"Schema already registered with id {existing.id} instead of input id {import_id}")
            return existing
        if import_id is not None and s.schema(import_id) is not None:
            raise IdMismatchError(f"Overwrite new schema with id {import_id} is not permitted.")
        return s.insert_schema(
            schema_id=import_id, fingerprint=cand.fingerprint, schema_type="AVRO", text=cand.text,
            references=cand.references, metadata=cand.metadata, rule_set=cand.rule_set, bindings=cand.bindings)

    def lookup(self, subject: str, request: RegisterRequest, *, normalize: bool = False,
               deleted: bool = False) -> tuple[SubjectVersion, StoredSchema]:
        """Find the version of ``subject`` that holds this schema content.

        Raises:
            InvalidSchemaError, SubjectNotFoundError, SchemaNotFoundError.
        """
        self._precheck_size(request)

        def tx(s: StoreSession) -> tuple[SubjectVersion, StoredSchema]:
            rows = [r for r in s.versions(subject) if deleted or not r.deleted]
            norm = normalize or self.configs.normalize_in(s, subject)
            live = [r for r in rows if not r.deleted]
            latest = self._schema_or_fail(s, live[-1].schema_id) if live else None
            plain = self._candidate(s, subject, request, normalize=norm, inherit_from=None)
            if not rows:
                raise subject_not_found(subject)
            prints = [plain.fingerprint]
            if latest is not None:
                prints.append(self._candidate(s, subject, request, normalize=norm, inherit_from=latest).fingerprint)
            for fp in prints:
                stored = s.schema_by_fingerprint(fp)
                if stored is None:
                    continue
                for r in reversed(rows):
                    if r.schema_id == stored.id:
                        return r, stored
            raise SchemaNotFoundError("Schema not found")

        return self.store.run(tx, write=False)

    # --- compatibility ---------------------------------------------------------------------------------------

    def test_compatibility(self, subject: str, request: RegisterRequest, version: str | None, *,
                           normalize: bool = False) -> CompatibilityResult:
        """Check a schema against one version (``version``) or against what registration would check (None).

        A subject without versions is compatible with anything (Confluent, on purpose).

        Raises:
            InvalidSchemaError, InvalidVersionError, SubjectNotFoundError, VersionNotFoundError.
        """
        number = parse_version(version) if version is not None else None
        self._precheck_size(request)

        def tx(s: StoreSession) -> CompatibilityResult:
            rows = s.versions(subject)
            live = [r for r in rows if not r.deleted]
            latest = self._known_schema(s, live[-1].schema_id) if live else None
            effective = self.configs.effective_in(s, subject)
            cand = self._candidate(s, subject, request, normalize=normalize or effective.normalize,
                                   inherit_from=latest)
            level = effective.level
            if version is None:
                return self._check(s, cand, live, level)
            if number is None:
                targets = live[-1:]
            else:
                if not rows:
                    raise subject_not_found(subject)
                targets = [r for r in live if r.version == number]
                if not targets:
                    raise VersionNotFoundError(f"Version {number} not found.")
            return self._check(s, cand, targets, level)

        return self.store.run(tx, write=False)

    def _check(self, s: StoreSession, cand: _Candidate, previous: Sequence[SubjectVersion],
               level: CompatibilityLevel) -> CompatibilityResult:
        if level is CompatibilityLevel.NONE or not previous:
            return CompatibilityResult(True)
        if not level.transitive:
            previous = previous[-1:]
        bound = self._bound(s, cand.bindings)
        shape = record_shape(cand.parsed.avro)
        new = VersionedSchema(cand.parsed.avro, None, bound, shape)
        if cand.text == cand.parsed.text:  # (normalized text would parse to other alias spellings)
            # by content, not id: whether or not this transaction commits, a later check that meets this content
            # stored (the next registration, where this one is history) need not parse it again
            self._prepared_by_content.put(cand.fingerprint, _Prepared(cand.parsed.avro, shape, bound))
        if level is CompatibilityLevel.BACKWARD_TRANSITIVE and shape is not None and not bound and len(previous) > 1:
            # only the versions the history index cannot prove readable are visited one by one (their messages are
            # all check_level could report: a version the new schema reads adds none, as the new schema binds no
            # semantic type)
            proven = self._history(s, tuple(row.schema_id for row in previous)).readable(shape)
            previous = [row for position, row in enumerate(previous) if not proven >> position & 1]
        prepared = self._prepared(s, [row.schema_id for row in previous])
        old = [VersionedSchema(p.avro, row.version, p.bound, p.shape)
               for row, p in zip(previous, prepared, strict=True)]
        return check_level(new, old, level)

    def _history(self, s: StoreSession, schema_ids: tuple[int, ...]) -> HistoryIndex:
        """The history index of these versions' schemas (oldest first): cached by the ids, and built from the index
        of all but the last one when that is cached (the common case: the last check of the subject, before the
        version it registered)."""
        index = self._histories.get(schema_ids)
        if index is None:
            base = self._histories.get(schema_ids[:-1])
            if base is not None:
                index = base.extend([p.shape for p in self._prepared(s, schema_ids[-1:])])
            else:
                index = HistoryIndex.build([p.shape for p in self._prepared(s, schema_ids)])
            self._histories.put(schema_ids, index)
        return index

    def _bound(self, s: StoreSession, bindings: dict[str, SemanticBinding]) -> dict[str, BoundField]:
        out = {}
        for path, b in bindings.items():
            st = self.semantic.version_in(s, b.name, b.version)
            out[path] = BoundField(st.name, st.version, st.spec.constraints)
        return out

    # --- deletes ---------------------------------------------------------------------------------------------

    def delete_version(self, subject: str, version: str, *, permanent: bool = False) -> int:
        """Soft-delete a version, or hard-delete a soft-deleted one (``permanent``).

        Raises:
            InvalidVersionError, SubjectNotFoundError, VersionNotFoundError, VersionSoftDeletedError,
            VersionNotSoftDeletedError, ReferenceExistsError, OperationNotPermittedError.
        """
        number = parse_version(version)

        def tx(s: StoreSession) -> int:
            self.configs.require_writable(s, subject)
            rows = s.versions(subject)
            if not rows:
                raise subject_not_found(subject)
            if number is None:
                live = [r for r in rows if not r.deleted]
                candidates = live or (rows if permanent else [])
                if not candidates:
                    raise subject_not_found(subject)
                row = candidates[-1]
            else:
                found = [r for r in rows if r.version == number]
                if not found:
                    raise VersionNotFoundError(f"Version {number} not found.")
                row = found[0]
            referrers = [r for r in s.referrers(subject, row.version) if permanent or not r.deleted]
            if not permanent:
                if row.deleted:
                    raise VersionSoftDeletedError(
                        f"Version {row.version} was soft deleted. Set permanent=true to delete permanently")
                if referrers:
                    raise _referenced(subject, row.version, referrers)
                s.mark_deleted(subject, row.version)
            else:
                if not row.deleted:
                    raise VersionNotSoftDeletedError(
                        f"Subject '{subject}' Version {row.version} was not deleted first before being "
                        "permanently deleted")
                if referrers:
                    raise _referenced(subject, row.version, referrers)
                s.remove_version(subject, row.version)
                if len(rows) == 1:
                    s.delete_config(subject)
                    s.delete_mode(subject)
            logger.info("deleted subject=%s version=%d permanent=%s", subject, row.version, permanent)
            return row.version

        return self.store.run(tx, write=True)

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete every live version, or hard-delete a soft-deleted subject (``permanent``).

        Raises:
            SubjectNotFoundError, SubjectSoftDeletedError, SubjectNotSoftDeletedError, ReferenceExistsError,
            OperationNotPermittedError.
        """
        def tx(s: StoreSession) -> list[int]:
            self.configs.require_writable(s, subject)
            rows = s.versions(subject)
            if not rows:
                raise subject_not_found(subject)
            live = [r for r in rows if not r.deleted]
            if not permanent:
                if not live:
                    raise SubjectSoftDeletedError(
                        f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently")
                for r in live:
                    refs = [x for x in s.referrers(subject, r.version) if not x.deleted and x.subject != subject]
                    if refs:
                        raise _referenced(subject, r.version, refs)
                for r in live:
                    s.mark_deleted(subject, r.version)
                return [r.version for r in live]
            if live:
                raise SubjectNotSoftDeletedError(
                    f"Subject '{subject}' was not deleted first before being permanently deleted")
            for r in rows:
                refs = [x for x in s.referrers(subject, r.version) if x.subject != subject]
                if refs:
                    raise _referenced(subject, r.version, refs)
            for r in rows:
                s.remove_version(subject, r.version)
            s.delete_config(subject)
            s.delete_mode(subject)
            return [r.version for r in rows]

        versions = self.store.run(tx, write=True)
        logger.info("deleted subject=%s versions=%s permanent=%s", subject, versions, permanent)
        return versions

    # --- config and mode -------------------------------------------------------------------------------------

    # --- semantic types --------------------------------------------------------------------------------------

    # --- metrics ---------------------------------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(live subjects, schema ids in use)."""
        return self.store.run(lambda s: s.counts(), write=False)

    # --- helpers ---------------------------------------------------------------------------------------------

    def _precheck_size(self, request: RegisterRequest) -> None:
        size = len(request.schema_text.encode("utf-8"))
        if size > self.settings.max_schema_bytes:
            raise SchemaTooLargeError(
                f"Schema too large: {size} bytes, the limit is {self.settings.max_schema_bytes} bytes")

    def _candidate(self, s: StoreSession, subject: str, request: RegisterRequest, *, normalize: bool,
                   inherit_from: StoredSchema | None) -> _Candidate:
        if request.schema_type.upper() != "AVRO":
            raise InvalidSchemaError(
                f"Invalid schema type {request.schema_type}: this registry supports AVRO only")
        text = request.schema_text
        metadata, rule_set = request.metadata, request.rule_set
        if inherit_from is not None:
            metadata = metadata if metadata is not None else inherit_from.metadata
            rule_set = rule_set if rule_set is not None else inherit_from.rule_set
        if not text.strip():
            if inherit_from is not None and (request.metadata is not None or request.rule_set is not None):
                text = inherit_from.schema_text
            else:
                raise InvalidSchemaError("Invalid schema: empty schema")
        if rule_set is not None:
            validate_rule_set(rule_set)
        if metadata is not None and not _valid_metadata(metadata):
            raise InvalidSchemaError("Invalid schema: metadata must be an object of tags, properties and sensitive")
        referenced = self._referenced_texts(s, request.references, set())
        parsed = parse_schema(text, referenced)
        stored_text = normalized_text(parsed.text) if normalize else parsed.text
        # the catalogue is read only for schemas that bind a field (most bind none)
        bindings = bind_fields(parsed.avro, self.semantic.latest_in(s)) if declared_bindings(parsed.avro) else {}
        refs = tuple(sorted(set(request.references), key=lambda r: (r.name, r.subject, r.version))) if normalize \
            else request.references
        fp = fingerprint("AVRO", stored_text, refs, metadata, rule_set)
        return _Candidate(parsed, stored_text, refs, metadata, rule_set, bindings, fp)

    def _referenced_texts(self, s: StoreSession, refs: Sequence[SchemaReference],
                          seen: set[tuple[str, int]]) -> list[str]:
        out: list[str] = []
        for ref in refs:
            key = (ref.subject, ref.version)
            if key in seen:
                continue
            seen.add(key)
            target = [r for r in s.versions(ref.subject) if r.version == ref.version]
            if not target and ref.version == -1:
                live = [r for r in s.versions(ref.subject) if not r.deleted]
                target = live[-1:]
            if not target:
                raise InvalidSchemaError(
                    f"Invalid schema: reference '{ref.name}' points at subject '{ref.subject}' version "
                    f"{ref.version}, which does not exist")
            stored = self._schema_or_fail(s, target[0].schema_id)
            out.extend(self._referenced_texts(s, stored.references, seen))
            out.append(stored.schema_text)
        return out

    def _prepared(self, s: StoreSession, schema_ids: Sequence[int]) -> list[_Prepared]:
        """Stored schemas ready for level checks, in the order of ``schema_ids``.

        The content of an id never changes (content rows are never updated or deleted), so what is prepared once
        is kept (LRU, ``PREPARED_CACHE_SIZE`` ids) and a warm check reads no schema from the store; the misses are
        fetched in one round of queries, and content a recent check prepared as a candidate (the last version
        registered, typically) is taken by its fingerprint instead of being parsed again.

        Raises:
            SchemaNotFoundError: an id without content (a corrupt store).
        """
        found: dict[int, _Prepared] = {}
        for schema_id in schema_ids:
            hit = self._prepared_cache.get(schema_id)
            if hit is not None:
                found[schema_id] = hit
        missing = [i for i in dict.fromkeys(schema_ids) if i not in found]
        if missing:
            stored = s.schemas(missing)
            for schema_id in missing:
                st = stored.get(schema_id)
                if st is None:
                    raise SchemaNotFoundError(f"Schema {schema_id} not found")
                hit = self._prepared_by_content.get(st.fingerprint)
                if hit is None:
                    parsed = parse_schema(st.schema_text, self._referenced_texts(s, st.references, set()),
                                          validate_defaults=False)
                    hit = _Prepared(parsed.avro, record_shape(parsed.avro), self._bound(s, st.semantic_bindings))
                found[schema_id] = hit
            for schema_id in missing:
                self._prepared_cache.put(schema_id, found[schema_id])
        return [found[i] for i in schema_ids]

def _referenced(subject: str, version: int, referrers: list[SubjectVersion]) -> ReferenceExistsError:
    ids = sorted({r.schema_id for r in referrers})
    return ReferenceExistsError(
        f"One or more references exist to the schema {{subject={subject}, version={version}}}: schema ids {ids}")


def _valid_metadata(metadata: dict[str, Any]) -> bool:
    tags, props, sensitive = metadata.get("tags"), metadata.get("properties"), metadata.get("sensitive")
    return ((tags is None or isinstance(tags, dict)) and (props is None or isinstance(props, dict))
            and (sensitive is None or isinstance(sensitive, list)))


