"""Avro table schemas following the Hudi/Spark conventions (reference §5.3), their Arrow mapping and evolution.

A Hudi table schema is an Avro record named ``<table>_record`` in namespace ``hoodie.<table>``. Every field is a
nullable union ``["null", T]`` with ``"default": null``; nested records are named after their field and live in the
namespace ``<parent namespace>.<parent record name>``; decimals are ``fixed`` types named ``fixed`` in the namespace
``<namespace>.<record>.<field>``. The commit ``extraMetadata.schema`` holds the schema *without* the five meta
columns; Parquet footers and log block headers hold it *with* them (:func:`with_meta_fields`).

This module is pure (no Spark): Arrow <-> Avro conversion, the meta columns, the evolution check of a write and the
compact JSON form Hudi writes.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pyarrow as pa

from tablecore.exceptions import SchemaEvolutionError

__all__ = [
    "META_FIELDS",
    "arrow_to_avro",
    "avro_to_arrow",
    "canonical_json",
    "evolve",
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

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Avro schema-resolution promotions: writer type -> reader types that can read it.
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

# Temporal logical types: name -> (family, rank). Within one family a finer unit has the higher rank.
_TEMPORAL: dict[str, tuple[str, int]] = {
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
_TEMPORAL_BASE: dict[str, str] = {
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


def _min_bytes_for_precision(precision: int) -> int:
    """Smallest number of bytes of a two's complement integer that holds any unscaled decimal of ``precision``.

    Same as Spark's ``minBytesForPrecision`` (precision 10 -> 5 bytes).
    """
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def _full_name(node: dict[str, Any], enclosing_ns: str | None) -> str:
    """The full name of a named type definition, applying the Avro namespace rules."""
    name = str(node["name"])
    if "." in name:
        return name
    ns = node.get("namespace", enclosing_ns)
    return f"{ns}.{name}" if ns else name


def _namespace_of(full_name: str) -> str | None:
    """The namespace part of a full name (``None`` for the null namespace)."""
    return full_name.rsplit(".", 1)[0] if "." in full_name else None


def _lookup(ref: str, enclosing_ns: str | None, names: dict[str, Any]) -> str | None:
    """The full name a named-type reference resolves to, or ``None`` if it is not (yet) defined."""
    candidates = [ref] if "." in ref else ([f"{enclosing_ns}.{ref}"] if enclosing_ns else []) + [ref]
    for candidate in candidates:
        if candidate in names:
            return candidate
    return None


def _split_nullable(node: Any) -> tuple[Any, bool]:
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
                "size": _min_bytes_for_precision(t.precision),
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
            inner, _ = _split_nullable(node)
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
        if t in _NAMED:
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
        full = _lookup(name, ns, self.names)
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
        if _TEMPORAL_BASE.get(logical) != base:
            return None
        family, rank = _TEMPORAL[logical]
        if family == "date":
            return pa.date32()
        if family == "time":
            return pa.time32("ms") if rank == 0 else pa.time64("us")
        unit = "ns" if rank == 2 else "us"
        return pa.timestamp(unit, tz="UTC") if family == "timestamp" else pa.timestamp(unit)

    def named(self, node: dict[str, Any], ns: str | None, path: str) -> pa.DataType:
        full = _full_name(node, ns)
        child_ns = _namespace_of(full)
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


# ---------------------------------------------------------------------------------------------------------------------
# schema evolution
# ---------------------------------------------------------------------------------------------------------------------


def _collect_names(node: Any, ns: str | None, names: dict[str, tuple[dict[str, Any], str | None]]) -> None:
    """Register every named type defined in ``node`` (full name -> (definition, enclosing namespace))."""
    if isinstance(node, list):
        for branch in node:
            _collect_names(branch, ns, names)
        return
    if not isinstance(node, dict):
        return
    t = node.get("type")
    if isinstance(t, (list, dict)):
        _collect_names(t, ns, names)
    elif t in _NAMED and "name" in node:
        full = _full_name(node, ns)
        names.setdefault(full, (node, ns))
        for f in node.get("fields", []) if t in ("record", "error") else []:
            _collect_names(f.get("type"), _namespace_of(full), names)
    elif t == "array":
        _collect_names(node.get("items"), ns, names)
    elif t == "map":
        _collect_names(node.get("values"), ns, names)


def _is_decimal(node: dict[str, Any]) -> bool:
    return (
        node.get("logicalType") == "decimal"
        and node.get("type") in ("bytes", "fixed")
        and isinstance(node.get("precision"), int)
        and isinstance(node.get("scale", 0), int)
    )


class _Side:
    """One schema of an evolution check (the table's or the incoming one) with its named types."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.names: dict[str, tuple[dict[str, Any], str | None]] = {}
        _collect_names(root, None, self.names)

    def resolve(self, node: Any, ns: str | None, path: str) -> tuple[Any, str | None]:
        """Follow named references and ``{"type": <type>}`` wrappers; return the definition and its namespace."""
        seen = 0
        while True:
            seen += 1
            if seen > 100:
                raise SchemaEvolutionError(f"column {path!r}: cannot resolve type {node!r}")
            if isinstance(node, str) and node not in _PRIMITIVES:
                full = _lookup(node, ns, self.names)
                if full is None:
                    raise SchemaEvolutionError(f"column {path!r}: unknown Avro type {node!r}")
                node, ns = self.names[full]
                continue
            if isinstance(node, dict) and isinstance(node.get("type"), (list, dict)):
                node = node["type"]
                continue
            if isinstance(node, dict) and node.get("type") not in _PRIMITIVES | _NAMED | {"array", "map"}:
                if not isinstance(node.get("type"), str):
                    raise SchemaEvolutionError(f"column {path!r}: invalid Avro type {node!r}")
                node = node["type"]
                continue
            if not isinstance(node, (str, dict)):
                raise SchemaEvolutionError(f"column {path!r}: invalid Avro type {node!r}")
            return node, ns


def _kind(node: Any) -> str:
    """A short comparable description of a resolved (non-union) type, used for the rules and error messages."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    t = node["type"]
    logical = node.get("logicalType")
    if _is_decimal(node):
        return f"decimal({node['precision']},{node.get('scale', 0)})"
    if isinstance(logical, str) and _TEMPORAL_BASE.get(logical) == t:
        return logical
    if t in ("error",):
        return "record"
    return str(t)


class _Evolver:
    """One evolution check: merges the incoming schema into the table schema."""

    def __init__(self, table: dict[str, Any], incoming: dict[str, Any]) -> None:
        self.table = _Side(table)
        self.incoming = _Side(incoming)
        self.active: set[tuple[str, str]] = set()

    # -- records --------------------------------------------------------------------------------------------------
    def record(
        self, t_rec: dict[str, Any], t_ns: str | None, i_rec: dict[str, Any], i_ns: str | None, path: str
    ) -> dict[str, Any]:
        t_full, i_full = _full_name(t_rec, t_ns), _full_name(i_rec, i_ns)
        if (t_full, i_full) in self.active:
            raise SchemaEvolutionError(f"column {path!r}: recursive record types are not supported")
        self.active.add((t_full, i_full))
        t_child_ns, i_child_ns = _namespace_of(t_full), _namespace_of(i_full)
        incoming_fields = {f["name"]: f for f in i_rec.get("fields", [])}
        fields: list[dict[str, Any]] = []
        for t_field in t_rec.get("fields", []):
            name = t_field["name"]
            col = f"{path}.{name}" if path else name
            i_field = incoming_fields.pop(name, None)
            if i_field is None:
                raise SchemaEvolutionError(
                    f"column {col!r} is missing from the input; dropping columns is not supported")
            fields.append(self.field(t_field, t_child_ns, i_field, i_child_ns, col))
        for i_field in incoming_fields.values():  # new columns, appended in input order
            new = copy.deepcopy(i_field)
            new["type"] = _move_namespaces(new["type"], i_full, t_full)
            if not _nullable(new["type"]):
                new["type"] = ["null", new["type"]]
                new["default"] = None
            elif new["type"][0] == "null" and "default" not in new:
                new["default"] = None
            fields.append(new)
        self.active.discard((t_full, i_full))
        out = {k: fields if k == "fields" else copy.deepcopy(v) for k, v in t_rec.items()}
        out["fields"] = fields
        return out

    def field(
        self, t_field: dict[str, Any], t_ns: str | None, i_field: dict[str, Any], i_ns: str | None, path: str
    ) -> dict[str, Any]:
        out = {k: copy.deepcopy(v) for k, v in t_field.items()}  # "type" is replaced below, in place
        t_type = t_field["type"]
        merged = self.slot(t_type, t_ns, i_field["type"], i_ns, path)
        if _nullable(merged) and not _nullable(t_type):
            # the table column was not nullable and becomes so; a non-null default must stay on the first branch
            inner = next(b for b in merged if b != "null")
            if t_field.get("default") is not None:
                merged = [inner, "null"]
            else:
                merged = ["null", inner]
                out["default"] = None
        out["type"] = merged
        return out

    def slot(self, t_node: Any, t_ns: str | None, i_node: Any, i_ns: str | None, path: str) -> Any:
        """Merge a type position that may hold an optional union (field types, array items, map values)."""
        if t_node == i_node:
            return copy.deepcopy(t_node)
        t_inner, t_nullable = _split_nullable(t_node)
        i_inner, i_nullable = _split_nullable(i_node)
        for node, inner in ((t_node, t_inner), (i_node, i_inner)):
            if isinstance(inner, list):
                raise SchemaEvolutionError(
                    f"column {path!r}: unions other than [\"null\", T] are not supported: {node}")
        merged = self.type(t_inner, t_ns, i_inner, i_ns, path)
        if merged == "null":
            return copy.deepcopy(t_node)
        if isinstance(t_node, list):
            if t_inner == "null":
                return ["null", merged]
            return [b if b == "null" else merged for b in t_node]  # keep the table's branch order
        if i_nullable and not t_nullable:
            return ["null", merged]
        return merged

    # -- types ----------------------------------------------------------------------------------------------------
    def type(self, t_node: Any, t_ns: str | None, i_node: Any, i_ns: str | None, path: str) -> Any:
        """Merge two non-union types; returns the table's node when the table type is kept."""
        t_def, t_def_ns = self.table.resolve(t_node, t_ns, path)
        i_def, i_def_ns = self.incoming.resolve(i_node, i_ns, path)
        t_kind, i_kind = _kind(t_def), _kind(i_def)

        def fail() -> SchemaEvolutionError:
            return SchemaEvolutionError(f"column {path!r}: cannot change type from {t_kind} to {i_kind}")

        def changed(new: Any) -> Any:
            if isinstance(t_node, str) and t_node not in _PRIMITIVES:
                raise SchemaEvolutionError(
                    f"column {path!r}: cannot change type from {t_kind} to {i_kind}: the table type is a named "
                    f"reference ({t_node!r}) and cannot be evolved")
            return new

        if i_kind == "null":  # an all-null input column fits any table type
            return copy.deepcopy(t_node)
        if t_kind == "null":
            return changed(copy.deepcopy(i_node))
        t_type = t_def if isinstance(t_def, str) else t_def["type"]
        i_type = i_def if isinstance(i_def, str) else i_def["type"]

        if t_type in ("record", "error"):
            if i_type not in ("record", "error"):
                raise fail()
            merged = self.record(t_def, t_def_ns, i_def, i_def_ns, path)
            return copy.deepcopy(t_node) if merged == t_def else changed(merged)
        if t_type in ("array", "map"):
            if i_type != t_type:
                raise fail()
            key, step = ("items", "element") if t_type == "array" else ("values", "value")
            child = self.slot(t_def[key], t_def_ns, i_def[key], i_def_ns, f"{path}.{step}")
            return copy.deepcopy(t_node) if child == t_def[key] else changed({**copy.deepcopy(t_def), key: child})

        if isinstance(t_def, dict) and _is_decimal(t_def):
            if not (isinstance(i_def, dict) and _is_decimal(i_def)):
                raise fail()
            t_p, t_s = t_def["precision"], t_def.get("scale", 0)
            i_p, i_s = i_def["precision"], i_def.get("scale", 0)
            if t_s != i_s:
                raise SchemaEvolutionError(f"column {path!r}: cannot change decimal scale from {t_s} to {i_s} "
                                           f"({t_kind} to {i_kind})")
            if i_p <= t_p:
                return copy.deepcopy(t_node)
            widened = {**copy.deepcopy(t_def), "precision": i_p}
            if t_def["type"] == "fixed":
                widened["size"] = max(int(t_def.get("size", 0)), _min_bytes_for_precision(i_p))
            return changed(widened)

        if t_kind == i_kind:
            if t_type == "enum":
                if set(i_def.get("symbols", [])) <= set(t_def.get("symbols", [])):
                    return copy.deepcopy(t_node)
                raise SchemaEvolutionError(f"column {path!r}: cannot change enum symbols "
                                           f"{t_def.get('symbols')} to {i_def.get('symbols')}")
            if t_type == "fixed":
                if t_def.get("size") == i_def.get("size"):
                    return copy.deepcopy(t_node)
                raise SchemaEvolutionError(f"column {path!r}: cannot change fixed size from {t_def.get('size')} "
                                           f"to {i_def.get('size')}")
            return copy.deepcopy(t_node)

        if t_kind in _TEMPORAL and i_kind in _TEMPORAL and _TEMPORAL[t_kind][0] == _TEMPORAL[i_kind][0]:
            return copy.deepcopy(t_node)  # same family, other unit: the table's unit is kept and the write converts

        if t_kind in _PROMOTIONS and i_kind in _PROMOTIONS[t_kind]:
            return changed(copy.deepcopy(i_node))  # legal promotion: widen the table column
        if i_kind in _PROMOTIONS and t_kind in _PROMOTIONS[i_kind]:
            return copy.deepcopy(t_node)  # narrower input: keep the table type, the write casts up
        raise fail()


def _nullable(node: Any) -> bool:
    return isinstance(node, list) and "null" in node


def _move_namespaces(node: Any, old: str, new: str) -> Any:
    """Re-root the explicit namespaces of named types in ``node`` from prefix ``old`` to ``new`` (in place)."""
    if old == new:
        return node
    if isinstance(node, list):
        return [_move_namespaces(b, old, new) for b in node]
    if not isinstance(node, dict):
        return node
    ns = node.get("namespace")
    if isinstance(ns, str) and (ns == old or ns.startswith(old + ".")):
        node["namespace"] = new + ns[len(old):]
    t = node.get("type")
    if isinstance(t, (list, dict)):
        node["type"] = _move_namespaces(t, old, new)
    elif t in ("record", "error"):
        for f in node.get("fields", []):
            f["type"] = _move_namespaces(f["type"], old, new)
    elif t == "array":
        node["items"] = _move_namespaces(node["items"], old, new)
    elif t == "map":
        node["values"] = _move_namespaces(node["values"], old, new)
    return node


def _check_unique_names(node: Any, ns: str | None, seen: dict[str, Any], path: str) -> None:
    """Raise if a full type name is defined twice with different definitions (invalid Avro)."""
    if isinstance(node, list):
        for b in node:
            _check_unique_names(b, ns, seen, path)
        return
    if not isinstance(node, dict):
        return
    t = node.get("type")
    if isinstance(t, (list, dict)):
        _check_unique_names(t, ns, seen, path)
    elif t in _NAMED and "name" in node:
        full = _full_name(node, ns)
        if full in seen and seen[full] is not node:
            raise SchemaEvolutionError(f"column {path!r}: the evolved schema would define type {full!r} twice")
        seen[full] = node
        for f in node.get("fields", []) if t in ("record", "error") else []:
            col = f"{path}.{f.get('name')}" if path else str(f.get("name"))
            _check_unique_names(f.get("type"), _namespace_of(full), seen, col)
    elif t == "array":
        _check_unique_names(node.get("items"), ns, seen, f"{path}.element")
    elif t == "map":
        _check_unique_names(node.get("values"), ns, seen, f"{path}.value")


def evolve(table: dict[str, Any] | None, incoming: dict[str, Any]) -> dict[str, Any]:
    """Check that a write's schema is a legal evolution of the table schema and return the table schema after it.

    Rules (applied recursively through records, array items and map values):

    - a table column missing from the input -> error (dropping columns is not supported);
    - a new input column (at any depth) -> accepted, appended at the end of its record, stored nullable;
    - same type -> the table type is kept;
    - input type is an Avro promotion of the table type (int -> long/float/double, long -> float/double,
      float -> double, string <-> bytes) -> the table column is widened to the input type;
    - input type promotes to the table type (e.g. table long, input int) -> the table type is kept (the write casts);
    - decimals: same scale and input precision <= table precision -> kept; larger precision -> widened;
      another scale -> error;
    - temporal logical types of one family (timestamp, local-timestamp, time) that only differ in unit -> the table
      type is kept;
    - anything else (string -> int, record -> primitive, date -> long, ...) -> error.

    Record names, namespaces and other attributes of the table schema are kept; the namespaces of new nested types
    are re-rooted under the table's record.

    Args:
        table: the current table Avro schema, or ``None`` for a new table.
        incoming: the Avro schema of the batch (as built by :func:`arrow_to_avro`).

    Returns:
        The table Avro schema after the write (a new dict; the arguments are not modified).

    Raises:
        SchemaEvolutionError: the input is not a legal evolution; the message names the column path.
    """
    if table is None:
        return copy.deepcopy(incoming)
    for which, schema in (("table", table), ("incoming", incoming)):
        if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
            raise SchemaEvolutionError(f"the {which} schema is not an Avro record")
    result = _Evolver(table, incoming).record(table, None, incoming, None, "")
    _check_unique_names(result, None, {}, "")
    return result
