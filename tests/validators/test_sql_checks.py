"""``sql`` checks: the four forms over the views, tolerance, and errors that fail the check instead of raising."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

from validators import AuditContext, ExpectValue, Policy, SqlCheck, Status, Suite, Tolerance, Verdict

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def before(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([(i, float(i), "a") for i in range(10)], "id long, fare double, kind string")


@pytest.fixture(scope="module")
def changes(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([(10, -1.0, "b"), (11, -2.0, "b"), (3, 30.0, "a")],
                                 "id long, fare double, kind string")


@pytest.fixture(scope="module")
def ctx(before: DataFrame, changes: DataFrame) -> AuditContext:
    snapshot = before.where("id != 3").unionByName(changes)
    return AuditContext(batch=changes, changes=changes, snapshot=snapshot, before=before)


def run(ctx: AuditContext, *checks: SqlCheck) -> dict[str, object]:
    result = Suite(name="sql", checks=checks).run(ctx)
    return {c.name: c for c in result.checks} | {"__verdict__": result.verdict}


def test_single_value_equals_and_range(ctx: AuditContext) -> None:
    out = run(ctx,
              SqlCheck(name="rows", form="single_value", query="SELECT count(*) FROM {snapshot}",
                       expect=ExpectValue(equals=12)),
              SqlCheck(name="rows_wrong", form="single_value", query="SELECT count(*) FROM {snapshot}",
                       expect=ExpectValue(equals=11), policy=Policy.WARN),
              SqlCheck(name="avg_fare", form="single_value", query="SELECT avg(fare) FROM {before}",
                       expect=ExpectValue(min=4, max=5)),
              SqlCheck(name="max_fare", form="single_value", query="SELECT max(fare) FROM {changes}",
                       expect=ExpectValue(max=10)))
    assert out["rows"].status == Status.PASS and out["rows"].observed == 12
    assert out["rows_wrong"].status == Status.WARN
    assert out["avg_fare"].status == Status.PASS and out["avg_fare"].observed == pytest.approx(4.5)
    assert out["max_fare"].status == Status.FAIL and out["max_fare"].observed == 30.0
    assert out["__verdict__"] == Verdict.BLOCK


def test_zero_rows_counts_and_samples_with_tolerance(ctx: AuditContext) -> None:
    query = "SELECT id, fare FROM {changes} WHERE fare < 0"
    out = run(ctx,
              SqlCheck(name="strict", form="zero_rows", query=query),
              SqlCheck(name="tolerant", form="zero_rows", query=query, tolerance=Tolerance(max_rows=2)),
              SqlCheck(name="clean", form="zero_rows", query="SELECT * FROM {before} WHERE fare < 0"))
    assert out["strict"].status == Status.FAIL and out["strict"].failing_rows == 2
    assert sorted(s.row["id"] for s in out["strict"].sample) == [10, 11]
    assert out["tolerant"].status == Status.WARN and out["tolerant"].failing_rows == 2
    assert out["clean"].status == Status.PASS and out["clean"].failing_rows == 0


def test_equality_and_inequality_compare_before_and_snapshot(ctx: AuditContext) -> None:
    out = run(ctx,
              SqlCheck(name="kinds_kept", form="equality",
                       query="SELECT DISTINCT kind FROM {table} WHERE kind = 'a'"),
              SqlCheck(name="count_changed", form="inequality", query="SELECT count(*) AS n FROM {table}"),
              SqlCheck(name="sum_unchanged", form="equality", query="SELECT kind, count(*) FROM {table} GROUP BY kind"))
    assert out["kinds_kept"].status == Status.PASS
    assert out["count_changed"].status == Status.PASS
    unchanged = out["sum_unchanged"]
    assert unchanged.status == Status.FAIL and unchanged.observed == {"differing_rows": 1}  # kind b appeared
    assert unchanged.sample[0].row["snapshot_minus_before"] == 1


def test_runtime_errors_fail_the_check_with_the_error(ctx: AuditContext, changes: DataFrame) -> None:
    out = run(ctx, SqlCheck(name="bad_column", form="zero_rows", query="SELECT * FROM {changes} WHERE nope > 0"),
              SqlCheck(name="many_rows", form="single_value", query="SELECT id FROM {changes}",
                       expect=ExpectValue(equals=1)))
    assert out["bad_column"].status == Status.FAIL and "nope" in (out["bad_column"].error or "")
    assert out["many_rows"].status == Status.FAIL and "one row" in (out["many_rows"].error or "")
    missing = run(AuditContext(changes=changes),
                  SqlCheck(name="needs_before", form="zero_rows", query="SELECT * FROM {before}"))
    assert "no 'before' view" in (missing["needs_before"].error or "")


def test_temp_views_are_dropped(spark: SparkSession, ctx: AuditContext) -> None:
    run(ctx, SqlCheck(name="rows", form="single_value", query="SELECT count(*) FROM {snapshot}",
                      expect=ExpectValue(min=0)))
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("__lakegate_")]
