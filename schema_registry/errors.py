"""The one exception tree of schema_registry, mapped onto Confluent Schema Registry error codes.

Every error carries ``http_status`` and ``error_code``; the server renders it as Confluent's body
``{"error_code": <int>, "message": "<text>"}`` and the client turns such a body back into the same class.

```
SchemaRegistryError                         (500 / 50001 unless a subclass says otherwise)
 ├── NotFoundError                          404
 │    ├── SubjectNotFoundError              40401
 │    ├── VersionNotFoundError              40402
 │    ├── SchemaNotFoundError               40403
 │    ├── SubjectSoftDeletedError           40404  subject already soft-deleted
 │    ├── SubjectNotSoftDeletedError        40405  permanent delete before a soft delete
 │    ├── VersionSoftDeletedError           40406  version already soft-deleted
 │    ├── VersionNotSoftDeletedError        40407  permanent delete before a soft delete
 │    ├── SubjectConfigNotFoundError        40408  no subject-level compatibility configured
 │    ├── SubjectModeNotFoundError          40409  no subject-level mode configured
 │    ├── AssociationNotFoundError          40410
 │    └── SemanticTypeNotFoundError         40450  (lakegate extension)
 ├── IncompatibleSchemaError                409 / 409 or 40901 (server setting)
 ├── UnprocessableError                     422
 │    ├── InvalidSchemaError                42201  bad JSON or Avro, bad default, unknown or misbound semantic type
 │    ├── InvalidVersionError               42202
 │    ├── InvalidCompatibilityLevelError    42203
 │    ├── InvalidModeError                  42204
 │    ├── OperationNotPermittedError        42205
 │    ├── ReferenceExistsError              42206
 │    ├── IdMismatchError                   42207
 │    ├── InvalidSubjectError               42208
 │    ├── SchemaTooLargeError               42209
 │    ├── InvalidRuleSetError               42210
 │    ├── ContextNotEmptyError              42211
 │    └── InvalidSemanticTypeError          42250  (lakegate extension) bad constraints / base type
 ├── HttpError                              bare framework statuses (400, 401, 403, 404, 405, 406, 413, 415)
 │    ├── AuthenticationError               401 / 40101
 │    ├── AuthorizationError                403 / 40301
 │    └── ThrottledError                    429 / 42901  too many failed logins (Retry-After) — lakegate
 ├── StoreError                             500 / 50001
 ├── SettingsError                          server start-up: bad auth config, store URL
 └── TransportError                         client side only: the server could not be reached
```
"""

from __future__ import annotations

from typing import ClassVar


class SchemaRegistryError(Exception):
    """Base class of every error raised by schema_registry.

    Attributes:
        message: the human-readable text (Confluent's ``message``).
        http_status: the HTTP status the server answers with.
        error_code: Confluent's ``error_code`` (its first three digits are the HTTP status).
    """

    default_status: ClassVar[int] = 500
    default_code: ClassVar[int] = 50001

    def __init__(self, message: str, *, http_status: int | None = None, error_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status if http_status is not None else self.default_status
        self.error_code = error_code if error_code is not None else self.default_code

    def body(self) -> dict[str, object]:
        """The Confluent-shaped JSON body of this error."""
        return {"error_code": self.error_code, "message": self.message}


class NotFoundError(SchemaRegistryError):
    """Something asked for does not exist."""

    default_status = 404
    default_code = 404


class SubjectNotFoundError(NotFoundError):
    """The subject has no (non-deleted) version."""

    default_code = 40401


class VersionNotFoundError(NotFoundError):
    """The subject has no such version."""

    default_code = 40402


class SchemaNotFoundError(NotFoundError):
    """No schema with this id / guid, or a lookup found no matching schema under the subject."""

    default_code = 40403


class SubjectSoftDeletedError(NotFoundError):
    """A non-permanent delete of a subject whose versions are already all soft-deleted."""

    default_code = 40404


class SubjectNotSoftDeletedError(NotFoundError):
    """A permanent delete of a subject that was not soft-deleted first."""

    default_code = 40405


class VersionSoftDeletedError(NotFoundError):
    """A non-permanent delete of a version that is already soft-deleted."""

    default_code = 40406


class VersionNotSoftDeletedError(NotFoundError):
    """A permanent delete of a version that was not soft-deleted first."""

    default_code = 40407


class SubjectConfigNotFoundError(NotFoundError):
    """The subject has no subject-level compatibility configured."""

    default_code = 40408


class SubjectModeNotFoundError(NotFoundError):
    """The subject has no subject-level mode configured."""

    default_code = 40409


class AssociationNotFoundError(NotFoundError):
    """No topic/subject association (this server keeps none)."""

    default_code = 40410


class SemanticTypeNotFoundError(NotFoundError):
    """No semantic type (or version of it) with this name."""

    default_code = 40450


class IncompatibleSchemaError(SchemaRegistryError):
    """The schema breaks the subject's compatibility level.

    Attributes:
        messages: the human-readable reasons, one per incompatibility.
    """

    default_status = 409
    default_code = 409

    def __init__(
        self, message: str, *, messages: list[str] | None = None, http_status: int | None = None,
        error_code: int | None = None,
    ) -> None:
        super().__init__(message, http_status=http_status, error_code=error_code)
        self.messages = list(messages or [])


class UnprocessableError(SchemaRegistryError):
    """The request is well-formed but its content is not acceptable."""

    default_status = 422
    default_code = 422


class InvalidSchemaError(UnprocessableError):
    """The schema is not valid (bad JSON, invalid Avro, bad default, bad reference, semantic-type binding)."""

    default_code = 42201


class InvalidVersionError(UnprocessableError):
    """A version in a path is neither a positive 32-bit int, ``latest`` nor ``-1``."""

    default_code = 42202


class InvalidCompatibilityLevelError(UnprocessableError):
    """An unknown compatibility level."""

    default_code = 42203


class InvalidModeError(UnprocessableError):
    """An unknown mode."""

    default_code = 42204


class OperationNotPermittedError(UnprocessableError):
    """The operation is not allowed in the current mode (read-only, import) or on this object."""

    default_code = 42205


class ReferenceExistsError(UnprocessableError):
    """The schema version is still referenced by another schema."""

    default_code = 42206


class IdMismatchError(UnprocessableError):
    """In IMPORT mode, the given id is already used by different content."""

    default_code = 42207


class InvalidSubjectError(UnprocessableError):
    """The subject name is not acceptable."""

    default_code = 42208


class SchemaTooLargeError(UnprocessableError):
    """The schema text is over the server's size limit."""

    default_code = 42209


class InvalidRuleSetError(UnprocessableError):
    """The data-contract ruleSet is not valid."""

    default_code = 42210


class ContextNotEmptyError(UnprocessableError):
    """A context cannot be deleted while it holds subjects."""

    default_code = 42211


class InvalidSemanticTypeError(UnprocessableError):
    """A semantic type definition is invalid (unknown base type, contradictory or malformed constraints)."""

    default_code = 42250


class HttpError(SchemaRegistryError):
    """A framework-level HTTP error (unknown route, bad method, bad media type, malformed body)."""

    def __init__(self, http_status: int, message: str, *, error_code: int | None = None) -> None:
        super().__init__(message, http_status=http_status, error_code=error_code or http_status)


class AuthenticationError(HttpError):
    """No or wrong credentials."""

    def __init__(self, message: str = "Unauthorized", *, http_status: int = 401, error_code: int = 40101) -> None:
        super().__init__(http_status, message, error_code=error_code)


class AuthorizationError(HttpError):
    """The credentials are valid but their role does not allow the operation."""

    def __init__(self, message: str = "Forbidden", *, http_status: int = 403, error_code: int = 40301) -> None:
        super().__init__(http_status, message, error_code=error_code)


class ThrottledError(HttpError):
    """Too many failed logins from this client, or too many logins in progress: retry after ``retry_after`` s.

    Attributes:
        retry_after: seconds to wait (the response's ``Retry-After`` header), None when unknown (client side).
    """

    def __init__(self, message: str = "Too Many Requests", *, retry_after: int | None = None, http_status: int = 429,
                 error_code: int = 42901) -> None:
        super().__init__(http_status, message, error_code=error_code)
        self.retry_after = retry_after


class StoreError(SchemaRegistryError):
    """The backing store failed (Confluent's 50001 "Error in the backend data store")."""


class SettingsError(SchemaRegistryError):
    """The server's settings are invalid (an unreadable auth config, an unsupported store URL)."""


class TransportError(SchemaRegistryError):
    """Client side: the registry could not be reached."""

    default_status = 0
    default_code = -1


_BY_CODE: dict[int, type[SchemaRegistryError]] = {
    cls.default_code: cls
    for cls in (
        SubjectNotFoundError, VersionNotFoundError, SchemaNotFoundError, SubjectSoftDeletedError,
        SubjectNotSoftDeletedError, VersionSoftDeletedError, VersionNotSoftDeletedError, SubjectConfigNotFoundError,
        SubjectModeNotFoundError, AssociationNotFoundError, SemanticTypeNotFoundError, InvalidSchemaError,
        InvalidVersionError, InvalidCompatibilityLevelError, InvalidModeError, OperationNotPermittedError,
        ReferenceExistsError, IdMismatchError, InvalidSubjectError, SchemaTooLargeError, InvalidRuleSetError,
        ContextNotEmptyError, InvalidSemanticTypeError, StoreError,
    )
}


def error_from_response(http_status: int, error_code: int | None, message: str) -> SchemaRegistryError:
    """Rebuild the typed error of a Confluent error body (used by the client).

    Args:
        http_status: the response's HTTP status.
        error_code: the body's ``error_code`` (None if the body had none).
        message: the body's ``message``.

    Returns:
        An instance of the most specific class for the code.
    """
    code = error_code if error_code is not None else http_status
    if http_status == 409 or code in (409, 40901):
        return IncompatibleSchemaError(message, http_status=http_status, error_code=code)
    if http_status == 401:
        return AuthenticationError(message, http_status=http_status, error_code=code)
    if http_status == 403:
        return AuthorizationError(message, http_status=http_status, error_code=code)
    if http_status == 429:
        return ThrottledError(message, http_status=http_status, error_code=code)
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(message, http_status=http_status, error_code=code)
    if http_status == 404:
        return NotFoundError(message, http_status=http_status, error_code=code)
    if http_status == 422:
        return UnprocessableError(message, http_status=http_status, error_code=code)
    if 400 <= http_status < 500:
        return HttpError(http_status, message, error_code=code)
    return SchemaRegistryError(message, http_status=http_status, error_code=code)
