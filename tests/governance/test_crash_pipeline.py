"""Acceptance: a pipeline SIGKILLed at random moments, 20 times, resumes exactly once.

One process runs the pipeline (a live registry in this process, JSON batches with inserts, late updates, deletes and
rows that get quarantined); it is killed — with its JVM and Python workers — at a random moment after Spark is up,
then the next trial's process resumes. After every kill the committed checkpoint names the last published file and
the table (read by hudi-rs) holds exactly the rows of the files up to it: nothing lost, nothing twice. A last
in-process run finishes the source; the table and the quarantine table must then hold exactly the expected rows.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from governance.pipeline import PipelineRunner, load_pipeline
from schema_registry import RegistryClient
from tests.governance.kill_trials import KillTrials
from tests.tablecore.oracle import hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.crash_trials, pytest.mark.trial_seconds(510)]

TRIALS = int(os.environ.get("LAKEGATE_CRASH_TRIALS", "20"))
SEED = int(os.environ.get("LAKEGATE_CRASH_SEED", "20261121"))
N_BATCHES = 16
COLUMNS = ("uuid", "driver", "dt", "ts", "rider_age", "fare", "tip", "currency")


def _batches(rng: random.Random) -> list[list[dict[str, Any]]]:
    """Batches of new trips, late tip updates, deletes of earlier trips, and now and then a rider aged 900."""
    out: list[list[dict[str, Any]]] = []
    live: list[int] = []
    day: dict[int, str] = {}  # a trip keeps its day (the partition) for life
    next_id = 0
    for n in range(N_BATCHES):
        rows: list[dict[str, Any]] = []
        ts = 1_000 * (n + 1)
        for _ in range(rng.randint(3, 8)):
            age = 900 if rng.random() < 0.12 else rng.randint(18, 90)
            day[next_id] = f"2026-11-{10 + n % 5}"
            rows.append({"uuid": f"t{next_id:04d}", "driver": f"d{next_id % 4}", "dt": day[next_id],
                         "ts": ts, "rider_age": age, "fare": 7.5, "tip": 0.0, "currency": "EUR"})
            if age <= 150:
                live.append(next_id)
            next_id += 1
        for i in rng.sample(live, min(len(live), rng.randint(0, 3))):  # late tips
            rows.append({"uuid": f"t{i:04d}", "driver": f"d{i % 4}", "dt": day[i],
                         "ts": ts + 1, "rider_age": 40, "fare": 7.5, "tip": float(rng.randint(1, 9)),
                         "currency": "EUR"})
        if len(live) > 6 and rng.random() < 0.4:  # a cancelled trip
            gone = live.pop(rng.randrange(len(live)))
            rows.append({"uuid": f"t{gone:04d}", "driver": f"d{gone % 4}", "dt": day[gone], "ts": ts + 2,
                         "rider_age": None, "fare": 0.0, "tip": 0.0, "currency": "EUR", "_hoodie_is_deleted": True})
        out.append(rows)
    return out


def _expected(batches: list[list[dict[str, Any]]], upto: int) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """(table rows by key, quarantined keys) after the first ``upto`` batches — a plain-Python model."""
    state: dict[str, dict[str, Any]] = {}
    held: set[str] = set()
    for batch in batches[:upto]:
        latest: dict[str, dict[str, Any]] = {}
        for r in batch:
            if (r["rider_age"] or 0) > 150:
                held.add(r["uuid"])
                continue
            if r["uuid"] not in latest or r["ts"] >= latest[r["uuid"]]["ts"]:
                latest[r["uuid"]] = r
        for key, r in latest.items():
            if r.get("_hoodie_is_deleted"):
                state.pop(key, None)
            else:
                state[key] = {k: r[k] for k in COLUMNS}
    return state, held


def _table_rows(uri: str) -> dict[str, dict[str, Any]]:
    rows = hudi_snapshot(uri)
    by_key = {r["uuid"]: {k: r[k] for k in COLUMNS} for r in rows}
    assert len(by_key) == len(rows), "a key appears twice in the table"
    return by_key


def _consumed(checkpoint: Any) -> int:
    return 0 if checkpoint is None else int(checkpoint["last_file"].split("-")[1].split(".")[0]) + 1


def test_sigkilled_pipeline_resumes_exactly_once(spark: SparkSession, tmp_path: Path,
                                                 registry: RegistryClient) -> None:
    rng = random.Random(SEED)
    batches = _batches(rng)
    landing = tmp_path / "landing"
    landing.mkdir()
    for n, batch in enumerate(batches):
        (landing / f"batch-{n:03d}.json").write_text("\n".join(json.dumps(r) for r in batch) + "\n")
    spec_path = tmp_path / "trips.yaml"
    spec_path.write_text(f"""
name: crash-trips
source: {{kind: files, path: landing, format: json, pattern: "batch-*.json"}}
target: {{path: tables/trips, name: trips, record_key: [uuid], ordering_field: ts, partition_fields: [dt],
          table_type: MERGE_ON_READ}}
registry: {{url: "{registry.url}", subject: trips-value}}
gate: {{semantic_check: quarantine}}
""")
    spec = load_pipeline(spec_path)
    uri = str(tmp_path / "tables" / "trips")
    progress: list[int] = []
    mid_commit = 0
    with KillTrials(spec_path, 2, rng) as trials:
        while trials.kills < TRIALS:
            assert not progress or progress[-1] < N_BATCHES, \
                f"the source ran out after {trials.kills} kills: add batches"
            trials.once()
            runner = PipelineRunner(spec, spark)
            consumed = _consumed(runner.checkpoint())
            progress.append(consumed)
            state, _ = _expected(batches, consumed)
            assert _table_rows(uri) == state, \
                f"kill {trials.kills}: the table does not match the checkpoint ({consumed} files)"
            if runner.table.staged() or any(i.state != "completed" for i in runner.table.timeline()):
                mid_commit += 1
    # the last run, in this process, finishes the source (and aborts what the last kill left)
    final = PipelineRunner(spec, spark)
    final.run_once()
    state, held = _expected(batches, N_BATCHES)
    assert _consumed(final.checkpoint()) == N_BATCHES
    assert _table_rows(uri) == state
    assert {r["uuid"]: {k: r[k] for k in COLUMNS} for r in spark_rows(final.table.read())} == state
    assert final.table.staged() == []
    quarantined = final.gate().quarantine.read(target="trips").collect()
    assert sorted(json.loads(r["row_json"])["uuid"] for r in quarantined) == sorted(held), \
        "the quarantine table lost or repeated rows"
    assert progress == sorted(progress), "a checkpoint went backwards"
    assert mid_commit >= 1, f"no kill landed inside a commit (progress {progress})"
    print(f"crash trials: {trials.kills} kills, files consumed after each process {progress}, "
          f"{mid_commit} inside a commit; per trial (seconds: trial-logs/trials.jsonl): {trials.history}")
