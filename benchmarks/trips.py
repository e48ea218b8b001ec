"""The trips workload and the harness every benchmark shares: seeded trips data generated inside Spark, the
command-line options of a trips benchmark, the RSS sampler, the timer, the stage breakdown from Spark's event log
and the start-up of a benchmark's session."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
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

from common import total_ram_bytes  # noqa: E402
from pyspark.sql import Column, DataFrame, SparkSession, Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablecore.spark.session import local_session  # noqa: E402

GB = 1024**3
MB = 1024**2
DAY_MS = 86_400_000
LAST_DAY = dt.date(2024, 12, 31)  # the newest partition; fixed so that runs are comparable
CITIES = ["san_francisco", "new_york", "chicago", "austin", "seattle", "boston", "denver", "miami", "atlanta",
          "los_angeles", "sao_paulo", "london", "paris", "berlin", "madrid", "chennai", "singapore", "tokyo"]
PAYMENT_TYPES = ["card", "cash", "wallet", "corporate", "voucher"]
STATUSES = ["completed"] * 17 + ["cancelled", "disputed", "refunded"]
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


