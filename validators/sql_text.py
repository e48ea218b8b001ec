"""SQL text of ``sql`` checks: view placeholders and the parse check done at load time (no Spark needed).

A query names its inputs with placeholders: ``{batch}``, ``{changes}``, ``{snapshot}``, ``{before}`` and, in the
``equality`` / ``inequality`` forms, ``{table}`` (run once as ``{before}`` and once as ``{snapshot}``). Only these
exact tokens are placeholders; other braces (JSON literals, regexes) are left alone. At load time every placeholder
is replaced with a plain identifier and the query is parsed with sqlglot's Spark dialect, so a query that does not
parse, or names an unknown view, fails before any data is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

VIEWS = ("batch", "changes", "snapshot", "before")
TABLE_PLACEHOLDER = "table"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(query: str) -> list[str]:
    """The placeholder names in ``query``, in order of appearance (duplicates kept)."""
    return _PLACEHOLDER.findall(query)


def substitute(query: str, names: Mapping[str, str]) -> str:
    """Replace each ``{view}`` placeholder with ``names[view]`` (a temp-view name); others are kept as they are."""
    return _PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), query)


def check_query(query: str, *, allow_table: bool) -> str | None:
    """Why ``query`` is not acceptable (None if it is): unknown placeholder, no view, or a parse error.

    Args:
        query: the SQL with placeholders.
        allow_table: whether ``{table}`` is allowed (the equality and inequality forms).
    """
    known = set(VIEWS) | ({TABLE_PLACEHOLDER} if allow_table else set())
    used = placeholders(query)
    for name in used:
        if name not in known:
            hint = " ({table} is only for the equality and inequality forms)" if name == TABLE_PLACEHOLDER else ""
            return f"unknown view {{{name}}}{hint}; known views: " + ", ".join(f"{{{v}}}" for v in sorted(known))
    if allow_table and TABLE_PLACEHOLDER not in used:
        return "the equality and inequality forms need the {table} placeholder (run on {before} and {snapshot})"
    if not used:
        return "the query reads no view: use {batch}, {changes}, {snapshot} or {before}"
    return parse_problem(substitute(query, {n: f"__lakegate_view_{n}" for n in known}))


def parse_problem(sql: str) -> str | None:
    """Why ``sql`` does not parse as one Spark SQL query (None if it does)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except (ParseError, TokenError) as e:
        first = str(e).splitlines()[0]
        return f"SQL does not parse: {first}"
    if len(statements) != 1:
        return f"expected one SQL query, found {len(statements)} statements"
    stmt = statements[0]
    if not isinstance(stmt, exp.Query):
        return f"expected a query (SELECT / WITH ...), found {type(stmt).__name__.upper()}"
    return None
