"""The write-audit-publish gate on real tables, a live registry and hudi-rs as the independent reader."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from governance.audit import AUDIT_KEY, AuditRecord, Decision
from governance.checkpoint import CHECKPOINT_KEY, last_checkpoint
from governance.gate import Gate, GateConfig, OnBlock
from schema_registry import RegistryClient
from tablecore import Table, TableConfig
from tests.governance.conftest import trip, trips
from tests.tablecore.oracle import hudi_snapshot, spark_rows
from validators import ExpectValue, Policy, SqlCheck, Suite

pytestmark = pytest.mark.spark


def _table(spark: SparkSession, tmp_path: Path, kind: str = "MERGE_ON_READ") -> Table:
    return Table.create(str(tmp_path / "trips"), TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                                             partition_fields=["dt"], table_type=kind), spark=spark)


def _snapshot_ids(table: Table) -> list[str]:
    return sorted(r["uuid"] for r in hudi_snapshot(table.uri))


def test_good_batch_is_published_with_its_audit(spark: SparkSession, tmp_path: Path,
                                                registry: RegistryClient) -> None:
    table = _table(spark, tmp_path)
    gate = Gate(table, registry=registry, pipeline="p")
    rows = [trip(i) for i in range(10)] + [trip(3, ts=5_000, tip=2.0)]  # a duplicate key: the later ts wins
    record = gate.write(trips(spark, rows), checkpoint={"file": "b1"})
    assert record.decision == Decision.PUBLISHED
    assert record.schema_decision.action == "conforms" and record.schema_decision.version == 1
    c = record.conservation
    assert (c.rows_in, c.published, c.quarantined, c.deduplicated, c.rejected) == (11, 10, 0, 1, 0)
    stored = AuditRecord.from_metadata(table.commit_metadata(record.instant).extra_metadata[AUDIT_KEY])
    assert stored.conservation == c and stored.decision == Decision.PUBLISHED
    assert {v.name: v.status for v in stored.checks} == {"registry.schema": "pass", "registry.semantic": "pass"}
    assert last_checkpoint(table, "p") == (record.instant, {"file": "b1"})
    assert _snapshot_ids(table) == [f"trip-{i:05d}" for i in range(10)]
    tip = next(r for r in hudi_snapshot(table.uri) if r["uuid"] == "trip-00003")["tip"]
    assert tip == 2.0
    assert Path(record.report or "").read_text().count("PUBLISHED") >= 1
    assert [r.run_id for r in gate.audit_log.records()] == [record.run_id]


def test_blocked_batch_leaves_the_table_unchanged(spark: SparkSession, tmp_path: Path,
                                                 registry: RegistryClient) -> None:
    table = _table(spark, tmp_path)
    gate = Gate(table, registry=registry)
    first = gate.write(trips(spark, [trip(i) for i in range(5)]))
    before = hudi_snapshot(table.uri)
    timeline = [i.instant for i in table.timeline()]
    bad = trips(spark, [trip(i, age=900 if i == 7 else 30, tip=1.0) for i in range(3, 9)])
    record = gate.write(bad)
    assert record.decision == Decision.BLOCKED and record.verdict == "block"
    assert record.instant is None
    assert (record.conservation.rows_in, record.conservation.rejected) == (6, 6)
    failed = {v.name: v.failing_rows for v in record.checks if v.status == "fail"}
    assert failed == {"registry.semantic": 1}
    assert hudi_snapshot(table.uri) == before
    assert [i.instant for i in table.timeline() if i.action != "rollback"] == timeline
    assert table.staged() == []
    assert first.instant == table.latest_instant()
    assert "BLOCKED" in Path(record.report or "").read_text()


def test_quarantine_holds_back_bad_rows_and_publishes_the_rest(spark: SparkSession, tmp_path: Path,
                                                               registry: RegistryClient) -> None:
    table = _table(spark, tmp_path)
    gate = Gate(table, registry=registry, config=GateConfig(semantic_check=Policy.QUARANTINE), pipeline="p")
    rows = [trip(i, age=900 if i in (2, 5) else 30, currency="ZZZ" if i == 5 else "USD") for i in range(8)]
    record = gate.write(trips(spark, rows), checkpoint={"file": "b1"})
    assert record.decision == Decision.QUARANTINED
    c = record.conservation
    assert (c.rows_in, c.published, c.quarantined, c.deduplicated) == (8, 6, 2, 0)
    assert _snapshot_ids(table) == [f"trip-{i:05d}" for i in range(8) if i not in (2, 5)]
    q = gate.quarantine.read(target="trips").collect()
    assert sorted(json.loads(r["row_json"])["uuid"] for r in q) == ["trip-00002", "trip-00005"]
    assert {r["status"] for r in q} == {"quarantined"}
    assert all(json.loads(r["source_checkpoint"])["position"] == {"file": "b1"} for r in q)
    five = next(r for r in q if "trip-00005" in r["row_json"])
    assert len(json.loads(five["violations"])) == 2  # age and currency
    # the same batch again (a rerun after a crash): the quarantine table does not grow
    gate.write(trips(spark, rows), checkpoint={"file": "b1"})
    assert gate.quarantine.read(target="trips").count() == 2


def test_keep_for_review_then_publish_or_abort(spark: SparkSession, tmp_path: Path,
                                               registry: RegistryClient) -> None:
    from governance.wap import abort_kept, kept_commits, publish_kept

    table = _table(spark, tmp_path, "COPY_ON_WRITE")
    suite = Suite(name="s", checks=(SqlCheck(name="no_big_tips", query="SELECT * FROM {changes} WHERE tip > 100",
                                             form="zero_rows"),))
    gate = Gate(table, suite, registry=registry,
                config=GateConfig(on_block=OnBlock.KEEP, semantic_check=Policy.QUARANTINE))
    record = gate.write(trips(spark, [trip(1, tip=500.0), trip(2), trip(3, age=999)]))
    assert record.decision == Decision.KEPT and record.instant is not None
    c = record.conservation
    assert (c.rows_in, c.quarantined, c.rejected) == (3, 1, 2)  # the held-back row waits in quarantine anyway
    assert [(k.staged.instant, k.audit.run_id if k.audit else None) for k in kept_commits(table, gate.audit_log)] \
        == [(record.instant, record.run_id)]
    assert hudi_snapshot(table.uri) == []
    published = publish_kept(table, gate.audit_log, record.instant, note="tip confirmed with the rider")
    assert _snapshot_ids(table) == ["trip-00001", "trip-00002"]
    stored = AuditRecord.from_metadata(table.commit_metadata(record.instant).extra_metadata[AUDIT_KEY])
    assert stored.decision == Decision.PUBLISHED and "tip confirmed" in (stored.review or "")
    assert (stored.conservation.published, stored.conservation.quarantined) == (2, 1) == \
        (published.conservation.published, published.conservation.quarantined)
    second = gate.write(trips(spark, [trip(4, tip=700.0)]))
    aborted = abort_kept(table, gate.audit_log, second.instant or "")
    assert aborted.decision == Decision.BLOCKED and table.staged() == []
    assert _snapshot_ids(table) == ["trip-00001", "trip-00002"]
    assert [r.decision for r in gate.audit_log.records()] == [Decision.KEPT, Decision.PUBLISHED, Decision.KEPT,
                                                              Decision.BLOCKED]


def test_late_publish_on_a_version_6_table_warns_that_incremental_consumers_miss_it(
        spark: SparkSession, tmp_path: Path, registry: RegistryClient, caplog: pytest.LogCaptureFixture) -> None:
    """Commit A kept for review, commit B published, then A published: on version 6 an incremental consumer that read
    up to B never sees A (instant times order the range) -- the gate says so when A is published."""
    from governance.wap import publish_kept

    table = _table(spark, tmp_path, "COPY_ON_WRITE")
    suite = Suite(name="s", checks=(SqlCheck(name="no_big_tips", query="SELECT * FROM {changes} WHERE tip > 100",
                                             form="zero_rows"),))
    gate = Gate(table, suite, registry=registry, config=GateConfig(on_block=OnBlock.KEEP))
    a = gate.write(trips(spark, [trip(1, tip=500.0)]))
    b = gate.write(trips(spark, [trip(2)]))
    assert a.decision == Decision.KEPT and b.decision == Decision.PUBLISHED
    assert a.instant is not None and b.instant is not None and a.instant < b.instant
    read_up_to = b.instant  # the consumer's position
    with caplog.at_level("WARNING"):
        published = publish_kept(table, gate.audit_log, a.instant)
    assert f"behind the completed later instant {b.instant}" in (published.review or "")
    assert any("will not see" in r.getMessage() and a.instant in r.getMessage() for r in caplog.records)
    assert spark_rows(table.read_changes(start=read_up_to)) == []  # the hole the warning names
    assert sorted(r["uuid"] for r in spark_rows(table.read())) == ["trip-00001", "trip-00002"]


def test_gate_on_a_version_8_table_audits_the_staged_changes_and_a_late_publish_reaches_consumers(
        spark: SparkSession, tmp_path: Path, registry: RegistryClient, caplog: pytest.LogCaptureFixture) -> None:
    """The audit views of a staged commit on a version-8 table (its provisional completion), and the same
    late-publish scenario as on version 6: no warning, and the consumer's next pull holds the published rows."""
    from governance.wap import publish_kept

    table = Table.create(str(tmp_path / "trips"), TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                                              partition_fields=["dt"], table_version=8), spark=spark)
    suite = Suite(name="s", checks=(SqlCheck(name="no_big_tips", query="SELECT * FROM {changes} WHERE tip > 100",
                                             form="zero_rows"),))
    gate = Gate(table, suite, registry=registry, config=GateConfig(on_block=OnBlock.KEEP))
    a = gate.write(trips(spark, [trip(1, tip=500.0)]))
    b = gate.write(trips(spark, [trip(2)]))
    assert a.decision == Decision.KEPT and b.decision == Decision.PUBLISHED and a.instant and b.instant
    position = next(i.completed for i in table.timeline() if i.instant == b.instant)
    with caplog.at_level("WARNING"):
        published = publish_kept(table, gate.audit_log, a.instant)
    assert "behind" not in (published.review or "")
    assert not [r for r in caplog.records if "will not see" in r.getMessage()]
    assert [r["uuid"] for r in spark_rows(table.read_changes(start=position))] == ["trip-00001"]


def test_skip_parks_the_batch_and_commits_only_the_checkpoint(spark: SparkSession, tmp_path: Path,
                                                             registry: RegistryClient) -> None:
    table = _table(spark, tmp_path)
    gate = Gate(table, registry=registry, config=GateConfig(on_block=OnBlock.SKIP), pipeline="p")
    gate.write(trips(spark, [trip(i) for i in range(4)]), checkpoint=1)
    before = hudi_snapshot(table.uri)
    record = gate.write(trips(spark, [trip(10, fare=-3.0), trip(11)]), checkpoint=2)
    assert record.decision == Decision.SKIPPED
    assert (record.conservation.rows_in, record.conservation.rejected) == (2, 2)
    assert hudi_snapshot(table.uri) == before
    assert last_checkpoint(table, "p") == (record.instant, 2)
    parked = gate.quarantine.read(statuses=("blocked",)).collect()
    assert sorted(json.loads(r["row_json"])["uuid"] for r in parked) == ["trip-00010", "trip-00011"]
    assert table.commit_metadata(record.instant).extra_metadata[CHECKPOINT_KEY]


def test_schema_evolution_by_policy(spark: SparkSession, tmp_path: Path, registry: RegistryClient) -> None:
    table = _table(spark, tmp_path)
    wider = trips(spark, [trip(1), trip(2)]).withColumn("city", F.lit("SF"))
    refused = Gate(table, registry=registry).write(wider)
    assert refused.decision == Decision.REFUSED
    assert any("city" in m for m in refused.schema_decision.messages)
    assert table.latest_instant() is None and registry.versions("trips-value") == [1]
    record = Gate(table, registry=registry, config=GateConfig(evolution="register")).write(wider)
    assert record.decision == Decision.PUBLISHED
    assert record.schema_decision.action == "registered" and record.schema_decision.version == 2
    latest = json.loads(registry.latest("trips-value").schema)
    assert [f["name"] for f in latest["fields"]][-1] == "city"
    assert latest["name"] == "Trip"
    assert next(f for f in latest["fields"] if f["name"] == "rider_age")["semanticType"] == "age_years"
    # an incompatible change (string -> a number) is refused even when evolution is allowed
    retyped = trips(spark, [trip(3)]).withColumn("driver", F.lit(7))
    bad = Gate(table, registry=registry, config=GateConfig(evolution="register")).write(retyped)
    assert bad.decision == Decision.REFUSED
    assert any(m.startswith("incompatible") for m in bad.schema_decision.messages)
    assert registry.versions("trips-value") == [1, 2]


def test_delete_markers_pass_through_the_gate(spark: SparkSession, tmp_path: Path,
                                              registry: RegistryClient) -> None:
    table = _table(spark, tmp_path)
    gate = Gate(table, registry=registry, config=GateConfig(semantic_check=Policy.QUARANTINE))
    gate.write(trips(spark, [trip(i) for i in range(5)]))
    batch = trips(spark, [trip(1, ts=9_000), trip(2, ts=9_000, age=None, fare=0.0), trip(9, age=901)]) \
        .withColumn("_hoodie_is_deleted", F.col("uuid").isin("trip-00001", "trip-00002"))
    record = gate.write(batch)
    c = record.conservation
    assert (c.rows_in, c.published, c.quarantined, c.deduplicated) == (3, 2, 1, 0)
    assert _snapshot_ids(table) == ["trip-00000", "trip-00003", "trip-00004"]
    assert spark_rows(table.read().select("uuid")) == [{"uuid": u} for u in _snapshot_ids(table)]


def test_replay_resubmits_fixed_rows_idempotently(spark: SparkSession, tmp_path: Path,
                                                  registry: RegistryClient) -> None:
    from governance.replay import replay

    table = _table(spark, tmp_path)
    gate = Gate(table, registry=registry, config=GateConfig(semantic_check=Policy.QUARANTINE))
    gate.write(trips(spark, [trip(i, ts=100, age=900 if i in (1, 2, 3) else 30) for i in range(6)]))
    assert _snapshot_ids(table) == ["trip-00000", "trip-00004", "trip-00005"]
    # trip 3 arrives again, fixed and newer, through the normal path: the replay must not overwrite it
    gate.write(trips(spark, [trip(3, ts=500, age=41, tip=9.0)]))
    # a replay without a fix quarantines the rows again (nothing published for them)
    again = replay(gate, where="reason LIKE '%trip%' OR true", assignments={})
    assert again.superseded == 1 and again.record is not None
    assert again.record.conservation.quarantined == 2 and again.record.conservation.deduplicated == 1
    assert again.marked == 3
    # fix: age out of range -> unknown (NULL); replays the two re-quarantined rows
    fixed = replay(gate, assignments={"rider_age": "CASE WHEN rider_age > 150 THEN NULL ELSE rider_age END"})
    assert fixed.picked == 2 and fixed.superseded == 0 and fixed.record is not None
    assert fixed.record.decision == Decision.PUBLISHED and fixed.record.conservation.published == 2
    rows = {r["uuid"]: r for r in hudi_snapshot(table.uri)}
    assert sorted(rows) == [f"trip-{i:05d}" for i in range(6)]
    assert rows["trip-00001"]["rider_age"] is None and rows["trip-00003"]["tip"] == 9.0
    # nothing open any more: a second replay does nothing
    assert replay(gate).picked == 0
    records = gate.quarantine.read().collect()
    assert {r["status"] for r in records} == {"replayed"}
    # the outcome of each record: judged against the table before the replay published anything
    assert sorted((json.loads(r["row_json"])["uuid"], r["replay_outcome"]) for r in records) == [
        ("trip-00001", "published"), ("trip-00001", "quarantined"), ("trip-00002", "published"),
        ("trip-00002", "quarantined"), ("trip-00003", "superseded")]


def test_a_sql_check_over_the_batch_leaves_the_cached_batch_cached(spark: SparkSession, tmp_path: Path) -> None:
    """The gate caches a costly batch once for its count, split, checks and write. A SQL check over ``{batch}`` reads
    it through a temporary view, and dropping that view must not uncache the batch (Spark uncaches a dropped view's
    plan): the batch is computed once per gated write, not again for the write after the check."""
    marks = tmp_path / "computed"
    marks.mkdir()
    rows = trips(spark, [trip(i, tip=float(i % 3)) for i in range(30)])

    def mark(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os
        import uuid
        open(os.path.join(str(marks), uuid.uuid4().hex), "w").close()  # one mark per task that computes the batch
        yield from batches

    def computed() -> int:
        return len(list(marks.iterdir()))

    def batch() -> DataFrame:
        return rows.mapInArrow(mark, rows.schema)

    batch().collect()
    once = computed()
    suite = Suite(name="s", checks=(
        # two checks that run as queries of their own (grouped: not folded into the one pass over the batch)
        SqlCheck(name="drivers", query="SELECT count(*) FROM (SELECT driver FROM {batch} GROUP BY driver)",
                 form="single_value", expect=ExpectValue(equals=7)),
        SqlCheck(name="one_row_per_trip", query="SELECT uuid FROM {batch} GROUP BY uuid HAVING count(*) > 1",
                 form="zero_rows")))
    record = Gate(_table(spark, tmp_path), suite).write(batch())
    statuses = {v.name: (v.status, v.message) for v in record.checks}
    assert record.decision == Decision.PUBLISHED, statuses
    assert (statuses["drivers"][0], statuses["one_row_per_trip"][0]) == ("pass", "pass")
    assert computed() - once == once
