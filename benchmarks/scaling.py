"""Scaling benchmark (issue 19, acceptance 2): the same kind of upsert batch into a ``--rows`` and a ``--large-rows``
table. With an index whose cost follows the batch, the upsert into the large table costs about what it costs into
the small one (target: <= 1.3x).

Tables: merge-on-read, partitioned by day (``--days``), loaded with Arrow bulk inserts of ``--load-chunk`` rows
from rows generated with numpy (seeded: a key, the day, a timestamp, a fare, a city). Each index is measured on both
sizes:

* ``RECORD_INDEX`` (version 8, the metadata table with ``files`` and the record index): the batch's keys are looked
  up in the index;
* ``SIMPLE`` (reported): the keys of every partition the batch touches are read; a batch of updates spread over
  every day reads every key of the table.

A batch holds ``--updates`` keys drawn uniformly from the whole table (updates anywhere) and new keys in the newest
day; ``--repeat`` batches per table, the median reported, with the driver's and the JVM's peak RSS.

Results: ``benchmarks/results/scaling.json`` and ``scaling.png``. Run from the repository root:
``make bench-scaling`` or ``python benchmarks/scaling.py [--rows N --large-rows M ...]``.
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
from trips import CITIES, check_trips_args, machine, start_bench, trips_parser  # noqa: E402

from tablecore import Table, TableConfig  # noqa: E402

TARGETS: dict[str, tuple[str, float]] = {"record_index_upsert_large_vs_small": ("<=", 1.3)}
INDEXES = ("RECORD_INDEX", "SIMPLE")
FIRST_DAY = dt.date(2024, 1, 1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (the trips options and this benchmark's)."""
    p = trips_parser(__doc__, "scaling.json", "JSON results; the chart is written next to it with a .png suffix")
    p.add_argument("--large-rows", type=int, default=50_000_000, help="rows of the large table")
    p.add_argument("--repeat", type=int, default=3, help="upsert batches per table (median reported)")
    p.add_argument("--simple-repeat", type=int, default=1, help="upsert batches per table with the simple index")
    p.add_argument("--load-chunk", type=int, default=10_000_000, help="rows per bulk insert of a table's load")
    args = p.parse_args(argv)
    check_trips_args(p, args)
    if args.large_rows <= args.rows:
        p.error("need --large-rows > --rows")
    return args


def keys_of(ids: np.ndarray) -> pa.ChunkedArray:
    """The record keys of row ids (``trip-`` and 12 digits), in chunks of a million (string arrays hold 2 GiB)."""
    chunks = []
    for start in range(0, len(ids), 1_000_000):
        digits = pc.utf8_lpad(pc.cast(pa.array(ids[start:start + 1_000_000], pa.int64()), pa.string()), 12, "0")
        chunks.append(pc.binary_join_element_wise(pa.scalar("trip-"), digits, ""))
    return pa.chunked_array(chunks, pa.string())


def rows_of(ids: np.ndarray, *, rows: int, days: int, seed: int, day: int | None = None) -> pa.Table:
    """Trips of row ids: row ``i`` falls on day ``i * days // rows`` (or ``day``), seeded columns."""
    rng = np.random.default_rng(seed + int(ids[0]) if len(ids) else seed)
    day_index = ids * days // rows if day is None else np.full(len(ids), day)
    dates = [(FIRST_DAY + dt.timedelta(days=int(d))).isoformat() for d in range(days)]
    return pa.table({
        "uuid": keys_of(ids),
        "dt": pa.array(dates, pa.string()).take(pa.array(day_index)),
        "ts": pa.array(day_index * 86_400_000 + rng.integers(0, 86_400_000, len(ids)), pa.int64()),
        "fare": pa.array(np.round(rng.random(len(ids)) * 80, 2)),
        "city": pa.array(CITIES, pa.string()).take(pa.array(rng.integers(0, len(CITIES), len(ids)))),
    })


def batch_file(work: Path, name: str, *, rows: int, days: int, batch: int, updates: int, seed: int,
               next_id: int) -> Path:
    """A batch: ``updates`` existing keys drawn uniformly (a later ``ts``), then new keys in the newest day."""
    rng = np.random.default_rng(seed)
    upd = rows_of(np.sort(rng.choice(rows, updates, replace=False)), rows=rows, days=days, seed=seed + 1)
    upd = upd.set_column(2, "ts", pc.add(upd.column("ts"), pa.scalar(10**12, pa.int64())))
    new = rows_of(np.arange(next_id, next_id + batch - updates), rows=rows, days=days, seed=seed + 2, day=days - 1)
    path = work / f"{name}.parquet"
    pq.write_table(pa.concat_tables([upd, new]), path)
    return path


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load each index's tables, run the batches, return the results document."""
    started = dt.datetime.now(dt.UTC)
    work, spark, sampler, timer = start_bench("scaling", args)
    out: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    try:
        with timer.phase("warm_up", timed=False):  # the JVM and the Python workers start before anything is timed
            warm = Table.create(str(work / "warm"), TableConfig(name="w", record_key=["uuid"], ordering_field="ts",
                                                                partition_fields=["dt"], table_version=8,
                                                                index_type="RECORD_INDEX"), spark=spark)
            warm.bulk_insert(rows_of(np.arange(1000), rows=1000, days=3, seed=1))
            warm.upsert(spark.read.parquet(str(batch_file(work, "warm", rows=1000, days=3, batch=100, updates=80,
                                                          seed=1, next_id=1000))))
            shutil.rmtree(work / "warm", ignore_errors=True)
        for size, rows in (("small", args.rows), ("large", args.large_rows)):
            for index in INDEXES:
                name = f"{index.lower()}_{size}"
                config = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                                     table_type="MERGE_ON_READ", index_type=index,
                                     table_version=8 if index == "RECORD_INDEX" else 6)
                t = Table.create(str(work / name), config, spark=spark)
                print(f"{name}: loading {rows:,} rows", flush=True)
                with timer.phase(f"{name}/load"):  # in chunks: one Arrow bulk insert holds its rows in memory
                    for start in range(0, rows, args.load_chunk):
                        ids = np.arange(start, min(rows, start + args.load_chunk))
                        t.bulk_insert(rows_of(ids, rows=rows, days=args.days, seed=args.seed))
                repeat = args.repeat if index == "RECORD_INDEX" else args.simple_repeat
                seconds, results = [], []
                for r in range(repeat):
                    path = batch_file(work, f"{name}_batch{r}", rows=rows, days=args.days, batch=args.batch,
                                      updates=args.updates, seed=args.seed + 100 * r,
                                      next_id=rows + r * (args.batch - args.updates))
                    with timer.phase(f"{name}/upsert_{r}"):
                        res = t.upsert(spark.read.parquet(str(path)))
                    seconds.append(timer.seconds[f"{name}/upsert_{r}"])
                    results.append((res.updated, res.inserted))
                out[name] = {"rows": rows, "load_seconds": timer.seconds[f"{name}/load"],
                             "upsert_seconds": seconds, "upsert_median": statistics.median(seconds),
                             "updated_inserted": results}
                checks[name] = all(r == (args.updates, args.batch - args.updates) for r in results)
                if index == "RECORD_INDEX":
                    checks[f"{name}_rows"] = t.read().count() == rows + repeat * (args.batch - args.updates)
                shutil.rmtree(work / name, ignore_errors=True)
        checks["ok"] = all(checks.values())
    finally:
        sampler.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    ratio = out["record_index_large"]["upsert_median"] / out["record_index_small"]["upsert_median"]
    measured = {"record_index_upsert_large_vs_small": ratio}
    return {
        "benchmark": "scaling",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {"rows": args.rows, "large_rows": args.large_rows, "load_chunk": args.load_chunk,
                       "days": args.days, "batch": args.batch,
                       "updates": args.updates, "seed": args.seed, "repeat": args.repeat,
                       "simple_repeat": args.simple_repeat, "driver_memory": args.driver_memory},
        "results": out,
        "simple_upsert_large_vs_small": out["simple_large"]["upsert_median"] / out["simple_small"]["upsert_median"],
        "seconds": dict(timer.seconds),
        "targets": {name: {"op": op, "target": limit, "measured": round(measured[name], 4),
                           "pass": measured[name] <= limit}
                    for name, (op, limit) in TARGETS.items()},
        "checks": checks,
        "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm_peak_rss_bytes": sampler.jvm_peak if sampler.available else None,
    }


def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Upsert seconds of each index at both sizes; False (and a note) when matplotlib is not installed."""
    plt = pyplot()
    if plt is None:
        return False
    res, p = doc["results"], doc["parameters"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    for i, index in enumerate(INDEXES):
        values = [res[f"{index.lower()}_{size}"]["upsert_median"] for size in ("small", "large")]
        drawn = ax.bar([x + (i - 0.5) * width for x in range(2)], values, width, label=index)
        ax.bar_label(drawn, fmt="%.1f s")
    ax.set_xticks(range(2), [f"{p['rows']:,} rows", f"{p['large_rows']:,} rows"])
    ax.set_ylabel("seconds per upsert (median)")
    ax.set_title(f"MOR upsert of {p['batch']:,} rows ({p['updates']:,} updates anywhere), {p['days']} days "
                 f"({doc['date'][:10]}, {doc['machine']['nproc']} cores)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the JSON and the chart, print a summary; exit 1 if a target is missed."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    doc = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    write_chart(doc, args.out.with_suffix(".png"))
    for name, r in doc["results"].items():
        print(f"  {name:22s} load {r['load_seconds']:7.1f}s  upsert median {r['upsert_median']:6.2f}s  "
              f"{r['upsert_seconds']}")
    for name, tgt in doc["targets"].items():
        print(f"  {name:38s} {tgt['measured']:7.3f} {tgt['op']} {tgt['target']:.3f}  "
              f"{'PASS' if tgt['pass'] else 'MISS'}")
    print(f"  simple index large vs small: {doc['simple_upsert_large_vs_small']:.2f}x")
    print(f"  checks ok: {doc['checks']['ok']}; {time.perf_counter() - t0:.0f}s")
    return 0 if all(t["pass"] for t in doc["targets"].values()) and doc["checks"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
