"""Avro table schemas following the Hudi/Spark conventions (reference §5.3), their Arrow mapping and evolution.

A Hudi table schema is an Avro record named ``<table>_record`` in namespace ``hoodie.<table>``. Every field is a
nullable union ``["null", T]`` with ``"default": null``; nested records are named after their field and live in the
namespace ``<parent namespace>.<parent record name>``; decimals are ``fixed`` types named ``fixed`` in the namespace
``<namespace>.<record>.<field>``. The commit ``extraMetadata.schema`` holds the schema *without* the five meta
columns; Parquet footers and log block headers hold it *with* them (:func:`with_meta_fields`).

This module is pure (no Spark): Arrow <-> Avro conversion, the meta columns and the compact JSON form Hudi writes;
the evolution check of a write is in :mod:`tablecore.format.schema_evolution`.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pyarrow as pa

__all__ = [
    "META_FIELDS",
    "arrow_to_avro",
    "avro_to_arrow",
    "canonical_json",
    "meta_arrow_fields",
    "with_meta_fields",
]

META_FIELDS: tuple[str, ...] = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED_TYPES = frozenset({"record", "error", "enum", "fixed"})
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Avro schema-resolution promotions: writer type -> reader types that can read it.
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

# Temporal logical types: name -> (family, rank). Within one family a finer unit has the higher rank.
TEMPORAL: dict[str, tuple[str, int]] = {
    "date": ("date", 0),
    "time-millis": ("time", 0),
    "time-micros": ("time", 1),
    "timestamp-millis": ("timestamp", 0),
    "timestamp-micros": ("timestamp", 1),
    "timestamp-nanos": ("timestamp", 2),
    "local-timestamp-millis": ("local-timestamp", 0),
    "local-timestamp-micros": ("local-timestamp", 1),
    "local-timestamp-nanos": ("local-timestamp", 2),
}

# Underlying Avro type each temporal logical type is valid on.
TEMPORAL_BASE: dict[str, str] = {
    "date": "int",
    "time-millis": "int",
    "time-micros": "long",
    "timestamp-millis": "long",
    "timestamp-micros": "long",
    "timestamp-nanos": "long",
    "local-timestamp-millis": "long",
    "local-timestamp-micros": "long",
    "local-timestamp-nanos": "long",
}


# ---------------------------------------------------------------------------------------------------------------------
# helpers shared by all directions
# ---------------------------------------------------------------------------------------------------------------------


def min_bytes_for_precision(precision: int) -> int:
    """Smallest number of bytes of a two's complement integer that holds any unscaled decimal of ``precision``.

    Same as Spark's ``minBytesForPrecision`` (precision 10 -> 5 bytes).
    """
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def full_name(node: dict[str, Any], enclosing_ns: str | None) -> str:
    """The full name of a named type definition, applying the Avro namespace rules."""
    name = str(node["name"])
    if "." in name:
        return name
    ns = node.get("namespace", enclosing_ns)
    return f"{ns}.{name}" if ns else name


def namespace_of(full_name: str) -> str | None:
    """The namespace part of a full name (``None`` for the null namespace)."""
    return full_name.rsplit(".", 1)[0] if "." in full_name else None


def lookup_name(ref: str, enclosing_ns: str | None, names: dict[str, Any]) -> str | None:
    """The full name a named-type reference resolves to, or ``None`` if it is not (yet) defined."""
    candidates = [ref] if "." in ref else ([f"{enclosing_ns}.{ref}"] if enclosing_ns else []) + [ref]
    for candidate in candidates:
        if candidate in names:
            return candidate
    return None


def split_nullable(node: Any) -> tuple[Any, bool]:
    """Split an optional union into ``(non-null branch, nullable)``.

    ``["null", T]`` and ``[T, "null"]`` give ``(T, True)``; a non-union ``T`` gives ``(T, False)``; ``["null"]``
    gives ``("null", True)``. Unions with several non-null branches are returned unchanged as ``(node, nullable)``.
    """
    if not isinstance(node, list):
        return node, node == "null"
    rest = [b for b in node if b != "null"]
    nullable = len(rest) < len(node)
    if not rest:
        return "null", True
    if len(rest) == 1:
        return rest[0], nullable
    return node, nullable


def _check_name(name: str, what: str) -> None:
    if not _AVRO_NAME.fullmatch(name):
        raise ValueError(
            f"{what} {name!r} is not a valid Avro name (letters, digits and '_', not starting with a digit)")


# ---------------------------------------------------------------------------------------------------------------------
# Arrow -> Avro
# ---------------------------------------------------------------------------------------------------------------------


class _ArrowToAvro:
    """One conversion; remembers the full names defined so far to reject collisions."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def define(self, full_name: str, path: str) -> None:
        if full_name in self.defined:
            raise ValueError(f"column {path!r}: Avro type name {full_name!r} would be defined twice")
        self.defined.add(full_name)

    def record(self, struct_fields: list[pa.Field], name: str, namespace: str, prefix: str) -> dict[str, Any]:
        """An Avro record of ``struct_fields`` named ``name`` in ``namespace``; ``prefix`` is the column path."""
        self.define(f"{namespace}.{name}", prefix.rstrip(".") or name)
        child_ns = f"{namespace}.{name}"
        seen: set[str] = set()
        fields: list[dict[str, Any]] = []
        for f in struct_fields:
            path = f"{prefix}{f.name}"
            _check_name(f.name, f"column {path!r}: field name")
            if f.name in seen:
                raise ValueError(f"column {path!r} appears more than once")
            seen.add(f.name)
            avro_type = self.type(f.type, f.name, child_ns, path)
            fields.append({"name": f.name, "type": ["null", avro_type], "default": None})
        return {"type": "record", "name": name, "namespace": namespace, "fields": fields}

    def type(self, t: pa.DataType, name: str, namespace: str, path: str) -> Any:
        """The (non-null) Avro type of Arrow type ``t`` of field ``name`` whose enclosing record is ``namespace``."""
        if pa.types.is_boolean(t):
            return "boolean"
        if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
            return "int"
        if pa.types.is_int64(t):
            return "long"
        if pa.types.is_float32(t):
            return "float"
        if pa.types.is_float64(t):
            return "double"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "string"
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return "bytes"
        if pa.types.is_date32(t):
            return {"type": "int", "logicalType": "date"}
        if pa.types.is_timestamp(t):
            logical = "timestamp-micros" if t.tz is not None else "local-timestamp-micros"
            return {"type": "long", "logicalType": logical}
        if pa.types.is_decimal(t):
            fixed_ns = f"{namespace}.{name}"
            self.define(f"{fixed_ns}.fixed", path)
            return {
                "type": "fixed",
                "name": "fixed",
                "namespace": fixed_ns,
                "size": min_bytes_for_precision(t.precision),
                "logicalType": "decimal",
                "precision": t.precision,
                "scale": t.scale,
            }
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            items = self.type(t.value_type, name, namespace, f"{path}.element")
            return {"type": "array", "items": ["null", items]}
        if pa.types.is_map(t):
            if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
                raise ValueError(f"column {path!r}: map keys must be strings in Avro, got {t.key_type}")
            values = self.type(t.item_type, name, namespace, f"{path}.value")
            return {"type": "map", "values": ["null", values]}
        if pa.types.is_struct(t):
            return self.record([t.field(i) for i in range(t.num_fields)], name, namespace, f"{path}.")
        raise ValueError(f"column {path!r}: Arrow type {t} is not supported in a table schema")


def arrow_to_avro(schema: pa.Schema, table_name: str) -> dict[str, Any]:
    """Convert the Arrow schema of the data columns (no meta columns) to the Hudi Avro table schema.

    The result follows the Hudi/Spark conventions of the commit ``extraMetadata.schema`` exactly: record
    ``<table_name>_record`` in namespace ``hoodie.<table_name>``, every field ``["null", T]`` with ``"default": null``,
    nested records named after their field in namespace ``<parent namespace>.<parent record name>`` (array items and
    map values included), decimals as ``fixed`` named ``fixed`` in namespace ``<namespace>.<record>.<field>``.

    Type mapping: int8/int16/int32 -> int, int64 -> long, float32 -> float, float64 -> double, bool -> boolean,
    (large_)string -> string, (large_)binary -> bytes, date32 -> int/date, timestamp with a time zone (any unit) ->
    long/timestamp-micros, timestamp without one -> long/local-timestamp-micros, decimal -> fixed/decimal,
    (large_)list -> array, map<string, T> -> map, struct -> record. Arrow nullability is ignored: everything is stored
    nullable.

    Args:
        schema: Arrow schema of the data columns.
        table_name: the table name (used for the record name and namespace).

    Returns:
        The Avro record schema as a JSON-able dict.

    Raises:
        ValueError: a column has an unsupported type (null, unsigned ints, durations, non-string map keys, ...), an
            invalid Avro name, or appears twice (the message names the column); or the table name is not a valid
            Avro name.
    """
    _check_name(table_name, "table name")
    conv = _ArrowToAvro()
    return conv.record(list(schema), f"{table_name}_record", f"hoodie.{table_name}", "")


# ---------------------------------------------------------------------------------------------------------------------
# Avro -> Arrow
# ---------------------------------------------------------------------------------------------------------------------


class _AvroToArrow:
    """One conversion; remembers the Arrow type of every named Avro type defined so far."""

    def __init__(self) -> None:
        self.names: dict[str, pa.DataType] = {}
        self.in_progress: set[str] = set()

    def type(self, node: Any, ns: str | None, path: str) -> pa.DataType:
        """The Arrow type of Avro type ``node`` declared inside namespace ``ns``."""
        if isinstance(node, list):
            inner, _ = split_nullable(node)
            if isinstance(inner, list):
                raise ValueError(f"column {path!r}: unions other than [\"null\", T] are not supported: {node}")
            return self.type(inner, ns, path)
        if isinstance(node, str):
            return self.primitive_or_ref(node, ns, path)
        if not isinstance(node, dict) or "type" not in node:
            raise ValueError(f"column {path!r}: invalid Avro type {node!r}")
        t = node["type"]
        if isinstance(t, (list, dict)):
            return self.type(t, ns, path)
        logical = node.get("logicalType")
        if t in NAMED_TYPES:
            return self.named(node, ns, path)
        if t == "array":
            item = self.type(node["items"], ns, f"{path}.element")
            return pa.list_(pa.field("element", item, nullable=True))
        if t == "map":
            value = self.type(node["values"], ns, f"{path}.value")
            return pa.map_(pa.string(), pa.field("value", value, nullable=True))
        if isinstance(logical, str):
            as_logical = self.logical(t, logical, node)
            if as_logical is not None:
                return as_logical
        return self.primitive_or_ref(t, ns, path)

    def primitive_or_ref(self, name: str, ns: str | None, path: str) -> pa.DataType:
        primitive = {
            "null": pa.null(),
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "bytes": pa.binary(),
            "string": pa.string(),
        }.get(name)
        if primitive is not None:
            return primitive
        full = lookup_name(name, ns, self.names)
        if full is None:
            candidates = [name] if "." in name else ([f"{ns}.{name}"] if ns else []) + [name]
            if any(c in self.in_progress for c in candidates):
                raise ValueError(f"column {path!r}: recursive type {name!r} cannot be represented in Arrow")
            raise ValueError(f"column {path!r}: unknown Avro type {name!r}")
        return self.names[full]

    @staticmethod
    def logical(base: str, logical: str, node: dict[str, Any]) -> pa.DataType | None:
        """The Arrow type of a logical type on ``base``, or ``None`` to fall back to ``base`` (unknown/invalid)."""
        if logical == "decimal" and base in ("bytes", "fixed"):
            precision, scale = node.get("precision"), node.get("scale", 0)
            if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision <= 76:
                return None  # invalid decimal: Avro says to ignore the logical type
            if precision == 0:
                return None
            return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        if logical == "uuid" and base == "string":
            return pa.string()
        if TEMPORAL_BASE.get(logical) != base:
            return None
        family, rank = TEMPORAL[logical]
        if family == "date":
            return pa.date32()
        if family == "time":
            return pa.time32("ms") if rank == 0 else pa.time64("us")
        unit = "ns" if rank == 2 else "us"
        return pa.timestamp(unit, tz="UTC") if family == "timestamp" else pa.timestamp(unit)

    def named(self, node: dict[str, Any], ns: str | None, path: str) -> pa.DataType:
        full = full_name(node, ns)
        child_ns = namespace_of(full)
        kind = node["type"]
        if kind in ("record", "error"):
            self.in_progress.add(full)
            fields = [
                pa.field(f["name"], self.type(f["type"], child_ns, f"{path}.{f['name']}" if path else f["name"]))
                for f in node.get("fields", [])
            ]
            self.in_progress.discard(full)
            result: pa.DataType = pa.struct(fields)
        elif kind == "enum":
            result = pa.string()
        else:
            logical = node.get("logicalType")
            as_decimal = self.logical("fixed", logical, node) if isinstance(logical, str) else None
            result = as_decimal if as_decimal is not None else pa.binary()
        self.names[full] = result
        return result


def avro_to_arrow(avro: dict[str, Any] | str) -> pa.Schema:
    """Convert an Avro record schema to the Arrow schema used for reading.

    Optional unions (``["null", T]`` or ``[T, "null"]``) become nullable ``T``; every produced field is nullable and
    the field order is kept. Mapping: int -> int32, long -> int64, float -> float32, double -> float64, boolean ->
    bool, string -> string, bytes -> binary, enum -> string, fixed -> binary, decimal (bytes or fixed) ->
    decimal128(p, s) (decimal256 beyond precision 38), date -> date32, timestamp-millis/micros ->
    timestamp("us", "UTC"), local-timestamp-millis/micros -> timestamp("us"), time-millis -> time32("ms"),
    time-micros -> time64("us"), uuid -> string, array -> list (item field "element"), map -> map<string, T>,
    record -> struct. Named types may be referenced by (full or namespace-relative) name after their definition;
    unknown logical types fall back to their underlying type.

    Args:
        avro: the Avro record schema, as a dict or a JSON string.

    Returns:
        The Arrow schema.

    Raises:
        ValueError: the schema is not a record, or holds something Arrow cannot represent (general unions,
            recursive types, unknown type names).
    """
    node = json.loads(avro) if isinstance(avro, str) else avro
    if not isinstance(node, dict) or node.get("type") not in ("record", "error"):
        raise ValueError("the top-level Avro schema must be a record")
    struct = _AvroToArrow().named(node, None, "")
    return pa.schema([struct.field(i) for i in range(struct.num_fields)])


# ---------------------------------------------------------------------------------------------------------------------
# meta columns and JSON
# ---------------------------------------------------------------------------------------------------------------------


def with_meta_fields(avro: dict[str, Any]) -> dict[str, Any]:
    """Prepend the five Hudi meta fields to a record schema.

    Each meta field is ``{"name": ..., "type": ["null", "string"], "doc": "", "default": null}``, the form of the
    Parquet ``parquet.avro.schema`` footer and the log block SCHEMA header. Like Hudi's ``addMetadataFields``, meta
    fields already present in ``avro`` are replaced (the function is idempotent).

    Args:
        avro: the Avro record schema of the data columns.

    Returns:
        A new schema dict; ``avro`` is not modified.
    """
    out = copy.deepcopy(avro)
    meta = [{"name": name, "type": ["null", "string"], "doc": "", "default": None} for name in META_FIELDS]
    out["fields"] = meta + [f for f in out.get("fields", []) if f.get("name") not in META_FIELDS]
    return out


def meta_arrow_fields() -> list[pa.Field]:
    """The five meta columns as nullable Arrow string fields, in Hudi order.

    Returns:
        A new list of ``pa.field(name, pa.string())``.
    """
    return [pa.field(name, pa.string(), nullable=True) for name in META_FIELDS]


def canonical_json(avro: dict[str, Any]) -> str:
    """The compact JSON text of a schema, as Hudi writes it (no spaces, key order kept, non-ASCII kept).

    Args:
        avro: the Avro schema.

    Returns:
        The JSON string.
    """
    return json.dumps(avro, separators=(",", ":"), ensure_ascii=False)
