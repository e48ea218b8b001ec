"""Load, snapshot scan and incremental pull at lake scale, side by side with delta-rs in the same process (issue 19,
acceptance 3): lakegate's Arrow reader (no Spark), lakegate's Spark reader, hudi-rs, and delta-rs.

The seeded trips data of ``trips.py`` (``--rows`` over ``--days`` daily partitions) is generated in Spark and staged
as Parquet once; then, timed:

* **load**: lakegate ``bulk_insert`` of the staged rows into a copy-on-write and a merge-on-read table (version 8),
  through Spark (``local[2]``; a DataFrame over the staged files) and from Arrow (the staged files read into this
  process with ``pyarrow.dataset`` and written by ``tablecore.arrow_writer``, the time of the read included), and
  delta-rs ``write_deltalake`` of the same rows (a pyarrow dataset over the staged files), all partitioned by ``dt``;
  the reads below use the Arrow-loaded tables;
* **upsert**: one batch (``--batch`` rows: ``--updates`` updates anywhere + new keys of the newest day) into each:
  lakegate ``upsert`` (simple index) and delta-rs ``merge`` (update matched, insert not matched) - for context;
* **snapshot scan** (every column of every row into one ``pyarrow.Table`` in this process): lakegate
  ``read_arrow`` (threads), hudi-rs ``HudiTable.read``, delta-rs ``DeltaTable.to_pyarrow_table``; and lakegate's
  Spark read through the ``noop`` sink (rows stay in the JVM); and lakegate ``read_arrow`` of the columns delta-rs
  returns (the data columns, without Hudi's 5 meta columns);
* **incremental pull of one commit** (the upsert's): lakegate ``read_changes_arrow(start=before)``, against the
  snapshot scan of the same table (and lakegate's Spark pull, ``read_changes``, through the ``noop`` sink, against
  the Spark scan); then a second upsert whose updates fall in the newest 7 days, and the pull of
  that commit.

``--repeat`` runs of each read and of the Arrow and delta-rs loads (the Spark loads run once), medians reported;
every read's row count is checked against the table's. Peak RSS of this process (the Arrow readers run here) and of
the JVM are reported. Results: ``benchmarks/results/
lake_read.json`` and ``.png``; ``make bench-lake-read`` or ``python benchmarks/lake_read.py [--rows N ...]``.

Targets (issue 19, acceptance 3): snapshot scan <= 2x delta-rs's; incremental pull of one commit <= 1/10 of a
snapshot scan; load <= 3x delta-rs.
"""

from __future__ import annotations

import gc
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import pyarrow as pa  # noqa: E402
import pyarrow.dataset as pads  # noqa: E402
from common import git_sha, pyplot, write_results  # noqa: E402
from trips import batch_rows, check_trips_args, machine, noop_scan, start_bench, trips, trips_parser  # noqa: E402

from tablecore import Table, TableConfig, read_arrow, read_changes_arrow  # noqa: E402


def _median_run(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        if isinstance(result, pa.Table):
            n = result.num_rows
            del result
            result = n
    return round(statistics.median(times), 3), result


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def main() -> None:
    p = trips_parser(__doc__, "lake_read.json", "results JSON (a .png chart is written next to it)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each read and Arrow / delta-rs load")
    args = p.parse_args()
    check_trips_args(p, args)
    import deltalake
    from hudi import HudiTable

    started = time.perf_counter()
    work, spark, sampler, _timer = start_bench("lake_read", args)
    seconds: dict[str, float] = {}
    rows_seen: dict[str, int] = {}
    try:
        staged = work / "staged"
        trips(spark.range(args.rows), rows=args.rows, days=args.days, seed=args.seed) \
            .write.partitionBy("dt").parquet(str(staged))
        batch_dir = work / "batch"
        batch_rows(spark, "uniform", rows=args.rows, days=args.days, batch=args.batch, updates=args.updates,
                   seed=args.seed).write.parquet(str(batch_dir))
        spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")  # dt stays a string
        base_df, batch_df = spark.read.parquet(str(staged)), spark.read.parquet(str(batch_dir))
        staged_ds = pads.dataset(str(staged), format="parquet",
                                 partitioning=pads.partitioning(pa.schema([("dt", pa.string())]), flavor="hive"))
        batch_arrow = pads.dataset(str(batch_dir), format="parquet").to_table()

        tables: dict[str, Table] = {}
        for ttype in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            name = "cow" if ttype == "COPY_ON_WRITE" else "mor"
            cfg = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                              table_type=ttype, table_version=8)
            # Spark: the staged rows through the executors (the path for loads larger than one process)
            spark_loaded = Table.create(str(work / f"lakegate-{name}-spark"), cfg, spark=spark)
            t0 = time.perf_counter()
            spark_loaded.bulk_insert(base_df)
            seconds[f"load_lakegate_{name}"] = round(time.perf_counter() - t0, 3)
            shutil.rmtree(work / f"lakegate-{name}-spark")
            # Arrow: the staged rows read into this process and written without Spark, as delta-rs does (``--repeat``
            # loads into fresh tables, the median reported; the last one is the table read below)
            times = []
            for k in range(args.repeat):
                shutil.rmtree(work / f"lakegate-{name}", ignore_errors=True)
                gc.collect()
                t = Table.create(str(work / f"lakegate-{name}"), cfg, spark=spark)
                t0 = time.perf_counter()
                t.bulk_insert(staged_ds.to_table())
                times.append(time.perf_counter() - t0)
                seconds[f"load_lakegate_arrow_{name}_{k + 1}"] = round(times[-1], 3)
            seconds[f"load_lakegate_arrow_{name}"] = round(statistics.median(times), 3)
            tables[name] = t
        delta_path = str(work / "delta")
        times = []
        for k in range(args.repeat):
            shutil.rmtree(delta_path, ignore_errors=True)
            gc.collect()
            t0 = time.perf_counter()
            deltalake.write_deltalake(delta_path, staged_ds.scanner().to_reader(), partition_by=["dt"])
            times.append(time.perf_counter() - t0)
            seconds[f"load_delta_rs_{k + 1}"] = round(times[-1], 3)
        seconds["load_delta_rs"] = round(statistics.median(times), 3)

        # the incremental pull starts after the load's completion time (what version-8 ranges compare)
        before = {name: next(i.completed for i in reversed(t.timeline()) if i.completed) for name, t in tables.items()}
        for name, t in tables.items():
            t0 = time.perf_counter()
            t.upsert(batch_df)
            seconds[f"upsert_lakegate_{name}"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        (deltalake.DeltaTable(delta_path).merge(batch_arrow, predicate="t.uuid = s.uuid AND t.dt = s.dt",
                                                source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
        seconds["upsert_delta_rs"] = round(time.perf_counter() - t0, 3)
        expected = args.rows + args.batch - args.updates

        # the columns delta-rs returns: the data columns (a Hudi table adds its 5 meta columns, 2 of them a unique
        # string per row: more than half the bytes of a read of every column)
        data_columns = [f.name for f in deltalake.DeltaTable(delta_path).schema().fields]
        for name, t in tables.items():
            uri = t.uri
            seconds[f"scan_arrow_{name}"], rows_seen[f"scan_arrow_{name}"] = _median_run(
                lambda uri=uri: read_arrow(uri), args.repeat)
            seconds[f"scan_arrow_{name}_data"], rows_seen[f"scan_arrow_{name}_data"] = _median_run(
                lambda uri=uri: read_arrow(uri, columns=data_columns), args.repeat)
            seconds[f"scan_hudi_rs_{name}"], rows_seen[f"scan_hudi_rs_{name}"] = _median_run(
                lambda uri=uri: pa.Table.from_batches(HudiTable(uri).read()), args.repeat)
            seconds[f"scan_spark_{name}"], _ = _median_run(lambda t=t: noop_scan(t.read()), args.repeat)
            start = before[name]
            seconds[f"incremental_arrow_{name}"], rows_seen[f"incremental_arrow_{name}"] = _median_run(
                lambda uri=uri, start=start: read_changes_arrow(uri, start), args.repeat)
            seconds[f"incremental_spark_{name}"], _ = _median_run(
                lambda t=t, start=start: noop_scan(t.read_changes(start)), args.repeat)
        seconds["scan_delta_rs"], rows_seen["scan_delta_rs"] = _median_run(
            lambda: deltalake.DeltaTable(delta_path).to_pyarrow_table(), args.repeat)
        # a second commit whose updates fall in the newest 7 days (the common case of a pipeline every few minutes)
        recent_df = batch_rows(spark, "recent7", rows=args.rows, days=args.days, batch=args.batch,
                               updates=args.updates, seed=args.seed + 1)
        for name, t in tables.items():
            after = next(i.completed for i in reversed(t.timeline()) if i.completed)
            t.upsert(recent_df)
            seconds[f"incremental_recent_arrow_{name}"], n = _median_run(
                lambda uri=t.uri, after=after: read_changes_arrow(uri, after), args.repeat)
            if n != args.batch:
                raise SystemExit(f"the pull of the recent commit of {name} read {n} rows, expected {args.batch}")
        for what, n in rows_seen.items():
            want = args.batch if what.startswith("incremental") else expected
            if n != want:
                raise SystemExit(f"{what} read {n} rows, expected {want}")
        sampler.stop()
        ratios = {
            "load_cow_vs_delta_rs": round(seconds["load_lakegate_cow"] / seconds["load_delta_rs"], 2),
            "load_mor_vs_delta_rs": round(seconds["load_lakegate_mor"] / seconds["load_delta_rs"], 2),
            "load_arrow_cow_vs_delta_rs": round(seconds["load_lakegate_arrow_cow"] / seconds["load_delta_rs"], 2),
            "load_arrow_mor_vs_delta_rs": round(seconds["load_lakegate_arrow_mor"] / seconds["load_delta_rs"], 2),
            "scan_arrow_cow_vs_delta_rs": round(seconds["scan_arrow_cow"] / seconds["scan_delta_rs"], 2),
            "scan_arrow_mor_vs_delta_rs": round(seconds["scan_arrow_mor"] / seconds["scan_delta_rs"], 2),
            "scan_arrow_cow_data_vs_delta_rs": round(seconds["scan_arrow_cow_data"] / seconds["scan_delta_rs"], 2),
            "scan_arrow_mor_data_vs_delta_rs": round(seconds["scan_arrow_mor_data"] / seconds["scan_delta_rs"], 2),
            "incremental_vs_scan_cow": round(seconds["incremental_arrow_cow"] / seconds["scan_arrow_cow"], 3),
            "incremental_vs_scan_mor": round(seconds["incremental_arrow_mor"] / seconds["scan_arrow_mor"], 3),
            "incremental_recent_vs_scan_cow": round(seconds["incremental_recent_arrow_cow"] / seconds["scan_arrow_cow"],
                                                    3),
            "incremental_recent_vs_scan_mor": round(seconds["incremental_recent_arrow_mor"] / seconds["scan_arrow_mor"],
                                                    3),
            "incremental_spark_vs_scan_spark_cow": round(seconds["incremental_spark_cow"] / seconds["scan_spark_cow"],
                                                         3),
            "incremental_spark_vs_scan_spark_mor": round(seconds["incremental_spark_mor"] / seconds["scan_spark_mor"],
                                                         3),
            "upsert_mor_vs_delta_rs": round(seconds["upsert_lakegate_mor"] / seconds["upsert_delta_rs"], 2),
        }
        targets = {
            "scan <= 2x delta-rs (the columns delta-rs returns)": max(ratios["scan_arrow_cow_data_vs_delta_rs"],
                                                                     ratios["scan_arrow_mor_data_vs_delta_rs"]) <= 2.0,
            "scan <= 2x delta-rs (every column: Hudi's 5 meta columns too)": max(
                ratios["scan_arrow_cow_vs_delta_rs"], ratios["scan_arrow_mor_vs_delta_rs"]) <= 2.0,
            "incremental pull of one commit <= 1/10 of a snapshot scan (MOR, updates anywhere)":
                ratios["incremental_vs_scan_mor"] <= 0.1,
            # a COW commit with updates over every day rewrote every file group; its pull reads the row groups of
            # the rows it wrote (a merge writes them apart from the rows it keeps)
            "incremental pull of one commit <= 1/10 of a snapshot scan (COW, updates anywhere)":
                ratios["incremental_vs_scan_cow"] <= 0.1,
            "incremental pull of one commit <= 1/10 of a snapshot scan (updates in the newest 7 days)": max(
                ratios["incremental_recent_vs_scan_cow"], ratios["incremental_recent_vs_scan_mor"]) <= 0.1,
            "load <= 3x delta-rs (Arrow bulk insert, COW and MOR)": max(ratios["load_arrow_cow_vs_delta_rs"],
                                                                        ratios["load_arrow_mor_vs_delta_rs"]) <= 3.0,
            "load <= 3x delta-rs (Spark bulk insert)": min(ratios["load_cow_vs_delta_rs"],
                                                           ratios["load_mor_vs_delta_rs"]) <= 3.0,
        }
        doc = {
            "benchmark": "lake_read", "commit": git_sha(), "machine": machine(),
            "workload": {"rows": args.rows, "days": args.days, "batch": args.batch, "updates": args.updates,
                         "seed": args.seed, "repeat": args.repeat, "deltalake": deltalake.__version__,
                         "index": "SIMPLE", "table_version": 8},
            "seconds": seconds, "ratios": ratios, "targets_met": targets,
            "peak_rss_mb": {"python_process": _peak_rss_mb(), "jvm": round(sampler.jvm_peak / 2**20, 1),
                            "python_workers": round(sampler.workers_peak / 2**20, 1)},
        }
        write_results(doc, args.out, _chart, _summary, started)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _summary(doc: dict[str, Any]) -> str:
    s, r = doc["seconds"], doc["ratios"]
    lines = [f"{doc['workload']['rows']:,} rows over {doc['workload']['days']} days (seconds, medians)"]
    lines.append(f"load: lakegate Spark COW {s['load_lakegate_cow']}, MOR {s['load_lakegate_mor']} "
                 f"(x{r['load_cow_vs_delta_rs']}, x{r['load_mor_vs_delta_rs']}); lakegate Arrow COW "
                 f"{s['load_lakegate_arrow_cow']}, MOR {s['load_lakegate_arrow_mor']} "
                 f"(x{r['load_arrow_cow_vs_delta_rs']}, x{r['load_arrow_mor_vs_delta_rs']}); "
                 f"delta-rs {s['load_delta_rs']}")
    for name in ("cow", "mor"):
        lines.append(f"{name} scan: arrow {s[f'scan_arrow_{name}']} (data columns {s[f'scan_arrow_{name}_data']}), "
                     f"hudi-rs {s[f'scan_hudi_rs_{name}']}, spark noop {s[f'scan_spark_{name}']}; incremental "
                     f"pull of one commit {s[f'incremental_arrow_{name}']} "
                     f"(Spark noop {s[f'incremental_spark_{name}']})")
    lines.append(f"pull of a commit with updates in the newest 7 days: COW {s['incremental_recent_arrow_cow']}, MOR "
                 f"{s['incremental_recent_arrow_mor']}")
    lines.append(f"delta-rs scan {s['scan_delta_rs']}; upsert: lakegate COW {s['upsert_lakegate_cow']}, MOR "
                 f"{s['upsert_lakegate_mor']}, delta-rs merge {s['upsert_delta_rs']}")
    lines += [f"{'met' if ok else 'NOT met'}: {what}" for what, ok in doc["targets_met"].items()]
    return "\n".join(lines)


def _chart(doc: dict[str, Any], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    s = doc["seconds"]
    groups = {
        "load": [("Spark COW", s["load_lakegate_cow"]), ("Spark MOR", s["load_lakegate_mor"]),
                 ("Arrow COW", s["load_lakegate_arrow_cow"]), ("Arrow MOR", s["load_lakegate_arrow_mor"]),
                 ("delta-rs", s["load_delta_rs"])],
        "snapshot scan": [("arrow COW", s["scan_arrow_cow"]), ("arrow MOR", s["scan_arrow_mor"]),
                          ("arrow COW data", s["scan_arrow_cow_data"]), ("arrow MOR data", s["scan_arrow_mor_data"]),
                          ("hudi-rs COW", s["scan_hudi_rs_cow"]), ("spark COW", s["scan_spark_cow"]),
                          ("delta-rs", s["scan_delta_rs"])],
        "one commit": [("incr. COW", s["incremental_arrow_cow"]), ("incr. MOR", s["incremental_arrow_mor"]),
                       ("incr. 7d COW", s["incremental_recent_arrow_cow"]),
                       ("incr. 7d MOR", s["incremental_recent_arrow_mor"]),
                       ("upsert MOR", s["upsert_lakegate_mor"]), ("delta-rs merge", s["upsert_delta_rs"])],
    }
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.5))
    for ax, (title, bars) in zip(axes, groups.items(), strict=True):
        ax.bar([b[0] for b in bars], [b[1] for b in bars], color="#4C78A8")
        ax.set_title(title)
        ax.set_ylabel("seconds")
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(f"{doc['workload']['rows']:,} trips over {doc['workload']['days']} days (lakegate {doc['commit']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


if __name__ == "__main__":
    main()
