"""Row rules: the compiled form of row-level checks, and field paths as Spark column expressions.

A :class:`RowRule` is a pair of Spark Column expressions over one view: ``failed`` (boolean, never null) and
``reason`` (a human string, meaningful where ``failed``). The one-pass evaluator counts and samples them in one
job; the quarantine split tags rows with them. Both use the very same expressions.

Field paths follow the registry's notation: ``a.b`` (nested record), ``a[]`` (array items), ``a{}`` (map values),
``a[].b`` (a field of records in an array). A predicate on the values at a path lifts to a row predicate that is
true when *any* value at the path fails; a null parent (nullable record, null array) has no values to fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

Predicate = Callable[[Column], Column]
_SEGMENT = re.compile(r"\[\]|\{\}|[^.\[\]{}]+")
MAX_VALUE_CHARS = 200


@dataclass(frozen=True)
class RowRule:
    """One compiled row rule.

    Attributes:
        name: unique in the suite, e.g. ``semantic:rider_age:age_years:maximum``.
        check: the name of the check it belongs to.
        description: what the rule requires, for humans (``rider_age <= 150``).
        failed: boolean Column, true for a failing row, never null.
        reason: string Column explaining the failure (only evaluated where ``failed``).
        pre_columns: helper columns the rule's expressions read, materialized once per row before evaluation
            (used by Python UDF rules so that the UDF runs once).
    """

    name: str
    check: str
    description: str
    failed: Column
    reason: Column
    pre_columns: dict[str, Column] = field(default_factory=dict)


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
    return F.col("`" + name.replace("`", "``") + "`")


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


def any_value(path: str, pred: Predicate) -> Column:
    """True when some value at ``path`` satisfies ``pred`` (never null)."""
    segs = parse_path(path)
    return F.coalesce(_lift(column(segs[0]), segs[1:], pred), F.lit(False))


def first_value(path: str, pred: Predicate) -> Column:
    """The first value at ``path`` that satisfies ``pred`` (for the reason text); the value itself for plain paths."""
    segs = parse_path(path)
    return _first(column(segs[0]), segs[1:], pred)


def has_repetition(path: str) -> bool:
    """Whether the path goes through an array or a map (several values per row)."""
    return "[]" in path or "{}" in path


def _lift(base: Column, segs: list[str], pred: Predicate) -> Column:
    if not segs:
        return pred(base)
    seg, rest = segs[0], segs[1:]
    if seg == "[]":
        return F.exists(base, lambda x: F.coalesce(_lift(x, rest, pred), F.lit(False)))
    if seg == "{}":
        return F.exists(F.map_values(base), lambda x: F.coalesce(_lift(x, rest, pred), F.lit(False)))
    return F.when(base.isNotNull(), _lift(base.getField(seg), rest, pred))


def _first(base: Column, segs: list[str], pred: Predicate) -> Column:
    if not segs:
        return base
    seg, rest = segs[0], segs[1:]
    if seg in ("[]", "{}"):
        items = base if seg == "[]" else F.map_values(base)
        hits = F.filter(items, lambda x: F.coalesce(_lift(x, rest, pred), F.lit(False)))
        return F.element_at(F.transform(hits, lambda x: _first(x, rest, pred)), 1)
    return _first(base.getField(seg), rest, pred)


def show_value(value: Column, *, quote: bool) -> Column:
    """A value as text for a reason: ``null``, numbers as they are, strings quoted and cut to 200 characters."""
    text = value.cast("string")
    if quote:
        cut = F.when(F.length(text) > MAX_VALUE_CHARS, F.concat(F.substring(text, 1, MAX_VALUE_CHARS), F.lit("...")))
        text = F.concat(F.lit("'"), F.coalesce(cut, text), F.lit("'"))
    return F.coalesce(text, F.lit("null"))


def reason(path: str, value: Column, text: str, *, quote: bool, several: bool | None = None) -> Column:
    """``<path> = <value> <text>``; for repeated paths ``<path> holds <value> which <text>``."""
    shown = show_value(value, quote=quote)
    if several if several is not None else has_repetition(path):
        return F.concat(F.lit(f"{path} holds "), shown, F.lit(f" which {text}"))
    return F.concat(F.lit(f"{path} = "), shown, F.lit(f" {text}"))


def fmt_number(x: float) -> str:
    """``150`` for 150.0, ``0.5`` for 0.5."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))
