"""Acceptance 3: all row-level rules of a suite cost one Spark job (counted with the status tracker)."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import SparkSession

from tests.validators.faults import DATA, PAYLOAD_SCHEMA, clean_trips, faults, inject
from validators import AuditContext, JsonSchemaCheck, SchemaCheck, SchemaRef, SemanticCheck, Suite

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


def test_many_row_rules_run_in_one_job(spark: SparkSession) -> None:
    df = inject(clean_trips(spark, rows=300), faults())
    suite = row_suite()
    ctx = AuditContext.from_dataframe(df)
    n_rules = sum(len(rules) for rules in suite.row_rules(ctx).values())
    assert n_rules >= 20
    holder = {}
    jobs = jobs_of(spark, lambda: holder.setdefault("r", suite.run(ctx)))
    result = holder["r"]
    assert len(jobs) == 1, f"{n_rules} row rules took {len(jobs)} jobs"
    assert result.row_pass_jobs == 1
    assert sum(c.failing_rows or 0 for c in result.checks) > 0  # the job did count the faults


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
