"""CDC read benchmark on the trips workload of ``benchmarks/upsert.py`` (issue 23, acceptance 4).

Same seeded data: ``--rows`` trips over ``--days`` days (partition ``dt``), bulk-inserted into a copy-on-write and a
merge-on-read table (simple index). Into each, two upsert batches of ``--batch`` rows (``--updates`` updates, the
rest new keys in the newest day): ``recent7`` (updates in the last 7 days) and ``uniform`` (updates in every day).
Measured in one SparkSession, each read through the ``noop`` sink, median of ``--repeat`` interleaved runs:

* ``cdc_<type>_<batch>``: ``Table.read_cdc`` of that one commit (every change with before and after images);
* ``changes_<type>_<batch>``: ``Table.read_changes`` of the same commit (latest state only), for comparison;
* ``snapshot_<type>``: a snapshot scan of the table.

Target: a CDC read of one commit <= 1/10 of a snapshot scan. The read costs the file groups the commit wrote (each
read as it stood before and after the commit), so the ratio is the commit's share of the table twice over plus a
fixed cost per Spark job: the uniform batch of a copy-on-write table rewrites a file in every partition, i.e. the
whole table, and cannot meet it by construction (reported, not a target).

Results go to ``benchmarks/results/cdc.json`` (+ ``cdc.png``). Run from the repository root: ``make bench-cdc`` or
``python benchmarks/cdc.py [--rows N ...]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from common import git_sha, pyplot, write_results  # noqa: E402
from mor import timed_medians  # noqa: E402
from trips import batch_rows, check_trips_args, machine, noop_scan, start_bench, trips, trips_parser  # noqa: E402

from tablecore import Table, TableConfig  # noqa: E402

TYPES = {"cow": "COPY_ON_WRITE", "mor": "MERGE_ON_READ"}
BATCHES = ("recent7", "uniform")
TARGETS = {f"cdc_{kind}_recent7_vs_snapshot": ("<=", 1 / 10) for kind in TYPES}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = trips_parser(__doc__, "cdc.json", "JSON results")
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs of each read (the median is reported)")
    p.add_argument("--cdc-logs", action="store_true",
                   help="create the tables with CDC log files (hoodie.table.cdc.enabled, DATA_BEFORE_AFTER): a "
                        "copy-on-write commit's changes are then read from them as is")
    args = p.parse_args(argv)
    check_trips_args(p, args)
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every step and return the results document."""
    started = dt.datetime.now(dt.UTC)
    work, spark, sampler, timer = start_bench("cdc", args)
    gen = {"rows": args.rows, "days": args.days, "seed": args.seed}
    out: dict[str, float] = {}
    checks: dict[str, Any] = {"ok": True}
    try:
        print(f"trips: {args.rows:,} rows over {args.days} days; batches of {args.batch:,} ({args.updates:,} "
              f"updates): {', '.join(BATCHES)}")
        source = work / "source.parquet"
        with timer.phase("generate_source", timed=False):
            trips(spark.range(args.rows), **gen).write.mode("overwrite").parquet(str(source))
        batches: dict[str, Path] = {}
        for dist in BATCHES:
            batches[dist] = work / f"batch_{dist}.parquet"
            with timer.phase(f"generate_{dist}", timed=False):
                (batch_rows(spark, dist, batch=args.batch, updates=args.updates, **gen)
                 .coalesce(1).write.mode("overwrite").parquet(str(batches[dist])))
        for kind, table_type in TYPES.items():
            config = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                                 table_type=table_type, cdc_enabled=args.cdc_logs)
            t = Table.create(str(work / f"table_{kind}"), config, spark=spark)
            with timer.phase(f"bulk_insert_{kind}", timed=False):
                t.bulk_insert(spark.read.parquet(str(source)))
            commits: dict[str, tuple[str, str]] = {}  # batch -> (start, end) of its one commit
            for dist in BATCHES:
                start = t.latest_instant()
                with timer.phase(f"upsert_{kind}_{dist}", timed=False):
                    r = t.upsert(spark.read.parquet(str(batches[dist])))
                commits[dist] = (str(start), r.instant)  # version 6: the range is of instant times
                ops = {row["op"]: row["count"] for row in t.read_cdc(*commits[dist]).groupBy("op").count().collect()}
                checks[f"{kind}_{dist}_ops"] = ops
                checks["ok"] &= ops == {"u": args.updates, "i": args.batch - args.updates}
            fns: dict[str, Any] = {f"snapshot_{kind}": lambda t=t: noop_scan(t.read())}
            for dist in BATCHES:
                fns[f"cdc_{kind}_{dist}"] = lambda t=t, c=commits[dist]: noop_scan(t.read_cdc(*c))
                fns[f"changes_{kind}_{dist}"] = lambda t=t, c=commits[dist]: noop_scan(t.read_changes(*c))
            out.update(timed_medians(spark, timer, args.repeat, fns))
        shutil.rmtree(source)
        if not checks["ok"]:
            print(f"  WARNING: verification failed: {checks}")
    finally:
        sampler.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    ratios = {f"cdc_{kind}_{dist}_vs_snapshot": out[f"cdc_{kind}_{dist}"] / out[f"snapshot_{kind}"]
              for kind in TYPES for dist in BATCHES}
    return {
        "benchmark": "cdc",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {"rows": args.rows, "cdc_logs": args.cdc_logs, "days": args.days, "batch": args.batch,
                       "updates": args.updates, "seed": args.seed, "repeat": args.repeat,
                       "driver_memory": args.driver_memory},
        "results_seconds": out,
        "ratios": {k: round(v, 4) for k, v in ratios.items()},
        "seconds": dict(timer.seconds),
        "targets": {name: {"op": op, "target": limit, "measured": round(ratios[name], 4),
                           "pass": ratios[name] <= limit} for name, (op, limit) in TARGETS.items()},
        "checks": checks,
        "jvm_peak_rss_bytes": sampler.jvm_peak if sampler.available else None,
    }


def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Bars per table type: snapshot scan, and the CDC and latest-state reads of one commit of each batch."""
    plt = pyplot()
    if plt is None:
        return False
    res = doc["results_seconds"]
    fig, axes = plt.subplots(1, len(TYPES), figsize=(11, 4.5))
    for ax, kind in zip(axes, TYPES, strict=True):
        bars = [(f"snapshot_{kind}", "snapshot\nscan")]
        bars += [(f"{what}_{kind}_{dist}", f"{what}\n{dist}") for dist in BATCHES for what in ("cdc", "changes")]
        drawn = ax.bar([label for _, label in bars], [res[key] for key, _ in bars])
        ax.bar_label(drawn, fmt="%.2f s")
        ax.set_ylabel("seconds")
        ax.set_title(f"{TYPES[kind].lower()}: one commit vs the table")
    p = doc["parameters"]
    fig.suptitle(f"CDC read of one commit: {p['rows']:,} rows, {p['days']} days, batch {p['batch']:,} "
                 f"({doc['date'][:10]}, {doc['machine']['nproc']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """The timings, the ratios and the targets as text."""
    lines = [f"  {name:34s} {v:8.2f}s" for name, v in doc["results_seconds"].items()]
    lines += [f"  {name:34s} {v:8.3f}" for name, v in doc["ratios"].items()]
    lines += [f"  {name:34s} {t['measured']:8.3f} {t['op']} {t['target']:.3f}  {'PASS' if t['pass'] else 'MISS'}"
              for name, t in doc["targets"].items()]
    lines.append(f"  checks ok: {doc['checks'].get('ok')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the JSON and the chart, print a summary; exit 1 if a target is missed."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    doc = run(args)
    write_results(doc, args.out, write_chart, summary, t0)
    return 0 if all(t["pass"] for t in doc["targets"].values()) and doc["checks"].get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
