"""Several sources in one pipeline (issue 21, acceptance 1): ``examples/driver_daily/driver_daily.yaml`` pulls the
trips table incrementally, the driver_status table's changes since its previous batch (a 24 h look-back) and, for
the days its rows touch only, the partitions of driver_status, fx_rates and trips; a SQL -> Python -> SQL chain
computes each touched (driver, dt) group. Between runs, trips arrive for today and months late, trips are corrected
and cancelled, and status rows change for days with and without trips. After every run the derived table, read by
our reader and by hudi-rs, equals a plain-Python recomputation from scratch over hudi-rs's reads of the three
source tables; the lookup tables were read only for the days the batch touched."""

from __future__ import annotations

import datetime as dt
import logging
import random
import shutil
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.driver_daily.bonus import bonus
from governance.pipeline import PipelineRunner, load_pipeline
from tablecore import Table, TableConfig
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "driver_daily"
DAYS = [f"{dt.date(2026, 5, 1) + dt.timedelta(days=n):%Y-%m-%d}" for n in range(150)]
DRIVERS = [f"d{n}" for n in range(6)]
CURRENCIES = ("USD", "EUR", "BRL")
TRIPS_DDL = "uuid string, driver string, dt string, currency string, status string, fare decimal(10,2), ts bigint"
STATUS_DDL = "driver string, dt string, online_minutes int, updated_at bigint"
RATES_DDL = "dt string, currency string, usd_rate decimal(10,4)"
CENT = Decimal("0.01")


def _tables(spark: SparkSession, root: Path, rng: random.Random) -> tuple[Table, Table]:
    rates = Table.create(str(root / "fx_rates"), TableConfig(name="fx_rates", record_key=["dt", "currency"],
                                                             partition_fields=["dt"]), spark=spark)
    rows = [(d, c, Decimal("1.0000") if c == "USD" else Decimal(rng.randint(1500, 60000)) / 10000)
            for d in DAYS for c in CURRENCIES]
    rates.bulk_insert(spark.createDataFrame(rows, RATES_DDL))
    trips = Table.create(str(root / "trips"), TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                                          partition_fields=["dt"], table_type="MERGE_ON_READ"),
                         spark=spark)
    status = Table.create(str(root / "driver_status"), TableConfig(
        name="driver_status", record_key=["driver", "dt"], ordering_field="updated_at", partition_fields=["dt"]),
        spark=spark)
    return trips, status


def recompute(trips: list[dict[str, Any]], status: list[dict[str, Any]], rates: list[dict[str, Any]]) \
        -> dict[tuple[str, str], tuple[Any, ...]]:
    """driver_daily from scratch: one row per (driver, dt) with a trip or a status row."""
    rate = {(r["dt"], r["currency"]): Decimal(str(r["usd_rate"])) for r in rates}
    minutes = {(s["driver"], s["dt"]): s["online_minutes"] for s in status}
    groups: dict[tuple[str, str], list[Any]] = {g: [0, Decimal(0)] for g in minutes}
    for t in trips:
        g = groups.setdefault((t["driver"], t["dt"]), [0, Decimal(0)])
        if t["status"] == "completed":
            g[0] += 1
            g[1] += Decimal(str(t["fare"])) * rate[(t["dt"], t["currency"])]
    out = {}
    for key, (n, usd) in groups.items():
        fares = usd.quantize(CENT, rounding=ROUND_HALF_UP)
        extra = bonus(n, minutes.get(key, 0))
        out[key] = (n, fares, minutes.get(key, 0), extra, fares + extra)
    return out


def derived(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    out = {}
    for r in rows:
        key = (r["driver"], r["dt"])
        assert key not in out, f"two rows for {key}"
        out[key] = (r["trips"], Decimal(str(r["fares_usd"])), r["online_minutes"], Decimal(str(r["bonus_usd"])),
                    Decimal(str(r["total_usd"])))
    return out


def test_three_sources_each_read_as_little_as_the_batch_needs(spark: SparkSession, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(21)
    shutil.copy(EXAMPLE / "driver_daily.yaml", tmp_path / "driver_daily.yaml")
    root = tmp_path / "tables"
    trips, status = _tables(spark, root, rng)
    runner = PipelineRunner(load_pipeline(tmp_path / "driver_daily.yaml"), spark)
    known: dict[str, tuple[Any, ...]] = {}  # uuid -> the trip's latest row
    status_days: set[str] = set()
    ts = 1_000
    for rnd in range(4):
        changed_days: set[str] = set()
        for _ in range(rng.choice((1, 2))):  # one or two trips commits per run
            batch = []
            today = DAYS[120 + rnd]
            for _ in range(20):  # today's trips, a few drivers many times (bonus days)
                ts += 1
                batch.append((f"t{ts}", rng.choice(DRIVERS[:3]), today, rng.choice(CURRENCIES), "completed",
                              Decimal(rng.randint(300, 4000)) / 100, ts))
            for _ in range(4):  # late arrivals, months old
                ts += 1
                batch.append((f"t{ts}", rng.choice(DRIVERS), rng.choice(DAYS[:100]), rng.choice(CURRENCIES),
                              "completed", Decimal(rng.randint(300, 4000)) / 100, ts))
            for uuid in rng.sample(sorted(known), min(4, len(known))):  # corrections and cancellations
                ts += 1
                old = known[uuid]
                fix = (old[4], Decimal(rng.randint(300, 4000)) / 100) if rng.random() < 0.5 else ("cancelled", old[5])
                batch.append((*old[:4], *fix, ts))
            trips.upsert(spark.createDataFrame(batch, TRIPS_DDL))
            for row in batch:
                known[row[0]] = row
                changed_days.add(row[2])
        updates = []
        for _ in range(6):  # status changes: today's, and old days' (some with no trips at all)
            ts += 1
            updates.append((rng.choice(DRIVERS), rng.choice((DAYS[120 + rnd], rng.choice(DAYS[:120]))),
                            rng.randint(0, 300), ts))
        status.upsert(spark.createDataFrame(list({(u[0], u[1]): u for u in updates}.values()), STATUS_DDL))
        status_days |= {u[1] for u in updates}

        caplog.clear()
        with caplog.at_level(logging.INFO, logger="governance.secondary_sources"):
            records = runner.run_once()
        assert [r.decision.value for r in records] == ["published"]

        # the lookup read only the days of the batch's trips and of the status changes since the start (the
        # 24 h look-back of this quick test reaches back to the first status commit)
        touched = changed_days | status_days
        counts = {m.split(":")[0].removeprefix("source "): int(m.split(": ")[1].split()[0])
                  for m in caplog.messages if "affected partition" in m}
        assert counts == {"status": len(touched), "fx_rates": len(touched), "trips_days": len(touched)}
        assert len(touched) < len(DAYS) // 2

        want = recompute(hudi_snapshot(trips.uri), hudi_snapshot(status.uri), hudi_snapshot(str(root / "fx_rates")))
        ours = derived([r.asDict() for r in runner.table.read().collect()])
        theirs = derived(hudi_snapshot(runner.table.uri))
        assert ours == want, f"run {rnd}: {sorted(set(ours.items()) ^ set(want.items()))[:6]}"
        assert theirs == want
    # the data reached the cases that matter: bonus days, and days with a status row and no completed trip
    assert any(v[3] > 0 for v in want.values()) and any(v[0] == 0 for v in want.values())
    assert runner.checkpoint() == {"instant": trips.latest_instant()}
