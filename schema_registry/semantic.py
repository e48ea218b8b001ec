"""Semantic types: the built-in catalogue, binding fields to types, and comparing constraints.

A field binds to a semantic type with the Avro field attribute ``"semanticType": "<name>"`` (custom
attributes are legal Avro and survive round trips). Binding rules, checked when a schema is registered:

- the type must exist in the catalogue (built-in or user-defined), else the schema is invalid (42201);
- the field's type, or the non-null branch of a ``["null", T]`` union, must be the type's base type or promote
  to it (int -> long -> float -> double), and carry one of the type's ``logical_types`` if it lists any;
- a ``not_null`` type cannot bind to a nullable field.

Field paths name fields from the top-level record: ``a.b`` for a nested record, ``a[]`` for array items,
``a{}`` for map values (``a[].b`` for a field of records inside an array).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources

import avro.schema

from schema_registry.avro import non_null_branch
from schema_registry.errors import InvalidSchemaError
from schema_registry.model import Constraints, SemanticBinding, SemanticType, SemanticTypeSpec

logger = logging.getLogger(__name__)

SEMANTIC_ATTRIBUTE = "semanticType"

_PROMOTES_TO = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "double": {"double"},
    "string": {"string"},
    "bytes": {"bytes"},
    "boolean": {"boolean"},
}


@cache
def iso_codes() -> dict[str, tuple[str, ...]]:
    """The ISO code lists shipped with the package: ``iso_3166_1_alpha_2`` and ``iso_4217_alpha_3``."""
    raw = json.loads(resources.files("schema_registry").joinpath("data/iso_codes.json").read_text("utf-8"))
    return {k: tuple(v) for k, v in raw.items() if not k.startswith("_")}


@cache
def builtin_types() -> dict[str, SemanticType]:
    """The built-in semantic types (version 1 each, read-only)."""
    codes = iso_codes()
    specs: dict[str, SemanticTypeSpec] = {
        "email": SemanticTypeSpec(
            base_type="string", description="An e-mail address (local@domain, pragmatic subset of RFC 5322).",
            constraints=Constraints(
                pattern=r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+",
                max_length=254)),
        "uuid": SemanticTypeSpec(
            base_type="string", description="A UUID in its canonical 8-4-4-4-12 hexadecimal form.",
            constraints=Constraints(
                pattern=r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")),
        "url": SemanticTypeSpec(
            base_type="string", description="An absolute http or https URL.",
            constraints=Constraints(pattern=r"https?://[^\s/?#]+[^\s]*", max_length=2048)),
        "phone_e164": SemanticTypeSpec(
            base_type="string", description="A phone number in E.164 form: '+', country code, up to 15 digits.",
            constraints=Constraints(pattern=r"\+[1-9][0-9]{1,14}")),
        "iso_country": SemanticTypeSpec(
            base_type="string", description="An ISO 3166-1 alpha-2 country code (upper case).",
            constraints=Constraints(enum=codes["iso_3166_1_alpha_2"])),
        "iso_currency": SemanticTypeSpec(
            base_type="string", description="An ISO 4217 alphabetic currency code (upper case).",
            constraints=Constraints(enum=codes["iso_4217_alpha_3"])),
        "latitude": SemanticTypeSpec(
            base_type="double", description="Degrees of latitude, WGS 84.",
            constraints=Constraints(minimum=-90, maximum=90)),
        "longitude": SemanticTypeSpec(
            base_type="double", description="Degrees of longitude, WGS 84.",
            constraints=Constraints(minimum=-180, maximum=180)),
        "percentage": SemanticTypeSpec(
            base_type="double", description="A percentage between 0 and 100.",
            constraints=Constraints(minimum=0, maximum=100)),
        "non_negative_amount": SemanticTypeSpec(
            base_type="double", description="A monetary or other amount that is never negative.",
            constraints=Constraints(minimum=0)),
        "age_years": SemanticTypeSpec(
            base_type="int", description="A human age in whole years.",
            constraints=Constraints(minimum=0, maximum=150)),
        "timestamp_not_future": SemanticTypeSpec(
            base_type="long", logical_types=("timestamp-millis", "timestamp-micros"),
            description="An event time that is not in the future at the time of the check.",
            constraints=Constraints(not_future=True)),
        "json_object": SemanticTypeSpec(
            base_type="string", description="A string holding a JSON object.",
            constraints=Constraints(json_schema={"type": "object"})),
    }
    return {name: SemanticType(name=name, version=1, builtin=True, spec=spec) for name, spec in specs.items()}


# --- binding ---------------------------------------------------------------------------------------------------

def iter_fields(schema: avro.schema.Schema) -> Iterator[tuple[str, avro.schema.Field]]:
    """Every record field reachable from ``schema`` with its path (each named record visited once)."""
    seen: set[str] = set()

    def walk(s: avro.schema.Schema, prefix: str) -> Iterator[tuple[str, avro.schema.Field]]:
        if isinstance(s, avro.schema.RecordSchema):
            if s.fullname in seen:
                return
            seen.add(s.fullname)
            for f in s.fields:
                path = f"{prefix}.{f.name}" if prefix else f.name
                yield path, f
                yield from walk(f.type, path)
        elif isinstance(s, avro.schema.UnionSchema):
            for b in s.schemas:
                yield from walk(b, prefix)
        elif isinstance(s, avro.schema.ArraySchema):
            yield from walk(s.items, f"{prefix}[]")
        elif isinstance(s, avro.schema.MapSchema):
            yield from walk(s.values, f"{prefix}{{}}")

    yield from walk(schema, "")


def field_paths(schema: avro.schema.Schema) -> set[str]:
    """The paths of every field of ``schema``."""
    return {path for path, _ in iter_fields(schema)}


def declared_bindings(schema: avro.schema.Schema) -> dict[str, str]:
    """Field path -> semantic type name, for every field carrying the ``semanticType`` attribute.

    Raises:
        InvalidSchemaError: if an attribute value is not a non-empty string.
    """
    out: dict[str, str] = {}
    for path, f in iter_fields(schema):
        if SEMANTIC_ATTRIBUTE in f.props:
            name = f.props[SEMANTIC_ATTRIBUTE]
            if not isinstance(name, str) or not name:
                raise InvalidSchemaError(
                    f"Invalid schema: field '{path}' has a {SEMANTIC_ATTRIBUTE} attribute that is not a type name: "
                    f"{name!r}")
            out[path] = name
    return out


def bind_fields(schema: avro.schema.Schema, catalogue: Mapping[str, SemanticType]) -> dict[str, SemanticBinding]:
    """Resolve and check every ``semanticType`` attribute of ``schema`` against ``catalogue`` (latest versions).

    Returns:
        Field path -> the bound type name and version.

    Raises:
        InvalidSchemaError: unknown semantic type, or a field whose Avro type does not fit the type's base type.
    """
    declared = declared_bindings(schema)
    if not declared:
        return {}
    fields = dict(iter_fields(schema))
    out: dict[str, SemanticBinding] = {}
    for path, name in declared.items():
        st = catalogue.get(name)
        if st is None:
            known = ", ".join(sorted(catalogue))
            raise InvalidSchemaError(
                f"Invalid schema: field '{path}' names unknown semantic type '{name}' (known types: {known})")
        problem = binding_problem(fields[path].type, st.spec)
        if problem:
            raise InvalidSchemaError(
                f"Invalid schema: field '{path}' cannot be bound to semantic type '{name}': {problem}")
        out[path] = SemanticBinding(name=name, version=st.version)
    return out


def binding_problem(field_type: avro.schema.Schema, spec: SemanticTypeSpec) -> str | None:
    """Why a field of ``field_type`` cannot carry a semantic type ``spec`` (None if it can)."""
    inner, nullable = non_null_branch(field_type)
    physical = str(inner.type)
    if isinstance(inner, avro.schema.UnionSchema) or physical not in _PROMOTES_TO:
        return f"its type is {_describe_type(field_type)}, the semantic type needs {spec.base_type}"
    if spec.base_type not in _PROMOTES_TO[physical]:
        return f"its type is {physical}, the semantic type needs {spec.base_type}"
    logical = inner.props.get("logicalType") if isinstance(inner.props, dict) else None
    if spec.logical_types and logical not in spec.logical_types:
        wanted = " or ".join(spec.logical_types)
        return f"its logicalType is {logical or 'absent'}, the semantic type needs {wanted}"
    if nullable and spec.constraints.not_null:
        return "the field is nullable but the semantic type is not_null"
    return None


def _describe_type(s: avro.schema.Schema) -> str:
    if isinstance(s, avro.schema.UnionSchema):
        return "a union of " + ", ".join(str(b.type) for b in s.schemas)
    return str(s.type)


# --- comparing constraints -------------------------------------------------------------------------------------

def constraint_narrowing(reader: Constraints, writer: Constraints) -> list[str]:
    """Why some value the ``writer`` constraints admit is rejected by the ``reader`` ones (empty: none is).

    Each rule is conservative where containment cannot be decided (two different regular expressions or JSON
    Schemas count as a narrowing unless the reader has none).
    """
    out: list[str] = []
    if reader.minimum is not None:
        if writer.minimum is None:
            out.append(f"adds minimum {reader.minimum}")
        elif writer.minimum < reader.minimum or (
            writer.minimum == reader.minimum and reader.exclusive_minimum and not writer.exclusive_minimum
        ):
            out.append(f"raises minimum from {_bound(writer.minimum, writer.exclusive_minimum, '>')} to "
                       f"{_bound(reader.minimum, reader.exclusive_minimum, '>')}")
    if reader.maximum is not None:
        if writer.maximum is None:
            out.append(f"adds maximum {reader.maximum}")
        elif writer.maximum > reader.maximum or (
            writer.maximum == reader.maximum and reader.exclusive_maximum and not writer.exclusive_maximum
        ):
            out.append(f"lowers maximum from {_bound(writer.maximum, writer.exclusive_maximum, '<')} to "
                       f"{_bound(reader.maximum, reader.exclusive_maximum, '<')}")
    if reader.enum is not None:
        if writer.enum is None:
            out.append("adds an enum set")
        else:
            dropped = [v for v in writer.enum if v not in set(reader.enum)]
            if dropped:
                shown = ", ".join(map(str, dropped[:10])) + (" ..." if len(dropped) > 10 else "")
                out.append(f"drops enum values {shown}")
    if reader.pattern is not None and reader.pattern != writer.pattern:
        out.append(f"changes pattern from {writer.pattern!r} to {reader.pattern!r}")
    if reader.min_length is not None and (writer.min_length is None or writer.min_length < reader.min_length):
        out.append(f"raises min_length from {writer.min_length} to {reader.min_length}")
    if reader.max_length is not None and (writer.max_length is None or writer.max_length > reader.max_length):
        out.append(f"lowers max_length from {writer.max_length} to {reader.max_length}")
    if reader.not_null and not writer.not_null:
        out.append("adds not_null")
    if reader.not_future and not writer.not_future:
        out.append("adds not_future")
    if reader.json_schema is not None and reader.json_schema != writer.json_schema:
        out.append("changes json_schema")
    return out


def _bound(value: float, exclusive: bool, strict: str) -> str:
    return f"{strict}{value}" if exclusive else f"{strict}={value}"
