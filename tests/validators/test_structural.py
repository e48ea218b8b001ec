"""The ``schema`` check's column-level comparison (no data read) and nested row rules.

Compiling builds Spark Column expressions, which needs the session even when no data is read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from schema_registry.avro import parse_schema
from validators import AuditContext, SchemaCheck, SchemaRef, Status, Suite
from validators.structural import compile_schema_check

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _session(spark: SparkSession) -> None:
    """Column expressions need an active SparkContext."""


NESTED: dict[str, Any] = {
    "type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}},
        {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
            {"name": "sku", "type": "string"},
            {"name": "qty", "type": "int"},
            {"name": "size", "type": ["null", {"type": "enum", "name": "Size", "symbols": ["S", "M", "L"]}]}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
        {"name": "_hoodie_commit_time", "type": ["null", "string"], "default": None},
    ]}
GOOD_DDL = ("id long, placed timestamp, day date, total decimal(8,2), "
            "items array<struct<sku: string, qty: int, size: string>>, attrs map<string, double>, code binary")


def _avro() -> Any:
    return parse_schema(json.dumps(NESTED), validate_defaults=False).avro


def issues(ddl: str, **options: Any) -> list[str]:
    """The structural issues of a frame of ``ddl`` against NESTED."""
    check = SchemaCheck(name="s", avro=SchemaRef(inline=NESTED), **options)
    found, _ = compile_schema_check(check, StructType.fromDDL(ddl), _avro())
    return [str(i) for i in found]


def test_conforming_frame_has_no_issues_and_meta_columns_are_ignored() -> None:
    assert issues(GOOD_DDL) == ["_hoodie_commit_time: missing column (schema type [null, string])"]
    assert issues(GOOD_DDL, allow_missing_with_default=True) == []
    assert issues(GOOD_DDL + ", _hoodie_record_key string", allow_missing_with_default=True) == []
    # Avro promotions and the usual Spark representations are accepted
    assert issues("id int, placed long, day int, total decimal(20,4), "
                  "items array<struct<sku: string, qty: short, size: string>>, attrs map<string, float>, code binary",
                  allow_missing_with_default=True) == []


@pytest.mark.parametrize(("ddl", "expected"), [
    (GOOD_DDL.replace("id long", "id string"), "id: type mismatch: schema long, DataFrame string"),
    (GOOD_DDL.replace("qty: int", "qty: long"), "items[].qty: type mismatch: schema int, DataFrame bigint"),
    (GOOD_DDL.replace("sku: string, ", ""), "items[].sku: missing field (schema type string)"),
    (GOOD_DDL.replace("size: string", "size: string, extra: int"), "items[].extra: extra field not in the schema"),
    (GOOD_DDL.replace("map<string, double>", "map<int, double>"), "attrs: type mismatch: schema map<double>"),
    (GOOD_DDL.replace("map<string, double>", "map<string, string>"), "attrs{}: type mismatch: schema double"),
    (GOOD_DDL + ", surprise int", "surprise: extra column not in the schema (Spark type int)"),
    (GOOD_DDL.replace("day date", "day timestamp"), "day: type mismatch: schema int (date), DataFrame timestamp"),
])
def test_column_level_issues(ddl: str, expected: str) -> None:
    found = issues(ddl, allow_missing_with_default=True)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_extra_columns_can_be_allowed() -> None:
    assert issues(GOOD_DDL + ", surprise int", allow_missing_with_default=True, allow_extra_columns=True) == []


def test_row_rules_cover_nested_values() -> None:
    check = SchemaCheck(name="s", avro=SchemaRef(inline=NESTED), allow_missing_with_default=True)
    _, rules = compile_schema_check(check, StructType.fromDDL(GOOD_DDL.replace("decimal(8,2)", "decimal(12,2)")),
                                    _avro())
    names = {r.name for r in rules}
    assert {"schema:id:not_null", "schema:items[]:not_null", "schema:items[].sku:not_null",
            "schema:items[].size:enum", "schema:attrs{}:not_null", "schema:code:fixed_size",
            "schema:total:decimal"} <= names
    assert "schema:items[].size:not_null" not in names  # nullable union


def test_nested_rules_count_rows(spark: SparkSession) -> None:
    import datetime as dt
    from decimal import Decimal

    t = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    good_item = ("a", 1, "M")
    rows = [
        (1, t, dt.date(2024, 1, 1), Decimal("1.00"), [good_item], {"k": 1.0}, b"ab"),         # clean
        (2, t, dt.date(2024, 1, 1), Decimal("1.00"), [good_item, ("b", 2, "XL")], {}, b"ab"),  # bad enum in array
        (3, t, dt.date(2024, 1, 1), Decimal("1.00"), [(None, 1, None)], {"k": None}, b"abc"),  # 3 faults, 1 row
        (4, t, dt.date(2024, 1, 1), Decimal("1234567.89"), None, {}, b"ab"),                  # decimal, null array
    ]
    ddl = GOOD_DDL.replace("decimal(8,2)", "decimal(12,2)")
    df = spark.createDataFrame(rows, ddl)
    suite = Suite(name="n", checks=(SchemaCheck(name="s", avro=SchemaRef(inline=NESTED),
                                                allow_missing_with_default=True),))
    c = suite.run(AuditContext.from_dataframe(df)).check("s")
    counts = {r.name: r.failing_rows for r in c.rules if r.failing_rows}
    assert counts == {"schema:items[].size:enum": 1, "schema:items[].sku:not_null": 1,
                      "schema:attrs{}:not_null": 1, "schema:code:fixed_size": 1, "schema:total:decimal": 1,
                      "schema:items:not_null": 1}
    assert c.failing_rows == 3 and c.status == Status.FAIL
    assert c.rule("schema:items[].size:enum").sample[0].reason.startswith("items[].size holds 'XL' which is not")
    assert c.rule("schema:code:fixed_size").sample[0].reason == "code has 3 bytes, the fixed type Code has 2"
