"""Simple ``sql`` checks folded into the one pass: which queries fold, same results as running them, one job."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.validators.faults import DATA, clean_trips
from tests.validators.test_one_pass import jobs_of
from validators import AuditContext, ExpectValue, SchemaRef, SemanticCheck, SqlCheck, Status, Suite, Tolerance
from validators.sql_checks import run_sql_check
from validators.sql_fold import fold_sql_check

ONE = ExpectValue(min=1)


@pytest.mark.parametrize(("form", "query", "kind"), [
    ("single_value", "SELECT count(*) FROM {changes}", "value"),
    ("single_value", "SELECT avg(fare) FROM {batch}", "value"),
    ("single_value", "SELECT max(fare) - min(fare) FROM {changes}", "value"),
    ("single_value", "SELECT count_if(fare < 0) * 100 / count(*) FROM {changes}", "value"),
    ("zero_rows", "SELECT uuid, fare FROM {changes} WHERE fare < 0 OR fare IS NULL", "rows"),
    ("zero_rows", "SELECT * FROM {changes} WHERE currency NOT IN ('USD', 'EUR') AND length(uuid) = 36", "rows"),
    ("zero_rows", "SELECT uuid, fare * 2 AS double_fare FROM {changes} WHERE CAST(rider_age AS INT) > 150", "rows"),
    ("zero_rows", "SELECT uuid FROM {changes}", "rows"),
])
def test_simple_queries_fold(form: str, query: str, kind: str) -> None:
    folded = fold_sql_check(SqlCheck(name="q", form=form, query=query, expect=ONE if form == "single_value" else None))
    assert folded is not None and folded.probe.kind == kind


@pytest.mark.parametrize(("form", "query"), [
    ("single_value", "SELECT count(DISTINCT uuid) FROM {changes}"),        # DISTINCT aggregates: not in observe
    ("single_value", "SELECT count(*) FROM {changes} WHERE fare < 0"),    # WHERE on an aggregate query
    ("single_value", "SELECT fare FROM {changes}"),                       # not an aggregate: many rows
    ("single_value", "SELECT count(*) + fare FROM {changes}"),            # column outside the aggregate
    ("single_value", "SELECT sum(rand()) FROM {changes}"),                # non-deterministic, unknown functions
    ("single_value", "SELECT count(*) FROM {changes} c"),                 # aliases
    ("single_value", "SELECT count(*) FROM {changes} JOIN {before} USING (uuid)"),
    ("zero_rows", "SELECT uuid FROM {changes} WHERE fare > (SELECT avg(fare) FROM {changes})"),
    ("zero_rows", "SELECT DISTINCT uuid FROM {changes}"),
    ("zero_rows", "SELECT uuid FROM {changes} LIMIT 3"),
    ("zero_rows", "SELECT uuid, fare * 2 FROM {changes}"),                # Spark's generated name: not guessed
    ("zero_rows", "SELECT uuid, uuid FROM {changes}"),
    ("zero_rows", "SELECT address.city FROM {changes}"),                  # qualified / nested names
    ("zero_rows", "SELECT uuid FROM {changes} WHERE my_udf(uuid)"),
    ("zero_rows", "SELECT currency, count(*) FROM {changes} GROUP BY currency"),
    ("equality", "SELECT count(*) FROM {table}"),
])
def test_other_queries_run_on_their_own(form: str, query: str) -> None:
    check = SqlCheck(name="q", form=form, query=query, expect=ONE if form == "single_value" else None)
    assert fold_sql_check(check) is None


def sql_checks() -> tuple[SqlCheck, ...]:
    return (
        SqlCheck(name="rows", form="single_value", query="SELECT count(*) FROM {changes}", expect=ONE),
        SqlCheck(name="avg_fare", form="single_value", query="SELECT avg(fare) FROM {changes}",
                 expect=ExpectValue(min=100)),
        SqlCheck(name="fare_spread", form="single_value", query="SELECT max(fare) - min(fare) FROM {changes}",
                 expect=ExpectValue(max=1000)),
        SqlCheck(name="cheap_rides", form="zero_rows", tolerance=Tolerance(max_rows=100),
                 query="SELECT uuid, fare, fare * 2 AS double_fare FROM {changes} WHERE fare < 10"),
        SqlCheck(name="no_rows", form="zero_rows", query="SELECT * FROM {batch} WHERE fare < 0"),
    )


@pytest.fixture(scope="module")
def trips(spark: SparkSession) -> DataFrame:
    return clean_trips(spark, rows=400).cache()


def test_folded_checks_match_their_own_queries_in_one_counting_job(spark: SparkSession, trips: DataFrame) -> None:
    ctx = AuditContext.from_dataframe(trips)
    schema = SchemaRef(path=str(DATA / "trips.avsc"))
    suite = Suite(name="folded", sample_size=4, checks=(
        SemanticCheck(name="semantics", avro=schema, fields=("fare", "rider_age")), *sql_checks()))
    holder = {}
    jobs = jobs_of(spark, lambda: holder.setdefault("r", suite.run(ctx)))
    result = holder["r"]
    # row rules and all five SQL checks are counted in one job; the rows cheap_rides returns are sampled in a second
    assert result.check("cheap_rides").observed and not any(
        c.failing_rows for c in result.checks if c.kind != "sql")
    assert len(jobs) == result.row_pass_jobs == 2
    for check in sql_checks():
        folded = result.check(check.name)
        alone = run_sql_check(spark, check, ctx, sample_size=4)
        assert (folded.status, folded.observed, folded.failing_rows, folded.message, folded.expected) == \
            (alone.status, alone.observed, alone.failing_rows, alone.message, alone.expected), check.name
        assert sorted(map(repr, folded.sample)) == sorted(map(repr, alone.sample)), check.name
    assert result.check("cheap_rides").status == Status.WARN and (result.check("cheap_rides").failing_rows or 0) > 0
    assert len(result.check("cheap_rides").sample) == 4
    assert set(result.check("cheap_rides").sample[0].row) == {"uuid", "fare", "double_fare"}
    assert result.check("avg_fare").status == Status.FAIL


def test_a_folded_query_spark_rejects_runs_on_its_own(spark: SparkSession, trips: DataFrame) -> None:
    schema = SchemaRef(path=str(DATA / "trips.avsc"))
    suite = Suite(name="bad_fold", checks=(
        SemanticCheck(name="semantics", avro=schema, fields=("fare",)),
        SqlCheck(name="bad_column", form="zero_rows", query="SELECT uuid FROM {changes} WHERE nope > 0"),
        SqlCheck(name="rows", form="single_value", query="SELECT count(*) FROM {changes}", expect=ONE)))
    result = suite.run(AuditContext.from_dataframe(trips))
    assert result.check("semantics").status == Status.PASS and result.check("semantics").total_rows == 400
    assert result.check("bad_column").status == Status.FAIL and result.check("bad_column").error
    assert result.check("rows").observed == 400  # the good query still runs (on its own)


def test_pass_views_are_those_of_row_checks_and_folded_sql_checks() -> None:
    from validators import SchemaCheck

    suite = Suite(name="s", checks=(
        SchemaCheck(name="structure", avro=SchemaRef(path=str(DATA / "trips.avsc")), view="batch"),
        SqlCheck(name="n", form="single_value", query="SELECT count(*) FROM {changes}", expect=ExpectValue(min=1)),
        # not folded (GROUP BY): a query of its own, no pass over {snapshot}
        SqlCheck(name="dupes", form="zero_rows",
                 query="SELECT uuid FROM {snapshot} GROUP BY uuid HAVING count(*) > 1"),
    ))
    assert suite.pass_views() == {"batch", "changes"}
