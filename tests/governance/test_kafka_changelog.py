"""Kafka changelogs into the lake end to end: a Tansu broker, the schema registry over HTTP, 10,000 Confluent-Avro
change events over 3 partitions, a pipeline writing the history and the merged snapshot tables in mini-batches;
the merged table against a pure-Python model of the changelog and against hudi-rs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from governance.audit import Decision
from governance.changelog import BATCH_KEY
from governance.cli import app
from governance.pipeline import PipelineRunner, load_pipeline
from schema_registry import RegistryClient
from tablecore import Table
from tests.governance.changelog_model import (
    HISTORY_COLUMNS,
    MERGED_COLUMNS,
    generate_events,
    key_partition,
    model_history,
    model_merged,
    produce,
    with_bad_fares,
    with_coordinates,
)
from tests.kafka_broker import TansuBroker
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark


def write_pipeline(folder: Path, *, bootstrap: str, registry_url: str, topic: str, max_records: int = 3_000,
                   semantic: str = "quarantine", on_block: str = "abort") -> Path:
    """A changelog pipeline of the ``rides`` topic (merged: merge-on-read, history: copy-on-write)."""
    text = f"""
name: rides-changelog
source:
  kind: kafka
  bootstrap_servers: "{bootstrap}"
  topics: [{topic}]
  value_format: confluent_avro
  subject: {topic}-value
  max_records: {max_records}
  idle_ms: 300
  headers:
    - {{name: event_ts, column: _event_ts, type: long}}
    - {{name: row_key, column: _row_key}}
    - {{name: version, column: _version, type: long}}
    - {{name: datacenter, column: _datacenter}}
    - {{name: host, column: _host}}
  event_time_header: event_ts
target: {{path: rides, name: rides, record_key: [ride_id], ordering_field: version, partition_fields: [dt],
         table_type: MERGE_ON_READ}}
changelog:
  history: {{path: rides_history, name: rides_history}}
  delete_field: op
  delete_values: [d]
registry: {{url: "{registry_url}", subject: rides-value}}
gate: {{evolution: register, semantic_check: {semantic}, on_block: {on_block}}}
"""
    path = folder / "rides.yaml"
    path.write_text(text)
    return path


def merged_rows(table: Table) -> dict[str, dict[str, Any]]:
    """The merged table through lakegate's reader, as the model's rows."""
    return {r["ride_id"]: {c: r[c] for c in MERGED_COLUMNS} for r in table.read().collect()}


def history_rows(table: Table) -> list[dict[str, Any]]:
    """The history table through lakegate's reader."""
    return [r.asDict() for r in table.read().select(*HISTORY_COLUMNS, "_merged_dt").collect()]


def test_changelog_into_history_and_merged_tables(spark: SparkSession, tmp_path: Path, registry: RegistryClient,
                                                  kafka_broker: TansuBroker) -> None:
    topic = "rides-e2e"
    kafka_broker.create_topic(topic, 3)
    events = generate_events(10_000, 1_000, seed=11)
    coords = produce(kafka_broker.bootstrap, topic, events, registry.url, f"{topic}-value")
    placed = with_coordinates(events, topic, coords)
    assert {p for p, _ in coords} == {0, 1, 2}

    spec_path = write_pipeline(tmp_path, bootstrap=kafka_broker.bootstrap, registry_url=registry.url, topic=topic,
                               max_records=5_000)
    spec = load_pipeline(spec_path)
    with PipelineRunner(spec, spark) as runner:
        records = runner.run_once()
        assert len(records) >= 2  # 5,000 records a batch at most (1,667 a partition)
        assert all(r.decision == Decision.PUBLISHED for r in records)
        assert runner.run_once() == []  # nothing new
        writer = runner.changelog
        assert writer is not None
        merged, history = runner.table, writer.history
        # every batch published both tables, each commit naming the batch
        batches = [m.extra_metadata[BATCH_KEY] for _, m in history.commit_history()]
        assert batches == [m.extra_metadata[BATCH_KEY] for _, m in merged.commit_history()]
        # the last batch's lag, per partition, in the record
        assert {(x.topic, x.partition) for x in records[-1].lag} == {(topic, 0), (topic, 1), (topic, 2)}
        assert all(x.event_time_lag_s is not None and x.event_time_lag_s > 0 for x in records[-1].lag
                   if x.end > x.start)

    # `lakegate pipeline status`: both tables' last batch, checkpoint and lag (from the audit logs, no Spark)
    result = CliRunner().invoke(app, ["pipeline", "status", str(spec_path), "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)["tables"]
    last = records[-1].checkpoint
    assert last is not None
    assert status["target"]["checkpoint"] == status["history"]["checkpoint"] == last["position"]
    assert status["target"]["checkpoint"]["offsets"][topic] == {
        str(p): max(o for q, o in coords if q == p) + 1 for p in (0, 1, 2)}
    assert {(x["partition"], x["end"]) for x in status["target"]["lag"]} == {
        (p, max(o for q, o in coords if q == p) + 1) for p in (0, 1, 2)}

    # the changelog's semantic types reach both tables' subjects (registered from the changelog's schema)
    for subject in ("rides-value", "rides_history-value"):
        fields = {f["name"]: f for f in json.loads(registry.latest(subject).schema)["fields"]}
        assert fields["fare"].get("semanticType") == "non_negative_amount", subject

    expected = model_merged(placed)
    assert merged_rows(merged) == expected
    theirs = {r["ride_id"]: {c: r[c] for c in MERGED_COLUMNS} for r in hudi_snapshot(merged.uri)}
    assert theirs == expected

    held = history_rows(history)
    assert len(held) == len(events)  # every event once
    want = model_history(placed)
    got = {(r["_kafka_topic"], r["_kafka_partition"], r["_kafka_offset"]): r for r in held}
    assert got.keys() == want.keys()
    for where, row in want.items():
        assert {c: got[where][c] for c in HISTORY_COLUMNS} == row
    # the key's merged partition: the key's one date, or null while no event had given it yet
    dates = key_partition(events)
    assert all(r["_merged_dt"] in (dates[r["ride_id"]], None) for r in held)
    assert sum(r["_merged_dt"] is None for r in held) < len(held) // 100
    assert {r["_merged_dt"] for r in hudi_snapshot(history.uri)} <= {*dates.values(), None}


def test_bad_events_are_quarantined_with_their_coordinates_and_replayed_once(
        spark: SparkSession, tmp_path: Path, registry: RegistryClient, kafka_broker: TansuBroker) -> None:
    topic = "rides-quarantine"
    kafka_broker.create_topic(topic, 3)
    events = with_bad_fares(generate_events(600, 100, seed=5), 7)
    coords = produce(kafka_broker.bootstrap, topic, events, registry.url, f"{topic}-value")
    placed = with_coordinates(events, topic, coords)
    bad = {c for (e, c) in placed if (e.fields.get("fare") or 0) < 0}
    assert len(bad) == 7
    spec_path = write_pipeline(tmp_path, bootstrap=kafka_broker.bootstrap, registry_url=registry.url, topic=topic,
                               max_records=10_000)
    spec = load_pipeline(spec_path)
    with PipelineRunner(spec, spark) as runner:
        (record,) = runner.run_once()
        writer = runner.changelog
        assert writer is not None
        assert record.decision == Decision.QUARANTINED and record.table == "rides_history"
        assert record.conservation.quarantined == 7
        merged_record = list(runner.audit_log().records())[-1]
        assert merged_record.decision == Decision.PUBLISHED and merged_record.table == "rides"
        open_rows = writer.history_gate.quarantine.read(target="rides_history", statuses=("quarantined",)).collect()
        quarantined = {(json.loads(r["row_json"])["_kafka_topic"], json.loads(r["row_json"])["_kafka_partition"],
                        json.loads(r["row_json"])["_kafka_offset"]) for r in open_rows}
        assert quarantined == bad  # each bad event with its Kafka coordinates
        assert {r["check_name"] for r in open_rows} == {"registry.semantic"}
        # neither table holds the bad events
        held = history_rows(writer.history)
        assert {(r["_kafka_topic"], r["_kafka_partition"], r["_kafka_offset"]) for r in held} & bad == set()
        good = [(e, c) for e, c in placed if c not in bad]
        assert merged_rows(runner.table) == model_merged(good)

        # fixed upstream: the fares are corrected on replay, and the events are published once, in both tables
        result = CliRunner().invoke(app, ["quarantine", "replay", str(spec_path), "--set", "fare=abs(fare)",
                                          "--json"])
        assert result.exit_code == 0, result.output
        replayed = json.loads(result.stdout)
        assert (replayed["picked"], replayed["decision"]) == (7, "published")
        assert writer.replay() == (0, None)  # nothing open any more
        fixed = [(_abs_fare(e), c) for e, c in placed]
        assert merged_rows(runner.table) == model_merged(fixed)
        held = history_rows(writer.history)
        assert len(held) == len(events)
        assert len({(r["_kafka_topic"], r["_kafka_partition"], r["_kafka_offset"]) for r in held}) == len(events)


def _abs_fare(event: Any) -> Any:
    from dataclasses import replace

    fare = event.fields.get("fare")
    if fare is None or fare >= 0:
        return event
    return replace(event, fields={**event.fields, "fare": abs(fare)})


def test_a_run_killed_between_the_two_publishes_is_caught_up_from_history(
        spark: SparkSession, tmp_path: Path, registry: RegistryClient, kafka_broker: TansuBroker,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the history table published, the merged table's publish never happened: the next run folds the history
    # commit into the merged table before reading on, and no event is lost or written twice
    from governance.gate import AuditedWrite

    topic = "rides-between"
    kafka_broker.create_topic(topic, 3)
    events = generate_events(300, 60, seed=9)
    placed = with_coordinates(events, topic, produce(kafka_broker.bootstrap, topic, events, registry.url,
                                                     f"{topic}-value"))
    spec = load_pipeline(write_pipeline(tmp_path, bootstrap=kafka_broker.bootstrap, registry_url=registry.url,
                                        topic=topic))
    publish = AuditedWrite.publish

    def dies_on_the_merged_table(self: AuditedWrite, extra_metadata: dict[str, str] | None = None) -> Any:
        if self.staged.metadata.extra_metadata.get(BATCH_KEY) and self.run.gate.table.name == "rides":
            raise KeyboardInterrupt("killed between the publishes")
        return publish(self, extra_metadata)

    with PipelineRunner(spec, spark) as runner:
        monkeypatch.setattr(AuditedWrite, "publish", dies_on_the_merged_table)
        with pytest.raises(KeyboardInterrupt):
            runner.run_once()
        monkeypatch.setattr(AuditedWrite, "publish", publish)
        writer = runner.changelog
        assert writer is not None
        assert len(history_rows(writer.history)) == 300 and runner.table.staged() != []
        assert runner.checkpoint() is None  # the merged table is a batch behind
    with PipelineRunner(spec, spark) as rerun:
        done = rerun.recover()
        assert any(line.startswith("aborted staged instant") for line in done)
        assert any(line.startswith("folded history commit") for line in done)
        assert rerun.checkpoint() is not None and rerun.run_once() == []  # caught up: nothing new to read
        assert merged_rows(rerun.table) == model_merged(placed)
        assert len(history_rows(rerun.changelog.history)) == 300  # type: ignore[union-attr]
