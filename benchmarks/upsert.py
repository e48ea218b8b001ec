"""Upsert benchmark: tablecore copy-on-write upserts vs the status quo of rebuilding a plain Parquet snapshot.

Workload "trips": ``--rows`` trips over ``--days`` consecutive days (partition ``dt``), keyed by ``uuid`` and
ordered by ``ts``. All data is generated inside Spark from ``spark.range`` with deterministic hash expressions
(no rows are built on, or collected to, the driver). For each key distribution a batch of ``--batch`` rows is
upserted: ``--updates`` updates of existing keys (same uuid and dt, higher ts, new tip) plus new keys in the newest
day. Measured, in one SparkSession:

* ``bulk_insert`` of the base table and the Spark write of the plain Parquet snapshot (reported, no target);
* per distribution: ``Table.upsert(batch)`` vs rebuilding the whole snapshot with Spark (read, union, dedupe by
  uuid keeping the highest ts, rewrite every partition);
* incremental read of the upsert's instant vs a full snapshot read, both through the ``noop`` sink;
* peak RSS of the driver: this Python process and the JVM (the driver in local mode).

Results go to a JSON file (and a PNG chart when matplotlib is installed); a summary table is printed.

Run from the repository root: ``make bench`` or ``python benchmarks/upsert.py [--rows N ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from common import git_sha, pyplot, total_ram_bytes  # noqa: E402
from pyspark.sql import Column, DataFrame, SparkSession, Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablecore import Table, TableConfig  # noqa: E402
from tablecore.spark.session import local_session  # noqa: E402

GB = 1024**3
MB = 1024**2
DAY_MS = 86_400_000
LAST_DAY = dt.date(2024, 12, 31)  # the newest partition; fixed so that runs are comparable
CITIES = ["san_francisco", "new_york", "chicago", "austin", "seattle", "boston", "denver", "miami", "atlanta",
          "los_angeles", "sao_paulo", "london", "paris", "berlin", "madrid", "chennai", "singapore", "tokyo"]
PAYMENT_TYPES = ["card", "cash", "wallet", "corporate", "voucher"]
STATUSES = ["completed"] * 17 + ["cancelled", "disputed", "refunded"]
TARGETS: dict[str, tuple[str, float]] = {
    "upsert_vs_rebuild_recent7": ("<=", 0.1),
    "upsert_vs_rebuild_uniform": ("<=", 1 / 3),
    "incremental_vs_snapshot_read": ("<=", 0.1),
    "driver_python_peak_rss_bytes": ("<=", 2 * GB),
    "driver_jvm_peak_rss_bytes": ("<=", 2 * GB),
}
_DIST_RE = re.compile(r"^(uniform|recent(\d+))$")


# ---- arguments ------------------------------------------------------------------------------------------------------
def trips_parser(doc: str | None, results: str, results_help: str) -> argparse.ArgumentParser:
    """The options every trips benchmark shares: data size and seed, scratch and results paths, JVM heap."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", type=int, default=5_000_000, help="rows of the base table")
    p.add_argument("--days", type=int, default=365, help="consecutive days (dt partitions) of the base table")
    p.add_argument("--batch", type=int, default=50_000, help="rows per upsert batch (updates + new keys)")
    p.add_argument("--updates", type=int, default=40_000, help="updates of existing keys per batch")
    p.add_argument("--seed", type=int, default=42, help="seed of the deterministic data generator")
    p.add_argument("--workdir", type=Path, default=REPO / "benchmarks" / "data",
                   help="scratch directory for tables and snapshots (gitignored)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / results, help=results_help)
    p.add_argument("--driver-memory", default="1g",
                   help="heap of the local-mode JVM (driver and executors in one process)")
    return p


def check_trips_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject sizes the generator cannot produce."""
    if args.rows < 1 or args.days < 1 or args.days > args.rows:
        p.error("need 1 <= --days <= --rows")
    if not 0 <= args.updates <= args.batch:
        p.error("need 0 <= --updates <= --batch")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = trips_parser(__doc__, "upsert.json", "JSON results; the chart is written next to it with a .png suffix")
    p.add_argument("--distributions", default="uniform,recent7",
                   help="comma-separated key distributions of the updates: uniform, recent<N> (newest N days)")
    p.add_argument("--keep-data", action="store_true", help="keep the scratch tables in --workdir")
    p.add_argument("--no-stage-breakdown", dest="stage_breakdown", action="store_false",
                   help="do not enable Spark's event log for the per-phase stage breakdown")
    args = p.parse_args(argv)
    dists = [d.strip() for d in args.distributions.split(",") if d.strip()]
    for d in dists:
        if not _DIST_RE.match(d):
            p.error(f"unknown distribution {d!r}: use uniform or recent<N>")
    args.distributions = dists
    check_trips_args(p, args)
    return args


# ---- deterministic data generation (Spark expressions only) -------------------------------------------------------
def _hash_int(id_col: Column, seed: int, salt: int, modulo: int) -> Column:
    """A deterministic pseudo-random integer in [0, modulo) from the row id."""
    return F.pmod(F.xxhash64(id_col, F.lit(seed), F.lit(salt)), F.lit(modulo))


def _hash_unit(id_col: Column, seed: int, salt: int) -> Column:
    """A deterministic pseudo-random double in [0, 1) from the row id."""
    return _hash_int(id_col, seed, salt, 1 << 30) / float(1 << 30)


def _pick(values: list[str], id_col: Column, seed: int, salt: int) -> Column:
    index = (_hash_int(id_col, seed, salt, len(values)) + 1).cast("int")
    return F.element_at(F.array(*[F.lit(v) for v in values]), index)


def first_id_of_day(day: int, rows: int, days: int) -> int:
    """The smallest row id whose day index (``id * days // rows``) is ``day``."""
    return -(-day * rows // days)


def trips(ids: DataFrame, *, rows: int, days: int, seed: int, day: Column | None = None) -> DataFrame:
    """The trip of every row id of ``ids`` (column ``id``): the same id always gives the same trip.

    Args:
        ids: a DataFrame with a long column ``id``.
        rows, days: the base table's size; row ids are spread over the days in id order (day = id * days // rows).
        seed: the generator seed.
        day: the day index (0 = oldest) to use instead of the id-derived one (new keys of a batch).
    """
    first_day = LAST_DAY - dt.timedelta(days=days - 1)
    epoch0 = int(dt.datetime(first_day.year, first_day.month, first_day.day, tzinfo=dt.UTC).timestamp() * 1000)
    i = F.col("id")
    day_idx = day if day is not None else F.expr(f"id * {days} div {rows}")
    h = F.md5(F.concat_ws("-", F.lit("trip"), F.lit(seed), i.cast("string")))
    uuid = F.concat_ws("-", F.substring(h, 1, 8), F.substring(h, 9, 4), F.substring(h, 13, 4),
                       F.substring(h, 17, 4), F.substring(h, 21, 12))
    fare = F.round(F.lit(2.5) + _hash_unit(i, seed, 5) * 60.0, 2)
    return ids.select(
        uuid.alias("uuid"),
        (F.lit(epoch0) + day_idx.cast("long") * DAY_MS + _hash_int(i, seed, 1, DAY_MS)).alias("ts"),
        F.date_format(F.date_add(F.lit(first_day.isoformat()).cast("date"), day_idx.cast("int")),
                      "yyyy-MM-dd").alias("dt"),
        F.concat(F.lit("driver-"), F.lpad(_hash_int(i, seed, 2, 50_000).cast("string"), 5, "0")).alias("driver_id"),
        F.concat(F.lit("rider-"), F.lpad(_hash_int(i, seed, 3, 1_000_000).cast("string"), 6, "0")).alias("rider_id"),
        fare.alias("fare"),
        F.round(fare * _hash_unit(i, seed, 6) * 0.25, 2).alias("tip"),
        F.round(F.lit(0.3) + _hash_unit(i, seed, 7) * 40.0, 3).alias("distance_km"),
        _pick(CITIES, i, seed, 8).alias("city"),
        _pick(PAYMENT_TYPES, i, seed, 9).alias("payment_type"),
        _pick(STATUSES, i, seed, 10).alias("status"),
    )


def update_ids(spark: SparkSession, dist: str, *, rows: int, days: int, updates: int, seed: int) -> DataFrame:
    """``updates`` distinct existing row ids: one per equal stride of the id range the distribution covers."""
    m = _DIST_RE.match(dist)
    assert m is not None
    recent = int(m.group(2)) if m.group(2) else None
    lo = first_id_of_day(max(0, days - recent), rows, days) if recent else 0
    span = rows - lo
    if updates > span:
        raise SystemExit(f"{dist}: {updates} updates but only {span} keys in range; lower --updates")
    stride = span // updates if updates else 1
    k = F.col("id")
    return spark.range(updates).select((F.lit(lo) + k * stride + _hash_int(k, seed, 11, stride)).alias("id"))


def batch_rows(spark: SparkSession, dist: str, *, rows: int, days: int, batch: int, updates: int,
               seed: int) -> DataFrame:
    """The upsert batch: updates of existing keys (same uuid and dt, ts later, tip changed) + new keys."""
    upd = trips(update_ids(spark, dist, rows=rows, days=days, updates=updates, seed=seed),
                rows=rows, days=days, seed=seed)
    salt = 100 + sum(map(ord, dist))
    bump = _hash_int(F.xxhash64(F.col("uuid")), seed, salt, 3_600_000)
    upd = (upd.withColumn("ts", F.col("ts") + F.lit(60_000) + bump)
           .withColumn("tip", F.round(F.col("tip") + F.lit(0.5) + bump / 1_000_000.0, 2)))
    # new keys: ids past the base range (distinct uuids), all in the newest day; offset per distribution
    offset = rows + sum(map(ord, dist)) * batch
    new = trips(spark.range(offset, offset + batch - updates), rows=rows, days=days, seed=seed,
                day=F.lit(days - 1))
    return upd.unionByName(new)


# ---- measurement helpers ------------------------------------------------------------------------------------------
@dataclass
class RssSampler:
    """Samples the RSS of the JVM child process (and the Python workers under it) every ``interval`` seconds."""

    interval: float = 0.5
    jvm_peak: int = 0
    workers_peak: int = 0
    samples: int = 0
    phase: str = "startup"
    phase_jvm_peak: dict[str, int] = field(default_factory=dict)
    available: bool = True
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            import psutil  # noqa: F401
        except ImportError:
            self.available = False
            print("note: psutil is not installed; the JVM RSS is not sampled (pip install psutil)")
            return
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        me = psutil.Process(os.getpid())
        while not self._stop.is_set():
            jvm = workers = 0
            try:
                for child in me.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        rss = child.memory_info().rss
                        if child.name() == "java":
                            jvm = max(jvm, rss)
                        elif "python" in child.name().lower():
                            workers += rss
            except psutil.Error:
                pass
            self.samples += 1
            self.jvm_peak = max(self.jvm_peak, jvm)
            self.workers_peak = max(self.workers_peak, workers)
            self.phase_jvm_peak[self.phase] = max(self.phase_jvm_peak.get(self.phase, 0), jvm)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


@dataclass
class Timer:
    """Times named phases; each phase runs under its own Spark job group (for the stage breakdown)."""

    spark: SparkSession
    sampler: RssSampler
    seconds: dict[str, float] = field(default_factory=dict)
    windows: dict[str, tuple[int, int]] = field(default_factory=dict)  # epoch ms, for the event log

    @contextlib.contextmanager
    def phase(self, name: str, *, timed: bool = True) -> Iterator[None]:
        sc = self.spark.sparkContext
        sc.setJobGroup(name, name)
        self.sampler.phase = name
        wall0 = int(time.time() * 1000)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - t0
            sc.setJobGroup("untimed", "untimed")
            self.sampler.phase = "untimed"
            self.windows[name] = (wall0, int(time.time() * 1000))
            if timed:
                self.seconds[name] = round(elapsed, 3)
            print(f"  {name}: {elapsed:.1f}s", flush=True)


def noop_scan(df: DataFrame) -> None:
    """Read every column of every row through Spark's ``noop`` sink (nothing reaches the driver)."""
    df.write.format("noop").mode("overwrite").save()


def rebuild_snapshot(spark: SparkSession, snapshot: Path, batch: DataFrame, out: Path) -> None:
    """The status quo: rewrite the whole snapshot with the batch merged in (latest ts per uuid wins)."""
    current = spark.read.parquet(str(snapshot))
    merged = current.unionByName(batch.select(*current.columns))
    w = Window.partitionBy("uuid").orderBy(F.col("ts").desc())
    latest = merged.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") == 1).drop("_rn")
    latest.write.mode("overwrite").partitionBy("dt").parquet(str(out))


# ---- the stage breakdown from Spark's event log -------------------------------------------------------------------
def stage_breakdown(event_dir: Path, windows: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Per timed phase: its Spark jobs and stages (wall time, task time, rows and bytes) from the event log."""
    logs = _event_files(event_dir)
    if not logs:
        return {}
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = {}
    for log in logs:
        with log.open(encoding="utf-8") as f:
            for line in f:
                _apply_event(json.loads(line), jobs, stages)
    out: dict[str, Any] = {}
    for phase, (lo, hi) in windows.items():
        phase_jobs = [(jid, j) for jid, j in sorted(jobs.items()) if j["group"] == phase]
        job_ms = _union_ms([(j["start"], j.get("end", hi)) for _, j in phase_jobs])
        out[phase] = {
            "wall_s": round((hi - lo) / 1000, 3),
            "in_spark_jobs_s": round(job_ms / 1000, 3),
            "outside_spark_jobs_s": round(max(0, hi - lo - job_ms) / 1000, 3),
            "jobs": [{"job": jid, "wall_s": round((j.get("end", hi) - j["start"]) / 1000, 3),
                      "stages": [{"stage": sid, **_rounded(stages[sid])} for sid in sorted(j["stages"])
                                 if sid in stages and stages[sid].get("name")]}
                     for jid, j in phase_jobs],
        }
    return out


def _apply_event(ev: dict[str, Any], jobs: dict[int, dict[str, Any]], stages: dict[int, dict[str, Any]]) -> None:
    kind = ev.get("Event")
    if kind == "SparkListenerJobStart":
        jobs[ev["Job ID"]] = {"group": (ev.get("Properties") or {}).get("spark.jobGroup.id"),
                              "start": ev["Submission Time"], "stages": ev["Stage IDs"]}
    elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
        jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
    elif kind == "SparkListenerStageCompleted":
        info = ev["Stage Info"]
        s = stages.setdefault(info["Stage ID"], _empty_stage())
        s.update(name=info["Stage Name"], tasks=info["Number of Tasks"],
                 wall_s=round((info["Completion Time"] - info["Submission Time"]) / 1000, 3))
    elif kind == "SparkListenerTaskEnd" and ev.get("Task Metrics"):
        _add_task(stages.setdefault(ev["Stage ID"], _empty_stage()), ev["Task Metrics"])


def _event_files(event_dir: Path) -> list[Path]:
    """The event log files of the one application logged to ``event_dir``: rolling (Spark 4) or a single file."""
    if not event_dir.is_dir():
        return []
    files = [p for p in event_dir.rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus"))]

    def order(p: Path) -> int:
        m = re.match(r"events_(\d+)_", p.name)
        return int(m.group(1)) if m else 0

    return sorted(files, key=order)


def _empty_stage() -> dict[str, Any]:
    return {"name": None, "tasks": 0, "wall_s": 0.0, "task_run_s": 0.0, "task_cpu_s": 0.0, "gc_s": 0.0,
            "input_records": 0, "input_mb": 0.0, "output_mb": 0.0, "shuffle_read_mb": 0.0, "shuffle_write_mb": 0.0,
            "spill_mb": 0.0}


def _add_task(s: dict[str, Any], m: dict[str, Any]) -> None:
    s["task_run_s"] += m.get("Executor Run Time", 0) / 1000
    s["task_cpu_s"] += m.get("Executor CPU Time", 0) / 1e9
    s["gc_s"] += m.get("JVM GC Time", 0) / 1000
    inp = m.get("Input Metrics") or {}
    s["input_records"] += inp.get("Records Read", 0)
    s["input_mb"] += inp.get("Bytes Read", 0) / MB
    s["output_mb"] += (m.get("Output Metrics") or {}).get("Bytes Written", 0) / MB
    sr = m.get("Shuffle Read Metrics") or {}
    s["shuffle_read_mb"] += (sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0)) / MB
    s["shuffle_write_mb"] += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0) / MB
    s["spill_mb"] += m.get("Disk Bytes Spilled", 0) / MB


def _rounded(s: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()}


def _union_ms(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


# ---- environment ------------------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """Cores, memory and versions of the machine the benchmark ran on."""
    total = total_ram_bytes()
    java = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        r = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
        java = (r.stderr or r.stdout).splitlines()[0] if (r.stderr or r.stdout) else None
    import pyarrow
    import pyspark

    return {"nproc": os.cpu_count(), "total_ram_bytes": total,
            "total_ram_gb": round(total / GB, 1) if total else None,
            "platform": platform.platform(), "python": platform.python_version(), "java": java,
            "pyspark": pyspark.__version__, "pyarrow": pyarrow.__version__}


def _enable_event_log(event_dir: Path) -> None:
    """Turn on Spark's event log for the session created next (spark-submit arguments of the JVM launch)."""
    event_dir.mkdir(parents=True, exist_ok=True)
    current = os.environ.get("PYSPARK_SUBMIT_ARGS", "").replace("pyspark-shell", "").strip()
    os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join(filter(None, [
        current, "--conf spark.eventLog.enabled=true", "--conf spark.eventLog.compress=false",
        f"--conf spark.eventLog.dir={event_dir.resolve().as_uri()}",
        "pyspark-shell"]))


EVENT_LOG = "eventlog"
"""The folder of the work folder that Spark's event log goes to (``start_bench(..., event_log=True)``)."""


def start_bench(name: str, args: argparse.Namespace, *,
                event_log: bool = False) -> tuple[Path, SparkSession, RssSampler, Timer]:
    """What every benchmark starts with: a fresh work folder ``<--workdir>/<name>`` (its event log in
    :data:`EVENT_LOG` when ``event_log``), the JVM's RSS sampler running, the ``local[2]`` session and its timer.
    The caller stops the sampler and the session, and removes the folder."""
    work = args.workdir.resolve() / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if event_log:
        _enable_event_log(work / EVENT_LOG)
    # executors are Python workers started by the JVM: they must import tablecore too
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    sampler = RssSampler()
    sampler.start()
    spark = local_session(f"bench-{name}", cores=2, driver_memory=args.driver_memory)
    return work, spark, sampler, Timer(spark, sampler)


# ---- the benchmark ----------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every step and return the results document."""
    started = dt.datetime.now(dt.UTC)
    work, spark, sampler, timer = start_bench("upsert", args, event_log=args.stage_breakdown)
    event_dir = work / EVENT_LOG
    spark_conf = {k: spark.conf.get(k) for k in ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions",
                                                 "spark.default.parallelism")}
    n_new = args.batch - args.updates
    gen = {"rows": args.rows, "days": args.days, "seed": args.seed}
    checks: dict[str, Any] = {}
    results: dict[str, Any] = {"upsert": {}, "rebuild": {}, "incremental_read": {}, "snapshot_read": {}}
    commits: dict[str, Any] = {}
    try:
        print(f"trips: {args.rows:,} rows over {args.days} days; batches of {args.batch:,} "
              f"({args.updates:,} updates + {n_new:,} new keys); distributions {', '.join(args.distributions)}")
        source = work / "source.parquet"
        with timer.phase("generate_source", timed=False):
            trips(spark.range(args.rows), **gen).write.mode("overwrite").parquet(str(source))

        base_path = work / "base_table"
        config = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                             table_type="COPY_ON_WRITE")
        base = Table.create(str(base_path), config, spark=spark)
        with timer.phase("bulk_insert"):
            base_commit = base.bulk_insert(spark.read.parquet(str(source)))
        commits["bulk_insert"] = base_commit.__dict__

        snapshot = work / "snapshot"
        with timer.phase("snapshot_write"):
            spark.read.parquet(str(source)).write.mode("overwrite").partitionBy("dt").parquet(str(snapshot))
        shutil.rmtree(source)

        for dist in args.distributions:
            print(f"distribution {dist}:")
            batch_path = work / f"batch_{dist}.parquet"
            with timer.phase(f"generate_batch_{dist}", timed=False):
                (batch_rows(spark, dist, batch=args.batch, updates=args.updates, **gen)
                 .coalesce(1).write.mode("overwrite").parquet(str(batch_path)))
            table_path = work / f"table_{dist}"
            shutil.copytree(base_path, table_path)
            t = Table.open(str(table_path), spark=spark)
            prev = t.latest_instant()
            batch = spark.read.parquet(str(batch_path))
            with timer.phase(f"upsert_{dist}"):
                r = t.upsert(batch)
            results["upsert"][dist] = timer.seconds[f"upsert_{dist}"]
            commits[f"upsert_{dist}"] = r.__dict__

            rebuilt = work / f"rebuild_{dist}"
            with timer.phase(f"rebuild_{dist}"):
                rebuild_snapshot(spark, snapshot, spark.read.parquet(str(batch_path)), rebuilt)
            results["rebuild"][dist] = timer.seconds[f"rebuild_{dist}"]

            with timer.phase(f"incremental_read_{dist}"):
                noop_scan(t.read_changes(start=prev, end=r.instant))
            results["incremental_read"][dist] = timer.seconds[f"incremental_read_{dist}"]
            with timer.phase(f"snapshot_read_{dist}"):
                noop_scan(t.read())
            results["snapshot_read"][dist] = timer.seconds[f"snapshot_read_{dist}"]

            with timer.phase(f"verify_{dist}", timed=False):
                expected = args.rows + n_new
                checks[dist] = {
                    "upsert_updated": r.updated, "upsert_inserted": r.inserted,
                    "upsert_counts_ok": r.updated == args.updates and r.inserted == n_new,
                    "table_rows": t.read().count(), "rebuilt_rows": spark.read.parquet(str(rebuilt)).count(),
                    "incremental_rows": t.read_changes(start=prev, end=r.instant).count(),
                    "expected_rows": expected,
                }
                c = checks[dist]
                c["ok"] = (c["upsert_counts_ok"] and c["table_rows"] == expected and c["rebuilt_rows"] == expected
                           and c["incremental_rows"] == args.batch)
                if not c["ok"]:
                    print(f"  WARNING: verification failed for {dist}: {c}")
            if not args.keep_data:
                shutil.rmtree(rebuilt)
                shutil.rmtree(table_path)
    finally:
        sampler.stop()
        spark.stop()
    py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux; before parsing the log
    breakdown = stage_breakdown(event_dir, timer.windows) if args.stage_breakdown else {}
    if not args.keep_data:
        shutil.rmtree(work, ignore_errors=True)

    memory: dict[str, Any] = {
        "driver_python_peak_rss_bytes": py_peak,
        "driver_jvm_peak_rss_bytes": sampler.jvm_peak if sampler.available else None,
        "python_workers_peak_rss_sum_bytes": sampler.workers_peak if sampler.available else None,
        "jvm_peak_rss_by_phase_bytes": sampler.phase_jvm_peak,
        "rss_samples": sampler.samples,
        "spark_driver_memory": args.driver_memory,
    }
    ratios: dict[str, float | None] = {}
    for dist in args.distributions:
        ratios[f"upsert_vs_rebuild_{dist}"] = _ratio(results["upsert"][dist], results["rebuild"][dist])
        ratios[f"incremental_vs_snapshot_read_{dist}"] = _ratio(results["incremental_read"][dist],
                                                                results["snapshot_read"][dist])
    measured: dict[str, float | None] = {
        "upsert_vs_rebuild_recent7": ratios.get("upsert_vs_rebuild_recent7"),
        "upsert_vs_rebuild_uniform": ratios.get("upsert_vs_rebuild_uniform"),
        "incremental_vs_snapshot_read": ratios.get("incremental_vs_snapshot_read_recent7"),
        "driver_python_peak_rss_bytes": py_peak,
        "driver_jvm_peak_rss_bytes": memory["driver_jvm_peak_rss_bytes"],
    }
    targets = {
        name: {"op": op, "target": limit, "measured": _shown(measured[name]), "pass": _within(measured[name], limit)}
        for name, (op, limit) in TARGETS.items()
    }
    return {
        "benchmark": "upsert",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {"rows": args.rows, "days": args.days, "batch": args.batch, "updates": args.updates,
                       "new_keys": n_new, "seed": args.seed, "distributions": args.distributions,
                       "spark": spark_conf,
                       "table": {"table_type": "COPY_ON_WRITE", "record_key": "uuid", "ordering_field": "ts",
                                 "partition_field": "dt", "index_type": "SIMPLE"}},
        "seconds": {**timer.seconds},
        "results_seconds": results,
        "ratios": {k: _shown(v) for k, v in ratios.items()},
        "targets": targets,
        "memory": memory,
        "commits": commits,
        "checks": checks,
        "stage_breakdown": breakdown,
    }


def _within(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None  # unrounded: a target is judged on the exact ratio, the JSON shows it rounded


def _shown(value: float | None) -> float | None:
    return round(value, 4) if value is not None and value < 1000 else value


# ---- output -----------------------------------------------------------------------------------------------------
def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """A bar chart of the timings; False (and a note) when matplotlib is not installed."""
    plt = pyplot()
    if plt is None:
        return False
    res = doc["results_seconds"]
    dists = doc["parameters"]["distributions"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    x = range(len(dists))
    width = 0.38
    panels = (
        (ax1, "Upsert one batch vs rebuild the snapshot",
         (("upsert", "tablecore upsert"), ("rebuild", "snapshot rebuild"))),
        (ax2, "Read the batch's commit vs the whole table (noop sink)",
         (("incremental_read", "incremental read"), ("snapshot_read", "snapshot read"))),
    )
    for ax, title, pair in panels:
        for offset, (key, label) in zip((-width / 2, width / 2), pair, strict=True):
            bars = ax.bar([i + offset for i in x], [res[key][d] for d in dists], width, label=label)
            ax.bar_label(bars, fmt="%.1f s")
        ax.set_xticks(list(x), dists)
        ax.set_ylabel("seconds")
        ax.set_title(title)
        ax.legend()
    p = doc["parameters"]
    fig.suptitle(f"tablecore upsert benchmark: {p['rows']:,} rows, {p['days']} days, batch {p['batch']:,} "
                 f"({doc['date'][:10]}, {doc['machine']['nproc']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _fmt_measured(name: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value / GB:.2f} GB" if name.endswith("_bytes") else f"{value:.3f}"


def summary(doc: dict[str, Any]) -> str:
    """A readable table of the results."""
    lines = []
    res = doc["results_seconds"]
    sec = doc["seconds"]
    lines.append(f"{'phase':<34}{'seconds':>10}")
    lines.append("-" * 44)
    for name in ("bulk_insert", "snapshot_write"):
        lines.append(f"{name:<34}{sec[name]:>10.1f}")
    for d in doc["parameters"]["distributions"]:
        for key in ("upsert", "rebuild", "incremental_read", "snapshot_read"):
            lines.append(f"{key + ' ' + d:<34}{res[key][d]:>10.1f}")
    lines.append("")
    lines.append(f"{'target':<34}{'measured':>12}{'target':>12}  result")
    lines.append("-" * 66)
    for name, t in doc["targets"].items():
        limit = f"<= {t['target'] / GB:.0f} GB" if name.endswith("_bytes") else f"<= {t['target']:.3f}"
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[t["pass"]]
        lines.append(f"{name:<34}{_fmt_measured(name, t['measured']):>12}{limit:>12}  {verdict}")
    mem = doc["memory"]
    if mem.get("python_workers_peak_rss_sum_bytes") is not None:
        lines.append(f"(python workers, peak sum of RSS: {mem['python_workers_peak_rss_sum_bytes'] / GB:.2f} GB)")
    bad = [d for d, c in doc["checks"].items() if not c.get("ok")]
    lines.append("verification: " + ("all row counts as expected" if not bad else f"FAILED for {', '.join(bad)}"))
    return "\n".join(lines)


def breakdown_summary(doc: dict[str, Any], top: int = 6) -> str:
    """Where the time of each timed phase goes: its slowest Spark stages and the time outside Spark jobs."""
    lines = []
    for phase, b in doc.get("stage_breakdown", {}).items():
        if phase not in doc["seconds"]:
            continue
        lines.append(f"{phase}: {b['wall_s']:.1f}s = {b['in_spark_jobs_s']:.1f}s in Spark jobs "
                     f"+ {b['outside_spark_jobs_s']:.1f}s on the driver outside jobs")
        stages = [(j["job"], s) for j in b["jobs"] for s in j["stages"]]
        for job, s in sorted(stages, key=lambda js: -js[1]["wall_s"])[:top]:
            lines.append(f"    job {job:>3} stage {s['stage']:>3} {s['wall_s']:>7.1f}s wall "
                         f"{s['task_run_s']:>7.1f}s tasks x{s['tasks']:<4} in {s['input_records']:>10,} rows  "
                         f"{s['name']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    doc = run(args)
    out: Path = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"results: {out}")
    chart = out.with_suffix(".png")
    if write_chart(doc, chart):
        print(f"chart: {chart}")
    if doc.get("stage_breakdown"):
        print()
        print("where the time goes (slowest stages per phase; wall overlaps when stages run concurrently):")
        print(breakdown_summary(doc))
    print()
    print(summary(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
