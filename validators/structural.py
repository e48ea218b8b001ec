"""The ``schema`` check: a DataFrame's Spark schema against an Avro schema, plus row rules for what types miss.

Column-level comparison (no data read) yields :class:`StructuralIssue` s: a missing field, an extra field, a Spark
type that cannot hold the Avro type (``long`` where Avro says ``int``), an unsupported union. Accepted Spark types
follow Avro's promotions (a Spark ``int`` column may feed an Avro ``long``, ``float`` or ``double``) and the usual
Spark representations of logical types (``timestamp-millis`` as ``timestamp`` or epoch ``long``, ``date`` as
``date`` or ``int``, ``decimal`` as any ``decimal(p, s)``, ``enum`` as ``string``, ``fixed`` as ``binary``).

Row rules (named ``schema:<path>:<rule>``):

- ``not_null``: a field whose Avro type is not a ``["null", T]`` union holds null (nested: only where the parent
  record is present; array items and map values too). Skipped where Spark's own schema says non-nullable;
- ``enum``: a value that is not one of the enum's symbols;
- ``decimal``: a value that does not fit ``decimal(precision, scale)`` (too many integer digits, or digits lost
  below the scale); only compiled when the Spark type can hold such values;
- ``max_length`` / ``min_length``: string length limits from ``maxLength`` / ``minLength`` attributes of the field or
  of its type;
- ``fixed_size``: a binary value whose length is not the ``fixed`` size.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable
from dataclasses import dataclass

import avro.schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from schema_registry.avro import non_null_branch
from validators.model import SchemaCheck
from validators.rules import (
    Predicate,
    RowRule,
    any_value,
    first_value,
    reason,
    sql_and,
    sql_concat,
    sql_literal,
    sql_string,
)

logger = logging.getLogger(__name__)

_INTS = (ByteType, ShortType, IntegerType)
_ACCEPTED: dict[str, tuple[type[DataType], ...]] = {
    "null": (NullType,),
    "boolean": (BooleanType,),
    "int": _INTS,
    "long": (*_INTS, LongType),
    "float": (*_INTS, LongType, FloatType),
    "double": (*_INTS, LongType, FloatType, DoubleType),
    "string": (StringType,),
    "bytes": (BinaryType,),
    "fixed": (BinaryType,),
    "enum": (StringType,),
}
_LOGICAL: dict[str, tuple[type[DataType], ...]] = {
    "date": (DateType, *_INTS),
    "time-millis": _INTS,
    "time-micros": (*_INTS, LongType),
    "timestamp-millis": (TimestampType, LongType),
    "timestamp-micros": (TimestampType, LongType),
    "timestamp-nanos": (TimestampType, LongType),
    "local-timestamp-millis": (TimestampNTZType, LongType),
    "local-timestamp-micros": (TimestampNTZType, LongType),
    "local-timestamp-nanos": (TimestampNTZType, LongType),
    "uuid": (StringType,),
    "decimal": (DecimalType,),
}


@dataclass(frozen=True)
class StructuralIssue:
    """A column-level mismatch between a DataFrame and the schema."""

    path: str
    problem: str

    def to_json(self) -> dict[str, str]:
        """``{"path": ..., "problem": ...}``."""
        return {"path": self.path, "problem": self.problem}

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def compile_schema_check(check: SchemaCheck, df_schema: StructType,
                         schema: avro.schema.Schema) -> tuple[list[StructuralIssue], list[RowRule]]:
    """The structural issues and the row rules of ``check`` for a DataFrame of ``df_schema``."""
    if not isinstance(schema, avro.schema.RecordSchema):
        return [StructuralIssue("", f"the schema is a {schema.type}, not a record")], []
    walker = _Walker(check)
    walker.record(schema, df_schema, "")
    logger.debug("schema check %s: %d issues, %d row rules", check.name, len(walker.issues), len(walker.rules))
    return walker.issues, walker.rules


class _Walker:
    def __init__(self, check: SchemaCheck) -> None:
        self.check = check
        self.issues: list[StructuralIssue] = []
        self.rules: list[RowRule] = []

    # --- structure ---------------------------------------------------------------------------------------------
    def record(self, rec: avro.schema.RecordSchema, struct: StructType, prefix: str) -> None:
        top = prefix == ""
        present = {f.name: f for f in struct.fields}
        for f in rec.fields:
            path = f"{prefix}.{f.name}" if prefix else f.name
            sf = present.get(f.name)
            if sf is None:
                if not (self.check.allow_missing_with_default and f.has_default):
                    what = "column" if top else "field"
                    self.issues.append(StructuralIssue(path, f"missing {what} (schema type {_describe(f.type)})"))
                continue
            self.value(f.type, sf.dataType, path, spark_nullable=sf.nullable, props=f.props)
        expected = {f.name for f in rec.fields}
        for sf in struct.fields:
            if sf.name in expected or self.check.allow_extra_columns:
                continue
            if top and any(fnmatch.fnmatchcase(sf.name, pat) for pat in self.check.ignore_columns):
                continue
            path = f"{prefix}.{sf.name}" if prefix else sf.name
            self.issues.append(StructuralIssue(path, f"extra {'column' if top else 'field'} not in the schema "
                                                     f"(Spark type {sf.dataType.simpleString()})"))

    def value(self, t: avro.schema.Schema, st: DataType, path: str, *, spark_nullable: bool,
              props: dict[str, object] | None = None) -> None:
        inner, nullable = non_null_branch(t)
        if isinstance(inner, avro.schema.UnionSchema):
            self.issues.append(StructuralIssue(
                path, f"unions other than [\"null\", T] are not supported ({_describe(t)})"))
            return
        if not nullable and spark_nullable and inner.type != "null":
            self.rule(path, "not_null", "is not null", lambda v: f"{v} IS NULL",
                      lambda: sql_string(f"{path} is null but the schema does not allow null"))
        self.typed(inner, st, path, props or {})

    def typed(self, t: avro.schema.Schema, st: DataType, path: str, field_props: dict[str, object]) -> None:
        logical = t.props.get("logicalType") if isinstance(t.props, dict) else None
        if isinstance(t, avro.schema.RecordSchema):
            if not isinstance(st, StructType):
                self.mismatch(path, t, st)
                return
            self.record(t, st, path)
        elif isinstance(t, avro.schema.ArraySchema):
            if not isinstance(st, ArrayType):
                self.mismatch(path, t, st)
                return
            self.value(t.items, st.elementType, f"{path}[]", spark_nullable=st.containsNull)
        elif isinstance(t, avro.schema.MapSchema):
            if not isinstance(st, MapType) or not isinstance(st.keyType, StringType):
                self.mismatch(path, t, st)
                return
            self.value(t.values, st.valueType, f"{path}{{}}", spark_nullable=st.valueContainsNull)
        elif logical in _LOGICAL and isinstance(st, _LOGICAL[str(logical)]):
            if logical == "decimal":
                self.decimal(t, st, path)
            elif isinstance(t, avro.schema.FixedSchema):
                self.fixed(t, path)
        elif isinstance(st, _ACCEPTED.get(str(t.type), ())):
            if isinstance(t, avro.schema.EnumSchema):
                self.enum(t, path)
            elif isinstance(t, avro.schema.FixedSchema):
                self.fixed(t, path)
            elif t.type == "string":
                self.lengths(path, {**t.props, **field_props})
        else:
            self.mismatch(path, t, st)

    def mismatch(self, path: str, t: avro.schema.Schema, st: DataType) -> None:
        self.issues.append(StructuralIssue(
            path, f"type mismatch: schema {_describe(t)}, DataFrame {st.simpleString()}"))

    # --- row rules ---------------------------------------------------------------------------------------------
    def rule(self, path: str, kind: str, requirement: str, pred: Predicate, why: Callable[[], str]) -> None:
        self.rules.append(RowRule(name=f"schema:{path}:{kind}", check=self.check.name,
                                  description=f"{path} {requirement}", failed_sql=any_value(path, pred),
                                  reason_sql=why()))

    def enum(self, t: avro.schema.EnumSchema, path: str) -> None:
        symbols = list(t.symbols)
        listed = ", ".join(sql_literal(x) for x in symbols)

        def bad(v: str) -> str:
            return sql_and(f"{v} IS NOT NULL", f"NOT ({v} IN ({listed}))")

        shown = ", ".join(symbols[:10]) + (" ..." if len(symbols) > 10 else "")
        self.rule(path, "enum", f"is one of the symbols of {t.name}", bad,
                  lambda: reason(path, first_value(path, bad), f"is not a symbol of enum {t.name} ({shown})",
                                 quote=True))

    def fixed(self, t: avro.schema.FixedSchema, path: str) -> None:
        size = int(t.size)
        if isinstance(t, avro.schema.FixedDecimalSchema):
            return

        def bad(v: str) -> str:
            return sql_and(f"{v} IS NOT NULL", f"length({v}) != {size}")

        self.rule(path, "fixed_size", f"has {size} bytes", bad,
                  lambda: sql_concat(sql_string(f"{path} has "), f"CAST(length({first_value(path, bad)}) AS STRING)",
                                     sql_string(f" bytes, the fixed type {t.name} has {size}")))

    def decimal(self, t: avro.schema.Schema, st: DataType, path: str) -> None:
        precision = int(t.props.get("precision", 0))  # type: ignore[call-overload]
        scale = int(t.props.get("scale", 0) or 0)  # type: ignore[call-overload]
        assert isinstance(st, DecimalType)
        if st.scale <= scale and st.precision - st.scale <= precision - scale:
            return  # every value of the Spark type fits

        def bad(v: str) -> str:
            fitted = f"try_cast({v} AS DECIMAL({precision}, {scale}))"
            return sql_and(f"{v} IS NOT NULL", f"{fitted} IS NULL OR {fitted} != {v}")

        self.rule(path, "decimal", f"fits decimal({precision}, {scale})", bad,
                  lambda: reason(path, first_value(path, bad),
                                 f"does not fit decimal({precision}, {scale}) (precision or scale overflow)",
                                 quote=False))

    def lengths(self, path: str, props: dict[str, object]) -> None:
        for attr, kind, op in (("maxLength", "max_length", ">"), ("minLength", "min_length", "<")):
            limit = props.get(attr)
            if not isinstance(limit, int) or isinstance(limit, bool):
                continue
            n = limit

            def bad(v: str, n: int = n, op: str = op) -> str:
                return sql_and(f"{v} IS NOT NULL", f"length({v}) {op} {n}")

            word = "at most" if op == ">" else "at least"
            self.rule(path, kind, f"has {word} {n} characters", bad, _length_reason(path, bad, word, n))


def _length_reason(path: str, bad: Predicate, word: str, n: int) -> Callable[[], str]:
    def why() -> str:
        return sql_concat(sql_string(f"{path} has "), f"CAST(length({first_value(path, bad)}) AS STRING)",
                          sql_string(f" characters, the schema allows {word} {n}"))

    return why


def _describe(t: avro.schema.Schema) -> str:
    if isinstance(t, avro.schema.UnionSchema):
        return "[" + ", ".join(_describe(b) for b in t.schemas) + "]"
    logical = t.props.get("logicalType") if isinstance(t.props, dict) else None
    if logical == "decimal":
        return f"decimal({t.props.get('precision')}, {t.props.get('scale', 0)})"
    if logical:
        return f"{t.type} ({logical})"
    if isinstance(t, avro.schema.NamedSchema):
        return f"{t.type} {t.name}"
    if isinstance(t, avro.schema.ArraySchema):
        return f"array<{_describe(t.items)}>"
    if isinstance(t, avro.schema.MapSchema):
        return f"map<{_describe(t.values)}>"
    return str(t.type)
