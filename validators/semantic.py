"""The ``semantic`` check: every constraint of every bound semantic type compiled into Spark SQL expressions.

One row rule per (field, constraint), named ``semantic:<path>:<type>:<constraint>``. The meaning of each
constraint is the one documented on :class:`schema_registry.model.Constraints`:

=============  ===============================================================================================
constraint     failing value (nulls fail only ``not_null``)
=============  ===============================================================================================
minimum        ``v < minimum`` (``v <= minimum`` when ``exclusive_minimum``)
maximum        ``v > maximum`` (``v >= maximum`` when ``exclusive_maximum``)
pattern        ``NOT v RLIKE '^(?:pattern)$'`` (a full match; Java regex in Spark)
enum           ``v NOT IN (enum)``
min_length     ``length(v) < min_length`` (characters; bytes for binary)
max_length     ``length(v) > max_length``
not_null       ``v IS NULL``
not_future     ``v > now``: ``now`` is taken once per run; epoch numbers are read in the field's logical unit
json_schema    the JSON document is invalid (a vectorized Python UDF; see :mod:`validators.json_rules`)
=============  ===============================================================================================
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping

import avro.schema
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from schema_registry.avro import non_null_branch
from schema_registry.model import Constraints, SemanticType
from schema_registry.regex_safety import pattern_problem
from schema_registry.semantic import declared_bindings, iter_fields
from validators.json_rules import json_schema_rule
from validators.model import CONSTRAINT_NAMES, SemanticCheck
from validators.rules import (
    Predicate,
    RowRule,
    any_value,
    first_value,
    fmt_number,
    reason,
    resolve_type,
    sql_and,
    sql_concat,
    sql_literal,
    sql_string,
)
from validators.structural import StructuralIssue

logger = logging.getLogger(__name__)

_NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)
_UNIT_PER_SECOND = {"timestamp-millis": 1_000, "timestamp-micros": 1_000_000, "timestamp-nanos": 1_000_000_000,
                    "local-timestamp-millis": 1_000, "local-timestamp-micros": 1_000_000}


def compile_semantic_check(check: SemanticCheck, df_schema: StructType, schema: avro.schema.Schema | None,
                           catalogue: Mapping[str, SemanticType],
                           now: dt.datetime) -> tuple[list[StructuralIssue], list[RowRule]]:
    """The issues (unknown type, missing field, unfit type) and the row rules of ``check``.

    Args:
        check: the check.
        df_schema: the schema of the view it reads.
        schema: the Avro schema whose ``semanticType`` attributes bind fields (None: only ``check.bindings``).
        catalogue: semantic types by name (the suite's own ``types`` win over it).
        now: the moment ``not_future`` compares with (UTC).
    """
    bindings: dict[str, str] = dict(declared_bindings(schema)) if schema is not None else {}
    bindings.update(check.bindings)
    logical: dict[str, str] = {}
    if schema is not None:
        for path, f in iter_fields(schema):
            inner, _ = non_null_branch(f.type)
            lt = inner.props.get("logicalType") if isinstance(inner.props, dict) else None
            if isinstance(lt, str):
                logical[path] = lt
    issues: list[StructuralIssue] = []
    rules: list[RowRule] = []
    for path, type_name in sorted(bindings.items()):
        if check.fields is not None and path not in check.fields:
            continue
        st = _lookup(check, catalogue, type_name)
        if st is None:
            issues.append(StructuralIssue(path, f"unknown semantic type {type_name!r}"))
            continue
        spark_type = resolve_type(df_schema, path)
        if spark_type is None:
            issues.append(StructuralIssue(path, f"bound to {type_name} but missing from the DataFrame"))
            continue
        compiler = _FieldCompiler(check, path, st, spark_type, logical.get(path), now, df_schema)
        for name in CONSTRAINT_NAMES:
            if check.constraints is not None and name not in check.constraints:
                continue
            outcome = compiler.compile(name)
            if isinstance(outcome, str):
                issues.append(StructuralIssue(path, outcome))
            elif outcome is not None:
                rules.append(outcome)
    for path in check.fields or ():
        if path not in bindings:
            issues.append(StructuralIssue(path, "listed in fields but bound to no semantic type"))
    logger.debug("semantic check %s: %d rules over %d bound fields", check.name, len(rules), len(bindings))
    return issues, rules


def _lookup(check: SemanticCheck, catalogue: Mapping[str, SemanticType], name: str) -> SemanticType | None:
    if name in check.types:
        return SemanticType(name=name, version=0, spec=check.types[name])
    return catalogue.get(name)


class _FieldCompiler:
    def __init__(self, check: SemanticCheck, path: str, st: SemanticType, spark_type: DataType,
                 logical_type: str | None, now: dt.datetime, df_schema: StructType) -> None:
        self.check = check
        self.path = path
        self.st = st
        self.c: Constraints = st.spec.constraints
        self.spark_type = spark_type
        self.logical_type = logical_type
        self.now = now
        self.df_schema = df_schema

    def rule(self, constraint: str, requirement: str, pred: Predicate, why: Callable[[str], str]) -> RowRule:
        return RowRule(name=f"semantic:{self.path}:{self.st.name}:{constraint}", check=self.check.name,
                       description=f"{self.path} {requirement} ({self.st.name}.{constraint})",
                       failed_sql=any_value(self.path, pred), reason_sql=why(first_value(self.path, pred)))

    def compile(self, constraint: str) -> RowRule | str | None:
        c, path, name = self.c, self.path, self.st.name
        numeric = isinstance(self.spark_type, _NUMERIC)
        text = isinstance(self.spark_type, (StringType, BinaryType))
        if constraint == "not_null":
            if not c.not_null:
                return None
            return self.rule("not_null", "is not null", lambda v: f"{v} IS NULL",
                             lambda _: sql_string(f"{path} is null but {name} is not_null"))
        if constraint in ("minimum", "maximum"):
            bound = c.minimum if constraint == "minimum" else c.maximum
            if bound is None:
                return None
            if not numeric:
                return f"{constraint} of {name} needs a numeric column, not {self.spark_type.simpleString()}"
            return self.bound(constraint, bound)
        if constraint == "pattern":
            if c.pattern is None:
                return None
            if not text:
                return f"pattern of {name} needs a string column, not {self.spark_type.simpleString()}"
            # a type stored before the registry refused such patterns: never hand Spark's backtracking engine one
            if (problem := pattern_problem(c.pattern)) is not None:
                return f"pattern of {name} is refused: {problem}"
            anchored = sql_string(f"^(?:{c.pattern})$")

            def no_match(v: str) -> str:
                s = f"CAST({v} AS STRING)" if isinstance(self.spark_type, BinaryType) else v
                return sql_and(f"{v} IS NOT NULL", f"NOT ({s} RLIKE {anchored})")

            shown = f" {c.pattern}" if len(c.pattern) <= 60 else ""
            return self.rule("pattern", "matches the pattern in full", no_match,
                             lambda v: reason(path, v, f"does not match the pattern{shown} of {name}", quote=True))
        if constraint == "enum":
            if c.enum is None:
                return None
            values = list(c.enum)

            listed = ", ".join(sql_literal(x) for x in values)

            def not_in(v: str) -> str:
                return sql_and(f"{v} IS NOT NULL", f"NOT ({v} IN ({listed}))")

            shown = ", ".join(map(str, values[:8])) + (f", ... ({len(values)} values)" if len(values) > 8 else "")
            return self.rule("enum", "is one of the enum values", not_in,
                             lambda v: reason(path, v, f"is not in the enum of {name} ({shown})", quote=text))
        if constraint in ("min_length", "max_length"):
            limit = c.min_length if constraint == "min_length" else c.max_length
            if limit is None:
                return None
            if not text:
                return f"{constraint} of {name} needs a string column, not {self.spark_type.simpleString()}"
            n = limit
            short = constraint == "min_length"

            def bad_length(v: str) -> str:
                return sql_and(f"{v} IS NOT NULL", f"length({v}) {'<' if short else '>'} {n}")

            word = "below the min_length" if short else "above the max_length"
            return self.rule(constraint, f"has {'at least' if short else 'at most'} {n} characters", bad_length,
                             lambda v: sql_concat(sql_string(f"{path} has "), f"CAST(length({v}) AS STRING)",
                                                  sql_string(f" characters, {word} {n} of {name}")))
        if constraint == "not_future":
            return self.not_future() if c.not_future else None
        if constraint == "json_schema":
            if c.json_schema is None:
                return None
            return json_schema_rule(name=f"semantic:{path}:{name}:json_schema", check=self.check.name, path=path,
                                    schema=c.json_schema, df_schema=self.df_schema,
                                    subject=f"the JSON Schema of {name}")
        raise AssertionError(constraint)

    def bound(self, constraint: str, bound: float) -> RowRule:
        c, path, name = self.c, self.path, self.st.name
        lower = constraint == "minimum"
        exclusive = c.exclusive_minimum if lower else c.exclusive_maximum
        shown = fmt_number(bound)

        op_failing = ("<=" if exclusive else "<") if lower else (">=" if exclusive else ">")
        literal = sql_literal(float(bound))

        def outside(v: str) -> str:
            return f"{v} {op_failing} {literal}"

        if lower:
            op, text = (">", f"is not above the exclusive minimum {shown}") if exclusive else (
                ">=", f"is below the minimum {shown}")
        else:
            op, text = ("<", f"is not below the exclusive maximum {shown}") if exclusive else (
                "<=", f"is above the maximum {shown}")
        return self.rule(constraint, f"{op} {shown}", outside,
                         lambda v: reason(path, v, f"{text} of {name}", quote=False))

    def not_future(self) -> RowRule | str:
        path, name, now = self.path, self.st.name, self.now
        t = self.spark_type
        utc = now.astimezone(dt.UTC)
        shown_now = utc.isoformat(timespec="seconds")
        as_text: Callable[[str], str] = lambda v: f"CAST({v} AS STRING)"  # noqa: E731
        if isinstance(t, TimestampNTZType):
            limit = f"TIMESTAMP_NTZ '{utc.replace(tzinfo=None).isoformat(sep=' ')}'"
        elif isinstance(t, TimestampType):
            limit = f"TIMESTAMP '{utc.isoformat(sep=' ')}'"
        elif isinstance(t, DateType):
            limit = f"DATE '{utc.date().isoformat()}'"
        elif isinstance(t, (IntegerType, LongType)):
            unit = self.epoch_unit()
            if unit is None:
                return f"not_future of {name}: cannot tell the unit of the epoch numbers in {path}"
            if unit == 0:  # days (Avro date as int)
                limit = sql_literal((utc.date() - dt.date(1970, 1, 1)).days)
                as_text = lambda v: f"CAST(date_from_unix_date({v}) AS STRING)"  # noqa: E731
            else:
                limit = sql_literal(int(now.timestamp() * unit))
                as_text = lambda v: f"CAST(timestamp_seconds({v} / {unit}) AS STRING)"  # noqa: E731
        else:
            return f"not_future of {name} needs a timestamp, date or epoch column, not {t.simpleString()}"

        def in_future(v: str) -> str:
            return f"{v} > {limit}"

        return self.rule("not_future", f"is not after the check time {shown_now}", in_future,
                         lambda v: sql_concat(sql_string(f"{path} = "), f"coalesce({as_text(v)}, 'null')",
                                              sql_string(f" is in the future (after {shown_now}) for {name}")))

    def epoch_unit(self) -> int | None:
        """Units per second of an epoch number column (0 for days), from the field's or the type's logical type."""
        candidates = [self.logical_type] if self.logical_type else list(self.st.spec.logical_types or ())
        for lt in candidates:
            if lt in _UNIT_PER_SECOND:
                return _UNIT_PER_SECOND[lt]
            if lt == "date":
                return 0
        return None
