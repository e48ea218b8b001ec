"""Pipelines end to end: a live registry, JSON files landing in batches, the gate, hudi-rs as the reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from governance.audit import AUDIT_KEY, AuditRecord, Decision
from governance.errors import BatchBlockedError, PipelineConfigError
from governance.pipeline import PipelineRunner, load_pipeline
from schema_registry import RegistryClient
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

COLUMNS = ("uuid", "driver", "dt", "ts", "rider_age", "fare", "tip", "currency")


def row(i: int, *, day: str, ts: int, tip: float = 0.0, age: int | None = 30, fare: float = 10.0,
        deleted: bool = False) -> dict[str, Any]:
    r: dict[str, Any] = {"uuid": f"trip-{i:04d}", "driver": f"d{i % 3}", "dt": day, "ts": ts, "rider_age": age,
                         "fare": fare, "tip": tip, "currency": "USD"}
    if deleted:
        r["_hoodie_is_deleted"] = True
    return r


BATCHES: list[list[dict[str, Any]]] = [
    [row(i, day="2026-11-18", ts=100) for i in range(20)],
    [row(i, day="2026-11-19", ts=200) for i in range(20, 40)]
    + [row(i, day="2026-11-18", ts=210, tip=3.0) for i in range(5)],  # late tips on an old day
    [row(i, day="2026-11-19", ts=300, age=900 if i % 2 else 30) for i in range(60, 66)]
    + [row(66, day="2026-11-19", ts=300, fare=-5.0)],  # the bad batch: 3 ages of 900, a negative fare
    [row(i, day="2026-11-19", ts=400, deleted=True) for i in range(20, 25)]
    + [row(i, day="2026-11-20", ts=400) for i in range(40, 50)],
    [row(i, day="2026-11-19", ts=500, tip=1.5) for i in range(25, 30)]
    + [row(i, day="2026-11-20", ts=500) for i in range(50, 55)],
]
BAD = {60 + i for i in range(7) if i % 2} | {66}


def _expected(upto: int, policy: str) -> dict[str, dict[str, Any]]:
    """The table after batches [0, upto): a plain-Python model of upserts and deletes."""
    state: dict[str, dict[str, Any]] = {}
    for n, batch in enumerate(BATCHES[:upto]):
        for r in batch:
            if n == 2 and (policy == "skip" or int(r["uuid"][5:]) in BAD):
                continue
            if r.get("_hoodie_is_deleted"):
                state.pop(r["uuid"], None)
            else:
                state[r["uuid"]] = {k: r[k] for k in COLUMNS}
    return state


def _write_pipeline(tmp_path: Path, registry: RegistryClient, policy: str) -> Path:
    landing = tmp_path / "landing"
    landing.mkdir()
    for n, batch in enumerate(BATCHES):
        (landing / f"batch-{n:03d}.json").write_text("\n".join(json.dumps(r) for r in batch) + "\n")
    semantic = "quarantine" if policy == "quarantine" else "block"
    spec = f"""
name: trips-ingest
source: {{kind: files, path: landing, format: json, pattern: "*.json"}}
target:
  path: tables/trips
  name: trips
  record_key: [uuid]
  ordering_field: ts
  partition_fields: [dt]
  table_type: MERGE_ON_READ
registry: {{url: "{registry.url}", subject: trips-value}}
gate: {{semantic_check: {semantic}, on_block: skip}}
validators:
  name: trips-sql
  checks:
    - {{name: fares_recorded, kind: sql, form: single_value,
       query: "SELECT count(*) FROM {{changes}} WHERE fare IS NULL", expect: {{equals: 0}}}}
"""
    path = tmp_path / "trips.yaml"
    path.write_text(spec)
    return path


@pytest.mark.parametrize("policy", ["skip", "quarantine"])
def test_five_batches_through_the_gate(spark: SparkSession, tmp_path: Path, registry: RegistryClient,
                                       policy: str) -> None:
    runner = PipelineRunner(load_pipeline(_write_pipeline(tmp_path, registry, policy)), spark)
    seen: list[AuditRecord] = []

    def after(batch: Any, record: AuditRecord) -> None:
        seen.append(record)
        theirs = {r["uuid"]: {k: r[k] for k in COLUMNS} for r in hudi_snapshot(runner.table.uri)}
        assert theirs == _expected(len(seen), policy), f"after batch {len(seen)}"

    records = runner.run_once(on_batch=after)
    assert len(records) == 5
    decisions = [r.decision for r in records]
    bad = Decision.SKIPPED if policy == "skip" else Decision.QUARANTINED
    assert decisions == [Decision.PUBLISHED, Decision.PUBLISHED, bad, Decision.PUBLISHED, Decision.PUBLISHED]
    for n, r in enumerate(records):
        c = r.conservation
        assert c.holds() and c.rows_in == len(BATCHES[n])
        stored = AuditRecord.from_metadata(runner.table.commit_metadata(r.instant or "").extra_metadata[AUDIT_KEY])
        assert stored.decision == r.decision and stored.conservation == c
        assert r.checkpoint == {"pipeline": "trips-ingest", "position": {"last_file": f"batch-{n:03d}.json"}}
    third = records[2].conservation
    if policy == "skip":
        assert (third.published, third.quarantined, third.rejected) == (0, 0, 7)
    else:
        assert (third.published, third.quarantined, third.rejected) == (3, 4, 0)
    assert records[3].conservation.published == 15  # 5 deletes + 10 inserts
    # nothing new: a second run does nothing and the checkpoint stays
    assert runner.run_once() == []
    assert runner.checkpoint() == {"last_file": "batch-004.json"}
    held = runner.gate().quarantine.read(target="trips").collect()
    assert sorted(json.loads(r["row_json"])["uuid"] for r in held) == \
        sorted(f"trip-{i:04d}" for i in (range(60, 67) if policy == "skip" else BAD))


def test_blocked_batch_stops_the_pipeline_and_is_read_again(spark: SparkSession, tmp_path: Path,
                                                            registry: RegistryClient) -> None:
    path = _write_pipeline(tmp_path, registry, "block")
    path.write_text(path.read_text().replace("on_block: skip", "on_block: abort"))
    runner = PipelineRunner(load_pipeline(path), spark)
    with pytest.raises(BatchBlockedError, match=r"batch-002\.json"):
        runner.run_once()
    assert runner.checkpoint() == {"last_file": "batch-001.json"}
    theirs = {r["uuid"] for r in hudi_snapshot(runner.table.uri)}
    assert theirs == set(_expected(2, "skip"))
    with pytest.raises(BatchBlockedError):
        runner.run_once()
    assert runner.checkpoint() == {"last_file": "batch-001.json"}


def test_pipeline_file_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\nsource: {kind: files, path: in, format: json}\ntarget:\n  path: t\n  name: t\n")
    with pytest.raises(PipelineConfigError, match=r"p.yaml:3: target.record_key: field required"):
        load_pipeline(bad)
    bad.write_text("name: x\nsource: {kind: filez, path: in}\ntarget: {path: t, name: t, record_key: [k]}\n")
    with pytest.raises(PipelineConfigError, match=r"p.yaml:2: source"):
        load_pipeline(bad)
    bad.write_text("name: x\nsource: {kind: files, path: in, format: json}\n"
                   "transform: {sql: 'SELECT * FROM {sauce}'}\ntarget: {path: t, name: t, record_key: [k]}\n")
    with pytest.raises(PipelineConfigError,
                       match=r"p.yaml:3: transform.sql: transform step 1 \(sql\): unknown view\(s\) {sauce}"):
        load_pipeline(bad)
    bad.write_text("name: x\nsource: [\n")
    with pytest.raises(PipelineConfigError, match="not valid YAML"):
        load_pipeline(bad)
