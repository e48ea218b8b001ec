"""Schema evolution of a write (reference §5.3): whether the Avro schema of a batch is a legal evolution of the
table's, and the table schema after the write (:func:`evolve`: new columns, Avro type promotions and wider decimals
are accepted; dropped columns and other type changes raise :class:`~tablecore.exceptions.SchemaEvolutionError`).
"""

from __future__ import annotations

import copy
from typing import Any

from tablecore.exceptions import SchemaEvolutionError
from tablecore.format.avro_schema import (
    NAMED_TYPES,
    PRIMITIVES,
    PROMOTIONS,
    TEMPORAL,
    TEMPORAL_BASE,
    full_name,
    lookup_name,
    min_bytes_for_precision,
    namespace_of,
    split_nullable,
)


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
    elif t in NAMED_TYPES and "name" in node:
        full = full_name(node, ns)
        names.setdefault(full, (node, ns))
        for f in node.get("fields", []) if t in ("record", "error") else []:
            _collect_names(f.get("type"), namespace_of(full), names)
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
            if isinstance(node, str) and node not in PRIMITIVES:
                full = lookup_name(node, ns, self.names)
                if full is None:
                    raise SchemaEvolutionError(f"column {path!r}: unknown Avro type {node!r}")
                node, ns = self.names[full]
                continue
            if isinstance(node, dict) and isinstance(node.get("type"), (list, dict)):
                node = node["type"]
                continue
            if isinstance(node, dict) and node.get("type") not in PRIMITIVES | NAMED_TYPES | {"array", "map"}:
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
    if isinstance(logical, str) and TEMPORAL_BASE.get(logical) == t:
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
        t_full, i_full = full_name(t_rec, t_ns), full_name(i_rec, i_ns)
        if (t_full, i_full) in self.active:
            raise SchemaEvolutionError(f"column {path!r}: recursive record types are not supported")
        self.active.add((t_full, i_full))
        t_child_ns, i_child_ns = namespace_of(t_full), namespace_of(i_full)
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
        t_inner, t_nullable = split_nullable(t_node)
        i_inner, i_nullable = split_nullable(i_node)
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
            if isinstance(t_node, str) and t_node not in PRIMITIVES:
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
                widened["size"] = max(int(t_def.get("size", 0)), min_bytes_for_precision(i_p))
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

        if t_kind in TEMPORAL and i_kind in TEMPORAL and TEMPORAL[t_kind][0] == TEMPORAL[i_kind][0]:
            return copy.deepcopy(t_node)  # same family, other unit: the table's unit is kept and the write converts

        if t_kind in PROMOTIONS and i_kind in PROMOTIONS[t_kind]:
            return changed(copy.deepcopy(i_node))  # legal promotion: widen the table column
        if i_kind in PROMOTIONS and t_kind in PROMOTIONS[i_kind]:
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
    elif t in NAMED_TYPES and "name" in node:
        full = full_name(node, ns)
        if full in seen and seen[full] is not node:
            raise SchemaEvolutionError(f"column {path!r}: the evolved schema would define type {full!r} twice")
        seen[full] = node
        for f in node.get("fields", []) if t in ("record", "error") else []:
            col = f"{path}.{f.get('name')}" if path else str(f.get("name"))
            _check_unique_names(f.get("type"), namespace_of(full), seen, col)
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
