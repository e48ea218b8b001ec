"""Folding simple ``sql`` checks into the one pass over their view (no job of their own).

Two shapes of query are folded, recognised on the sqlglot parse (Spark dialect) and only when every node of the
query is on a short list of deterministic, row-local constructs (columns, literals, arithmetic, comparisons, boolean
logic, ``IN``, ``BETWEEN``, ``LIKE``, ``RLIKE``, ``CAST``, ``coalesce``, ``length``, ``lower``, ``upper``, ``abs``):

- ``single_value``: ``SELECT <expression over count/sum/avg/min/max/count_if> FROM {view}``: one select item, every
  column inside an aggregate, no ``DISTINCT``, ``WHERE``, ``GROUP BY``, joins or anything else. Such a query returns
  exactly one row, whose value the pass computes as one more observed aggregate;
- ``zero_rows``: ``SELECT <columns, *, or aliased expressions> FROM {view} [WHERE <predicate>]`` without aggregates.
  The rows it returns are the rows where the predicate is true (a null predicate drops the row, as ``WHERE`` does):
  the pass counts them exactly and samples them (the query's columns, keyed by their hash, like the query would).

Anything else (and any query whose parse surprises us) is not folded and runs on its own as before. A folded
expression that Spark then rejects makes the caller run the pass again without it (see ``Suite.run``), so folding
never changes a result, only how many jobs it takes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from validators.model import SqlCheck
from validators.onepass import QueryProbe
from validators.rules import ident
from validators.sql_text import TABLE_PLACEHOLDER, VIEWS, placeholders, substitute

logger = logging.getLogger(__name__)

_VIEW_PREFIX = "__lakegate_fold_"


@dataclass(frozen=True)
class FoldedQuery:
    """A ``sql`` check that the pass over ``view`` evaluates."""

    view: str
    probe: QueryProbe


def fold_sql_check(check: SqlCheck) -> FoldedQuery | None:
    """The folded form of ``check``, or None when it must run as its own query."""
    if check.form not in ("single_value", "zero_rows"):
        return None
    used = set(placeholders(check.query))
    if len(used) != 1 or TABLE_PLACEHOLDER in used or not used <= set(VIEWS):
        return None
    view = next(iter(used))
    try:
        probe = _probe(check, substitute(check.query, {v: f"{_VIEW_PREFIX}{v}" for v in VIEWS}), view)
    except Exception as e:  # an unexpected parse must never break a run: run the query as it is
        logger.debug("sql check %s not folded: %s", check.name, e)
        return None
    return FoldedQuery(view, probe) if probe is not None else None


def _probe(check: SqlCheck, sql: str, view: str) -> QueryProbe | None:
    import sqlglot
    from sqlglot import exp

    stmt = sqlglot.parse_one(sql, read="spark")
    if not isinstance(stmt, exp.Select):
        return None
    if any(value for key, value in stmt.args.items() if key not in ("expressions", "from_", "where")):
        return None  # DISTINCT, LIMIT, joins, GROUP BY, HAVING, ORDER BY, CTEs, hints, ...
    source = stmt.args.get("from_")
    if source is None or {k for k, v in source.args.items() if v} != {"this"}:
        return None
    table = source.this
    if not isinstance(table, exp.Table) or {k for k, v in table.args.items() if v} != {"this"} \
            or table.name != f"{_VIEW_PREFIX}{view}":
        return None
    where = stmt.args.get("where")
    items = list(stmt.expressions)
    if check.form == "single_value":
        if where is not None or len(items) != 1 or not _aggregate_ok(items[0]):
            return None
        return QueryProbe(check=check.name, kind="value", sql=_sql(items[0]))
    outputs: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, exp.Star):
            outputs.append(("*", "*"))
        elif isinstance(item, exp.Column) and _scalar_ok(item):
            outputs.append((item.name, ident(item.name)))
        elif isinstance(item, exp.Alias) and _scalar_ok(item.this):
            outputs.append((item.alias, _sql(item.this)))
        else:
            return None
    names = [n for n, _ in outputs]
    if ("*" in names and len(names) > 1) or len(set(names)) != len(names):
        return None  # duplicate output names: leave those to Spark
    predicate = "TRUE"
    if where is not None:
        if not _scalar_ok(where.this):
            return None
        predicate = _sql(where.this)
    return QueryProbe(check=check.name, kind="rows", sql=f"({predicate})", outputs=tuple(outputs))


def _sql(node: object) -> str:
    return "(" + node.sql(dialect="spark") + ")"  # type: ignore[attr-defined]


def _scalar_classes() -> tuple[type, ...]:
    from sqlglot import exp

    return (exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Not, exp.And, exp.Or,
            exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Is, exp.In, exp.Between,
            exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Cast, exp.TryCast, exp.DataType,
            exp.DataTypeParam, exp.Coalesce, exp.Length, exp.Lower, exp.Upper, exp.Abs, exp.Like, exp.RegexpLike)


def _scalar_ok(node: object) -> bool:
    """Every node is an allowed row-local construct, and columns are plain (unqualified) names."""
    from sqlglot import exp

    allowed = _scalar_classes()
    assert isinstance(node, exp.Expression)
    for n in node.walk():
        if type(n) not in allowed:
            return False
        if isinstance(n, exp.Column) and (n.table or not isinstance(n.this, exp.Identifier)):
            return False
    return True


def _aggregate_ok(node: object) -> bool:
    """An expression over plain aggregates of row-local arguments; no column outside an aggregate."""
    from sqlglot import exp

    aggregates = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.CountIf)
    assert isinstance(node, exp.Expression)
    found = False

    def visit(n: exp.Expression) -> bool:
        nonlocal found
        if type(n) in aggregates:
            found = True
            arg = n.args.get("this")
            extra = {k: v for k, v in n.args.items() if k != "this" and v and not (k == "big_int" and v is True)}
            if extra or not isinstance(arg, exp.Expression):
                return False  # several arguments, or options we do not know
            return (type(n) is exp.Count and isinstance(arg, exp.Star)) or _scalar_ok(arg)
        if isinstance(n, exp.Column) or type(n) not in _scalar_classes():
            return False
        return all(visit(c) for c in n.iter_expressions())

    return visit(node) and found
