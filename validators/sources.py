"""Where schemas and semantic types come from: files and the built-in catalogue offline, or a live registry.

validators never import the registry client (DESIGN §1); :class:`RegistrySchemas` takes any object with the two
methods of ``schema_registry.RegistryClient`` it uses (``version`` and ``semantic_types``), which governance
passes in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from schema_registry.model import SemanticType
from schema_registry.semantic import builtin_types
from validators.errors import SchemaResolutionError
from validators.model import SchemaRef

logger = logging.getLogger(__name__)


class SchemaSource(Protocol):
    """Resolves schema references and semantic types for a suite run."""

    def schema_text(self, ref: SchemaRef) -> str:
        """The Avro schema text ``ref`` points at.

        Raises:
            SchemaResolutionError: it cannot be found.
        """
        ...

    def semantic_types(self) -> Mapping[str, SemanticType]:
        """Every known semantic type by name (latest versions)."""
        ...


class _Registered(Protocol):
    schema: str


class RegistryLike(Protocol):
    """The part of ``schema_registry.RegistryClient`` that :class:`RegistrySchemas` uses."""

    def version(self, subject: str, version: int | str = "latest", *, deleted: bool = False) -> Any: ...

    def semantic_types(self) -> list[SemanticType]: ...


def read_relative(path: str, base_dir: Path | None) -> str:
    """The text of ``path`` (relative paths resolve against ``base_dir``, else the working directory).

    Raises:
        SchemaResolutionError: the file cannot be read.
    """
    p = Path(path)
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    try:
        return p.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaResolutionError(f"cannot read {p}: {e.strerror or e}") from e


def read_json_file(path: str, base_dir: Path | None) -> Any:
    """The JSON document in ``path``.

    Raises:
        SchemaResolutionError: unreadable or not JSON.
    """
    text = read_relative(path, base_dir)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaResolutionError(f"{path} is not JSON: {e}") from e


class LocalSchemas:
    """Files (relative to ``base_dir``), inline schemas and the built-in semantic catalogue; no registry.

    Args:
        base_dir: where relative paths resolve.
        types: extra semantic types (override built-ins of the same name).
    """

    def __init__(self, base_dir: Path | None = None, types: Mapping[str, SemanticType] | None = None) -> None:
        self.base_dir = base_dir
        self._types = {**builtin_types(), **(types or {})}

    def schema_text(self, ref: SchemaRef) -> str:
        """See :meth:`SchemaSource.schema_text`; subjects need a registry and raise."""
        if ref.inline is not None:
            return json.dumps(ref.inline)
        if ref.path is not None:
            return read_relative(ref.path, self.base_dir)
        raise SchemaResolutionError(f"subject {ref.subject!r} needs a schema registry "
                                    "(run the suite with schemas=RegistrySchemas(client))")

    def semantic_types(self) -> Mapping[str, SemanticType]:
        """The built-in catalogue plus the extra types."""
        return self._types


class RegistrySchemas(LocalSchemas):
    """Subjects and semantic types from a live registry; files and inline schemas as :class:`LocalSchemas`.

    Args:
        client: a ``schema_registry.RegistryClient`` (or anything with its ``version`` and ``semantic_types``).
        base_dir: where relative paths resolve.
    """

    def __init__(self, client: RegistryLike, base_dir: Path | None = None) -> None:
        super().__init__(base_dir)
        self.client = client
        self._registry_types: dict[str, SemanticType] | None = None

    def schema_text(self, ref: SchemaRef) -> str:
        """See :meth:`SchemaSource.schema_text`."""
        if ref.subject is None:
            return super().schema_text(ref)
        try:
            registered = self.client.version(ref.subject, ref.version)
        except Exception as e:  # the client's own error tree; validators do not import it
            raise SchemaResolutionError(f"cannot fetch subject {ref.subject!r} version {ref.version}: {e}") from e
        return str(registered.schema)

    def semantic_types(self) -> Mapping[str, SemanticType]:
        """The registry's types (fetched once per source; built-ins are among them)."""
        if self._registry_types is None:
            try:
                self._registry_types = {t.name: t for t in self.client.semantic_types()}
            except Exception as e:
                raise SchemaResolutionError(f"cannot fetch semantic types from the registry: {e}") from e
            logger.debug("fetched %d semantic types from the registry", len(self._registry_types))
        return {**builtin_types(), **self._registry_types}
