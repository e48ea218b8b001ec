"""Incremental ETL vs batch ETL on the trips workload (issue 21, acceptance 5): the published account's comparison.

A merge-on-read trips table of ``--rows`` rows over ``--days`` daily partitions feeds a derived table,
``driver_daily`` (one row per driver and day: completed trips, fares, tips, earnings). Each run changes
``--change-pct`` % of the rows in one upsert (80 % updates of existing trips, 20 % new trips of the newest day), then
recomputes the derived table two ways, both in one SparkSession:

* **batch**: the status quo, a full recomputation from a snapshot of the trips table, written with
  ``insert_overwrite_table``;
* **incremental**: a lakegate pipeline (table source, latest mode): the (driver, dt) groups its changed trips touch,
  recomputed from the touched days' partitions of the trips table (a secondary source read by affected partitions),
  upserted through the gate into a merge-on-read derived table (``--target-type cow``: copy-on-write). With
  ``--incremental delta`` the pipeline reads the trips table's change feed instead (a ``cdc`` source): each change's
  before image is subtracted and its after image added per group, onto the group's stored row (the derived table
  read by affected partitions); with ``--source-type cow`` the trips table writes CDC log files, which the read
  takes as is.

The session's broadcast thresholds are raised (Spark's default is 10 MB for both): the adaptive one, which judges a
side's measured size, to ``--broadcast-mb`` (128 MB): at 50 M rows and 1 % changed, the touched groups are about
20 MB at run time, and under the default the join shuffles and sorts the whole trips table instead of broadcasting
them; a hash table of string keys measures more than one 64 MiB memory page, so 64 MB is too low. The static one,
which judges the plan's estimate before any stage runs, to ``--planned-broadcast-mb`` (1024 MB): Spark estimates the
touched groups from the size of the whole cached batch they are aggregated from (184 MiB at 50 M), and a plan made
for a sort-merge join shuffles the stored rows from the first stage on, while the touched groups are still being
counted (``docs/pipelines.md``, "Joining a batch to a large table"; results before 2026-12-05 ran at 64 MB, adaptive
only; before 2026-12-05 at noon, both at 128 MB). The first build, whose touched groups are the whole table, stays a
sort-merge join: its estimate is the whole table's change feed.

Update profiles (where the updates fall; new trips always land in the newest day):

* ``recent``: every update within the last ``--recent-days`` days;
* ``long_tail``: ``--tail-pct`` % of the updates spread over every older day (late corrections months old), the
  rest within the last ``--recent-days`` days.

Reported per profile: the median of ``--runs`` runs of each way, wall seconds and Spark task-seconds (from the event
log), the days each incremental run read, and the ratio. After each incremental run, the stored rows of the days
its changes touched are read alone through the ``noop`` sink (the trips of those days when recomputing; the derived
rows when by deltas): the least any way that reads by partition spends, reported beside the batch. After the last
run both derived tables are compared (equal, or the benchmark fails). Target: incremental run time <= 1/5 of batch
(at 50 M rows, 1 % changed per run).

Results go to ``benchmarks/results/etl.json`` (+ ``etl.png``). ``make bench-etl`` or
``python benchmarks/etl.py [--rows N ...]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from common import git_sha, pyplot, write_results  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from trips import (  # noqa: E402
    _hash_int,
    first_id_of_day,
    machine,
    noop_scan,
    stage_breakdown,
    start_bench,
    trips,
    trips_parser,
)

from governance.pipeline import PipelineRunner, load_pipeline  # noqa: E402
from tablecore import Table, TableConfig  # noqa: E402

PROFILES = ("recent", "long_tail")
AGGREGATE = """
    SELECT driver_id, dt,
           CAST(SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS INT) AS trips,
           CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN fare END), 0) AS DECIMAL(14, 2)) AS fares,
           CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN tip END), 0) AS DECIMAL(14, 2)) AS tips,
           CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN fare + tip END), 0) AS DECIMAL(14, 2)) AS earnings,
           MAX(ts) AS ts
    FROM {rows} GROUP BY driver_id, dt
"""
PIPELINE = """
name: driver-daily-etl
source: {kind: table, path: trips}
sources:
  trips_days: {path: trips, mode: affected_partitions, partitions_from: {dt: dt}}
transform:
  sql: |
    WITH touched AS (SELECT DISTINCT driver_id, dt FROM {source})
    SELECT t.driver_id, t.dt,
           CAST(SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS INT) AS trips,
           CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN fare END), 0) AS DECIMAL(14, 2)) AS fares,
           CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN tip END), 0) AS DECIMAL(14, 2)) AS tips,
           CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN fare + tip END), 0) AS DECIMAL(14, 2)) AS earnings,
           MAX(s.ts) AS ts
    FROM touched t JOIN {trips_days} s ON s.driver_id = t.driver_id AND s.dt = t.dt
    GROUP BY t.driver_id, t.dt
target: {path: driver_daily_incremental, name: driver_daily_incremental, record_key: [driver_id, dt],
         ordering_field: ts, partition_fields: [dt], table_type: COPY_ON_WRITE}
"""
DELTA_PIPELINE = """
name: driver-daily-etl
source: {kind: table, path: trips, mode: cdc, columns: [driver_id, dt, status, fare, tip, ts]}
sources:
  days: {path: "{target}", mode: affected_partitions, partitions_from: {dt: "coalesce(after_dt, before_dt)"}}
transform:
  # the changes' sums per touched group, computed once (persist): the next step reads them twice, for the broadcast
  # semi-join and for the union, and Spark pushes the semi-join into each input of the days' read (a union)
  - name: delta
    persist: true
    sql: |
      WITH images AS (
        SELECT after_driver_id AS driver_id, after_dt AS dt, 1 AS sign, after_status AS status,
               CAST(after_fare AS DECIMAL(14, 2)) AS fare, CAST(after_tip AS DECIMAL(14, 2)) AS tip, after_ts AS ts
        FROM {source} WHERE op <> 'd'
        UNION ALL
        SELECT before_driver_id, before_dt, -1, before_status, CAST(before_fare AS DECIMAL(14, 2)),
               CAST(before_tip AS DECIMAL(14, 2)), CAST(NULL AS BIGINT)
        FROM {source} WHERE op <> 'i'
      )
      SELECT driver_id, dt, SUM(sign) AS trip_rows,
             SUM(CASE WHEN status = 'completed' THEN sign ELSE 0 END) AS trips,
             SUM(CASE WHEN status = 'completed' THEN sign * fare ELSE 0 END) AS fares,
             SUM(CASE WHEN status = 'completed' THEN sign * tip ELSE 0 END) AS tips,
             MAX(ts) AS ts
      FROM images GROUP BY driver_id, dt
  - name: merged
    sql: |
      WITH old AS (
        -- the touched groups' stored rows: the touched groups are broadcast to the scan of the touched days (a LEFT
        -- JOIN from them could broadcast only the stored side, the large one)
        SELECT o.driver_id, o.dt, o.trip_rows, o.trips, o.fares, o.tips, o.earnings, o.ts
        FROM {days} o LEFT SEMI JOIN {previous} d ON o.driver_id = d.driver_id AND o.dt = d.dt
      ), both_sides AS (
        SELECT * FROM old
        UNION ALL
        SELECT driver_id, dt, trip_rows, trips, fares, tips, fares + tips, ts FROM {previous}
      )
      SELECT driver_id, dt, CAST(SUM(trips) AS INT) AS trips, CAST(SUM(fares) AS DECIMAL(14, 2)) AS fares,
             CAST(SUM(tips) AS DECIMAL(14, 2)) AS tips, CAST(SUM(earnings) AS DECIMAL(14, 2)) AS earnings,
             MAX(ts) AS ts, SUM(trip_rows) AS trip_rows, SUM(trip_rows) = 0 AS _hoodie_is_deleted
      FROM both_sides GROUP BY driver_id, dt
target:
  path: driver_daily_incremental
  name: driver_daily_incremental
  record_key: [driver_id, dt]
  ordering_field: ts
  partition_fields: [dt]
  table_type: COPY_ON_WRITE
  create_schema:
    type: record
    name: driver_daily
    fields:
      - {name: driver_id, type: string}
      - {name: dt, type: string}
      - {name: trips, type: [int, "null"]}
      - {name: fares, type: [{type: bytes, logicalType: decimal, precision: 14, scale: 2}, "null"]}
      - {name: tips, type: [{type: bytes, logicalType: decimal, precision: 14, scale: 2}, "null"]}
      - {name: earnings, type: [{type: bytes, logicalType: decimal, precision: 14, scale: 2}, "null"]}
      - {name: ts, type: [long, "null"]}
      - {name: trip_rows, type: [long, "null"]}
"""
TARGET_RATIO = 1 / 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = trips_parser(__doc__, "etl.json", "JSON results")
    p.set_defaults(rows=50_000_000, driver_memory="6g")
    p.add_argument("--change-pct", type=float, default=1.0, help="rows changed per run, % of the table")
    p.add_argument("--recent-days", type=int, default=3, help="days that take the recent updates")
    p.add_argument("--tail-pct", type=float, default=10.0, help="long_tail: % of the updates in older days")
    p.add_argument("--runs", type=int, default=3, help="runs per profile (the median is reported)")
    p.add_argument("--profiles", default=",".join(PROFILES), help="profiles to run, comma-separated")
    p.add_argument("--target-type", choices=("cow", "mor"), default="mor",
                   help="table type of the incremental pipeline's derived table (mor: its upserts append logs; cow: "
                        "they rewrite every file group they touch)")
    p.add_argument("--incremental", choices=("recompute", "delta"), default="recompute",
                   help="recompute: the touched (driver, dt) groups from the touched days of the trips table; delta: "
                        "the changes' before and after images (a CDC read) added to the derived rows they touch")
    p.add_argument("--source-type", choices=("cow", "mor"), default="mor",
                   help="table type of the trips table (cow with --incremental delta: its merges write CDC log files, "
                        "which the CDC read takes as is)")
    p.add_argument("--derived-index", choices=("SIMPLE", "BUCKET"), default="SIMPLE",
                   help="index of the incremental pipeline's derived table (BUCKET: one bucket per day)")
    p.add_argument("--broadcast-mb", type=int, default=128,
                   help="spark.sql.adaptive.autoBroadcastJoinThreshold, MB: on measured sizes (Spark's default: 10)")
    p.add_argument("--planned-broadcast-mb", type=int, default=1024,
                   help="spark.sql.autoBroadcastJoinThreshold, MB: on the plan's estimates (Spark's default: 10)")
    args = p.parse_args(argv)
    if args.days < args.recent_days + 1 or args.rows < args.days:
        p.error("need --rows >= --days > --recent-days")
    return args


def _updates(spark: SparkSession, args: argparse.Namespace, profile: str, run: int, n: int) -> DataFrame:
    """``n`` distinct existing row ids: spread evenly over the recent days, and (long_tail) over the older ones."""
    tail = int(n * args.tail_pct / 100) if profile == "long_tail" else 0
    recent_lo = first_id_of_day(args.days - args.recent_days, args.rows, args.days)
    parts = [(recent_lo, args.rows, n - tail), (0, recent_lo, tail)]
    out = None
    for lo, hi, count in parts:
        if count <= 0:
            continue
        stride = (hi - lo) // count
        k = F.col("id")
        ids = spark.range(count).select((F.lit(lo) + k * stride + _hash_int(k, args.seed + run, 31, stride))
                                        .alias("id"))
        out = ids if out is None else out.unionByName(ids)
    assert out is not None
    return out


def changed_rows(spark: SparkSession, args: argparse.Namespace, profile: str, run: int) -> DataFrame:
    """One run's changes: updates (same trip, later ts, another tip, some cancelled) and new trips of the newest
    day."""
    total = max(1, int(args.rows * args.change_pct / 100))
    n_upd = total * 4 // 5
    upd = trips(_updates(spark, args, profile, run, n_upd), rows=args.rows, days=args.days, seed=args.seed)
    bump = F.lit(60_000 * (run + 1)) + _hash_int(F.xxhash64(F.col("uuid")), args.seed, 40 + run, 3_600_000)
    upd = (upd.withColumn("ts", F.col("ts") + bump)
           .withColumn("tip", F.round(F.col("tip") + F.lit(0.25 * (run + 1)), 2))
           .withColumn("status", F.when(_hash_int(F.xxhash64(F.col("uuid")), args.seed, 50 + run, 10) == 0,
                                        F.lit("cancelled")).otherwise(F.col("status"))))
    offset = args.rows * (2 + run + 10 * PROFILES.index(profile))
    new = trips(spark.range(offset, offset + total - n_upd), rows=args.rows, days=args.days, seed=args.seed,
                day=F.lit(args.days - 1))
    return upd.unionByName(new)


def batch_etl(spark: SparkSession, source: Table, target: Table) -> None:
    """The status quo: the whole derived table from a snapshot of the source."""
    rows = source.read()
    view = "__bench_trips"
    rows.createOrReplaceTempView(view)
    target.insert_overwrite_table(spark.sql(AGGREGATE.replace("{rows}", view)))
    spark.catalog.dropTempView(view)


def read_touched_days(args: argparse.Namespace, source: Table, derived: Table, partitions: list[str]) -> None:
    """The floor of any incremental way that reads by partition: the stored rows of the run's touched days (the
    partition paths its upsert wrote, the same in both tables: both are partitioned by ``dt`` alike) alone, through
    the ``noop`` sink. Recomputing reads the trips of those days (the columns the aggregate needs); the delta way
    reads the derived rows of those days. No aggregate, no join, no write."""
    if args.incremental == "recompute":
        rows = source.read(partitions=partitions).select("driver_id", "dt", "status", "fare", "tip", "ts")
    else:
        rows = derived.read(partitions=partitions)
    noop_scan(rows)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every step and return the results document."""
    started = dt.datetime.now(dt.UTC)
    work, spark, sampler, timer = start_bench("etl", args, event_log=True)
    spark.conf.set("spark.sql.adaptive.autoBroadcastJoinThreshold", f"{args.broadcast_mb}MB")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", f"{args.planned_broadcast_mb}MB")
    try:
        source = Table.create(str(work / "trips"), TableConfig(
            name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
            table_type="MERGE_ON_READ" if args.source_type == "mor" else "COPY_ON_WRITE",
            merge_mode="EVENT_TIME_ORDERING", cdc_enabled=args.incremental == "delta"), spark=spark)
        with timer.phase("load"):
            source.bulk_insert(trips(spark.range(args.rows), rows=args.rows, days=args.days, seed=args.seed))
        batch_target = Table.create(str(work / "driver_daily_batch"), TableConfig(
            name="driver_daily_batch", record_key=["driver_id", "dt"], ordering_field="ts", partition_fields=["dt"]),
            spark=spark)
        kind = "MERGE_ON_READ" if args.target_type == "mor" else "COPY_ON_WRITE"
        pipeline = PIPELINE if args.incremental == "recompute" else DELTA_PIPELINE
        spec = yaml.safe_load(pipeline)
        spec["target"].update(table_type=kind, index_type=args.derived_index)
        if args.derived_index == "BUCKET":
            spec["target"]["bucket_count"] = 1
        (work / "etl.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        runner = PipelineRunner(load_pipeline(work / "etl.yaml"), spark)
        with timer.phase("batch_initial"):
            batch_etl(spark, source, batch_target)
        with timer.phase("incremental_initial"):
            runner.run_once()
        touched: dict[str, list[int]] = {}
        days_log = _DaysRead()
        logging.getLogger("governance.secondary_sources").addHandler(days_log)
        logging.getLogger("governance.secondary_sources").setLevel(logging.INFO)
        for profile in args.profiles.split(","):
            for r in range(args.runs):
                print(f"{profile} run {r + 1}/{args.runs}", flush=True)
                with timer.phase(f"upsert_{profile}_{r}"):
                    written = source.upsert(changed_rows(spark, args, profile, r))
                days = sorted({s.partition_path for s in source.commit_metadata(written.instant).write_stats})
                with timer.phase(f"batch_{profile}_{r}"):
                    batch_etl(spark, source, batch_target)
                days_log.days = None
                with timer.phase(f"incremental_{profile}_{r}"):
                    runner.run_once()
                touched.setdefault(profile, []).append(days_log.days or 0)
                with timer.phase(f"floor_{profile}_{r}"):
                    read_touched_days(args, source, runner.table, days)
        with timer.phase("compare", timed=False):
            columns = ["driver_id", "dt", "trips", "fares", "tips", "earnings"]
            a = batch_target.read().select(*columns)
            b = runner.table.read().select(*columns)
            differ = a.exceptAll(b).count() + b.exceptAll(a).count()
            groups = a.count()
        if differ:
            raise SystemExit(f"the incremental derived table differs from the batch one in {differ} rows")
    finally:
        sampler.stop()
        spark.stop()
    breakdown = stage_breakdown(work / "eventlog", timer.windows)
    shutil.rmtree(work, ignore_errors=True)
    return _document(args, started, timer.seconds, breakdown, touched, groups)


class _DaysRead(logging.Handler):
    """Catches the number of partitions the pipeline's affected-partitions source read."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.days: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "affected partition" in msg:
            self.days = int(msg.split(": ")[1].split()[0])


def _task_s(breakdown: dict[str, Any], phase: str) -> float | None:
    """Spark task-seconds of a phase: the executor run time of every task of its jobs' stages."""
    got = breakdown.get(phase)
    if not isinstance(got, dict):
        return None
    return round(sum(st["task_run_s"] for job in got["jobs"] for st in job["stages"]), 1)


def _document(args: argparse.Namespace, started: dt.datetime, seconds: dict[str, float],
              breakdown: dict[str, Any], touched: dict[str, list[int]], groups: int) -> dict[str, Any]:
    profiles: dict[str, Any] = {}
    for profile, days in touched.items():
        runs = range(len(days))
        batch = [seconds[f"batch_{profile}_{r}"] for r in runs]
        inc = [seconds[f"incremental_{profile}_{r}"] for r in runs]
        floor = [seconds[f"floor_{profile}_{r}"] for r in runs]
        ratio = statistics.median(inc) / statistics.median(batch)
        profiles[profile] = {
            "batch_s": statistics.median(batch), "incremental_s": statistics.median(inc),
            "ratio": round(ratio, 3), "target": f"<= {TARGET_RATIO:.2f}", "met": ratio <= TARGET_RATIO,
            "batch_task_s": [_task_s(breakdown, f"batch_{profile}_{r}") for r in runs],
            "incremental_task_s": [_task_s(breakdown, f"incremental_{profile}_{r}") for r in runs],
            "upsert_s": [seconds[f"upsert_{profile}_{r}"] for r in runs],
            # the stored rows of the touched days alone, read and dropped: what reading by partition costs at least
            "touched_days_scan_s": statistics.median(floor),
            "touched_days_scan_vs_batch": round(statistics.median(floor) / statistics.median(batch), 3),
            "days_read_by_incremental": days, "runs_batch_s": batch, "runs_incremental_s": inc}
    return {"benchmark": "etl", "commit": git_sha(), "started": started.isoformat(), "machine": machine(),
            "workload": {"rows": args.rows, "days": args.days, "change_pct": args.change_pct,
                         "recent_days": args.recent_days, "tail_pct": args.tail_pct, "runs": args.runs,
                         "seed": args.seed, "derived_groups": groups, "target_type": args.target_type,
                         "incremental": args.incremental, "source_type": args.source_type,
                         "derived_index": args.derived_index,
                         "broadcast_mb": args.broadcast_mb, "planned_broadcast_mb": args.planned_broadcast_mb},
            "seconds": seconds, "profiles": profiles,
            "phases": {name: {"wall_s": b["wall_s"], "in_spark_jobs_s": b["in_spark_jobs_s"],
                              "task_s": _task_s(breakdown, name), "jobs": len(b["jobs"])}
                       for name, b in breakdown.items()},
            # where each incremental run's time went: its Spark jobs, each with its wall, task-seconds and stages
            "incremental_jobs": {name: [{"wall_s": j["wall_s"],
                                         "task_s": round(sum(st["task_run_s"] for st in j["stages"]), 1),
                                         "stages": [st.get("name") for st in j["stages"]]} for j in b["jobs"]]
                                 for name, b in breakdown.items()
                                 if name.startswith("incremental_") and isinstance(b, dict)}}


def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Bars: batch vs incremental seconds per profile, with the ratio."""
    plt = pyplot()
    if plt is None:
        return False
    profiles = doc["profiles"]
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(profiles)
    xs = range(len(names))
    ax.bar([x - 0.27 for x in xs], [profiles[n]["batch_s"] for n in names], width=0.27, label="batch (full recompute)")
    ax.bar(list(xs), [profiles[n]["incremental_s"] for n in names], width=0.27, label="incremental")
    ax.bar([x + 0.27 for x in xs], [profiles[n]["touched_days_scan_s"] for n in names], width=0.27,
           label="scan of the touched days alone")
    for x, n in zip(xs, names, strict=True):
        ax.hlines(TARGET_RATIO * profiles[n]["batch_s"], x - 0.42, x + 0.42, colors="grey", linestyles="dashed",
                  label="target: 1/5 of batch" if x == 0 else None)
        ax.text(x, profiles[n]["incremental_s"], f"{profiles[n]['ratio']:.2f}x", ha="center", va="bottom")
        ax.text(x + 0.27, profiles[n]["touched_days_scan_s"], f"{profiles[n]['touched_days_scan_vs_batch']:.2f}x",
                ha="center", va="bottom")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("seconds per run (median)")
    w = doc["workload"]
    ax.set_title(f"driver_daily: {w['rows'] / 1e6:g} M trips, {w['change_pct']:g} % changed per run; "
                 f"{w.get('incremental', 'recompute')}, derived index {w.get('derived_index', 'SIMPLE')}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """One line per profile."""
    lines = []
    for name, p in doc["profiles"].items():
        lines.append(f"{name:>10}: batch {p['batch_s']:.1f}s, incremental {p['incremental_s']:.1f}s = "
                     f"{p['ratio']:.3f} ({'met' if p['met'] else 'not met'}, target {p['target']}); days read "
                     f"{p['days_read_by_incremental']}; scan of the touched days alone {p['touched_days_scan_s']:.1f}s"
                     f" = {p['touched_days_scan_vs_batch']:.3f} of batch")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    t0 = time.perf_counter()
    args = parse_args(argv)
    doc = run(args)
    write_results(doc, args.out, write_chart, summary, t0)


if __name__ == "__main__":
    main()
