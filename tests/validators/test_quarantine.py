"""Quarantine: failing rows (with check and reason) and passing rows as two lazy DataFrames; policies and verdicts."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tests.validators.faults import DATA, clean_trips, faults, inject
from validators import (
    AuditContext,
    Policy,
    SchemaCheck,
    SchemaRef,
    SemanticCheck,
    Status,
    Suite,
    Tolerance,
    ValidationFailed,
    Verdict,
    raise_for_verdict,
)

pytestmark = pytest.mark.spark
SCHEMA = SchemaRef(path=str(DATA / "trips.avsc"))
TYPES = {"positive_distance": {"base_type": "double", "constraints": {"minimum": 0, "exclusive_minimum": True}}}


@pytest.fixture(scope="module")
def faulty(spark: SparkSession) -> DataFrame:
    return inject(clean_trips(spark, rows=300), faults()).cache()


def test_split_routes_failing_rows_with_check_and_reason(faulty: DataFrame) -> None:
    suite = Suite(name="q", checks=(
        SemanticCheck(name="ages", avro=SCHEMA, fields=("rider_age",), policy=Policy.QUARANTINE),
        SemanticCheck(name="money", avro=SCHEMA, fields=("fare", "currency"), policy=Policy.QUARANTINE),
        SemanticCheck(name="geo", avro=SCHEMA, fields=("pickup_lat",), policy=Policy.BLOCK),
    ))
    ctx = AuditContext.from_dataframe(faulty)
    [split] = suite.split(ctx)
    assert split.view == "changes"
    assert split.failing.columns[:3] == ["check", "reason", "violations"]
    assert split.failing.columns[3:] == faulty.columns and split.passing.columns == faulty.columns
    per_check = {r["check"]: r["count"] for r in split.failing.groupBy("check").count().collect()}
    assert per_check == {"ages": 8, "money": 7}  # 6 + 2 ages, 4 negative fares + 3 bad currencies; geo is block
    assert split.passing.count() == 300 - 15
    assert split.failing.where(F.col("reason") == "rider_age = 900 is above the maximum 150 of age_years").count() == 6
    # the run agrees with the split: same expressions
    result = suite.run(ctx)
    assert result.check("ages").failing_rows == 8 and result.check("ages").status == Status.WARN
    assert result.check("ages").quarantines
    assert result.check("geo").status == Status.FAIL
    assert result.verdict == Verdict.BLOCK
    with pytest.raises(ValidationFailed, match="geo"):
        raise_for_verdict(result)


def test_quarantine_verdict_and_tolerance(faulty: DataFrame) -> None:
    ctx = AuditContext.from_dataframe(faulty)
    only_quarantine = Suite(name="q", checks=(
        SemanticCheck(name="ages", avro=SCHEMA, fields=("rider_age",), policy=Policy.QUARANTINE),))
    assert only_quarantine.run(ctx).verdict == Verdict.QUARANTINE
    too_many = Suite(name="q", checks=(
        SemanticCheck(name="ages", avro=SCHEMA, fields=("rider_age",), policy=Policy.QUARANTINE,
                      tolerance=Tolerance(max_fraction=0.01)),))  # 8 of 300 > 1 %
    assert too_many.run(ctx).verdict == Verdict.BLOCK


def test_block_tolerance_and_warn_policy(faulty: DataFrame) -> None:
    ctx = AuditContext.from_dataframe(faulty)
    suite = Suite(name="p", checks=(
        SemanticCheck(name="ages_tolerated", avro=SCHEMA, fields=("rider_age",),
                      tolerance=Tolerance.model_validate("3%")),  # 8 of 300 = 2.7 %
        SemanticCheck(name="ages_strict", avro=SCHEMA, fields=("rider_age",), tolerance=Tolerance(max_rows=7)),
        SemanticCheck(name="ages_warn", avro=SCHEMA, fields=("rider_age",), policy=Policy.WARN),
    ))
    result = suite.run(ctx)
    assert result.check("ages_tolerated").status == Status.WARN
    assert result.check("ages_strict").status == Status.FAIL
    assert result.check("ages_warn").status == Status.WARN
    assert result.verdict == Verdict.BLOCK
    relaxed = Suite(name="p", checks=suite.checks[:1] + suite.checks[2:]).run(ctx)
    assert relaxed.verdict == Verdict.WARN


def test_structural_issue_blocks_even_quarantine(spark: SparkSession) -> None:
    df = clean_trips(spark, rows=20).drop("note")
    suite = Suite(name="s", checks=(SchemaCheck(name="structure", avro=SCHEMA, policy=Policy.QUARANTINE),
                                    SemanticCheck(name="sem", avro=SCHEMA, types=TYPES, policy=Policy.QUARANTINE)))
    result = suite.run(AuditContext.from_dataframe(df))
    c = result.check("structure")
    assert c.status == Status.FAIL and c.failing_rows == 20
    assert c.observed == {"structural_issues": [{"path": "note", "problem": "missing column (schema type string)"}]}
    [split] = suite.split(AuditContext.from_dataframe(df))
    assert split.failing.count() == 0 and split.passing.count() == 20
    assert {r.check for r in split.rules} == {"sem"}
