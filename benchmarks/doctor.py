"""Doctor benchmark: how long ``lakegate table doctor`` takes on a clean table of 365 daily partitions on disk
(issue 22, acceptance 2: under 10 s), without Spark, and ``--deep`` with it.

The seeded trips data of ``trips.py`` (``--rows`` rows over ``--days`` partitions) is ``bulk_insert``ed into a
copy-on-write and a merge-on-read table (simple index), then ``--upserts`` batches of ``--batch`` rows
(``--updates`` updates spread over all days, new keys in the newest day) are upserted: the merge-on-read table keeps
them in log files, so its check reads logs as well as footers. Building is not timed. Then, per table:

* ``deep``: ``Table.verify(deep=True)`` — every row of every file slice read in Spark tasks (once, the session
  warm);
* after the Spark session is stopped, ``--repeat`` times each:
  * ``verify``: ``tablecore.verify_table(path)`` in this process (the listing, every timeline file, every Parquet
    footer and log file of the latest snapshot, by 16 threads);
  * ``cli``: ``lakegate table doctor PATH --json`` in a fresh Python process, the wall time a user waits (Python
    start-up and imports included); the process also reports whether it loaded pyspark (it must not).

Every check must find the table intact. Results: ``benchmarks/results/doctor.json`` and ``doctor.png``. Run from the
repository root: ``make bench-doctor`` or ``python benchmarks/doctor.py [--rows N ...]``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from common import git_sha, pyplot, write_results  # noqa: E402
from read_path import round_batch  # noqa: E402
from trips import check_trips_args, machine, start_bench, trips, trips_parser  # noqa: E402

from tablecore import Table, TableConfig, verify_table  # noqa: E402
from tablecore.format.file_view import list_table_files  # noqa: E402
from tablecore.io import file_io_for  # noqa: E402

TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
SHORT = {"COPY_ON_WRITE": "cow", "MERGE_ON_READ": "mor"}
TARGET_S = 10.0
CLI = ("import json, sys, time; t0 = time.perf_counter(); from governance.cli import main; "
       "code = main(['table', 'doctor', sys.argv[1], '--json']); "
       "print(json.dumps({'code': code, 'pyspark': 'pyspark' in sys.modules}), file=sys.stderr)")


def parse_args(argv: list[str] | None = None) -> Any:
    """The trips options (``--rows`` defaults to 1M here) and this benchmark's own."""
    p = trips_parser(__doc__, "doctor.json", "results file (JSON; the chart is written next to it)")
    p.set_defaults(rows=1_000_000)
    p.add_argument("--upserts", type=int, default=3, help="upserts after the bulk insert (MOR: left in logs)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each check without Spark; medians are reported")
    args = p.parse_args(argv)
    check_trips_args(p, args)
    if args.repeat < 1 or args.upserts < 0:
        p.error("need --repeat >= 1 and --upserts >= 0")
    return args


def build(spark: Any, work: Path, args: Any) -> dict[str, str]:
    """The two tables (untimed); their paths by table type."""
    gen = {"rows": args.rows, "days": args.days, "seed": args.seed}
    source = work / "source.parquet"
    trips(spark.range(args.rows), **gen).write.mode("overwrite").parquet(str(source))
    batches = []
    for r in range(1, args.upserts + 1):
        path = work / f"batch_{r}.parquet"
        (round_batch(spark, r, batch=args.batch, updates=args.updates, recent=args.days, **gen)
         .coalesce(1).write.mode("overwrite").parquet(str(path)))
        batches.append(path)
    paths = {}
    for tt in TABLE_TYPES:
        config = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                             table_type=tt, index_type="SIMPLE")
        t = Table.create(str(work / f"trips-{SHORT[tt]}"), config, spark=spark)
        t0 = time.perf_counter()
        t.bulk_insert(spark.read.parquet(str(source)))
        for path in batches:
            t.upsert(spark.read.parquet(str(path)))
        print(f"  built {SHORT[tt]} in {time.perf_counter() - t0:.0f} s", flush=True)
        paths[tt] = t.path
    return paths


def cli_run(path: str) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One ``lakegate table doctor PATH --json`` in a fresh process: wall seconds, its report, its exit status."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CLI, path], capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - t0
    status = json.loads(out.stderr.strip().splitlines()[-1])
    return seconds, json.loads(out.stdout), status


def run(args: Any) -> dict[str, Any]:
    """Build both tables, time the checks, return the results document."""
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    work, spark, sampler, _timer = start_bench("doctor", args)
    results: dict[str, Any] = {}
    try:
        print(f"{args.rows:,} rows over {args.days} days, {args.upserts} upserts of {args.batch:,} rows", flush=True)
        paths = build(spark, work, args)
        for tt, path in paths.items():
            files = list_table_files(file_io_for(path))
            t0 = time.perf_counter()
            deep = Table.open(path, spark=spark).verify(deep=True)
            deep_s = time.perf_counter() - t0
            print(f"  {SHORT[tt]} deep: {deep_s:.2f} s, ok {deep.ok}", flush=True)
            results[tt] = {"path": path, "base_files": len(files.bases), "log_files": len(files.logs),
                           "deep_s": round(deep_s, 3), "deep_ok": deep.ok}
        sampler.stop()
        spark.stop()  # what follows needs no Spark
        for tt, path in paths.items():
            r = results[tt]
            verify_s, oks = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                report = verify_table(path)
                verify_s.append(round(time.perf_counter() - t0, 3))
                oks.append(report.ok)
            cli_s, codes, spark_loaded = [], [], []
            for _ in range(args.repeat):
                seconds, doc, status = cli_run(path)
                cli_s.append(round(seconds, 3))
                codes.append(status["code"])
                spark_loaded.append(status["pyspark"])
                oks.append(doc["ok"])
            r.update(partitions=report.partitions, files_checked=report.files_checked, verify_s=verify_s,
                     verify_median_s=statistics.median(verify_s), cli_s=cli_s, cli_median_s=statistics.median(cli_s),
                     cli_exit_codes=codes, cli_loaded_pyspark=any(spark_loaded), all_ok=all(oks) and r["deep_ok"])
            print(f"  {SHORT[tt]}: verify median {r['verify_median_s']:.2f} s, cli median {r['cli_median_s']:.2f} s",
                  flush=True)
    finally:
        sampler.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    checks_ok = all(r["all_ok"] and not r["cli_loaded_pyspark"] and set(r["cli_exit_codes"]) == {0}
                    for r in results.values())
    return {
        "benchmark": "doctor",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_1_5_15": {"start": [round(x, 2) for x in load_start],
                                "end": [round(x, 2) for x in os.getloadavg()]},
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {"rows": args.rows, "days": args.days, "batch": args.batch, "updates": args.updates,
                       "upserts": args.upserts, "repeat": args.repeat, "seed": args.seed,
                       "driver_memory": args.driver_memory, "target_s": TARGET_S},
        "summary": {"checks_ok": checks_ok,
                    "target_met": all(r["cli_median_s"] < TARGET_S for r in results.values()),
                    **{f"{SHORT[tt]}_cli_median_s": r["cli_median_s"] for tt, r in results.items()}},
        "results": {SHORT[tt]: {k: v for k, v in r.items() if k != "path"} for tt, r in results.items()},
    }


def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Median seconds of each check per table type, and the target."""
    plt = pyplot()
    if plt is None:
        return False
    labels = list(doc["results"])
    series = [("verify (in process)", "verify_median_s"), ("lakegate table doctor", "cli_median_s"),
              ("--deep (Spark)", "deep_s")]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.25
    for i, (name, key) in enumerate(series):
        values = [doc["results"][t][key] for t in labels]
        bars = ax.bar([x + (i - 1) * width for x in range(len(labels))], values, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(doc["parameters"]["target_s"], color="red", linestyle="--", linewidth=1, label="target (doctor)")
    ax.set_xticks(range(len(labels)), [f"{t} ({doc['results'][t]['partitions']} partitions)" for t in labels])
    ax.set_ylabel("seconds")
    ax.set_title(f"table doctor, {doc['parameters']['rows']:,} rows, clean table on disk")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """A readable table of the medians, the target and the checks."""
    lines = [f"{'table':<6}{'partitions':>11}{'base/log files':>16}{'verify s':>10}{'doctor s':>10}{'deep s':>9}"]
    for t, r in doc["results"].items():
        lines.append(f"{t:<6}{r['partitions']:>11}{r['base_files']:>9}/{r['log_files']:<6}{r['verify_median_s']:>10.2f}"
                     f"{r['cli_median_s']:>10.2f}{r['deep_s']:>9.2f}")
    s = doc["summary"]
    lines.append(f"target: doctor under {doc['parameters']['target_s']:.0f} s: {'met' if s['target_met'] else 'MISSED'}"
                 f"; checks (intact, exit 0, no pyspark): {'ok' if s['checks_ok'] else 'FAILED'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run, write the JSON and the chart, print the summary; exit 1 if a check failed or the target was missed."""
    t0 = time.perf_counter()
    args = parse_args(argv)
    doc = run(args)
    write_results(doc, args.out, write_chart, summary, t0)
    return 0 if doc["summary"]["checks_ok"] and doc["summary"]["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
