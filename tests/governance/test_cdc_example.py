"""Deletes downstream (issue 23, acceptance 3): the ``driver-earnings-cdc`` pipeline of the driver-earnings example
(``examples/driver_earnings/earnings_cdc.yaml``) reads the trips table's change feed and adds each change's delta
to its (driver, dt) group, without reading the trips table. Between trips batches, trips are deleted (some groups
lose every trip) and corrected (a fare changed, a completed trip cancelled) directly in the trips table. After every
earnings batch the derived table, read by our reader and by hudi-rs, equals a full recomputation from scratch over
the trips table as of the batch's last commit; groups without trips are gone."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from examples.driver_earnings.generate import GeneratorConfig
from examples.driver_earnings.run import prepare
from governance.audit import AuditRecord, Decision
from governance.pipeline import PipelineRunner, load_pipeline
from governance.sources import Batch
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

CONFIG = GeneratorConfig(batches=3, trips_per_batch=30, drivers=5, late_tips_per_batch=4,
                         cancellations_per_batch=3, seed=23)
CENT = Decimal("0.01")
Group = tuple[str, str]
Row = tuple[int, int, int, Decimal, Decimal, Decimal]
"""(trip_rows, trips, cancelled, fares, tips, earnings) of a (driver, dt) group."""


def _money(v: Any) -> Decimal:
    return Decimal(str(v)).quantize(CENT)


def recompute(trips: list[dict[str, Any]]) -> dict[Group, Row]:
    """The derived table from scratch, in plain Python: one row per (driver, dt) with any trip."""
    acc: dict[Group, list[Any]] = {}
    for t in trips:
        a = acc.setdefault((t["driver"], t["dt"]), [0, 0, 0, Decimal(0), Decimal(0)])
        a[0] += 1
        if t["status"] == "completed":
            a[1] += 1
            a[3] += _money(t["fare"])
            a[4] += _money(t["tip"])
        elif t["status"] == "cancelled":
            a[2] += 1
    return {g: (a[0], a[1], a[2], _money(a[3]), _money(a[4]), _money(a[3] + a[4])) for g, a in acc.items()}


def derived(rows: list[dict[str, Any]]) -> dict[Group, Row]:
    out: dict[Group, Row] = {}
    for r in rows:
        g = (r["driver"], r["dt"])
        assert g not in out, f"two rows for {g}"
        out[g] = (r["trip_rows"], r["trips"], r["cancelled"], _money(r["fares"]), _money(r["tips"]),
                  _money(r["earnings"]))
    return out


def test_cdc_pipeline_propagates_deletes_and_corrections(spark: SparkSession, tmp_path: Path) -> None:
    prepare(tmp_path, CONFIG)
    trips = PipelineRunner(load_pipeline(tmp_path / "trips.yaml"), spark)
    earnings = PipelineRunner(load_pipeline(tmp_path / "earnings_cdc.yaml"), spark)
    rnd = random.Random(23)
    checked: list[str] = []
    emptied: list[Group] = []

    def check(batch: Batch, record: AuditRecord) -> None:
        assert record.decision == Decision.PUBLISHED, record.summary()
        assert batch.end_instant is not None
        expected = recompute(hudi_snapshot(trips.table.uri, as_of=batch.end_instant))
        columns = ["driver", "dt", "trip_rows", "trips", "cancelled", "fares", "tips", "earnings"]
        ours = derived([r.asDict() for r in earnings.table.read().select(*columns).collect()])
        assert ours == expected, f"our reader after {batch.description}"
        assert derived(hudi_snapshot(earnings.table.uri)) == expected, f"hudi-rs after {batch.description}"
        checked.append(batch.end_instant)

    for step in range(CONFIG.batches):
        assert [r.decision for r in trips.run_once(max_batches=1)] == [Decision.PUBLISHED]
        if step >= 1:
            stored = trips.table.read().drop(*[c for c in trips.table.read().columns if c.startswith("_hoodie_")])
            rows = sorted(stored.collect(), key=lambda r: r["uuid"])
            # every trip of one (driver, dt) group deleted: the group must disappear from the derived table
            groups = sorted({(r["driver"], r["dt"]) for r in rows})
            gone = rnd.choice(groups)
            emptied.append(gone)
            doomed = [r["uuid"] for r in rows if (r["driver"], r["dt"]) == gone]
            doomed += [r["uuid"] for r in rnd.sample(rows, 3) if r["uuid"] not in doomed]
            trips.table.delete(stored.where(F.col("uuid").isin(doomed)).select("uuid", "dt"))
            # corrections: a fare changed, a completed trip cancelled (newer ordering values, so they win)
            live = [r for r in rows if r["uuid"] not in doomed]
            fixed = stored.where(F.col("uuid").isin([r["uuid"] for r in rnd.sample(live, 4)]))
            fixed = fixed.withColumn("ts", F.col("ts") + 1).withColumn(
                "fare", (F.col("fare") + F.lit(Decimal("1.25"))).cast("decimal(10,2)")).withColumn(
                "status", F.when(F.col("uuid") == F.lit(live[0]["uuid"]), F.lit("cancelled"))
                .otherwise(F.col("status")))
            trips.table.upsert(fixed)
        earnings.run_once(on_batch=check)

    assert checked and checked[-1] == trips.table.latest_instant()
    final = derived(hudi_snapshot(earnings.table.uri))
    assert emptied and not any(g in final for g in emptied[-1:])
    # the CDC source saw deletes: the derived table once held the emptied groups, now it does not
    assert len(checked) >= CONFIG.batches
