"""Schema compatibility: Avro reader/writer resolution plus the seven Confluent levels over a subject's versions.

``R(reader, writer)`` holds when a reader using ``reader`` can decode everything written with ``writer``.
The verdict comes from the Apache ``avro`` package's ``ReaderWriterCompatibilityChecker`` (a port of Java's
``SchemaCompatibility``, which Confluent and karapace use). That checker merges its findings into sets and
loses which message belongs to which location, so the human-readable reasons come from :func:`explain`, a
walk that follows the same rules and keeps each finding whole; the test suite checks that both agree on
every vector of ``tests/fixtures/avro-compat``. Reasons are only worked out for pairs the checker rejects.

Level checks against many versions (BACKWARD_TRANSITIVE over a long history) mostly compare the same field types
again and again, so :func:`reads` asks the checker once per *pair of field types* and remembers the verdict by a
structural digest of both types (their full JSON, names, defaults and aliases included); the record level on top
(names, field lookup by name then alias, defaults) is the checker's own rule, applied per pair. A record's field
digests are computed once per schema (:func:`record_shape`; the registry caches them with the parsed versions).
The test suite checks that :func:`reads` agrees with the checker on every vector and on generated pairs.

Levels (``prev`` = the subject's non-deleted versions, oldest first):

```
NONE                 nothing
BACKWARD             R(new, latest)             FORWARD             R(latest, new)
BACKWARD_TRANSITIVE  R(new, v) for v in prev    FORWARD_TRANSITIVE  R(v, new) for v in prev
FULL                 both, latest only          FULL_TRANSITIVE     both, every v
```

Semantic types add one rule on top (see :mod:`schema_registry.semantic`): for every field bound in both
schemas, the reader's constraints must admit every value the writer's admit, so narrowing a range is a
BACKWARD break and widening it a FORWARD break.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import avro.compatibility
import avro.name
import avro.schema

from schema_registry.model import CompatibilityLevel, Constraints
from schema_registry.semantic import constraint_narrowing, field_paths

logger = logging.getLogger(__name__)

_PROMOTIONS = {
    "long": {"int"},
    "float": {"int", "long"},
    "double": {"int", "long", "float"},
    "bytes": {"string"},
    "string": {"bytes"},
}
_NAMED = ("record", "enum", "fixed", "error")


@dataclass(frozen=True)
class Incompatibility:
    """One reason why a reader cannot read a writer's data.

    Attributes:
        error_type: Confluent's error type (TYPE_MISMATCH, READER_FIELD_MISSING_DEFAULT_VALUE, ...).
        location: JSON-pointer-like path in the reader schema (``/fields/1/type``).
        detail: the short detail (field name, missing symbols, the two types, ...).
    """

    error_type: str
    location: str
    detail: str


@dataclass(frozen=True)
class BoundField:
    """A field bound to a semantic type, with the constraints of the resolved type version."""

    type_name: str
    type_version: int
    constraints: Constraints


@dataclass(frozen=True)
class FieldShape:
    """A record field with the structural digest of its type (equal digests: equal types, to the checker)."""

    field: avro.schema.Field
    type_key: bytes


@dataclass(frozen=True)
class RecordShape:
    """What the record level of a check reads of a top-level record, precomputed once per schema.

    Attributes:
        record: the record.
        by_name: its fields by name (the writer's view).
        by_pair: its fields by (name, type digest) (the reader's view).
        pairs: the keys of ``by_pair``: a reader field whose pair the writer has too reads it (same name, same type),
            so a check only looks at the reader's pairs the writer lacks (a set difference).
    """

    record: avro.schema.RecordSchema
    by_name: Mapping[str, FieldShape]
    by_pair: Mapping[tuple[str, bytes], FieldShape]
    pairs: frozenset[tuple[str, bytes]]


def record_shape(schema: avro.schema.Schema) -> RecordShape | None:
    """The shape of a top-level record (None for any other schema: those go to the checker whole)."""
    if not isinstance(schema, avro.schema.RecordSchema) or schema.type != "record":
        return None
    fields = [FieldShape(f, type_key(f.type)) for f in schema.fields]
    by_pair = {(f.field.name, f.type_key): f for f in fields}
    return RecordShape(schema, {f.field.name: f for f in fields}, by_pair, frozenset(by_pair))


def type_key(schema: avro.schema.Schema) -> bytes:
    """A digest of a type's full JSON (named types defined in place, names, defaults and aliases included)."""
    text = json.dumps(schema.to_json(avro.name.Names()), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class VersionedSchema:
    """A schema taking part in a level check.

    Attributes:
        schema: the parsed Avro schema.
        version: its version in the subject (None for the schema being checked).
        bindings: field path -> the semantic type bound there.
        shape: ``record_shape(schema)`` if already computed (callers that check one schema many times pass it).
    """

    schema: avro.schema.Schema
    version: int | None = None
    bindings: Mapping[str, BoundField] = field(default_factory=dict)
    shape: RecordShape | None = field(default=None, compare=False, repr=False)

    def with_shape(self) -> VersionedSchema:
        """This schema with its record shape computed (itself when it has one or is no record)."""
        if self.shape is not None:
            return self
        shape = record_shape(self.schema)
        return self if shape is None else replace(self, shape=shape)


@dataclass(frozen=True)
class CompatibilityResult:
    """The outcome of a check.

    Attributes:
        is_compatible: the verdict.
        messages: Confluent-style verbose messages (empty when compatible).
    """

    is_compatible: bool
    messages: tuple[str, ...] = ()


class _Checker(avro.compatibility.ReaderWriterCompatibilityChecker):
    """The reference checker, reading Avro ``error`` types as the records they are.

    Java's ``SchemaCompatibility`` sees an error as a RECORD schema (``isError`` set) and compares it like any
    record; the Python port knows no ``error`` type and raises "Unknown schema type: error" when the reader is one.
    """

    def calculate_compatibility(self, reader: avro.schema.Schema, writer: avro.schema.Schema,
                                location: list[str]) -> avro.compatibility.SchemaCompatibilityResult:
        if isinstance(reader, avro.schema.RecordSchema) and "error" in (reader.type, writer.type):
            if isinstance(writer, avro.schema.RecordSchema):
                result = avro.compatibility.check_schema_names(reader, writer, location)
                return avro.compatibility.merge(result, self.check_reader_writer_record_fields(reader, writer,
                                                                                              location))
            if not isinstance(writer, avro.schema.UnionSchema):
                return avro.compatibility.type_mismatch(reader, writer, location)
        return super().calculate_compatibility(reader, writer, location)


def can_read(reader: avro.schema.Schema, writer: avro.schema.Schema) -> bool:
    """``R(reader, writer)`` by the Apache Avro reference checker (``error`` types compared as records)."""
    result = _Checker().get_compatibility(reader, writer)
    return result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible


class _Verdicts:
    """Verdicts of the checker on pairs of field types, by (reader digest, writer digest); bounded LRU."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._map: OrderedDict[tuple[bytes, bytes], bool] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, reader: FieldShape, writer: FieldShape) -> bool:
        key = (reader.type_key, writer.type_key)
        with self._lock:
            hit = self._map.get(key)
            if hit is not None:
                self._map.move_to_end(key)
                return hit
        verdict = can_read(reader.field.type, writer.field.type)
        with self._lock:
            self._map[key] = verdict
            while len(self._map) > self._size:
                self._map.popitem(last=False)
        return verdict


_VERDICTS = _Verdicts(16_384)


def field_reads(reader: FieldShape, writer: FieldShape) -> bool:
    """Whether a reader field's type reads a writer field's type: equal digests always do, other pairs are asked
    of the checker once and remembered."""
    return reader.type_key == writer.type_key or _VERDICTS.get(reader, writer)


def reads(reader: VersionedSchema, writer: VersionedSchema) -> bool:
    """``R(reader, writer)``: the checker's verdict, asked once per pair of field types.

    Two top-level records go through the checker's record rule here: the names must match (or a reader alias
    names the writer), and every reader field needs a writer field (by name, then by the reader field's aliases)
    whose type it can read, or else a default. A field type reads an equal one (same digest: the same type; every
    schema reads itself); other field-type pairs are decided by the checker and remembered by digest. Anything else
    (a top-level union, enum, ...) is handed to the checker whole.
    """
    r = reader.shape or record_shape(reader.schema)
    w = writer.shape or record_shape(writer.schema)
    if r is None or w is None:
        return can_read(reader.schema, writer.schema)
    if not avro.compatibility.schema_name_equals(r.record, w.record):
        return False
    for pair in r.pairs - w.pairs:  # the other reader fields have a writer field of their name and type
        rf = r.by_pair[pair]
        wf = w.by_name.get(rf.field.name)
        if wf is None:
            aliases = rf.field.props.get("aliases")
            if isinstance(aliases, Iterable):
                for alias in aliases:
                    wf = w.by_name.get(alias)
                    if wf is not None:
                        break
        if wf is None:
            if rf.field.has_default:
                continue
            if isinstance(rf.field.type, avro.schema.EnumSchema) and rf.field.type.props.get("default"):
                return can_read(reader.schema, writer.schema)  # the checker's enum-default corner: ask it whole
            return False
        if rf.type_key != wf.type_key and not _VERDICTS.get(rf, wf):  # equal digests: the same type, which
            return False                                              # always reads itself (by alias here)
    return True


def explain(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[Incompatibility]:
    """Every reason why ``reader`` cannot read ``writer`` data (empty if it can), with locations."""
    return _Walker().compat(reader, writer, "")


class _Walker:
    """Java ``SchemaCompatibility``'s decision procedure, collecting each incompatibility whole."""

    def __init__(self) -> None:
        self._done: dict[tuple[int, int], list[Incompatibility]] = {}

    def compat(self, reader: avro.schema.Schema, writer: avro.schema.Schema, path: str) -> list[Incompatibility]:
        key = (id(reader), id(writer))
        if key in self._done:
            return self._done[key]
        self._done[key] = []  # in progress: recursive types resolve as compatible
        out = self._calculate(reader, writer, path)
        self._done[key] = out
        return out

    def _calculate(
        self, reader: avro.schema.Schema, writer: avro.schema.Schema, path: str
    ) -> list[Incompatibility]:
        rt, wt = _kind(reader), _kind(writer)
        if rt == wt:
            if isinstance(reader, avro.schema.ArraySchema) and isinstance(writer, avro.schema.ArraySchema):
                return self.compat(reader.items, writer.items, f"{path}/items")
            if isinstance(reader, avro.schema.MapSchema) and isinstance(writer, avro.schema.MapSchema):
                return self.compat(reader.values, writer.values, f"{path}/values")
            if isinstance(reader, avro.schema.FixedSchema) and isinstance(writer, avro.schema.FixedSchema):
                out = _names(reader, writer, path)
                if reader.size != writer.size:
                    out.append(Incompatibility("FIXED_SIZE_MISMATCH", f"{path}/size",
                                               f"expected: {writer.size}, found: {reader.size}"))
                return out
            if isinstance(reader, avro.schema.EnumSchema) and isinstance(writer, avro.schema.EnumSchema):
                out = _names(reader, writer, path)
                missing = [s for s in writer.symbols if s not in reader.symbols]
                default = reader.props.get("default")
                if missing and not (default and default in reader.symbols):
                    out.append(Incompatibility("MISSING_ENUM_SYMBOLS", f"{path}/symbols", ", ".join(missing)))
                return out
            if isinstance(reader, avro.schema.RecordSchema) and isinstance(writer, avro.schema.RecordSchema):
                return _names(reader, writer, path) + self._fields(reader, writer, path)
            if isinstance(reader, avro.schema.UnionSchema) and isinstance(writer, avro.schema.UnionSchema):
                out = []
                for i, branch in enumerate(writer.schemas):
                    if self.compat(reader, branch, path):
                        out.append(Incompatibility("MISSING_UNION_BRANCH", f"{path}/{i}",
                                                   f"reader union lacking writer type: {_type_name(branch)}"))
                return out
            return []
        if isinstance(writer, avro.schema.UnionSchema):
            out = []
            for branch in writer.schemas:
                out.extend(self.compat(reader, branch, path))
            return out
        if isinstance(reader, avro.schema.UnionSchema):
            if any(not self.compat(branch, writer, path) for branch in reader.schemas):
                return []
            return [Incompatibility("MISSING_UNION_BRANCH", path or "/",
                                    f"reader union lacking writer type: {_type_name(writer)}")]
        if wt in _PROMOTIONS.get(rt, set()):
            return []
        return [Incompatibility("TYPE_MISMATCH", path or "/",
                                f"reader type: {_type_name(reader)} not compatible with writer type: "
                                f"{_type_name(writer)}")]

    def _fields(
        self, reader: avro.schema.RecordSchema, writer: avro.schema.RecordSchema, path: str
    ) -> list[Incompatibility]:
        out: list[Incompatibility] = []
        writer_fields = writer.fields_dict
        for i, rf in enumerate(reader.fields):
            wf = writer_fields.get(rf.name)
            if wf is None:
                for alias in rf.props.get("aliases") or ():
                    if alias in writer_fields:
                        wf = writer_fields[alias]
                        break
            if wf is not None:
                out.extend(self.compat(rf.type, wf.type, f"{path}/fields/{i}/type"))
            elif not rf.has_default:
                if isinstance(rf.type, avro.schema.EnumSchema) and rf.type.props.get("default"):
                    out.extend(self.compat(rf.type, writer, f"{path}/fields/{i}"))
                else:
                    out.append(Incompatibility("READER_FIELD_MISSING_DEFAULT_VALUE", f"{path}/fields/{i}", rf.name))
        return out


def _kind(s: avro.schema.Schema) -> str:
    """The type a check compares: ``error`` counts as ``record`` (Java: both are RECORD schemas)."""
    return "record" if s.type == "error" else str(s.type)


def _names(reader: avro.schema.NamedSchema, writer: avro.schema.NamedSchema, path: str) -> list[Incompatibility]:
    aliases = reader.props.get("aliases")
    if reader.name == writer.name or (isinstance(aliases, list) and writer.fullname in aliases):
        return []
    return [Incompatibility("NAME_MISMATCH", f"{path}/name", f"expected: {writer.fullname}")]


def _type_name(s: avro.schema.Schema) -> str:
    if isinstance(s, avro.schema.NamedSchema):
        return f"{s.type.upper()} {s.fullname}"
    return str(s.type).upper()


# --- levels ----------------------------------------------------------------------------------------------------

def check_level(
    new: VersionedSchema, previous: Sequence[VersionedSchema], level: CompatibilityLevel
) -> CompatibilityResult:
    """Check ``new`` against the live ``previous`` versions (oldest first) under ``level``.

    Returns:
        The verdict and, when incompatible, one Confluent-style message per reason plus a trailing
        ``{compatibility: '<LEVEL>'}`` entry.
    """
    if level is CompatibilityLevel.NONE or not previous:
        return CompatibilityResult(True)
    targets = [p.with_shape() for p in (reversed(previous) if level.transitive else previous[-1:])]
    new = new.with_shape()
    messages: list[str] = []
    for old in targets:
        if level.checks_backward:
            messages.extend(_pair_messages(reader=new, writer=old, new_is_reader=True))
        if level.checks_forward:
            messages.extend(_pair_messages(reader=old, writer=new, new_is_reader=False))
    if not messages:
        return CompatibilityResult(True)
    messages.append(f"{{compatibility: '{level.value}'}}")
    return CompatibilityResult(False, tuple(messages))


def _pair_messages(reader: VersionedSchema, writer: VersionedSchema, *, new_is_reader: bool) -> list[str]:
    old = writer if new_is_reader else reader
    old_name = f"the old schema (version {old.version})" if old.version is not None else "the old schema"
    reasons: list[Incompatibility] = []
    if not reads(reader, writer):  # the reasons are only worked out for pairs the checker rejects
        reasons = explain(reader.schema, writer.schema) or [
            Incompatibility("TYPE_MISMATCH", "/", "the Avro reference checker found the schemas incompatible")]
    out = [_describe(r, new_is_reader, old_name) for r in reasons]
    for path, rb in reader.bindings.items():
        wb = writer.bindings.get(path)
        if wb is None:
            # the reader binds a field the writer left unconstrained: old values may break the constraints
            if path in field_paths(writer.schema) and rb.constraints != Constraints():
                out.append(_semantic_message(path, f"'{path}' gains semantic type '{rb.type_name}'", new_is_reader,
                                             old_name))
            continue
        for reason in constraint_narrowing(rb.constraints, wb.constraints):
            out.append(_semantic_message(
                path, f"semantic type of '{path}' ({wb.type_name} v{wb.type_version} -> {rb.type_name} "
                f"v{rb.type_version}): {reason}", new_is_reader, old_name))
    if out:
        out.append(f"{{oldSchemaVersion: {old.version}}}" if old.version is not None else "{oldSchemaVersion: none}")
    return out


def _semantic_message(path: str, detail: str, new_is_reader: bool, old_name: str) -> str:
    who = "the new schema" if new_is_reader else old_name
    other = old_name if new_is_reader else "the new schema"
    description = (f"The constraints on field '{path}' in {who} reject values that {other} allows ({detail})")
    return _format("SEMANTIC_CONSTRAINT_NARROWED", description, detail)


def _describe(r: Incompatibility, new_is_reader: bool, old_name: str) -> str:
    reader = "the new schema" if new_is_reader else old_name
    writer = old_name if new_is_reader else "the new schema"
    loc = r.location or "/"
    text = {
        "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{r.detail}' at path '{loc}' in {reader} has no default "
                                              f"value and is missing in {writer}",
        "TYPE_MISMATCH": f"The type (path '{loc}') of a field in {reader} does not match with {writer}",
        "MISSING_UNION_BRANCH": f"{_cap(reader)} is missing a type inside a union field at path '{loc}' in {writer}",
        "MISSING_ENUM_SYMBOLS": f"{_cap(reader)} is missing enum symbols '{r.detail}' at path '{loc}' in {writer}",
        "NAME_MISMATCH": f"The name of the schema has changed (path '{loc}'): {reader} cannot read {writer}",
        "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{loc}' in {reader} does not match with "
                               f"{writer}",
    }.get(r.error_type, f"{r.error_type} at '{loc}'")
    return _format(r.error_type, text, r.detail)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _format(error_type: str, description: str, info: str) -> str:
    return f"{{errorType:'{error_type}', description:'{description}', additionalInfo:'{info}'}}"
