"""The semantic-type catalogue: built-in types plus user-defined, versioned ones kept in the store.

A user-defined type gets version 1 on creation and a new version each time its definition changes; putting an
unchanged definition is a no-op. Built-in types (``schema_registry.semantic.builtin_types``) are read-only.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from schema_registry.errors import InvalidSemanticTypeError, OperationNotPermittedError, SemanticTypeNotFoundError
from schema_registry.identifiers import parse_version
from schema_registry.model import SemanticType, SemanticTypeSpec, valid_semantic_type_name
from schema_registry.semantic import builtin_types
from schema_registry.store import RegistryStore, StoreSession

logger = logging.getLogger(__name__)


class SemanticCatalogue:
    """Semantic types over a store."""

    def __init__(self, store: RegistryStore) -> None:
        self.store = store

    def all(self) -> list[SemanticType]:
        """Every semantic type (built-ins and the latest version of each user-defined one), by name."""
        return sorted(self.store.run(self.latest_in, write=False).values(), key=lambda t: t.name)

    def get(self, name: str, version: str | None = None) -> SemanticType:
        """One semantic type (latest, or a given version).

        Raises:
            SemanticTypeNotFoundError, InvalidVersionError.
        """
        number = parse_version(version) if version is not None else None
        return self.store.run(lambda s: self.version_in(s, name, number), write=False)

    def versions(self, name: str) -> list[int]:
        """The versions of a semantic type.

        Raises:
            SemanticTypeNotFoundError.
        """
        builtin = builtin_types().get(name)
        if builtin is not None:
            return [builtin.version]
        found = self.store.run(lambda s: s.semantic_versions(name), write=False)
        if not found:
            raise SemanticTypeNotFoundError(f"Semantic type '{name}' not found")
        return [t.version for t in found]

    def put(self, name: str, body: object) -> tuple[SemanticType, bool]:
        """Create a semantic type or add a version of it (a no-op when the definition is unchanged).

        Returns:
            The current type and whether a new version was stored.

        Raises:
            InvalidSemanticTypeError: bad name or definition; OperationNotPermittedError: a built-in name.
        """
        if not valid_semantic_type_name(name):
            raise InvalidSemanticTypeError(
                f"Invalid semantic type name '{name}': use letters, digits and '_', starting with a letter or '_'")
        if name in builtin_types():
            raise OperationNotPermittedError(f"Semantic type '{name}' is built in and cannot be changed")
        if isinstance(body, dict):
            body = {k: v for k, v in body.items() if k not in ("name", "version", "builtin")}
        try:
            spec = SemanticTypeSpec.model_validate(body)
        except ValidationError as e:
            raise InvalidSemanticTypeError(f"Invalid semantic type '{name}': {pydantic_messages(e)}") from e

        def tx(s: StoreSession) -> tuple[SemanticType, bool]:
            existing = s.semantic_versions(name)
            if existing and existing[-1].spec == spec:
                return existing[-1], False
            st = SemanticType(name=name, version=(existing[-1].version + 1) if existing else 1, spec=spec)
            s.insert_semantic(st)
            return st, True

        st, created = self.store.run(tx, write=True)
        if created:
            logger.info("semantic type %s version %d stored", st.name, st.version)
        return st, created

    def latest_in(self, s: StoreSession) -> dict[str, SemanticType]:
        """Built-ins plus the latest version of every user-defined type, inside a transaction."""
        out = dict(builtin_types())
        for st in s.semantic_latest():
            out.setdefault(st.name, st)
        return out

    def version_in(self, s: StoreSession, name: str, version: int | None) -> SemanticType:
        """One version (None: latest) of a type, inside a transaction.

        Raises:
            SemanticTypeNotFoundError.
        """
        builtin = builtin_types().get(name)
        if builtin is not None:
            if version not in (None, builtin.version):
                raise SemanticTypeNotFoundError(f"Version {version} of semantic type '{name}' not found")
            return builtin
        found = s.semantic_versions(name)
        if not found:
            raise SemanticTypeNotFoundError(f"Semantic type '{name}' not found")
        if version is None:
            return found[-1]
        for st in found:
            if st.version == version:
                return st
        raise SemanticTypeNotFoundError(f"Version {version} of semantic type '{name}' not found")


def pydantic_messages(e: ValidationError) -> str:
    """A one-line summary of a pydantic validation error."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)
