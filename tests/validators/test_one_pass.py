"""Acceptance 3: all row-level rules of a suite cost one Spark job (counted with the status tracker)."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.validators.faults import DATA, PAYLOAD_SCHEMA, clean_trips, faults, inject
from validators import AuditContext, JsonSchemaCheck, SchemaCheck, SchemaRef, SemanticCheck, Suite
from validators.rules import sql_literal, sql_string

pytestmark = pytest.mark.spark


def jobs_of(spark: SparkSession, fn: object) -> list[int]:
    """The Spark job ids started while ``fn()`` runs (its own job group)."""
    assert callable(fn)
    sc = spark.sparkContext
    group = f"onepass-{uuid.uuid4().hex}"
    sc.setJobGroup(group, group)
    try:
        fn()
    finally:
        sc.setJobGroup("", "")
    return list(sc.statusTracker().getJobIdsForGroup(group))


def row_suite() -> Suite:
    schema = SchemaRef(path=str(DATA / "trips.avsc"))
    return Suite(name="rows", sample_size=5, checks=(
        SchemaCheck(name="structure", avro=schema),
        SemanticCheck(name="semantics", avro=schema, types={
            "positive_distance": {"base_type": "double", "constraints": {"minimum": 0, "exclusive_minimum": True}}}),
        JsonSchemaCheck(name="payload_json", column="payload", json_schema=PAYLOAD_SCHEMA),
    ))


@pytest.mark.parametrize("dirty", [False, True])
def test_many_row_rules_count_in_one_job_and_sample_in_a_second_only_when_rows_fail(spark: SparkSession,
                                                                                   dirty: bool) -> None:
    df = inject(clean_trips(spark, rows=300), faults()) if dirty else clean_trips(spark, rows=300)
    suite = row_suite()
    ctx = AuditContext.from_dataframe(df)
    n_rules = sum(len(rules) for rules in suite.row_rules(ctx).values())
    assert n_rules >= 20
    holder = {}
    jobs = jobs_of(spark, lambda: holder.setdefault("r", suite.run(ctx)))
    result = holder["r"]
    assert len(jobs) == result.row_pass_jobs == (2 if dirty else 1), f"{n_rules} row rules took {len(jobs)} jobs"
    failing = [c for c in result.checks if c.failing_rows]
    assert bool(failing) is dirty  # the first job did count the faults
    # every failing check has its samples, taken by the second job, and each names a rule of its check
    assert all(c.sample and len(c.sample) <= 5 for c in failing)
    assert not any(c.sample for c in result.checks if not c.failing_rows)


def test_one_job_per_view(spark: SparkSession) -> None:
    df = clean_trips(spark, rows=50)
    schema = SchemaRef(path=str(DATA / "trips.avsc"))
    suite = Suite(name="two_views", checks=(
        SemanticCheck(name="on_changes", avro=schema, view="changes", fields=("rider_age",)),
        SemanticCheck(name="on_batch", avro=schema, view="batch", fields=("fare",)),
    ))
    holder = {}
    jobs = jobs_of(spark, lambda: holder.setdefault("r", suite.run(AuditContext(batch=df, changes=df))))
    assert len(jobs) == 2 and holder["r"].row_pass_jobs == 2


@pytest.mark.parametrize("text", ["plain", "it's", "back\\slash", "\\d{3}$", "a\nb\tc", "${spark.app.name}",
                                  "$${x}", "100%_\\%", "üñî €", "`tick`", "''", "\\'"])
def test_sql_string_literals_hold_exactly_the_text(spark: SparkSession, text: str) -> None:
    assert spark.range(1).selectExpr(f"{sql_string(text)} AS s").first()["s"] == text


def test_sql_literals_have_the_types_of_lit(spark: SparkSession) -> None:
    values = [0, -(2**31), 2**31, 2**40, 1.5, 1e300, -0.0, 150.0, True, "x"]
    exprs = [f"{sql_literal(v)} AS c{i}" for i, v in enumerate(values)]
    via_sql = spark.range(1).selectExpr(*exprs)
    via_lit = spark.range(1).select(*[F.lit(v).alias(f"c{i}") for i, v in enumerate(values)])
    assert via_sql.schema == via_lit.schema
    assert via_sql.first() == via_lit.first()


def test_every_row_failing_is_counted_exactly_and_sampled_within_bounds(spark: SparkSession) -> None:
    df = clean_trips(spark, rows=500).withColumn("rider_age", F.lit(900))  # every row fails one rule
    schema = SchemaRef(path=str(DATA / "trips.avsc"))
    suite = Suite(name="all_bad", sample_size=7, checks=(
        SemanticCheck(name="semantics", avro=schema, fields=("rider_age", "fare")),))
    c = suite.run(AuditContext.from_dataframe(df)).check("semantics")
    assert c.failing_rows == 500 and c.total_rows == 500
    assert c.rule("semantic:rider_age:age_years:maximum").failing_rows == 500
    assert len(c.rule("semantic:rider_age:age_years:maximum").sample) == 7
    assert all(r.failing_rows == 0 and not r.sample for r in c.rules if "rider_age" not in r.name)


def test_rules_are_sql_text_and_columns(spark: SparkSession) -> None:
    df = clean_trips(spark, rows=20)
    rules = row_suite().row_rules(AuditContext.from_dataframe(df))["changes"]
    assert all(isinstance(r.failed_sql, str) and isinstance(r.reason_sql, str) for r in rules)
    rule = next(r for r in rules if r.name == "semantic:rider_age:age_years:maximum")
    hit = df.withColumn("rider_age", F.lit(900)).select(rule.failed.alias("f"), rule.reason.alias("r")).first()
    assert hit["f"] is True and hit["r"] == "rider_age = 900 is above the maximum 150 of age_years"


def _attach(spark: SparkSession, df, inline) -> None:  # type: ignore[no-untyped-def]
    """Run ``inline`` inside another job over ``df`` (as a table write does) and nothing else."""
    inline(df, list(df.columns)).write.format("noop").mode("overwrite").save()


@pytest.mark.parametrize("dirty", [False, True])
def test_an_inline_pass_replaces_the_pass_of_its_view(spark: SparkSession, dirty: bool) -> None:
    df = inject(clean_trips(spark, rows=300), faults()) if dirty else clean_trips(spark, rows=300)
    suite = row_suite()
    inline = suite.inline_pass("changes")
    _attach(spark, df, inline)
    assert inline.error is None and inline.rows == 300
    assert inline.clean is not dirty
    assert (inline.result() is None) is dirty  # a dirty view needs per-rule counts and samples: a pass of its own
    ctx = AuditContext.from_dataframe(df)
    holder = {}
    jobs = jobs_of(spark, lambda: holder.setdefault("r", suite.run(ctx, inline={"changes": inline})))
    own = suite.run(ctx)
    got = holder["r"]
    assert [(c.name, c.status, c.failing_rows, c.total_rows, c.message) for c in got.checks] == \
        [(c.name, c.status, c.failing_rows, c.total_rows, c.message) for c in own.checks]
    # clean: the counts come from the other job; dirty: the view gets its pass for the samples
    assert (len(jobs), got.row_pass_jobs) == ((1, 1) if dirty else (0, 0))
    if dirty:
        assert any(c.sample for c in got.checks)


def test_an_inline_pass_of_other_rules_or_without_a_job_is_not_used(spark: SparkSession) -> None:
    df = clean_trips(spark, rows=50)
    suite = row_suite()
    other = Suite(name="other", checks=(SemanticCheck(name="semantics", avro=SchemaRef(path=str(DATA / "trips.avsc")),
                                                      fields=("fare",)),))
    mismatched = other.inline_pass("changes")
    _attach(spark, df, mismatched)
    assert mismatched.clean
    never_ran = suite.inline_pass("changes")
    never_ran(df, list(df.columns))  # attached, but no job runs the plan
    assert never_ran.result() is None and never_ran.rows is None  # and asking does not wait for one
    for inline in (mismatched, never_ran):
        result = suite.run(AuditContext.from_dataframe(df), inline={"changes": inline})
        assert result.row_pass_jobs == 1
