"""Backfills beside the incremental pipeline (issue 21, acceptance 2).

The driver-earnings pipeline runs with business logic v1 (tips counted whole), then v2 (80 % of each tip): the
incremental pipeline (v2) consumes new trips commits while ``lakegate pipeline backfill`` recomputes the older days
with v2, in two processes at once on the same table. Both finish; the derived table equals a plain-Python v2
recomputation over hudi-rs's read of the trips table; the pipeline's checkpoint is the one the incremental writer
committed, at the last trips commit. A backfill killed at random moments resumes and finishes to the same result.
The two multi-process trials run in ``make crash-trials``; the resume test in ``make test``."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from examples.driver_earnings.generate import GeneratorConfig, day
from examples.driver_earnings.run import prepare
from governance.backfill import BACKFILL_KEY, Backfill
from governance.cli import app
from governance.errors import PipelineConfigError
from governance.pipeline import PipelineRunner, load_pipeline
from tests.processes import short_lived_spark_env
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

CONFIG = GeneratorConfig(batches=6, trips_per_batch=20, drivers=4, late_tips_per_batch=4, cancellations_per_batch=2,
                         seed=21)
CENT = Decimal("0.01")
LAKEGATE = [sys.executable, "-m", "governance.cli"]


def _money(v: Any) -> Decimal:
    return Decimal(str(v)).quantize(CENT, rounding=ROUND_HALF_UP)


def recompute(trips: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """driver_daily_earnings with the v2 rule (80 % of each tip, rounded half up to the cent), from scratch."""
    acc: dict[tuple[str, str], list[Any]] = {}
    for t in trips:
        a = acc.setdefault((t["driver"], t["dt"]), [0, 0, Decimal(0), Decimal(0)])
        if t["status"] == "completed":
            a[0] += 1
            a[2] += _money(t["fare"])
            a[3] += _money(Decimal(str(t["tip"])) * Decimal("0.8"))
        elif t["status"] == "cancelled":
            a[1] += 1
    return {g: (a[0], a[1], _money(a[2]), _money(a[3]), _money(a[2] + a[3])) for g, a in acc.items()}


def derived(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {(r["driver"], r["dt"]): (r["trips"], r["cancelled"], _money(r["fares"]), _money(r["tips"]),
                                     _money(r["earnings"])) for r in rows}


def _v1(workdir: Path) -> Path:
    """earnings.yaml, one trips commit per batch, event-time ordering on the target, and a backfill section."""
    path = workdir / "earnings.yaml"
    text = path.read_text().replace("max_commits_per_batch: 2", "max_commits_per_batch: 1")
    text = text.replace("  table_type: COPY_ON_WRITE\n", "  table_type: COPY_ON_WRITE\n"
                        "  merge_mode: EVENT_TIME_ORDERING\n")
    path.write_text(text + "backfill: {range_field: dt, operation: upsert, days_per_batch: 1}\n")
    return path


def _to_v2(path: Path) -> None:
    """The business logic changes: 80 % of each tip."""
    text = path.read_text()
    assert text.count("s.tip") == 2
    path.write_text(text.replace("s.tip", "ROUND(s.tip * 0.8, 2)"))


def _land(spark: SparkSession, workdir: Path, batches: int) -> PipelineRunner:
    trips = PipelineRunner(load_pipeline(workdir / "trips.yaml"), spark)
    for _ in range(batches):
        assert [r.decision.value for r in trips.run_once(max_batches=1)] == ["published"]
    return trips


def _started(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = short_lived_spark_env()
    return subprocess.Popen([*LAKEGATE, *args], stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def _setup(spark: SparkSession, workdir: Path, *, later: int = 3) -> tuple[PipelineRunner, Path]:
    """Three days landed and derived with v1, the logic changed to v2, ``later`` more days landed (not derived)."""
    prepare(workdir, CONFIG)
    earnings_file = _v1(workdir)
    trips = _land(spark, workdir, 3)
    PipelineRunner(load_pipeline(earnings_file), spark).run_once()
    _to_v2(earnings_file)
    for _ in range(later):
        trips.run_once(max_batches=1)
    return trips, earnings_file


def _check(spark: SparkSession, trips: PipelineRunner, earnings_file: Path) -> None:
    want = recompute(hudi_snapshot(trips.table.uri))
    runner = PipelineRunner(load_pipeline(earnings_file), spark)
    assert derived(hudi_snapshot(runner.table.uri)) == want
    assert derived([r.asDict() for r in runner.table.read().collect()]) == want
    # the checkpoint is the incremental writer's, at the last trips commit; no backfill commit carries one
    assert runner.checkpoint() == {"instant": trips.table.latest_instant()}
    history = list(runner.table.commit_history())
    backfilled = [m for _, m in history if BACKFILL_KEY in m.extra_metadata]
    assert backfilled and all("lakegate.checkpoint" not in m.extra_metadata for m in backfilled)
    assert not runner.table.staged()


@pytest.mark.crash_trials  # two more processes and JVMs for about 100 s: with the other multi-process trials
@pytest.mark.trial_seconds(190)
def test_backfill_and_incremental_writer_at_once(spark: SparkSession, tmp_path: Path) -> None:
    trips, earnings_file = _setup(spark, tmp_path)
    logs = [tmp_path / "incremental.log", tmp_path / "backfill.log"]
    procs = [_started(["pipeline", "run", str(earnings_file)], logs[0]),
             _started(["pipeline", "backfill", str(earnings_file), "--from", day(CONFIG, 0), "--to",
                       day(CONFIG, 2)], logs[1])]
    codes = [p.wait(timeout=600) for p in procs]
    assert codes == [0, 0], "\n".join(log.read_text()[-3000:] for log in logs)
    _check(spark, trips, earnings_file)


def test_backfill_resumes_and_leaves_the_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    trips, earnings_file = _setup(spark, tmp_path, later=1)  # one day for the incremental pipeline to catch up on
    runner = PipelineRunner(load_pipeline(earnings_file), spark)
    before = runner.checkpoint()
    job = Backfill(runner, dt.date.fromisoformat(day(CONFIG, 0)), dt.date.fromisoformat(day(CONFIG, 2)))
    assert [f"{a}..{b}" for a, b in job.batches()] == [f"{day(CONFIG, n)}..{day(CONFIG, n)}" for n in range(3)]
    [first] = job.run(max_batches=1)
    assert first.checkpoint is None and first.decision.value == "published"
    assert job.done() == {f"{day(CONFIG, 0)}..{day(CONFIG, 0)}"}
    assert runner.checkpoint() == before  # the incremental position did not move
    result = CliRunner().invoke(app, ["pipeline", "backfill", str(earnings_file), "--from", day(CONFIG, 0),
                                      "--to", day(CONFIG, 2), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["records"]) == 2 and doc["remaining_batches"] == []  # the first day was not written again
    runner.run_once()  # the incremental pipeline catches up with v2
    _check(spark, trips, earnings_file)

    with pytest.raises(PipelineConfigError, match="is before"):
        Backfill(runner, dt.date(2026, 2, 1), dt.date(2026, 1, 1))
    bad = CliRunner().invoke(app, ["pipeline", "backfill", str(earnings_file), "--from", "yesterday", "--to",
                                   "2026-01-01"])
    assert bad.exit_code == 2 and "--from / --to" in bad.output


@pytest.mark.crash_trials
@pytest.mark.trial_seconds(200)
def test_a_killed_backfill_resumes(spark: SparkSession, tmp_path: Path) -> None:
    trips, earnings_file = _setup(spark, tmp_path)
    PipelineRunner(load_pipeline(earnings_file), spark).run_once()  # the incremental pipeline is caught up
    rng = random.Random(2121)
    args = ["pipeline", "backfill", str(earnings_file), "--from", day(CONFIG, 0), "--to", day(CONFIG, 5)]
    progress = []
    for kill in range(3):
        proc = _started(args, tmp_path / f"killed-{kill}.log")
        time.sleep(rng.uniform(10.0, 30.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # after a kill the table reads, and holds a consistent mix of v1 and v2 groups
        runner = PipelineRunner(load_pipeline(earnings_file), spark)
        assert len(runner.table.read().collect()) == len(recompute(hudi_snapshot(trips.table.uri)))
        job = Backfill(runner, dt.date.fromisoformat(day(CONFIG, 0)), dt.date.fromisoformat(day(CONFIG, 5)))
        progress.append(len(job.done()))
    done = _started(args, tmp_path / "resumed.log")
    assert done.wait(timeout=600) == 0, (tmp_path / "resumed.log").read_text()[-3000:]
    _check(spark, trips, earnings_file)
    # the kills interrupted the backfill (not every run finished), and no batch was committed twice
    assert progress == sorted(progress) and progress[0] < 6, progress
    runner = PipelineRunner(load_pipeline(earnings_file), spark)
    batches = [json.loads(m.extra_metadata[BACKFILL_KEY])["batch"] for _, m in runner.table.commit_history()
               if BACKFILL_KEY in m.extra_metadata]
    assert sorted(batches) == sorted(set(batches)) and len(batches) == 6
