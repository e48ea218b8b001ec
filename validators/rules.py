"""Row rules: the compiled form of row-level checks, and field paths as Spark SQL expressions.

A :class:`RowRule` is a pair of Spark SQL expressions over one view, kept as text: ``failed_sql`` (boolean, never
null) and ``reason_sql`` (a human string, meaningful where ``failed``). The one-pass evaluator counts and samples
them in one job; the quarantine split tags rows with them. Both use the very same expressions.

Rules are built as SQL text rather than with the ``Column`` API on purpose: in classic PySpark every ``Column``
call is a round trip to the JVM (several, with PySpark's call-site capture on), and a suite of 30 rules cost
thousands of them; a rule as text costs none until it is parsed once, in the one projection that uses it.

Field paths follow the registry's notation: ``a.b`` (nested record), ``a[]`` (array items), ``a{}`` (map values),
``a[].b`` (a field of records in an array). A predicate on the values at a path lifts to a row predicate that is
true when *any* value at the path fails; a null parent (nullable record, null array) has no values to fail.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

Predicate = Callable[[str], str]
"""A predicate on one value: the SQL text of the value in, the SQL text of a boolean out."""
_SEGMENT = re.compile(r"\[\]|\{\}|[^.\[\]{}]+")
MAX_VALUE_CHARS = 200


@dataclass(frozen=True)
class RowRule:
    """One compiled row rule.

    Attributes:
        name: unique in the suite, e.g. ``semantic:rider_age:age_years:maximum``.
        check: the name of the check it belongs to.
        description: what the rule requires, for humans (``rider_age <= 150``).
        failed_sql: Spark SQL boolean expression, true for a failing row, never null.
        reason_sql: Spark SQL string expression explaining the failure (only evaluated where failed).
        pre_columns: helper columns the rule's expressions read by name, materialized once per row before
            evaluation (used by Python UDF rules so that the UDF runs once).
    """

    name: str
    check: str
    description: str
    failed_sql: str
    reason_sql: str
    pre_columns: dict[str, Column] = field(default_factory=dict)

    @property
    def failed(self) -> Column:
        """``failed_sql`` as a Column (over the view plus ``pre_columns``)."""
        return F.expr(self.failed_sql)

    @property
    def reason(self) -> Column:
        """``reason_sql`` as a Column."""
        return F.expr(self.reason_sql)


def ident(name: str) -> str:
    """A name as a quoted Spark SQL identifier (any character allowed)."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A Spark SQL string literal holding exactly ``text``.

    Backslashes and quotes are escaped; ``${`` is split across two literals so that Spark's variable substitution
    (``spark.sql.variable.substitute``, applied to expressions too) never sees it.
    """
    parts = text.split("${")
    quoted = ["'" + p.replace("\\", "\\\\").replace("'", "\\'") + "'" for p in parts]
    if len(quoted) == 1:
        return quoted[0]
    pieces = [quoted[0]]
    for q in quoted[1:]:
        pieces += ["'$'", "'{'", q]
    return "concat(" + ", ".join(pieces) + ")"


def sql_literal(value: object) -> str:
    """A Python value as a Spark SQL literal of the type ``F.lit`` would give it (int, long, double, string...)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return str(value)
        return f"{value}L" if -(2**63) <= value < 2**63 else f"{value}BD"
    if isinstance(value, float):
        return f"{value!r}D" if math.isfinite(value) else f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, str):
        return sql_string(value)
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def sql_and(*terms: str) -> str:
    """The conjunction of boolean SQL expressions (each parenthesized)."""
    return " AND ".join(f"({t})" for t in terms)


def sql_concat(*parts: str) -> str:
    """``concat(...)`` of SQL string expressions."""
    return "concat(" + ", ".join(parts) + ")"


def parse_path(path: str) -> list[str]:
    """Split a field path into segments: names, ``[]`` and ``{}``.

    Raises:
        ValueError: an empty path or one that does not start with a name.
    """
    segments = _SEGMENT.findall(path)
    if not segments or segments[0] in ("[]", "{}") or "".join(segments) != path.replace(".", ""):
        raise ValueError(f"invalid field path {path!r}")
    return segments


def column(name: str) -> Column:
    """A top-level column by exact name (dots and other characters quoted)."""
    return F.col(ident(name))


def resolve_type(schema: StructType, path: str) -> DataType | None:
    """The Spark type of the values at ``path`` in ``schema`` (None if the path does not exist)."""
    current: DataType = schema
    for seg in parse_path(path):
        if seg == "[]":
            if not isinstance(current, ArrayType):
                return None
            current = current.elementType
        elif seg == "{}":
            if not isinstance(current, MapType):
                return None
            current = current.valueType
        else:
            if not isinstance(current, StructType) or seg not in current.fieldNames():
                return None
            current = current[seg].dataType
    return current


def any_value(path: str, pred: Predicate) -> str:
    """SQL: true when some value at ``path`` satisfies ``pred`` (never null)."""
    segs = parse_path(path)
    return f"coalesce({_lift(ident(segs[0]), segs[1:], pred, 0)}, false)"


def first_value(path: str, pred: Predicate) -> str:
    """SQL: the first value at ``path`` satisfying ``pred`` (for the reason text); the value itself for plain paths."""
    segs = parse_path(path)
    return _first(ident(segs[0]), segs[1:], pred, 0)


def has_repetition(path: str) -> bool:
    """Whether the path goes through an array or a map (several values per row)."""
    return "[]" in path or "{}" in path


def _var(depth: int) -> str:
    return f"__lg_x{depth}"  # a lambda variable shadows columns inside its lambda only; nested ones differ by depth


def _lift(base: str, segs: list[str], pred: Predicate, depth: int) -> str:
    if not segs:
        return pred(base)
    seg, rest = segs[0], segs[1:]
    if seg in ("[]", "{}"):
        items = base if seg == "[]" else f"map_values({base})"
        x = _var(depth)
        return f"exists({items}, {x} -> coalesce({_lift(x, rest, pred, depth + 1)}, false))"
    return f"CASE WHEN {base} IS NOT NULL THEN {_lift(f'{base}.{ident(seg)}', rest, pred, depth)} END"


def _first(base: str, segs: list[str], pred: Predicate, depth: int) -> str:
    if not segs:
        return base
    seg, rest = segs[0], segs[1:]
    if seg in ("[]", "{}"):
        items = base if seg == "[]" else f"map_values({base})"
        x = _var(depth)
        hits = f"filter({items}, {x} -> coalesce({_lift(x, rest, pred, depth + 1)}, false))"
        return f"try_element_at(transform({hits}, {x} -> {_first(x, rest, pred, depth + 1)}), 1)"
    return _first(f"{base}.{ident(seg)}", rest, pred, depth)


_QUOTE = sql_string("'")


def show_value(value: str, *, quote: bool) -> str:
    """SQL: a value as text for a reason: ``null``, numbers as they are, strings quoted and cut to 200 characters."""
    text = f"CAST({value} AS STRING)"
    if quote:
        text = (f"concat({_QUOTE}, CASE WHEN length({text}) > {MAX_VALUE_CHARS} "
                f"THEN concat(substring({text}, 1, {MAX_VALUE_CHARS}), '...') ELSE {text} END, {_QUOTE})")
    return f"coalesce({text}, 'null')"


def reason(path: str, value: str, text: str, *, quote: bool, several: bool | None = None) -> str:
    """SQL: ``<path> = <value> <text>``; for repeated paths ``<path> holds <value> which <text>``."""
    shown = show_value(value, quote=quote)
    if several if several is not None else has_repetition(path):
        return sql_concat(sql_string(f"{path} holds "), shown, sql_string(f" which {text}"))
    return sql_concat(sql_string(f"{path} = "), shown, sql_string(f" {text}"))


def fmt_number(x: float) -> str:
    """``150`` for 150.0, ``0.5`` for 0.5."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))
