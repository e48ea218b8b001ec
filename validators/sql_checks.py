"""Running ``sql`` checks: the views become temp views with unique names, the query runs with Spark SQL.

What reaches the driver is bounded: ``single_value`` fetches at most two rows of the query result; ``zero_rows``
and ``equality`` aggregate their result in Spark (a count plus a ``min_by(..., k)`` sample).
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from validators.context import AuditContext
from validators.errors import first_line
from validators.model import ExpectValue, SqlCheck
from validators.results import CheckResult, FailingRow, Status, decide_status, soft_status
from validators.rules import column
from validators.sql_text import TABLE_PLACEHOLDER, VIEWS, placeholders, substitute

logger = logging.getLogger(__name__)


def register_temp_view(df: DataFrame, name: str) -> None:
    """Register ``df`` as the temporary view ``name`` so that dropping the view later leaves ``df`` cached.

    Spark uncaches a temporary view's plan when the view is dropped (``Catalog.dropTempView``): a persisted
    DataFrame registered as it is (the gate's batch) would lose its cache, and its next reader would compute it
    again. The view is the DataFrame under an always-true filter instead: queries over it still read the cache (the
    filter is optimized away), and its plan is not the cached one."""
    df.filter(F.lit(True)).createOrReplaceTempView(name)


@contextmanager
def temp_views(spark: SparkSession, ctx: AuditContext, names: set[str]) -> Iterator[dict[str, str]]:
    """Register the context's views in ``names`` as uniquely named temp views; drop them afterwards."""
    run = uuid.uuid4().hex[:12]
    mapping: dict[str, str] = {}
    try:
        for name in sorted(names):
            mapping[name] = f"__lakegate_{run}_{name}"
            register_temp_view(ctx.view(name), mapping[name])  # dropping it leaves a cached batch cached
        yield mapping
    finally:
        for view in mapping.values():
            spark.catalog.dropTempView(view)


def run_sql_check(spark: SparkSession, check: SqlCheck, ctx: AuditContext, *, sample_size: int) -> CheckResult:
    """Run one ``sql`` check; errors (missing view, analysis errors) become a failing result with ``error`` set."""
    t0 = time.perf_counter()
    used = set(placeholders(check.query))
    needed = (used - {TABLE_PLACEHOLDER}) | ({"before", "snapshot"} if TABLE_PLACEHOLDER in used else set())
    try:
        with temp_views(spark, ctx, needed & set(VIEWS)) as views:
            if check.form == "single_value":
                fields = _single_value(spark, check, views)
            elif check.form == "zero_rows":
                fields = _zero_rows(spark, check, views, sample_size)
            else:
                fields = _compare(spark, check, views, sample_size)
    except Exception as e:  # one broken check must not hide the others
        logger.warning("sql check %s could not run: %s", check.name, e)
        return CheckResult(name=check.name, kind="sql", policy=check.policy, status=Status.FAIL,
                           expected=_expected(check), error=first_line(e, 500), message=f"error: {first_line(e, 500)}",
                           duration_ms=_ms(t0))
    return CheckResult(name=check.name, kind="sql", policy=check.policy, expected=_expected(check),
                       duration_ms=_ms(t0), **fields)


def _single_value(spark: SparkSession, check: SqlCheck, views: dict[str, str]) -> dict[str, Any]:
    df = spark.sql(substitute(check.query, views))
    if len(df.columns) != 1:
        raise ValueError(f"a single_value query must return one column, it returns {len(df.columns)}")
    rows = df.limit(2).collect()
    if len(rows) != 1:
        raise ValueError(f"a single_value query must return one row, it returns {'none' if not rows else 'several'}")
    return single_value_fields(check, rows[0][0])


def single_value_fields(check: SqlCheck, raw: Any) -> dict[str, Any]:
    """The result fields of a ``single_value`` check whose query returned ``raw``."""
    value = _jsonable(raw)
    assert check.expect is not None
    ok = matches(value, check.expect)
    return {"status": soft_status(check.policy, ok), "observed": value,
            "message": f"value {value!r} {'matches' if ok else 'does not match'} {check.expect.describe()}"}


def matches(value: Any, expect: ExpectValue) -> bool:
    """Whether a query result matches ``expect`` (numbers compare numerically; NaN and null match no range)."""
    if expect.equals is not None:
        if isinstance(expect.equals, bool) or isinstance(value, bool):
            return value is expect.equals or value == expect.equals
        if isinstance(expect.equals, (int, float)) and isinstance(value, (int, float)):
            return math.isclose(float(value), float(expect.equals), rel_tol=1e-12, abs_tol=0.0)
        return str(value) == str(expect.equals)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return False
    return (expect.min is None or value >= expect.min) and (expect.max is None or value <= expect.max)


def _zero_rows(spark: SparkSession, check: SqlCheck, views: dict[str, str], sample_size: int) -> dict[str, Any]:
    df = spark.sql(substitute(check.query, views))
    count, sample = _count_and_sample(df, sample_size, "returned by the assertion query")
    return zero_rows_fields(check, count, sample)


def zero_rows_fields(check: SqlCheck, count: int, sample: list[FailingRow]) -> dict[str, Any]:
    """The result fields of a ``zero_rows`` check whose query returned ``count`` rows (``sample`` of them)."""
    status = decide_status(check.policy, check.tolerance, count, None)
    return {"status": status, "observed": count, "failing_rows": count, "sample": tuple(sample),
            "message": "the assertion query returns no row" if count == 0 else
            f"the assertion query returns {count} row(s)"}


def _compare(spark: SparkSession, check: SqlCheck, views: dict[str, str], sample_size: int) -> dict[str, Any]:
    before = spark.sql(substitute(check.query, {**views, TABLE_PLACEHOLDER: views["before"]}))
    after = spark.sql(substitute(check.query, {**views, TABLE_PLACEHOLDER: views["snapshot"]}))
    cols = list(after.columns)
    if list(before.columns) != cols:
        raise ValueError("the query returns different columns on {before} and {snapshot}")
    sign = "__lg_sign"
    both = (before.select(*[column(c) for c in cols], F.lit(-1).alias(sign))
            .unionByName(after.select(*[column(c) for c in cols], F.lit(1).alias(sign))))
    # multiset difference: per distinct row, (rows on snapshot) - (rows on before); != 0 means the results differ
    diff = both.groupBy(*[column(c) for c in cols]).agg(F.sum(sign).alias("snapshot_minus_before"))
    diff = diff.where(F.col("snapshot_minus_before") != 0)
    count, sample = _count_and_sample(diff, sample_size, "differs between {before} and {snapshot}")
    equal = count == 0
    ok = equal if check.form == "equality" else not equal
    message = ("the results on {before} and {snapshot} are equal" if equal else
               f"the results on {{before}} and {{snapshot}} differ in {count} distinct row(s)")
    return {"status": soft_status(check.policy, ok), "observed": {"differing_rows": count}, "sample": tuple(sample),
            "message": message}


def _count_and_sample(df: DataFrame, k: int, why: str) -> tuple[int, list[FailingRow]]:
    cols = list(df.columns)
    aggs: list[Column] = [F.count(F.lit(1)).alias("n")]
    if k > 0 and cols:
        hashable = [column(c) for c in cols if not isinstance(df.schema[c].dataType, MapType)] or [F.lit(0)]
        aggs.append(F.min_by(F.to_json(F.struct(*[column(c) for c in cols])), F.xxhash64(*hashable),
                             k).alias("s"))
    row = df.agg(*aggs).collect()[0]
    sample = [FailingRow(reason=f"row {why}", row=json.loads(s)) for s in (row["s"] or [])] if len(aggs) > 1 else []
    return int(row["n"]), sample


def folded_result(check: SqlCheck, fields: dict[str, Any], duration_ms: float) -> CheckResult:
    """The result of a check folded into a row pass (``fields`` from :func:`single_value_fields` or
    :func:`zero_rows_fields`; ``duration_ms`` is the pass's)."""
    return CheckResult(name=check.name, kind="sql", policy=check.policy, expected=_expected(check),
                       duration_ms=duration_ms, **fields)


def _expected(check: SqlCheck) -> Any:
    if check.form == "single_value":
        assert check.expect is not None
        return check.expect.model_dump(exclude_none=True)
    if check.form == "zero_rows":
        return {"rows": 0} if check.tolerance is None else {"rows": check.tolerance.describe()}
    return "equal results on {before} and {snapshot}" if check.form == "equality" else \
        "different results on {before} and {snapshot}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)
