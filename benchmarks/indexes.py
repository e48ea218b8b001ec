"""Which index when (issue 19): the same upsert batches with each index of a ``--rows`` merge-on-read table, on two
shapes of table that platforms have.

* ``daily_anywhere``: trips partitioned by day (``--days``), a batch of ``--updates`` keys drawn uniformly from the
  whole table plus new keys in the newest day (the issue's "updates anywhere").
* ``events_recent``: an event table without partitions whose keys grow with time (``trip-`` and a 12-digit
  sequence), stored in files of ``--file-rows`` rows; a batch updates keys of the newest ``--recent`` share of the
  table (late-arriving updates) and adds new keys.

Indexes: ``SIMPLE`` (reads every key of the partitions the batch touches), ``BLOOM`` (prunes files by the key range
and bloom filter in their footers, then reads the keys of the files left) and ``RECORD_INDEX`` (looks the keys up
in the metadata table's record index; table version 8). Each table is loaded with Arrow bulk inserts of at most
``--load-chunk`` rows (seeded numpy data). Two engines upsert into each table, ``--repeat`` batches each, the
median reported: Spark (the batch a DataFrame read from Parquet, ``local[2]``), then Arrow (the batch a
``pyarrow.Table`` read before the clock starts, planned and written in this process by
``tablecore/arrow_upsert.py``; the later batches carry new keys of their own). Every batch must report exactly its
updates and inserts, and the table must hold every row afterwards.

Peers, on the ``daily_anywhere`` data and batches, in the same run (issue 19, acceptance 1): delta-rs loads the same
rows (partitioned by ``dt``) and merges the same batches (``MERGE`` on ``uuid`` and ``dt``, update all / insert
all; each batch read into Arrow before its clock starts), and Spark rebuilds a Parquet snapshot of the rows with the
first batch merged in (the status quo). Targets: the merge-on-read upsert with the default index (``SIMPLE``) of an
Arrow batch, the input delta-rs's merge takes, <= 1.5x the delta-rs merge and <= 1/20 of the rebuild; the same
ratios are reported for every index and both engines, and delta-rs's own ratio to the rebuild.

Results: ``benchmarks/results/indexes.json`` and ``indexes.png``. Run from the repository root:
``make bench-indexes`` or ``python benchmarks/indexes.py [--rows N ...]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from common import git_sha, pyplot  # noqa: E402
from scaling import rows_of  # noqa: E402
from trips import check_trips_args, machine, rebuild_snapshot, start_bench, trips_parser  # noqa: E402

from tablecore import Table, TableConfig  # noqa: E402

INDEXES = ("SIMPLE", "BLOOM", "RECORD_INDEX")
DEFAULT_INDEX = "SIMPLE"
TARGETS: dict[str, tuple[str, float]] = {"mor_upsert_default_index_vs_delta_rs": ("<=", 1.5),
                                         "mor_upsert_default_index_vs_rebuild": ("<=", 1 / 20)}
WORKLOADS = ("daily_anywhere", "events_recent")
LOAD_RECORD_BYTES = 1024  # the record size a first load estimates (Hudi's default): it sizes the load's files


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (the trips options and this benchmark's)."""
    p = trips_parser(__doc__, "indexes.json", "JSON results; the chart is written next to it with a .png suffix")
    p.add_argument("--repeat", type=int, default=3, help="upsert batches per table (median reported)")
    p.add_argument("--load-chunk", type=int, default=5_000_000, help="rows per bulk insert of a table's load")
    p.add_argument("--file-rows", type=int, default=100_000, help="rows per base file of the event table")
    p.add_argument("--recent", type=float, default=0.02, help="share of the newest keys the event batches update")
    p.add_argument("--indexes", default=",".join(INDEXES), help="indexes to measure, comma-separated")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="workloads to run, comma-separated")
    p.add_argument("--no-peers", dest="peers", action="store_false", help="skip delta-rs and the Spark rebuild")
    args = p.parse_args(argv)
    check_trips_args(p, args)
    args.indexes = tuple(i.strip().upper() for i in args.indexes.split(",") if i.strip())
    if not args.indexes or any(i not in INDEXES for i in args.indexes):
        p.error(f"--indexes takes some of {', '.join(INDEXES)}")
    args.workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    if not args.workloads or any(w not in WORKLOADS for w in args.workloads):
        p.error(f"--workloads takes some of {', '.join(WORKLOADS)}")
    if not 0 < args.recent <= 1 or args.updates > args.rows * args.recent:
        p.error("need 0 < --recent <= 1 and --updates <= --rows * --recent")
    return args


def config_for(workload: str, index: str, args: argparse.Namespace) -> TableConfig:
    """The table of a workload with an index."""
    common: dict[str, Any] = {"name": "trips", "record_key": ["uuid"], "ordering_field": "ts",
                              "table_type": "MERGE_ON_READ", "index_type": index,
                              "table_version": 8 if index == "RECORD_INDEX" else 6}
    if workload == "daily_anywhere":
        return TableConfig(partition_fields=["dt"], **common)
    size = args.file_rows * LOAD_RECORD_BYTES  # the load writes files of --file-rows rows
    return TableConfig(target_file_size=size, small_file_limit=size // 2, **common)


def batch_file(work: Path, name: str, workload: str, args: argparse.Namespace, r: int) -> Path:
    """Batch ``r``: ``--updates`` existing keys (a later ``ts``), then new keys (the newest day)."""
    rng = np.random.default_rng(args.seed + 100 * r)
    low = 0 if workload == "daily_anywhere" else int(args.rows * (1 - args.recent))
    ids = np.sort(low + rng.choice(args.rows - low, args.updates, replace=False))
    upd = rows_of(ids, rows=args.rows, days=args.days, seed=args.seed + r + 1)
    upd = upd.set_column(2, "ts", pc.add(upd.column("ts"), pa.scalar(10**12, pa.int64())))
    first_new = args.rows + r * (args.batch - args.updates)
    new = rows_of(np.arange(first_new, first_new + args.batch - args.updates), rows=args.rows, days=args.days,
                  seed=args.seed + r + 2, day=args.days - 1)
    path = work / f"{name}_batch{r}.parquet"
    pq.write_table(pa.concat_tables([upd, new]), path)
    return path


def peers(work: Path, spark: Any, args: argparse.Namespace, timer: Any) -> dict[str, Any]:
    """delta-rs's load and merges of the ``daily_anywhere`` data and batches, and Spark's snapshot rebuild."""
    import deltalake

    rows = rows_of(np.arange(args.rows), rows=args.rows, days=args.days, seed=args.seed)
    delta = str(work / "delta")
    with timer.phase("delta_rs/load"):
        deltalake.write_deltalake(delta, rows, partition_by=["dt"])
    merges = []
    for r in range(args.repeat):
        batch = pq.read_table(batch_file(work, "delta", "daily_anywhere", args, r))
        with timer.phase(f"delta_rs/merge_{r}"):
            metrics = (deltalake.DeltaTable(delta).merge(batch, predicate="t.uuid = s.uuid AND t.dt = s.dt",
                                                         source_alias="s", target_alias="t")
                       .when_matched_update_all().when_not_matched_insert_all().execute())
        merges.append(timer.seconds[f"delta_rs/merge_{r}"])
        if (metrics["num_target_rows_updated"], metrics["num_target_rows_inserted"]) != \
                (args.updates, args.batch - args.updates):
            raise RuntimeError(f"delta-rs merge {r} did not update and insert the batch: {metrics}")
    shutil.rmtree(delta, ignore_errors=True)
    snapshot = work / "snapshot"
    pq.write_to_dataset(rows, snapshot, partition_cols=["dt"])
    del rows
    # dt stays a string, as in the batch (Spark would infer a date from the directory names)
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    batch_df = spark.read.parquet(str(batch_file(work, "rebuild", "daily_anywhere", args, 0)))
    with timer.phase("rebuild"):
        rebuild_snapshot(spark, snapshot, batch_df, work / "rebuilt")
    spark.conf.unset("spark.sql.sources.partitionColumnTypeInference.enabled")
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.rmtree(work / "rebuilt", ignore_errors=True)
    return {"deltalake": deltalake.__version__, "delta_rs_load_seconds": timer.seconds["delta_rs/load"],
            "delta_rs_merge_seconds": merges, "delta_rs_merge_median": statistics.median(merges),
            "rebuild_seconds": timer.seconds["rebuild"]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load each workload's table per index, run the batches, return the results document."""
    started = dt.datetime.now(dt.UTC)
    work, spark, sampler, timer = start_bench("indexes", args)
    out: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    try:
        with timer.phase("warm_up", timed=False):  # the JVM and the Python workers start before anything is timed
            warm = Table.create(str(work / "warm"), TableConfig(name="w", record_key=["uuid"], ordering_field="ts",
                                                                partition_fields=["dt"], index_type="BLOOM"),
                                spark=spark)
            warm.bulk_insert(rows_of(np.arange(1000), rows=1000, days=3, seed=1))
            warm.upsert(spark.createDataFrame(rows_of(np.arange(900, 1000), rows=1000, days=3, seed=2)))
            shutil.rmtree(work / "warm", ignore_errors=True)
        peer = peers(work, spark, args, timer) if args.peers and "daily_anywhere" in args.workloads else None
        for workload in args.workloads:
            for index in args.indexes:
                name = f"{workload}_{index.lower()}"
                t = Table.create(str(work / name), config_for(workload, index, args), spark=spark)
                print(f"{name}: loading {args.rows:,} rows", flush=True)
                with timer.phase(f"{name}/load"):
                    for start in range(0, args.rows, args.load_chunk):
                        ids = np.arange(start, min(args.rows, start + args.load_chunk))
                        t.bulk_insert(rows_of(ids, rows=args.rows, days=args.days, seed=args.seed))
                seconds, results = [], []
                for r in range(args.repeat):
                    path = batch_file(work, name, workload, args, r)
                    with timer.phase(f"{name}/upsert_{r}"):
                        res = t.upsert(spark.read.parquet(str(path)))
                    seconds.append(timer.seconds[f"{name}/upsert_{r}"])
                    results.append((res.updated, res.inserted))
                # the same kind of batches as Arrow tables: planned and written in this process (arrow_upsert.py); the
                # batch is read before the clock starts, as delta-rs's is
                arrow_seconds, arrow_results = [], []
                for r in range(args.repeat, 2 * args.repeat):
                    data = pq.read_table(batch_file(work, name, workload, args, r))
                    with timer.phase(f"{name}/arrow_upsert_{r - args.repeat}"):
                        res = t.upsert(data)
                    arrow_seconds.append(timer.seconds[f"{name}/arrow_upsert_{r - args.repeat}"])
                    arrow_results.append((res.updated, res.inserted))
                base_files = sum(1 for _ in (work / name).rglob("*.parquet"))
                out[name] = {"workload": workload, "index": index, "load_seconds": timer.seconds[f"{name}/load"],
                             "upsert_seconds": seconds, "upsert_median": statistics.median(seconds),
                             "updated_inserted": results, "arrow_upsert_seconds": arrow_seconds,
                             "arrow_upsert_median": statistics.median(arrow_seconds),
                             "arrow_updated_inserted": arrow_results, "parquet_files": base_files,
                             "table_bytes": sum(f.stat().st_size for f in (work / name).rglob("*") if f.is_file())}
                # MOR counts updates as written to logs: every batch's updates must be found, its new keys not
                checks[name] = all(u == args.updates and i == args.batch - args.updates
                                   for u, i in results + arrow_results)
                checks[f"{name}_rows"] = t.read().count() == args.rows + 2 * args.repeat * (args.batch - args.updates)
                print(f"  {name}: load {out[name]['load_seconds']:.1f}s, upserts {seconds}, Arrow upserts "
                      f"{arrow_seconds}", flush=True)
                shutil.rmtree(work / name, ignore_errors=True)
        checks["ok"] = all(checks.values())
    finally:
        sampler.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    targets: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    if peer is not None:
        for index in args.indexes:
            upsert = out[f"daily_anywhere_{index.lower()}"]["upsert_median"]
            arrow = out[f"daily_anywhere_{index.lower()}"]["arrow_upsert_median"]
            ratios[index] = {"vs_delta_rs": round(upsert / peer["delta_rs_merge_median"], 3),
                             "vs_rebuild": round(upsert / peer["rebuild_seconds"], 4),
                             "arrow_vs_delta_rs": round(arrow / peer["delta_rs_merge_median"], 3),
                             "arrow_vs_rebuild": round(arrow / peer["rebuild_seconds"], 4)}
        ratios["delta_rs"] = {"vs_rebuild": round(peer["delta_rs_merge_median"] / peer["rebuild_seconds"], 4)}
        if DEFAULT_INDEX in args.indexes:
            measured = {"mor_upsert_default_index_vs_delta_rs": ratios[DEFAULT_INDEX]["arrow_vs_delta_rs"],
                        "mor_upsert_default_index_vs_rebuild": ratios[DEFAULT_INDEX]["arrow_vs_rebuild"]}
            targets = {name: {"op": op, "target": round(limit, 4), "measured": measured[name],
                              "pass": measured[name] <= limit} for name, (op, limit) in TARGETS.items()}
    return {
        "benchmark": "indexes",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {"rows": args.rows, "days": args.days, "batch": args.batch, "updates": args.updates,
                       "seed": args.seed, "repeat": args.repeat, "load_chunk": args.load_chunk,
                       "file_rows": args.file_rows, "recent": args.recent, "indexes": list(args.indexes),
                       "workloads": list(args.workloads),
                       "driver_memory": args.driver_memory},
        "results": out,
        "peers": peer,
        "ratios": ratios,
        "targets": targets,
        "seconds": dict(timer.seconds),
        "checks": checks,
        "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm_peak_rss_bytes": sampler.jvm_peak if sampler.available else None,
    }


def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Upsert seconds of each index on each workload; False (and a note) when matplotlib is not installed."""
    plt = pyplot()
    if plt is None:
        return False
    res, p = doc["results"], doc["parameters"]
    indexes = p["indexes"]
    fig, ax = plt.subplots(figsize=(9, 4.8))
    bars = [(index, engine) for index in indexes for engine in ("Spark", "Arrow")]
    width = 0.8 / len(bars)
    for i, (index, engine) in enumerate(bars):
        field = "upsert_median" if engine == "Spark" else "arrow_upsert_median"
        values = [res[f"{w}_{index.lower()}"][field] for w in p["workloads"]]
        drawn = ax.bar([x + (i - (len(bars) - 1) / 2) * width for x in range(len(values))], values, width,
                       label=f"{index}, {engine}", hatch="//" if engine == "Arrow" else None)
        ax.bar_label(drawn, fmt="%.1f", fontsize=7)
    if doc["peers"]:
        ax.axhline(doc["peers"]["delta_rs_merge_median"], color="grey", linestyle="--",
                   label=f"delta-rs merge (by day) {doc['peers']['delta_rs_merge_median']:.1f} s")
    labels = {"daily_anywhere": f"by day, {p['updates']:,} updates anywhere",
              "events_recent": f"events, {p['updates']:,} updates in newest {p['recent']:.0%}"}
    ax.set_xticks(range(len(p["workloads"])), [labels[w] for w in p["workloads"]])
    ax.set_ylabel("seconds per upsert (median)")
    ax.set_title(f"MOR upsert of {p['batch']:,} rows into {p['rows']:,} ({doc['date'][:10]}, "
                 f"{doc['machine']['nproc']} cores)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the JSON and the chart, print a summary; exit 1 if a check fails."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    doc = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    write_chart(doc, args.out.with_suffix(".png"))
    for name, r in doc["results"].items():
        print(f"  {name:30s} load {r['load_seconds']:7.1f}s  upsert median {r['upsert_median']:6.2f}s  "
              f"{r['upsert_seconds']}  Arrow {r['arrow_upsert_median']:6.2f}s  files {r['parquet_files']}")
    if doc["peers"]:
        print(f"  delta-rs merge median {doc['peers']['delta_rs_merge_median']:.2f}s "
              f"{doc['peers']['delta_rs_merge_seconds']}, Spark rebuild {doc['peers']['rebuild_seconds']:.1f}s")
        for name, r in doc["ratios"].items():
            print(f"  {name:14s} {r}")
    for name, tgt in doc["targets"].items():
        print(f"  {name:38s} {tgt['measured']:7.3f} {tgt['op']} {tgt['target']:.3f}  "
              f"{'PASS' if tgt['pass'] else 'MISS'}")
    print(f"  checks ok: {doc['checks']['ok']}; {time.perf_counter() - t0:.0f}s")
    return 0 if doc["checks"]["ok"] and all(t["pass"] for t in doc["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
