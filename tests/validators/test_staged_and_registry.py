"""A suite on the views of a real tablecore staged commit, and schemas / semantic types from a registry."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from schema_registry.model import SemanticType, SemanticTypeSpec
from schema_registry.semantic import builtin_types
from tablecore import Table, TableConfig
from validators import (
    AuditContext,
    ExpectValue,
    RegistrySchemas,
    SchemaCheck,
    SchemaRef,
    SchemaResolutionError,
    SemanticCheck,
    SqlCheck,
    Status,
    Suite,
    Verdict,
)

pytestmark = pytest.mark.spark

TRIP: dict[str, Any] = {"type": "record", "name": "Trip", "fields": [
    {"name": "uuid", "type": "string"},
    {"name": "ts", "type": "long"},
    {"name": "dt", "type": "string"},
    {"name": "rider_age", "type": "int", "semanticType": "age_years"},
    {"name": "fare", "type": "double", "semanticType": "fare_usd"},
]}


def frame(spark: SparkSession, ids: range, *, age: int = 30, fare: float = 10.0, ts: int = 1) -> Any:
    return spark.range(ids.start, ids.stop).select(
        F.concat(F.lit("u"), F.col("id").cast("string")).alias("uuid"), F.lit(ts).cast("long").alias("ts"),
        F.lit("2024-01-01").alias("dt"), F.lit(age).cast("int").alias("rider_age"), F.lit(fare).alias("fare"))


def test_suite_runs_on_the_views_of_a_staged_commit(spark: SparkSession, table_path: str) -> None:
    t = Table.create(table_path, TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                             partition_fields=["dt"]), spark=spark)
    t.bulk_insert(frame(spark, range(10)))
    batch = frame(spark, range(5, 15), age=200, ts=2)  # 5 updates + 5 inserts, every age out of range
    staged = t.upsert(batch, stage=True)
    ctx = AuditContext.from_staged(staged, batch=batch)
    types = {"fare_usd": SemanticTypeSpec(base_type="double", constraints={"minimum": 0})}  # type: ignore[arg-type]
    suite = Suite(name="wap", checks=(
        SchemaCheck(name="structure", avro=SchemaRef(inline=TRIP)),           # _hoodie_* columns ignored
        SemanticCheck(name="semantics", avro=SchemaRef(inline=TRIP), types=types),
        SqlCheck(name="grew_by_5", form="single_value",
                 query="SELECT (SELECT count(*) FROM {snapshot}) - (SELECT count(*) FROM {before})",
                 expect=ExpectValue(equals=5)),
        SqlCheck(name="keys_unique", form="zero_rows",
                 query="SELECT uuid FROM {snapshot} GROUP BY uuid HAVING count(*) > 1"),
        SqlCheck(name="rows_changed", form="inequality", query="SELECT uuid, ts FROM {table}"),
    ))
    result = suite.run(ctx)
    assert result.check("structure").status == Status.PASS
    sem = result.check("semantics")
    assert sem.total_rows == 10 and sem.failing_rows == 10
    assert sem.rule("semantic:rider_age:age_years:maximum").failing_rows == 10
    assert result.check("grew_by_5").status == Status.PASS
    assert result.check("keys_unique").status == Status.PASS
    assert result.check("rows_changed").status == Status.PASS
    assert result.verdict == Verdict.BLOCK
    staged.abort()
    assert t.read().count() == 10


class FakeRegistry:
    """Just the two client methods RegistrySchemas uses (the real client is tested in tests/schema_registry)."""

    def __init__(self, schemas: dict[str, str], types: list[SemanticType]) -> None:
        self.schemas = schemas
        self.types = types

    def version(self, subject: str, version: int | str = "latest", *, deleted: bool = False) -> Any:
        if subject not in self.schemas:
            raise LookupError(f"Subject '{subject}' not found.")
        return type("Registered", (), {"schema": self.schemas[subject]})()

    def semantic_types(self) -> list[SemanticType]:
        return [*builtin_types().values(), *self.types]


def test_subjects_and_types_resolve_through_a_registry(spark: SparkSession) -> None:
    import json

    fare_usd = SemanticType(name="fare_usd", version=2, spec=SemanticTypeSpec(
        base_type="double", constraints={"minimum": 0, "maximum": 50}))  # type: ignore[arg-type]
    registry = FakeRegistry({"trips-value": json.dumps(TRIP)}, [fare_usd])
    df = frame(spark, range(4), fare=75.0)
    suite = Suite(name="r", checks=(SemanticCheck(name="sem", avro=SchemaRef(subject="trips-value")),))
    result = suite.run(AuditContext.from_dataframe(df), schemas=RegistrySchemas(registry))
    assert result.check("sem").rule("semantic:fare:fare_usd:maximum").failing_rows == 4
    # offline, the subject cannot be resolved: the check fails with the reason instead of raising
    offline = suite.run(AuditContext.from_dataframe(df))
    assert offline.check("sem").status == Status.FAIL
    assert "needs a schema registry" in (offline.check("sem").error or "")
    missing = Suite(name="m", checks=(SemanticCheck(name="sem", avro=SchemaRef(subject="nope")),))
    res = missing.run(AuditContext.from_dataframe(df), schemas=RegistrySchemas(registry))
    assert "cannot fetch subject 'nope'" in (res.check("sem").error or "")
    with pytest.raises(SchemaResolutionError):
        RegistrySchemas(registry).schema_text(SchemaRef(subject="nope"))


def test_staged_views_are_planned_only_when_a_check_reads_them(spark) -> None:  # type: ignore[no-untyped-def]
    from validators import AuditContext, SqlCheck, Suite

    built: list[str] = []
    df = spark.createDataFrame([(1, 2.0)], "id int, fare double")

    class Views:
        def changes(self):  # type: ignore[no-untyped-def]
            built.append("changes")
            return df

        def snapshot(self):  # type: ignore[no-untyped-def]
            built.append("snapshot")
            return df

        def before(self):  # type: ignore[no-untyped-def]
            raise AssertionError("{before} is not read by the suite")

        def view_schema(self):  # type: ignore[no-untyped-def]
            built.append("schema")
            return df.schema

        def snapshot_count(self):  # type: ignore[no-untyped-def]
            raise AssertionError("no check counts {snapshot}")

    ctx = AuditContext.from_staged(Views(), batch=df)
    assert ctx.available() == ["batch", "changes", "snapshot", "before"] and built == []
    assert ctx.schema("changes") == df.schema and built == ["schema"]  # known without planning the view
    suite = Suite(name="s", checks=(
        SqlCheck(name="n", form="zero_rows", query="SELECT * FROM {changes} WHERE fare < 0"),))
    assert suite.run(ctx).verdict.value == "pass"
    assert built == ["schema", "changes"]
    assert ctx.view("changes") is ctx.view("changes") and built == ["schema", "changes"]


def test_row_count_of_a_staged_snapshot_comes_from_the_counter(spark: SparkSession, table_path: str) -> None:
    """``SELECT count(*) FROM {snapshot}`` alone on the view: answered by ``StagedCommit.snapshot_count`` (no pass
    over the merged rows); with another check on the view the pass counts; a failing counter falls back."""
    t = Table.create(table_path, TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                             partition_fields=["dt"], table_type="MERGE_ON_READ"), spark=spark)
    t.bulk_insert(frame(spark, range(10)))
    staged = t.upsert(frame(spark, range(5, 15), ts=2), stage=True)  # 5 updates + 5 inserts
    count = SqlCheck(name="rows", form="single_value", query="SELECT count(*) FROM {snapshot}",
                     expect=ExpectValue(min=15, max=15))
    counted: list[int] = []

    class Views:
        def __getattr__(self, name: str) -> Any:
            return getattr(staged, name)

        def snapshot(self) -> Any:
            raise AssertionError("the count must not read the snapshot")

        def snapshot_count(self) -> int:
            counted.append(staged.snapshot_count())
            return counted[-1]

    result = Suite(name="c", checks=(count,)).run(AuditContext.from_staged(Views()))
    assert result.check("rows").status == Status.PASS and result.check("rows").observed == 15
    assert counted == [15] and result.row_pass_jobs == 0

    # the view has a row check as well: its pass counts the rows, the counter is not asked
    other = SqlCheck(name="fares", form="zero_rows", query="SELECT uuid FROM {snapshot} WHERE fare < 0")
    both = Suite(name="b", checks=(count, other)).run(AuditContext.from_staged(staged))
    assert both.check("rows").observed == 15 and both.row_pass_jobs == 1

    class Broken(Views):
        def snapshot(self) -> Any:
            return staged.snapshot()

        def snapshot_count(self) -> int:
            raise OSError("footer unreadable")

    fallback = Suite(name="f", checks=(count,)).run(AuditContext.from_staged(Broken()))
    assert fallback.check("rows").observed == 15 and fallback.row_pass_jobs == 1
    staged.abort()
