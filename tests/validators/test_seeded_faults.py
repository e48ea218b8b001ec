"""Acceptance 1: every row rule reports exactly the injected count and names the rule; the clean frame passes."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.validators.faults import (
    DATA,
    clean_trips,
    expected_check_counts,
    expected_rule_counts,
    faults,
    inject,
    min_rows,
)
from validators import AuditContext, Status, Suite, SuiteResult, Verdict, load_suite

pytestmark = pytest.mark.spark

ROW_CHECKS = ("structure", "semantics", "payload_json")


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(DATA / "trips_suite.yaml")


@pytest.fixture(scope="module")
def clean(spark: SparkSession) -> DataFrame:
    return clean_trips(spark).cache()


@pytest.fixture(scope="module")
def clean_result(suite: Suite, clean: DataFrame) -> SuiteResult:
    return suite.run(AuditContext.from_dataframe(clean))


@pytest.fixture(scope="module")
def faulty_result(suite: Suite, clean: DataFrame) -> SuiteResult:
    return suite.run(AuditContext.from_dataframe(inject(clean, faults())))


def test_generator_fits_the_frame() -> None:
    assert min_rows(faults()) <= 200  # the smallest frame the Spark tests use


def test_clean_frame_passes_every_check(clean_result: SuiteResult) -> None:
    assert clean_result.verdict == Verdict.PASS, clean_result.summary()
    assert all(c.status == Status.PASS for c in clean_result.checks)
    for name in ROW_CHECKS:
        c = clean_result.check(name)
        assert c.failing_rows == 0 and c.total_rows == 600 and c.rules
        assert all(r.failing_rows == 0 and not r.sample for r in c.rules)


def test_every_rule_reports_the_injected_count(faulty_result: SuiteResult) -> None:
    expected = expected_rule_counts(faults())
    observed = {r.name: r.failing_rows for name in ROW_CHECKS for r in faulty_result.check(name).rules}
    assert set(expected) <= set(observed), f"rules not compiled: {set(expected) - set(observed)}"
    assert {name: observed[name] for name in expected} == expected
    untouched = {name: n for name, n in observed.items() if name not in expected}
    assert untouched and all(n == 0 for n in untouched.values()), untouched


def test_every_check_reports_the_injected_rows_and_fails(faulty_result: SuiteResult) -> None:
    for name, count in expected_check_counts(faults()).items():
        c = faulty_result.check(name)
        assert c.failing_rows == count, (name, c.message)
        assert c.status == Status.FAIL
        assert c.observed == {"failing_fraction": round(count / 600, 8)}
    assert faulty_result.verdict == Verdict.BLOCK


def test_samples_name_the_rule_value_and_bound(faulty_result: SuiteResult) -> None:
    semantics = faulty_result.check("semantics")
    age = semantics.rule("semantic:rider_age:age_years:maximum")
    assert len(age.sample) == 3  # sample_size of the suite bounds it (6 failing rows)
    assert {s.reason for s in age.sample} == {"rider_age = 900 is above the maximum 150 of age_years"}
    assert all(set(s.row) == {"id", "uuid"} for s in age.sample)  # the suite's sample_columns
    dist = semantics.rule("semantic:distance_km:positive_distance:minimum")
    assert dist.sample[0].reason == "distance_km = 0.0 is not above the exclusive minimum 0 of positive_distance"
    currency = semantics.rule("semantic:currency:iso_currency:enum")
    assert currency.sample[0].reason.startswith("currency = 'XXZ' is not in the enum of iso_currency")
    future = semantics.rule("semantic:ts:timestamp_not_future:not_future")
    assert "is in the future" in future.sample[0].reason
    structure = faulty_result.check("structure")
    assert structure.rule("schema:status:enum").sample[0].reason.startswith(
        "status = 'teleported' is not a symbol of enum TripStatus")
    assert structure.rule("schema:tags[]:not_null").sample[0].reason == \
        "tags[] is null but the schema does not allow null"
    assert structure.rule("schema:amount:decimal").sample[0].reason.startswith("amount = 123456.78 does not fit")
    payload = faulty_result.check("payload_json").rule("json_schema:payload")
    reasons = " ".join(s.reason for s in payload.sample)
    assert "is not JSON" in reasons or "violates the JSON Schema" in reasons
    # the check's own sample draws from every failing rule (round robin), bounded by sample_size
    assert len(structure.sample) == 3
    assert len({s.reason.split(" ")[0] for s in structure.sample}) == 3


def test_samples_are_deterministic(suite: Suite, clean: DataFrame, faulty_result: SuiteResult) -> None:
    again = suite.run(AuditContext.from_dataframe(inject(clean, faults())))
    rule = "semantic:rider_age:age_years:maximum"
    assert [s.row["id"] for s in again.check("semantics").rule(rule).sample] == \
        [s.row["id"] for s in faulty_result.check("semantics").rule(rule).sample]


def test_sql_and_expectations_see_the_faults(faulty_result: SuiteResult) -> None:
    negative = faulty_result.check("no_negative_fares")
    assert negative.failing_rows == 4 and negative.status == Status.WARN  # policy warn
    assert faulty_result.check("row_count").status == Status.PASS
    gx = {c.name: c for c in faulty_result.checks if c.kind == "expectations"}
    assert gx["gx_trips:expect_column_values_to_not_be_null:fare"].failing_rows == 3
    assert gx["gx_trips:expect_column_values_to_be_between:rider_age"].failing_rows == 8
    assert gx["gx_trips:expect_column_values_to_be_in_set:currency"].failing_rows == 3


def test_result_round_trips_through_json(faulty_result: SuiteResult) -> None:
    text = faulty_result.to_json()
    data = json.loads(text)
    assert data["verdict"] == "block"
    assert {c["status"] for c in data["checks"]} >= {"fail", "warn"}
    assert SuiteResult.from_json(text) == faulty_result


def test_semantic_not_future_uses_one_moment(spark: SparkSession) -> None:
    """A value one minute in the past passes, one minute ahead of the run's start fails."""
    from validators import SemanticCheck

    now = dt.datetime.now(dt.UTC)
    ms = [int((now + dt.timedelta(minutes=m)).timestamp() * 1000) for m in (-1, 1, 10_000)]
    df = spark.createDataFrame([(m,) for m in ms], "ts long")
    suite = Suite(name="t", checks=(SemanticCheck(name="ts", bindings={"ts": "timestamp_not_future"}),))
    # without an Avro schema the unit comes from the type's logical types (timestamp-millis first)
    result = suite.run(AuditContext.from_dataframe(df))
    assert result.check("ts").failing_rows == 2
