"""Avro schema text: parsing (with references), validation of defaults, canonical and normalized text, identity.

Parsing uses the Apache ``avro`` package (the same object model its compatibility checker works on).
The stored text is the compact JSON rendering Confluent stores (whitespace removed, ``{"type": "int"}``
collapsed to ``"int"``; docs, defaults, aliases, logical types and custom attributes such as
``semanticType`` kept). ``normalize=true`` additionally writes full names and a fixed key order, so that
key-order and namespace-spelling differences map to one id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.name
import avro.schema

from schema_registry.errors import InvalidSchemaError
from schema_registry.jsontext import strict_loads
from schema_registry.model import SchemaReference

logger = logging.getLogger(__name__)

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class ParsedSchema:
    """An Avro schema parsed from text.

    Attributes:
        text: the canonical text (what the registry stores).
        avro: the parsed ``avro.schema.Schema`` (references resolved).
    """

    text: str
    avro: avro.schema.Schema


def load_json(text: str, *, strict: bool = True) -> Any:
    """Decode a schema text as JSON.

    Args:
        text: the schema text.
        strict: refuse what cannot be stored and served again (``NaN``, ``Infinity``, ``1e999``, lone surrogates;
            see :mod:`schema_registry.jsontext`). Texts already stored are read with ``strict=False``.

    Raises:
        InvalidSchemaError: if the text is not (strict) JSON.
    """
    try:
        return strict_loads(text) if strict else json.loads(text)
    except (ValueError, RecursionError) as e:  # json.JSONDecodeError is a ValueError
        raise InvalidSchemaError(f"Invalid schema: the schema is not valid JSON: {e}") from e


def parse_schema(text: str, referenced: Sequence[str] = (), *, validate_defaults: bool = True) -> ParsedSchema:
    """Parse and validate an Avro schema text.

    Args:
        text: the schema JSON text.
        referenced: the texts of the schemas it references (transitively), dependencies first; their named
            types become visible to ``text``.
        validate_defaults: check every field default against its type, every ``aliases`` (of named types and
            fields) to be an array of strings as Java's parser requires (the Python one takes anything, and its
            checker then iterates a string's letters or fails on a number), and decode ``text`` strictly (no
            ``NaN``, ``Infinity``, out-of-range numbers or lone surrogates); done for new schemas, stored ones are
            re-parsed without it, as Confluent does.

    Returns:
        The parsed schema with its canonical text.

    Raises:
        InvalidSchemaError: bad JSON, invalid Avro (unknown type, bad name, duplicate field, aliases that are not
            an array of strings, ...), a default that does not match its type, or an unresolvable reference.
    """
    data = load_json(text, strict=validate_defaults)
    names = avro.name.Names()
    try:
        for ref_text in referenced:
            avro.schema.make_avsc_object(load_json(ref_text, strict=False), names)
        parsed = avro.schema.make_avsc_object(data, names)
    except InvalidSchemaError:
        raise
    except (avro.errors.AvroException, TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
        raise InvalidSchemaError(f"Invalid schema: {e}") from e
    if validate_defaults:
        problems = _validation_problems(parsed)
        if problems:
            raise InvalidSchemaError("Invalid schema: " + "; ".join(problems))
    return ParsedSchema(text=canonical_text(data), avro=parsed)


def canonical_text(data: Any) -> str:
    """Confluent's stored form: compact JSON, primitive shorthand, everything else kept in the given order."""
    return json.dumps(_collapse_primitives(data), separators=(",", ":"), ensure_ascii=False)


def _collapse_primitives(node: Any) -> Any:
    if isinstance(node, dict):
        if set(node) == {"type"} and isinstance(node["type"], str) and node["type"] in PRIMITIVES:
            return node["type"]
        out = {}
        for k, v in node.items():
            if k == "fields" and isinstance(v, list):
                out[k] = [_collapse_field(f) for f in v]
            else:
                out[k] = _collapse_primitives(v) if k in ("type", "fields", "items", "values") else v
        return out
    if isinstance(node, list):
        return [_collapse_primitives(n) for n in node]
    return node


def _collapse_field(field: Any) -> Any:
    if isinstance(field, dict) and "type" in field:
        return {k: (_collapse_primitives(v) if k == "type" else v) for k, v in field.items()}
    return field


# --- normalization -------------------------------------------------------------------------------------------

_TYPE_KEYS = ("name", "type", "fields", "symbols", "size", "items", "values", "logicalType", "precision", "scale",
              "doc", "aliases", "default")
_TYPE_WORDS = PRIMITIVES | {"record", "error", "enum", "fixed", "array", "map"}
_FIELD_KEYS = ("name", "type", "order", "doc", "aliases", "default")


def normalized_text(text: str) -> str:
    """Confluent-style normalized text: full names, fixed key order, custom attributes sorted by key.

    Raises:
        InvalidSchemaError: if the text is not JSON.
    """
    return json.dumps(_normalize(load_json(text), None), separators=(",", ":"), ensure_ascii=False)


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _normalize(node: Any, namespace: str | None) -> Any:
    if isinstance(node, str):
        return node if node in PRIMITIVES else _fullname(node, namespace)
    if isinstance(node, list):
        return [_normalize(n, namespace) for n in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if isinstance(kind, str) and kind in PRIMITIVES and set(node) == {"type"}:
        return kind
    out: dict[str, Any] = {}
    ns = namespace
    if kind in ("record", "error", "enum", "fixed") and isinstance(node.get("name"), str):
        full = _fullname(node["name"], node.get("namespace") if "namespace" in node else namespace)
        ns = full.rpartition(".")[0] or None
        out["name"] = full
    for key in _TYPE_KEYS:
        if key not in node or key == "name":
            continue
        value = node[key]
        if key == "type":
            value = value if isinstance(value, str) and value in _TYPE_WORDS else _normalize(value, ns)
        elif key in ("items", "values"):
            value = _normalize(value, ns)
        elif key == "fields" and isinstance(value, list):
            value = [_normalize_field(f, ns) for f in value]
        elif key == "aliases" and isinstance(value, list):
            value = sorted(_fullname(a, ns) if isinstance(a, str) else a for a in value)
        elif key == "doc" and value == "":
            continue
        out[key] = value
    for key in sorted(k for k in node if k not in _TYPE_KEYS and k != "namespace"):
        out[key] = node[key]
    return out


def _normalize_field(field: Any, namespace: str | None) -> Any:
    if not isinstance(field, dict):
        return field
    out: dict[str, Any] = {}
    for key in _FIELD_KEYS:
        if key not in field:
            continue
        value = field[key]
        if key == "type":
            value = _normalize(value, namespace)
        elif key == "aliases" and isinstance(value, list):
            value = sorted(value)
        elif key == "doc" and value == "":
            continue
        out[key] = value
    for key in sorted(k for k in field if k not in _FIELD_KEYS):
        out[key] = field[key]
    return out


# --- identity --------------------------------------------------------------------------------------------------

def fingerprint(
    schema_type: str, text: str, references: Sequence[SchemaReference], metadata: Any, rule_set: Any
) -> str:
    """The content identity of a schema: SHA-256 over type, text, references, metadata and ruleSet (hex)."""
    payload = json.dumps(
        [schema_type, text, [[r.name, r.subject, r.version] for r in references], metadata or None, rule_set or None],
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# --- aliases and default values ------------------------------------------------------------------------------

def _bad_aliases(value: Any) -> bool:
    return value is not None and not (isinstance(value, list) and all(isinstance(a, str) for a in value))


def _validation_problems(schema: avro.schema.Schema) -> list[str]:
    """Every ``aliases`` (of named types and record fields) that is not an array of strings, then every field
    default that does not match its field's type (union: its first branch): one walk, each named type once, each
    list in the order of the schema."""
    aliases: list[str] = []
    defaults: list[str] = []
    seen: set[str] = set()

    def walk(s: avro.schema.Schema) -> None:
        if isinstance(s, avro.schema.NamedSchema):
            if s.fullname in seen:
                return
            seen.add(s.fullname)
            if _bad_aliases(s.props.get("aliases")):
                aliases.append(f"the aliases of {s.type} '{s.fullname}' must be an array of strings")
        if isinstance(s, avro.schema.RecordSchema):
            for f in s.fields:
                if _bad_aliases(f.props.get("aliases")):
                    aliases.append(f"the aliases of field '{f.name}' in record '{s.fullname}' must be an array of "
                                   "strings")
                if f.has_default:
                    reason = _default_mismatch(f.type, f.default)
                    if reason:
                        defaults.append(f"default value of field '{f.name}' in record '{s.fullname}' is invalid: "
                                        f"{reason}")
                walk(f.type)
        elif isinstance(s, avro.schema.UnionSchema):
            for b in s.schemas:
                walk(b)
        elif isinstance(s, avro.schema.ArraySchema):
            walk(s.items)
        elif isinstance(s, avro.schema.MapSchema):
            walk(s.values)

    walk(schema)
    return aliases + defaults


def _default_mismatch(s: avro.schema.Schema, value: Any) -> str | None:
    """Why ``value`` is not a valid default for ``s`` (None if it is)."""
    t = s.type
    if isinstance(s, avro.schema.UnionSchema):
        return _default_mismatch(s.schemas[0], value) if s.schemas else "empty union"
    if t == "null":
        return None if value is None else f"expected null, got {value!r}"
    if t == "boolean":
        return None if isinstance(value, bool) else f"expected a boolean, got {value!r}"
    if t in ("int", "long"):
        lo, hi = _INT_RANGE[t]
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return None
        return f"expected {t}, got {value!r}"
    if t in ("float", "double"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            return None
        return f"expected a number, got {value!r}"
    if t in ("string",):
        return None if isinstance(value, str) else f"expected a string, got {value!r}"
    if t in ("bytes", "fixed"):
        if not isinstance(value, str) or any(ord(c) > 255 for c in value):
            return f"expected a string of code points 0-255, got {value!r}"
        if isinstance(s, avro.schema.FixedSchema) and len(value) != s.size:
            return f"expected {s.size} bytes, got {len(value)}"
        return None
    if isinstance(s, avro.schema.EnumSchema):
        return None if value in s.symbols else f"{value!r} is not a symbol of enum {s.fullname}"
    if isinstance(s, avro.schema.ArraySchema):
        if not isinstance(value, list):
            return f"expected an array, got {value!r}"
        return next((r for r in (_default_mismatch(s.items, v) for v in value) if r), None)
    if isinstance(s, avro.schema.MapSchema):
        if not isinstance(value, dict):
            return f"expected a map, got {value!r}"
        return next((r for r in (_default_mismatch(s.values, v) for v in value.values()) if r), None)
    if isinstance(s, avro.schema.RecordSchema):
        if not isinstance(value, dict):
            return f"expected a record object, got {value!r}"
        for f in s.fields:
            if f.name in value:
                reason = _default_mismatch(f.type, value[f.name])
                if reason:
                    return f"field '{f.name}': {reason}"
            elif not f.has_default:
                return f"field '{f.name}' is missing"
        return None
    return None


def non_null_branch(s: avro.schema.Schema) -> tuple[avro.schema.Schema, bool]:
    """For ``["null", T]`` (either order) return ``(T, True)``; otherwise ``(s, False)``."""
    if isinstance(s, avro.schema.UnionSchema):
        branches = [b for b in s.schemas if b.type != "null"]
        if len(branches) == 1 and len(s.schemas) == 2:
            return branches[0], True
    return s, False


def is_finite_number(value: object) -> bool:
    """A real number (not bool, not NaN/inf)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
