"""``RegistryClient``: a typed httpx client of the registry, with caches by id and by subject/version.

Content addressed by a global id or a numbered version never changes, so those lookups are cached for the
client's lifetime; ``latest`` is always asked afresh. Errors come back as the classes of
:mod:`schema_registry.errors`, rebuilt from Confluent's ``error_code``.

Example:
    >>> with RegistryClient("http://127.0.0.1:8081") as c:  # doctest: +SKIP
    ...     reg = c.register("trips-value", '{"type": "record", "name": "Trip", "fields": []}')
    ...     c.schema(reg.id).schema
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from schema_registry.errors import SchemaRegistryError, TransportError, error_from_response
from schema_registry.model import STORED, SchemaReference, SemanticType, SemanticTypeSpec

logger = logging.getLogger(__name__)

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it.

    Attributes:
        id: global id.
        schema: the stored schema text.
        subject: the subject (None when fetched by id).
        version: the version in ``subject`` (None when fetched by id).
        schema_type: AVRO.
        references: references to other subjects' types.
        metadata: data-contract metadata, verbatim.
        rule_set: data-contract ruleSet, verbatim.
        guid: content guid.
        deleted: the version is soft-deleted.
    """

    id: int
    schema: str
    subject: str | None = None
    version: int | None = None
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    metadata: dict[str, Any] | None = None
    rule_set: dict[str, Any] | None = None
    guid: str | None = None
    deleted: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any], *, subject: str | None = None) -> RegisteredSchema:
        """Build from a Confluent ``Schema`` / ``SchemaString`` / register response."""
        return cls(
            id=int(data["id"]) if "id" in data else -1, schema=data.get("schema", ""),
            subject=data.get("subject", subject), version=data.get("version"),
            schema_type=data.get("schemaType") or "AVRO",
            references=tuple(SchemaReference(**r) for r in data.get("references") or ()),
            metadata=data.get("metadata"), rule_set=data.get("ruleSet"), guid=data.get("guid"),
            deleted=bool(data.get("deleted", False)),
        )


@dataclass(frozen=True)
class CompatibilityReport:
    """The answer of a compatibility test."""

    is_compatible: bool
    messages: tuple[str, ...] = field(default_factory=tuple)


class RegistryClient:
    """A client of a Confluent-compatible schema registry (and of lakegate's semantic types).

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8081``.
        basic_auth: (user, password) for HTTP Basic.
        token: a bearer token (instead of ``basic_auth``).
        timeout: seconds per request.
        transport: an httpx transport (tests, proxies).
    """

    def __init__(self, url: str, *, basic_auth: tuple[str, str] | None = None, token: str | None = None,
                 timeout: float = 10.0, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        """The registry's base URL."""
        headers = {"Accept": _ACCEPT}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout,
                                  auth=httpx.BasicAuth(*basic_auth) if basic_auth else None, transport=transport)
        self._by_id: dict[int, RegisteredSchema] = {}
        self._by_version: dict[tuple[str, int], RegisteredSchema] = {}
        self._by_content: dict[tuple[str, str], RegisteredSchema] = {}
        self._lock = threading.Lock()

    # --- plumbing --------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        content = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"} if body is not None else None
        try:
            response = self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.HTTPError as e:
            raise TransportError(f"{method} {path}: {e}") from e
        if response.is_success:
            return response.json() if response.content else None
        try:
            data = response.json()
            code, message = data.get("error_code"), str(data.get("message", response.text))
        except (ValueError, AttributeError):
            code, message = None, response.text or response.reason_phrase
        raise error_from_response(response.status_code, code, message)

    @staticmethod
    def _subject(subject: str) -> str:
        return quote(subject, safe="")

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def clear_caches(self) -> None:
        """Forget every cached schema."""
        with self._lock:
            self._by_id.clear()
            self._by_version.clear()
            self._by_content.clear()

    # --- schemas ---------------------------------------------------------------------------------------------

    def register(self, subject: str, schema: str, *, references: Sequence[SchemaReference] = (),
                 metadata: dict[str, Any] | None = None, rule_set: dict[str, Any] | None = None,
                 normalize: bool = False) -> RegisteredSchema:
        """Register a schema under a subject (idempotent).

        Raises:
            IncompatibleSchemaError, InvalidSchemaError, SchemaTooLargeError, OperationNotPermittedError, ...
        """
        key = (subject, schema)
        cached = self._by_content.get(key) if not (references or metadata or rule_set or normalize) else None
        if cached is not None:
            return cached
        body = _schema_body(schema, references, metadata, rule_set)
        data = self._request("POST", f"/subjects/{self._subject(subject)}/versions", body=body,
                             params={"normalize": "true"} if normalize else None)
        registered = RegisteredSchema.from_json(data, subject=subject)
        if registered.version is not None:
            self._remember(registered)
            if not (references or metadata or rule_set or normalize):
                with self._lock:
                    self._by_content[key] = registered
        return registered

    def lookup(self, subject: str, schema: str, *, references: Sequence[SchemaReference] = (),
               deleted: bool = False) -> RegisteredSchema:
        """The version of ``subject`` holding this schema.

        Raises:
            SubjectNotFoundError, SchemaNotFoundError, InvalidSchemaError.
        """
        data = self._request("POST", f"/subjects/{self._subject(subject)}",
                             body=_schema_body(schema, references, None, None),
                             params={"deleted": "true"} if deleted else None)
        registered = RegisteredSchema.from_json(data)
        self._remember(registered)
        return registered

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with a global id (cached).

        Raises:
            SchemaNotFoundError.
        """
        with self._lock:
            hit = self._by_id.get(schema_id)
        if hit is not None:
            return hit
        data = self._request("GET", f"/schemas/ids/{schema_id}")
        registered = RegisteredSchema.from_json({**data, "id": schema_id})
        with self._lock:
            self._by_id[schema_id] = registered
        return registered

    def version(self, subject: str, version: int | str = "latest", *, deleted: bool = False) -> RegisteredSchema:
        """One version of a subject; numbered versions are cached, ``latest`` is always fetched.

        Raises:
            SubjectNotFoundError, VersionNotFoundError, InvalidVersionError.
        """
        if isinstance(version, int) and not deleted:
            with self._lock:
                hit = self._by_version.get((subject, version))
            if hit is not None:
                return hit
        data = self._request("GET", f"/subjects/{self._subject(subject)}/versions/{version}",
                             params={"deleted": "true"} if deleted else None)
        registered = RegisteredSchema.from_json(data)
        if not registered.deleted:
            self._remember(registered)
        return registered

    def latest(self, subject: str) -> RegisteredSchema:
        """The newest live version of a subject (never cached)."""
        return self.version(subject, "latest")

    def subjects(self, *, prefix: str | None = None, deleted: bool = False) -> list[str]:
        """Subject names."""
        params: dict[str, Any] = {"deleted": "true"} if deleted else {}
        if prefix:
            params["subjectPrefix"] = prefix
        return list(self._request("GET", "/subjects", params=params))

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        """Version numbers of a subject."""
        return list(self._request("GET", f"/subjects/{self._subject(subject)}/versions",
                                  params={"deleted": "true"} if deleted else None))

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> int:
        """Soft-delete (or, after that, permanently delete) a version."""
        result = int(self._request("DELETE", f"/subjects/{self._subject(subject)}/versions/{version}",
                                   params={"permanent": "true"} if permanent else None))
        with self._lock:
            self._by_version.pop((subject, result), None)
            self._by_content = {k: v for k, v in self._by_content.items() if k[0] != subject}
        return result

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete (or, after that, permanently delete) a subject."""
        result = [int(v) for v in self._request("DELETE", f"/subjects/{self._subject(subject)}",
                                                params={"permanent": "true"} if permanent else None)]
        with self._lock:
            self._by_version = {k: v for k, v in self._by_version.items() if k[0] != subject}
            self._by_content = {k: v for k, v in self._by_content.items() if k[0] != subject}
        return result

    def _remember(self, registered: RegisteredSchema) -> None:
        with self._lock:
            if registered.id >= 0:
                self._by_id.setdefault(registered.id, RegisteredSchema(
                    id=registered.id, schema=registered.schema, schema_type=registered.schema_type,
                    references=registered.references, metadata=registered.metadata, rule_set=registered.rule_set,
                    guid=registered.guid))
            if registered.subject is not None and registered.version is not None:
                self._by_version[(registered.subject, registered.version)] = registered

    # --- compatibility and config ----------------------------------------------------------------------------

    def test_compatibility(self, subject: str, schema: str, *, version: int | str | None = "latest",
                           references: Sequence[SchemaReference] = ()) -> CompatibilityReport:
        """Test a schema against one version, or (``version=None``) exactly as registration would."""
        path = f"/compatibility/subjects/{self._subject(subject)}/versions"
        if version is not None:
            path += f"/{version}"
        data = self._request("POST", path, body=_schema_body(schema, references, None, None),
                             params={"verbose": "true"})
        return CompatibilityReport(bool(data["is_compatible"]), tuple(data.get("messages") or ()))

    def compatibility(self, subject: str | None = None, *, default_to_global: bool = False) -> str:
        """The compatibility level of a subject (or the global one)."""
        path = "/config" if subject is None else f"/config/{self._subject(subject)}"
        data = self._request("GET", path, params={"defaultToGlobal": "true"} if default_to_global else None)
        return str(data["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        """Set the compatibility level of a subject (or the global one)."""
        path = "/config" if subject is None else f"/config/{self._subject(subject)}"
        return str(self._request("PUT", path, body={"compatibility": level})["compatibility"])

    # --- semantic types --------------------------------------------------------------------------------------

    def semantic_types(self) -> list[SemanticType]:
        """Every semantic type (latest versions)."""
        return [_semantic(d) for d in self._request("GET", "/semantic-types")]

    def semantic_type(self, name: str, version: int | None = None) -> SemanticType:
        """One semantic type (latest, or a given version)."""
        path = f"/semantic-types/{quote(name, safe='')}"
        if version is not None:
            path += f"/versions/{version}"
        return _semantic(self._request("GET", path))

    def put_semantic_type(self, name: str, spec: SemanticTypeSpec) -> SemanticType:
        """Create a semantic type or add a version of it."""
        body = spec.model_dump(mode="json", exclude_none=True)
        return _semantic(self._request("PUT", f"/semantic-types/{quote(name, safe='')}", body=body))


def _schema_body(schema: str, references: Sequence[SchemaReference], metadata: dict[str, Any] | None,
                 rule_set: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": schema, "schemaType": "AVRO"}
    if references:
        body["references"] = [r.model_dump() for r in references]
    if metadata is not None:
        body["metadata"] = metadata
    if rule_set is not None:
        body["ruleSet"] = rule_set
    return body


def _semantic(data: dict[str, Any]) -> SemanticType:
    # what the registry serves it has checked (or stored before today's checks existed): read it as it is
    spec = SemanticTypeSpec.model_validate(
        {k: v for k, v in data.items() if k not in ("name", "version", "builtin")}, context={STORED: True})
    return SemanticType(name=data["name"], version=data["version"], builtin=data.get("builtin", False), spec=spec)


__all__ = ["CompatibilityReport", "RegisteredSchema", "RegistryClient", "SchemaRegistryError"]
