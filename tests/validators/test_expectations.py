"""Acceptance 4: a GX suite with at least five expectation types runs on a Spark DataFrame; failures map to results."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.validators.faults import DATA, clean_trips, faults, inject
from validators import AuditContext, ExpectationsCheck, Policy, Status, Suite, Tolerance, Verdict

pytestmark = pytest.mark.spark
pytest.importorskip("great_expectations")


@pytest.fixture(scope="module")
def faulty(spark: SparkSession) -> DataFrame:
    return inject(clean_trips(spark, rows=200), faults()).cache()


def test_gx_suite_failures_map_to_check_results(faulty: DataFrame) -> None:
    doc = json.loads((DATA / "trips.gx.json").read_text())
    assert len({e["type"] for e in doc["expectations"]}) >= 5
    suite = Suite(name="gx", checks=(ExpectationsCheck(name="gx", inline=doc),), sample_size=4)
    result = suite.run(AuditContext.from_dataframe(faulty))
    by_name = {c.name: c for c in result.checks}
    assert len(by_name) == len(doc["expectations"])
    expected_unexpected = {
        "gx:expect_column_values_to_not_be_null:fare": 3,
        "gx:expect_column_values_to_be_between:rider_age": 8,
        "gx:expect_column_values_to_be_in_set:currency": 3,
        "gx:expect_column_values_to_match_regex:rider_email": 5,
        "gx:expect_column_values_to_be_unique:uuid": 2,
        "gx:expect_column_value_lengths_to_be_between:note": 5,
    }
    for name, n in expected_unexpected.items():
        c = by_name[name]
        assert c.status == Status.FAIL and c.failing_rows == n, (name, c.message)
        assert c.total_rows == 200 and c.kind == "expectations"
        assert 0 < len(c.sample) <= 4
    rows = by_name["gx:expect_table_row_count_to_be_between"]
    assert rows.status == Status.PASS and rows.observed == 200
    assert by_name["gx:expect_column_values_to_be_in_set:currency"].sample[0].row == {"value": "XXZ"}
    assert result.verdict == Verdict.BLOCK


def test_gx_policy_and_tolerance(faulty: DataFrame) -> None:
    doc = {"name": "t", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "rider_age", "min_value": 0,
                                                                   "max_value": 150}}]}
    warn = Suite(name="w", checks=(ExpectationsCheck(name="w", inline=doc, policy=Policy.WARN),)).run(
        AuditContext.from_dataframe(faulty))
    assert warn.checks[0].status == Status.WARN and warn.verdict == Verdict.WARN
    tolerant = Suite(name="t", checks=(ExpectationsCheck(name="t", inline=doc, tolerance=Tolerance(max_rows=8)),)).run(
        AuditContext.from_dataframe(faulty))
    assert tolerant.checks[0].status == Status.WARN and tolerant.checks[0].failing_rows == 8


def test_gx_suite_file_and_errors(faulty: DataFrame) -> None:
    ok = Suite(name="f", base_dir=DATA, checks=(ExpectationsCheck(name="f", suite="trips.gx.json"),)).run(
        AuditContext.from_dataframe(faulty))
    assert len(ok.checks) == 7
    bad_column = {"name": "b", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "no_such_column"}}]}
    broken = Suite(name="b", checks=(ExpectationsCheck(name="b", inline=bad_column),)).run(
        AuditContext.from_dataframe(faulty))
    assert broken.checks[0].status == Status.FAIL and broken.checks[0].error
