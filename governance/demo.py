"""The tablecore demo: a trips table, batches with late-arriving updates, the timeline and an incremental pull."""

from __future__ import annotations

import datetime as dt
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import TextIO

from tablecore import Table, TableConfig


def _trips(spark, start_id: int, n: int, day: dt.date, seed: int):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    rows = []
    for i in range(start_id, start_id + n):
        ts = int(dt.datetime.combine(day, dt.time(8), dt.UTC).timestamp() * 1000) + rng.randint(0, 36_000_000)
        rows.append((f"trip-{i:06d}", f"driver-{rng.randint(1, 20):03d}", day.isoformat(), ts,
                     round(rng.uniform(5, 60), 2), 0.0))
    return spark.createDataFrame(rows, "uuid string, driver string, dt string, ts long, fare double, tip double")


def run_demo(out: TextIO, base_dir: str | None = None) -> str:
    """Run the demo, printing to ``out``; returns the table path."""
    from pyspark.sql import functions as F

    from tablecore.spark.session import local_session

    spark = local_session("lakegate-demo")
    root = Path(base_dir or tempfile.mkdtemp(prefix="lakegate-demo-"))
    path = root / "trips"
    if path.exists():
        shutil.rmtree(path)
    t0 = time.monotonic()
    table = Table.create(str(path), TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                                partition_fields=["dt"]), spark=spark)
    print(f"created table 'trips' (COPY_ON_WRITE, Hudi v6) at {path}", file=out)
    day1, day2, day3 = dt.date(2026, 11, 18), dt.date(2026, 11, 19), dt.date(2026, 11, 20)
    r1 = table.upsert(_trips(spark, 0, 300, day1, 1))
    print(f"batch 1: {r1.inserted} new trips on {day1}", file=out)
    r2 = table.upsert(_trips(spark, 300, 300, day2, 2))
    print(f"batch 2: {r2.inserted} new trips on {day2}", file=out)
    late = (table.read().where(F.col("dt") == day1.isoformat()).limit(40)
            .select("uuid", "driver", "dt", (F.col("ts") + 3_600_000).alias("ts"), "fare", F.lit(4.5).alias("tip")))
    new = _trips(spark, 600, 200, day3, 3)
    r3 = table.upsert(late.unionByName(new))
    print(f"batch 3: {r3.inserted} new trips on {day3} + {r3.updated} late tips on {day1}", file=out)
    gone = table.read().where(F.col("dt") == day2.isoformat()).limit(10).select("uuid", "dt")
    r4 = table.delete(gone)
    print(f"batch 4: {r4.deleted} cancelled trips deleted on {day2}", file=out)

    print("\ntimeline:", file=out)
    for i in table.timeline():
        print(f"  {i.instant}  {i.action:<14} {i.state:<10} {i.operation or ''}", file=out)
    changes = table.read_changes(start=r2.instant, end=r3.instant)
    by_day = {r["dt"]: r["count"] for r in changes.groupBy("dt").count().collect()}
    print(f"\nincremental pull ({r2.instant}, {r3.instant}]: {changes.count()} rows "
          f"({', '.join(f'{d}: {n}' for d, n in sorted(by_day.items()))})", file=out)
    total = table.read().count()
    tips = table.read().where(F.col("tip") > 0).count()
    print(f"snapshot: {total} trips, {tips} with tips; done in {time.monotonic() - t0:.1f}s", file=out)
    return str(path)
