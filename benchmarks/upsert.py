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
import datetime as dt
import json
import os
import resource
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from common import git_sha, pyplot  # noqa: E402
from trips import (  # noqa: E402
    _DIST_RE,
    EVENT_LOG,
    GB,
    batch_rows,
    check_trips_args,
    machine,
    noop_scan,
    rebuild_snapshot,
    stage_breakdown,
    start_bench,
    trips,
    trips_parser,
)

from tablecore import Table, TableConfig  # noqa: E402

TARGETS: dict[str, tuple[str, float]] = {
    "upsert_vs_rebuild_recent7": ("<=", 0.1),
    "upsert_vs_rebuild_uniform": ("<=", 1 / 3),
    "incremental_vs_snapshot_read": ("<=", 0.1),
    "driver_python_peak_rss_bytes": ("<=", 2 * GB),
    "driver_jvm_peak_rss_bytes": ("<=", 2 * GB),
}
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
