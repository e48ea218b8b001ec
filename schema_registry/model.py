"""The registry's value types: levels, modes, schemas, versions, and semantic types with their constraints.

Everything here is pure (no I/O). The constraint model is deliberately small and declarative so that the
``validators`` package can compile each constraint into one Spark SQL predicate; the meaning of every
constraint is stated on its field below and in ``docs/schema_registry.md``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from schema_registry.errors import InvalidCompatibilityLevelError, InvalidModeError
from schema_registry.regex_safety import pattern_problem


class CompatibilityLevel(StrEnum):
    """Confluent's seven compatibility levels."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def parse(cls, value: object) -> CompatibilityLevel:
        """Parse a level name case-insensitively.

        Raises:
            InvalidCompatibilityLevelError: for anything else (Confluent 42203).
        """
        if isinstance(value, str):
            try:
                return cls(value.strip().upper())
            except ValueError:
                pass
        raise InvalidCompatibilityLevelError(
            "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
            "forward_transitive, and full_transitive"
        )

    @property
    def checks_backward(self) -> bool:
        """The new schema must read data of the old ones (new is the reader)."""
        return self in (self.BACKWARD, self.BACKWARD_TRANSITIVE, self.FULL, self.FULL_TRANSITIVE)

    @property
    def checks_forward(self) -> bool:
        """The old schemas must read data of the new one (new is the writer)."""
        return self in (self.FORWARD, self.FORWARD_TRANSITIVE, self.FULL, self.FULL_TRANSITIVE)

    @property
    def transitive(self) -> bool:
        """Checked against every live version instead of the latest only."""
        return self.value.endswith("_TRANSITIVE")


class Mode(StrEnum):
    """Confluent's registry modes."""

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"
    FORWARD = "FORWARD"

    @classmethod
    def parse(cls, value: object) -> Mode:
        """Parse a mode name case-insensitively.

        Raises:
            InvalidModeError: for anything else (Confluent 42204).
        """
        if isinstance(value, str):
            try:
                return cls(value.strip().upper())
            except ValueError:
                pass
        raise InvalidModeError(
            "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT and FORWARD"
        )

    @property
    def writable(self) -> bool:
        """New versions can be registered and deleted."""
        return self not in (Mode.READONLY, Mode.READONLY_OVERRIDE)


SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # ids and versions are Java ints in Confluent's API (and in our tables)


class SchemaReference(BaseModel):
    """A reference from one schema to a named type registered under another subject."""

    model_config = ConfigDict(frozen=True)

    name: str
    subject: str
    version: int = Field(ge=INT32_MIN, le=INT32_MAX)

    @field_validator("name", "subject")
    @classmethod
    def _no_nul(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("must not contain NUL characters")
        return v


class StoredSchema(BaseModel):
    """A schema by content: what a global id names.

    Attributes:
        id: the global id.
        schema_type: always ``AVRO`` on this server.
        schema_text: the canonical (compact) Avro text.
        references: the references, in the order given at registration.
        metadata: Confluent data-contract metadata, verbatim.
        rule_set: Confluent data-contract ruleSet, verbatim.
        fingerprint: SHA-256 over type, text, references, metadata and ruleSet: the content identity.
        semantic_bindings: for each field path bound to a semantic type, the type's name and the version
            that was current when the schema was first registered (used by compatibility checks).
    """

    model_config = ConfigDict(frozen=True)

    id: int
    schema_type: SchemaType = "AVRO"
    schema_text: str
    references: tuple[SchemaReference, ...] = ()
    metadata: dict[str, Any] | None = None
    rule_set: dict[str, Any] | None = None
    fingerprint: str
    semantic_bindings: dict[str, SemanticBinding] = Field(default_factory=dict)

    @property
    def guid(self) -> str:
        """Confluent's content guid: a UUID-formatted digest of the content identity."""
        h = self.fingerprint[:32]
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class SubjectVersion(NamedTuple):
    """One version of a subject and the schema id it points to.

    A plain immutable record, not a pydantic model: the store builds one per version row it reads (a registration
    reads every version of its subject), and a named tuple is built in a quarter of the time.
    """

    subject: str
    version: int
    schema_id: int
    deleted: bool = False


class SemanticBinding(BaseModel):
    """A field bound to a semantic type (name and the version resolved at registration)."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int


# ---------------------------------------------------------------------------------------------------------------
# semantic types

STORED = "stored"
"""Validation-context key: the definition comes from the registry's store or answers (see ``Constraints.pattern``)."""

AvroBaseType = Literal["string", "bytes", "int", "long", "float", "double", "boolean"]

NUMERIC_BASE_TYPES = frozenset({"int", "long", "float", "double"})
TEXT_BASE_TYPES = frozenset({"string", "bytes"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def json_schema_validator(schema: Any) -> Any:
    """The jsonschema validator class of a JSON Schema: the draft its ``$schema`` names, the latest draft when it
    names none.

    Raises:
        ValueError: ``$schema`` names a metaschema jsonschema does not know (it would guess the latest draft, and
            says that this will become an error).
    """
    import jsonschema

    validator = jsonschema.validators.validator_for(schema, default=None)
    if validator is not None:
        return validator
    if isinstance(schema, dict) and "$schema" in schema:
        raise ValueError(f"json_schema names an unknown $schema {schema['$schema']!r} (known: the JSON Schema drafts "
                         "3, 4, 6, 7, 2019-09 and 2020-12)")
    return jsonschema.validators.validator_for(schema)


class Constraints(BaseModel):
    """The value constraints of a semantic type. Every field is optional; absent means "no constraint".

    A value satisfies the constraints when it satisfies each one that is set. Null values are only
    restricted by ``not_null`` (every other constraint passes a null, as SQL predicates do).

    Attributes:
        minimum: numeric values must be ``>= minimum`` (``> minimum`` if ``exclusive_minimum``).
        maximum: numeric values must be ``<= maximum`` (``< maximum`` if ``exclusive_maximum``).
        exclusive_minimum: makes ``minimum`` a strict bound.
        exclusive_maximum: makes ``maximum`` a strict bound.
        pattern: text values must match this regular expression **in full** (anchored at both ends).
            Written in the subset of :mod:`schema_registry.regex_syntax` (read alike by Python ``re`` and Java regex,
            Spark's ``rlike``) and free of catastrophic backtracking (:mod:`schema_registry.regex_safety`); a
            definition validated with the context ``{STORED: True}`` (one the registry already holds) skips the
            backtracking check, so that types stored before it existed can still be read.
        enum: the value must be one of these (strings for text types, numbers for numeric types).
        min_length: text values must have at least this many characters (bytes for ``bytes``).
        max_length: text values must have at most this many characters (bytes for ``bytes``).
        not_null: the value must not be null (a nullable union field bound to such a type may hold no null).
        not_future: timestamp or date values must not be later than the moment of the check.
        json_schema: text values must be JSON documents valid under this JSON Schema (draft 2020-12
            unless the schema's ``$schema`` says otherwise).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    pattern: str | None = None
    enum: tuple[str | float, ...] | None = None
    min_length: int | None = Field(default=None, ge=0)
    max_length: int | None = Field(default=None, ge=0)
    not_null: bool = False
    not_future: bool = False
    json_schema: dict[str, Any] | None = None

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"pattern {v!r} is not a valid regular expression: {e}") from e
            if not (isinstance(info.context, dict) and info.context.get(STORED)):
                problem = pattern_problem(v)
                if problem is not None:
                    raise ValueError(problem)
        return v

    @field_validator("enum")
    @classmethod
    def _enum_not_empty(cls, v: tuple[str | float, ...] | None) -> tuple[str | float, ...] | None:
        if v is not None and not v:
            raise ValueError("enum must list at least one value")
        return v

    @field_validator("json_schema")
    @classmethod
    def _json_schema_valid(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            import jsonschema

            try:
                json_schema_validator(v).check_schema(v)
            except jsonschema.SchemaError as e:
                raise ValueError(f"json_schema is not a valid JSON Schema: {e.message}") from e
        return v

    @model_validator(mode="after")
    def _bounds_consistent(self) -> Constraints:
        if self.minimum is not None and self.maximum is not None:
            empty = self.minimum > self.maximum or (
                self.minimum == self.maximum and (self.exclusive_minimum or self.exclusive_maximum)
            )
            if empty:
                raise ValueError(f"minimum {self.minimum} and maximum {self.maximum} admit no value")
        if self.min_length is not None and self.max_length is not None and self.min_length > self.max_length:
            raise ValueError(f"min_length {self.min_length} is greater than max_length {self.max_length}")
        if self.exclusive_minimum and self.minimum is None:
            raise ValueError("exclusive_minimum needs minimum")
        if self.exclusive_maximum and self.maximum is None:
            raise ValueError("exclusive_maximum needs maximum")
        return self


class SemanticTypeSpec(BaseModel):
    """The definition of a semantic type, as sent to ``PUT /semantic-types/{name}``.

    Attributes:
        base_type: the Avro primitive the values have. A field binds when its type (or the non-null branch of
            a ``["null", T]`` union) is this type or promotes to it under Avro rules (int -> long -> float ->
            double).
        logical_types: if set, the field's Avro ``logicalType`` must be one of these (e.g. timestamp types).
        description: free text.
        constraints: the value constraints.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_type: AvroBaseType
    logical_types: tuple[str, ...] | None = None
    description: str = ""
    constraints: Constraints = Field(default_factory=Constraints)

    @model_validator(mode="after")
    def _constraints_fit_base_type(self) -> SemanticTypeSpec:
        c = self.constraints
        numeric = self.base_type in NUMERIC_BASE_TYPES
        text = self.base_type in TEXT_BASE_TYPES
        temporal = bool(self.logical_types) and all(
            lt.startswith(("timestamp", "local-timestamp", "date")) for lt in self.logical_types or ()
        )
        if (c.minimum is not None or c.maximum is not None) and not numeric:
            raise ValueError(f"minimum/maximum need a numeric base type, not {self.base_type}")
        if (c.pattern is not None or c.min_length is not None or c.max_length is not None) and not text:
            raise ValueError(f"pattern/min_length/max_length need a string or bytes base type, not {self.base_type}")
        if c.json_schema is not None and self.base_type != "string":
            raise ValueError("json_schema needs the string base type")
        if c.not_future and not temporal:
            raise ValueError("not_future needs timestamp or date logical_types")
        if c.enum is not None:
            for value in c.enum:
                if numeric and isinstance(value, (str, bool)):
                    raise ValueError(f"enum value {value!r} is not a number (base type {self.base_type})")
                if self.base_type == "string" and not isinstance(value, str):
                    raise ValueError(f"enum value {value!r} is not a string (base type string)")
        return self


class SemanticType(BaseModel):
    """A named, versioned semantic type.

    Attributes:
        name: the name fields use in ``"semanticType": "<name>"``.
        version: 1 for the first definition, +1 for each changed definition.
        builtin: defined by lakegate (read-only).
        spec: the definition.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    builtin: bool = False
    spec: SemanticTypeSpec

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"semantic type name {v!r} must match {_NAME.pattern}")
        return v

    def to_json(self) -> dict[str, Any]:
        """The JSON shape served at ``/semantic-types``."""
        out: dict[str, Any] = {"name": self.name, "version": self.version, "builtin": self.builtin}
        out.update(self.spec.model_dump(mode="json", exclude_none=True))
        out["constraints"] = self.spec.constraints.model_dump(mode="json", exclude_defaults=True)
        return out


def valid_semantic_type_name(name: str) -> bool:
    """Whether ``name`` is acceptable as a semantic type name."""
    return bool(_NAME.match(name))


StoredSchema.model_rebuild()


class RegisterRequest(BaseModel):
    """The body of register, lookup and compatibility POSTs (Confluent's ``RegisterSchemaRequest``).

    Unknown properties are ignored, as newer Confluent clients expect (``Confluent-Accept-Unknown-Properties``).
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    schema_text: str = Field(default="", alias="schema")
    schema_type: str = Field(default="AVRO", alias="schemaType")
    references: tuple[SchemaReference, ...] = ()
    metadata: dict[str, Any] | None = None
    rule_set: dict[str, Any] | None = Field(default=None, alias="ruleSet")
    id: int | None = Field(default=None, ge=INT32_MIN, le=INT32_MAX)
    version: int | None = Field(default=None, ge=INT32_MIN, le=INT32_MAX)

    @field_validator("schema_type", mode="before")
    @classmethod
    def _type_default(cls, v: object) -> object:
        return "AVRO" if v is None else v

    @field_validator("references", mode="before")
    @classmethod
    def _refs_default(cls, v: object) -> object:
        return () if v is None else v

    @field_validator("schema_text", mode="before")
    @classmethod
    def _schema_default(cls, v: object) -> object:
        return "" if v is None else v
