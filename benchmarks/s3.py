"""S3 benchmark: trips upserts and snapshot reads on the S3 test server vs local disk, and the object-store requests
each upsert makes, by kind (LIST, GET, HEAD, PUT, DELETE).

Same seeded trips data as ``benchmarks/upsert.py`` (``--rows`` trips over ``--days`` partitions, generated in
Spark). The S3 API is a real ``moto`` server (``moto.server``, started by ``tests/s3server.py``) whose
access log (werkzeug: one line per request) is captured to a file: requests are counted **on the server**, between
two mark requests sent around each measured operation, so every request of the driver and of the executors counts.

For each table type (copy-on-write and merge-on-read, simple index):

* the same table on local disk and on ``s3://lake/...``: ``bulk_insert`` of the base rows, then ``--upserts``
  rounds of ``Table.upsert(batch)`` (local and S3 interleaved, round by round), then ``--reads`` snapshot reads
  (``read()`` through the ``noop`` sink), timed; on S3 the requests of every operation;
* a ``--scale`` times larger table on S3 (``--scale`` x the days and the rows: the same rows per partition) with
  ``--large-upserts`` rounds of the same kind of batch: the requests of upsert 1 there against upsert 1 of the small
  table answer "do requests grow with the table?", upsert ``--upserts`` against upsert 1 "with the timeline?".

Each batch holds ``--updates`` updates spread over the newest ``--recent`` days (a different sample each round,
later ``ts``) and ``--batch - --updates`` new keys in the newest day: every round touches the same partitions.

Results: ``benchmarks/results/s3.json`` and ``s3.png``. Run from the repository root: ``make bench-s3`` or
``python benchmarks/s3.py [--rows N ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import os
import re
import shutil
import statistics
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from common import git_sha, pyplot, write_results  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from trips import (  # noqa: E402
    Timer,
    _hash_int,
    check_trips_args,
    first_id_of_day,
    machine,
    noop_scan,
    start_bench,
    trips,
    trips_parser,
)

from tablecore import Table, TableConfig  # noqa: E402
from tests.s3server import BUCKET, S3Server, start_s3_server  # noqa: E402

KINDS = ("LIST", "GET", "HEAD", "PUT", "DELETE", "OTHER")
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
SHORT = {"COPY_ON_WRITE": "cow", "MERGE_ON_READ": "mor"}
MARK = ".bench-mark"
_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_INSTANT = re.compile(r"^\d{14,17}\.")


# ---- the S3 server and its access log -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One logged request: HTTP method, target (path and query, as sent) and status."""

    method: str
    target: str
    status: int


def classify(req: Request) -> tuple[str, str]:
    """(kind, what): the request kind (LIST, GET, HEAD, PUT, DELETE, OTHER) and what it was for (a partition
    listing, an instant file, a base file, the commit lock...), from its method and object key."""
    parts = urlsplit(req.target)
    path = unquote(parts.path).lstrip("/")
    query = parse_qs(parts.query, keep_blank_values=True)
    key = path.partition("/")[2]
    if not key:  # a request on the bucket
        if req.method == "GET" and ("list-type" in query or "prefix" in query):
            prefix = query.get("prefix", [""])[0]
            recursive = "delimiter" not in query
            return "LIST", _listing_class(prefix.partition("/")[2], recursive)
        if req.method == "POST" and "delete" in query:
            return "DELETE", "objects (bulk delete)"
        return "OTHER", f"{req.method} bucket"
    what = _object_class(key.partition("/")[2])
    if req.method in ("GET", "HEAD", "PUT"):
        return req.method, what
    if req.method == "DELETE":
        return "DELETE", what
    return "OTHER", f"{req.method} {what}"


def _listing_class(rel: str, recursive: bool) -> str:
    """What a LIST of ``rel`` (a prefix relative to the table) is for."""
    rel = rel.rstrip("/")
    if not rel:
        return "whole table (recursive)" if recursive else "table root"
    if rel == ".hoodie":
        return "timeline (.hoodie/)"
    if rel.startswith(".hoodie/"):
        return _object_class(rel + "/")
    return "partition"


def _object_class(rel: str) -> str:
    """What the object at ``rel`` (relative to the table) is."""
    name = rel.rsplit("/", 1)[-1]
    if rel.startswith(".hoodie/"):
        sub = rel[len(".hoodie/"):]
        for prefix, what in ((".aux/lakegate/heartbeat", "heartbeat"), (".aux/lakegate/commit.lock", "commit lock"),
                             (".aux/lakegate/staged", "staged records"), (".temp", "temp (.hoodie/.temp)")):
            if sub.startswith(prefix):
                return what
        if sub == "hoodie.properties":
            return "table properties"
        if "/" not in sub and _INSTANT.match(sub):
            return "instant file"
        return "other .hoodie"
    if name == ".hoodie_partition_metadata":
        return "partition metadata"
    if name.endswith(".parquet"):
        return "base file"
    if ".log." in name:
        return "log file"
    if "." not in name:
        return "directory (prefix)"
    return "other data"


class RequestLog:
    """Counts the requests the server logged between two marks (``HEAD /lake/.bench-mark/<n>``, sent by us and
    waited for in the log, so that every request answered before the mark is in the window)."""

    def __init__(self, server: S3Server, log_path: Path) -> None:
        self.server = server
        self.log_path = log_path
        self._offset = 0
        self._marks = 0
        self._pending: deque[Request] = deque()

    def _read_new(self) -> list[Request]:
        with self.log_path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # complete lines only
        self._offset += end
        out = []
        for line in data[:end].decode("utf-8", "replace").splitlines():
            m = _LINE.search(_ANSI.sub("", line))
            if m:
                out.append(Request(m["method"], m["target"], int(m["status"])))
        return out

    def mark(self, timeout_s: float = 60.0) -> list[Request]:
        """Send a mark; return the requests logged since the previous one."""
        self._marks += 1
        target = f"/{BUCKET}/{MARK}/{self._marks}"
        with contextlib.suppress(urllib.error.HTTPError):  # a 404: the mark is only there to be logged
            urllib.request.urlopen(urllib.request.Request(self.server.endpoint + target, method="HEAD"), timeout=10)
        out: list[Request] = []
        deadline = time.monotonic() + timeout_s
        while True:
            while self._pending:
                req = self._pending.popleft()
                if req.method == "HEAD" and req.target == target:
                    return out
                out.append(req)
            if time.monotonic() > deadline:
                raise RuntimeError(f"mark {target} not seen in {self.log_path} within {timeout_s}s")
            new = self._read_new()
            if not new:
                time.sleep(0.02)
            self._pending.extend(new)

    @contextlib.contextmanager
    def measure(self) -> Iterator[dict[str, Any]]:
        """Count the requests of the ``with`` block (into the dict it yields)."""
        self.mark()  # what came before (table set-up, checks) is not counted
        counts: dict[str, Any] = {}
        yield counts
        counts.update(summarize(self.mark()))


def summarize(reqs: list[Request]) -> dict[str, Any]:
    """Totals by kind, by kind and purpose, and the requests that did not answer 2xx."""
    kinds: Counter[str] = Counter()
    detail: Counter[str] = Counter()
    not_ok: Counter[str] = Counter()
    for r in reqs:
        kind, what = classify(r)
        kinds[kind] += 1
        detail[f"{kind} {what}"] += 1
        if not 200 <= r.status < 300:
            not_ok[f"{kind} {what} -> {r.status}"] += 1
    return {"total": len(reqs), "kinds": {k: kinds.get(k, 0) for k in KINDS},
            "detail": dict(sorted(detail.items())), "not_2xx": dict(sorted(not_ok.items()))}


# ---- workload -------------------------------------------------------------------------------------------------------
def round_batch(spark: SparkSession, round_no: int, *, rows: int, days: int, batch: int, updates: int, recent: int,
                seed: int) -> DataFrame:
    """The batch of upsert ``round_no``: ``updates`` distinct existing keys of the newest ``recent`` days (one per
    equal stride, a different one each round; ``ts`` later than every earlier round's, ``tip`` changed) and new keys
    in the newest day (a fresh id range each round)."""
    lo = first_id_of_day(max(0, days - recent), rows, days)
    stride = (rows - lo) // updates if updates else 1
    if updates and stride < 1:
        raise SystemExit(f"{updates} updates but only {rows - lo} keys in the newest {recent} days; lower --updates")
    k = F.col("id")
    ids = spark.range(updates).select((F.lit(lo) + k * stride + _hash_int(k, seed, 1000 + round_no, stride))
                                      .alias("id"))
    bump = _hash_int(F.xxhash64(F.col("uuid")), seed, 2000 + round_no, 3_600_000)
    upd = (trips(ids, rows=rows, days=days, seed=seed)
           .withColumn("ts", F.col("ts") + F.lit(round_no * 7_200_000) + bump)
           .withColumn("tip", F.round(F.col("tip") + F.lit(0.5 * round_no) + bump / 1_000_000.0, 2)))
    offset = 2 * rows + round_no * batch  # past the base ids; disjoint between rounds
    new = trips(spark.range(offset, offset + batch - updates), rows=rows, days=days, seed=seed, day=F.lit(days - 1))
    return upd.unionByName(new)


def content_hash(df: DataFrame) -> int:
    """An order-independent checksum of the rows' key, ordering value and tip (one aggregate row to the driver)."""
    h = F.pmod(F.xxhash64("uuid", "ts", "tip"), F.lit(1 << 31))
    row = df.select(F.sum(h).alias("h")).first()
    return int(row["h"] or 0) if row is not None else 0


@dataclass
class Bench:
    """What the steps share: the session, the timer, the request log and the options."""

    spark: SparkSession
    timer: Timer
    requests: RequestLog
    args: argparse.Namespace
    work: Path

    def measured(self, storage: str) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """Count the requests of a block on S3 (nothing to count on local disk)."""
        return self.requests.measure() if storage == "s3" else contextlib.nullcontext({})


def run_size(b: Bench, size: str, rows: int, days: int, storages: tuple[str, ...], upserts: int,
             reads: int) -> dict[str, Any]:
    """Every table type at one size: base rows, bulk insert, ``upserts`` rounds (storages interleaved per round),
    ``reads`` snapshot reads, checks. Returns the runs keyed ``<type>/<storage>/<size>``."""
    a, spark, timer = b.args, b.spark, b.timer
    gen = {"rows": rows, "days": days, "seed": a.seed}
    source = b.work / f"source_{size}.parquet"
    with timer.phase(f"generate_{size}", timed=False):
        trips(spark.range(rows), **gen).write.mode("overwrite").parquet(str(source))
        batches = []
        for r in range(1, upserts + 1):
            path = b.work / f"batch_{size}_{r}.parquet"
            (round_batch(spark, r, batch=a.batch, updates=a.updates, recent=a.recent, **gen)
             .coalesce(1).write.mode("overwrite").parquet(str(path)))
            batches.append(path)
    runs: dict[str, Any] = {}
    for tt in TABLE_TYPES:
        tables: dict[str, Table] = {}
        for storage in storages:
            name = f"trips-{SHORT[tt]}-{size}"
            loc = f"s3://{BUCKET}/{name}" if storage == "s3" else str(b.work / name)
            config = TableConfig(name="trips", record_key=["uuid"], ordering_field="ts", partition_fields=["dt"],
                                 table_type=tt, index_type=a.index,
                                 table_version=8 if a.index == "RECORD_INDEX" else 6)
            tables[storage] = Table.create(loc, config, spark=spark)
            runs[f"{tt}/{storage}/{size}"] = {
                "table_type": tt, "storage": storage, "size": size, "rows": rows, "days": days, "location": loc,
                "seconds": {"upserts": [], "snapshot_reads": []},
                "requests": {"upserts": [], "snapshot_reads": []}, "upserts": []}
        for storage, t in tables.items():
            run = runs[f"{tt}/{storage}/{size}"]
            with b.measured(storage) as req, timer.phase(f"{tt}/{storage}/{size}/bulk_insert"):
                t.bulk_insert(spark.read.parquet(str(source)))
            run["seconds"]["bulk_insert"] = timer.seconds[f"{tt}/{storage}/{size}/bulk_insert"]
            run["requests"]["bulk_insert"] = req
        for r, path in enumerate(batches, start=1):
            for storage, t in tables.items():
                run = runs[f"{tt}/{storage}/{size}"]
                phase = f"{tt}/{storage}/{size}/upsert_{r}"
                with b.measured(storage) as req, timer.phase(phase):
                    res = t.upsert(spark.read.parquet(str(path)))
                run["seconds"]["upserts"].append(timer.seconds[phase])
                run["requests"]["upserts"].append(req)
                meta = t.commit_metadata(res.instant)
                run["upserts"].append({
                    "round": r, "completed_writes_before": r, "inserted": res.inserted, "updated": res.updated,
                    "files_written": res.files_written, "bytes_written": res.bytes_written,
                    "partitions_touched": len(meta.partitions()),
                    "log_files_written": sum(1 for s in meta.write_stats if ".log." in (s.file_name or "")),
                })
        for i in range(1, reads + 1):
            for storage, t in tables.items():
                phase = f"{tt}/{storage}/{size}/snapshot_read_{i}"
                with b.measured(storage) as req, timer.phase(phase):
                    noop_scan(t.read())
                runs[f"{tt}/{storage}/{size}"]["seconds"]["snapshot_reads"].append(timer.seconds[phase])
                runs[f"{tt}/{storage}/{size}"]["requests"]["snapshot_reads"].append(req)
        with timer.phase(f"verify_{tt}_{size}", timed=False):
            for storage, t in tables.items():
                run = runs[f"{tt}/{storage}/{size}"]
                expected = rows + upserts * (a.batch - a.updates)
                got = t.read().count()
                counts_ok = all(u["updated"] == a.updates and u["inserted"] == a.batch - a.updates
                                for u in run["upserts"])
                run["checks"] = {"rows": got, "expected_rows": expected, "content_hash": content_hash(t.read()),
                                 "upsert_counts_ok": counts_ok, "ok": got == expected and counts_ok}
            hashes = {runs[f"{tt}/{s}/{size}"]["checks"]["content_hash"] for s in tables}
            for s in tables:
                runs[f"{tt}/{s}/{size}"]["checks"]["same_rows_on_every_storage"] = len(hashes) == 1
                runs[f"{tt}/{s}/{size}"]["checks"]["ok"] &= len(hashes) == 1
            for s in tables:
                if not runs[f"{tt}/{s}/{size}"]["checks"]["ok"]:
                    print(f"  WARNING: verification failed for {tt}/{s}/{size}: {runs[f'{tt}/{s}/{size}']['checks']}")
    return runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (the trips options with small defaults, and this benchmark's)."""
    p = trips_parser(__doc__, "s3.json", "JSON results; the chart is written next to it with a .png suffix")
    p.set_defaults(rows=200_000, days=30, batch=5_000, updates=4_000)
    p.add_argument("--recent", type=int, default=7, help="the updates fall in the newest N days (partitions)")
    p.add_argument("--upserts", type=int, default=10, help="upsert rounds on the small tables (timeline length)")
    p.add_argument("--reads", type=int, default=3, help="snapshot reads of each small table (median reported)")
    p.add_argument("--scale", type=int, default=4, help="the large S3 tables have scale x the days and the rows")
    p.add_argument("--large-upserts", type=int, default=2, help="upsert rounds on the large S3 tables")
    p.add_argument("--index", choices=["SIMPLE", "RECORD_INDEX"], default="SIMPLE",
                   help="the tables' index (RECORD_INDEX: version 8, with the metadata table's files listing and "
                        "record index)")
    args = p.parse_args(argv)
    check_trips_args(p, args)
    if args.upserts < 2 or args.large_upserts < 1 or args.scale < 2 or args.reads < 1:
        p.error("need --upserts >= 2, --large-upserts >= 1, --scale >= 2, --reads >= 1")
    if not 1 <= args.recent <= args.days:
        p.error("need 1 <= --recent <= --days")
    return args


# ---- the benchmark ----------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the S3 server and the session, run both sizes, return the results document."""
    started = dt.datetime.now(dt.UTC)
    scratch = args.workdir.resolve() / "s3-server"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    log_path = scratch / "moto.log"
    server = start_s3_server(log_path=log_path)
    os.environ.update(server.env)  # before the JVM starts: its Python workers (the executors) inherit it
    runs: dict[str, Any] = {}
    large = (args.rows * args.scale, args.days * args.scale)
    try:
        work, spark, sampler, timer = start_bench("s3", args)
        b = Bench(spark, timer, RequestLog(server, log_path), args, work)
        try:
            print(f"small tables: {args.rows:,} rows over {args.days} days, local disk and S3; large tables (S3): "
                  f"{large[0]:,} rows over {large[1]} days; batches of {args.batch:,} ({args.updates:,} updates in "
                  f"the newest {args.recent} days + {args.batch - args.updates:,} new keys)")
            runs.update(run_size(b, "small", args.rows, args.days, ("local", "s3"), args.upserts, args.reads))
            runs.update(run_size(b, "large", large[0], large[1], ("s3",), args.large_upserts, 1))
        finally:
            sampler.stop()
            spark.stop()
            shutil.rmtree(work, ignore_errors=True)
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "benchmark": "s3",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "machine": machine(),
        "parameters": {
            "rows": args.rows, "days": args.days, "large_rows": large[0], "large_days": large[1],
            "batch": args.batch, "updates": args.updates, "new_keys": args.batch - args.updates,
            "updates_in_newest_days": args.recent, "upserts": args.upserts, "large_upserts": args.large_upserts,
            "snapshot_reads": args.reads, "seed": args.seed, "driver_memory": args.driver_memory,
            "table": {"record_key": "uuid", "ordering_field": "ts", "partition_field": "dt",
                      "index_type": args.index, "table_version": 8 if args.index == "RECORD_INDEX" else 6},
            "s3_server": f"moto {importlib.metadata.version('moto')} (moto.server on 127.0.0.1, conditional puts "
                         "made atomic by tests/s3server.py), requests counted from its access log",
        },
        "summary": summarize_runs(runs, args),
        "runs": runs,
    }


def summarize_runs(runs: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Seconds local vs S3, and the requests per upsert by kind at both sizes and both timeline lengths."""
    seconds: dict[str, Any] = {}
    per_upsert: dict[str, Any] = {}
    growth: dict[str, Any] = {}
    last = args.upserts
    for tt in TABLE_TYPES:
        seconds[tt] = {}
        for storage in ("local", "s3"):
            s = runs[f"{tt}/{storage}/small"]["seconds"]
            seconds[tt][storage] = {"bulk_insert": s["bulk_insert"], "upsert_first": s["upserts"][0],
                                    "upsert_median": statistics.median(s["upserts"]),
                                    "snapshot_read_median": statistics.median(s["snapshot_reads"])}
        small, big = runs[f"{tt}/s3/small"], runs[f"{tt}/s3/large"]
        points = {f"{args.days} days, upsert 1": (small, 0), f"{args.days} days, upsert {last}": (small, last - 1),
                  f"{args.days * args.scale} days, upsert 1": (big, 0)}
        per_upsert[tt] = {label: {**run["requests"]["upserts"][i]["kinds"],
                                  "total": run["requests"]["upserts"][i]["total"],
                                  "partitions_touched": run["upserts"][i]["partitions_touched"],
                                  "files_written": run["upserts"][i]["files_written"]}
                          for label, (run, i) in points.items()}
        first, at_last = small["requests"]["upserts"][0], small["requests"]["upserts"][last - 1]
        big_first = big["requests"]["upserts"][0]
        growth[tt] = {
            "table_size": {k: big_first["kinds"][k] - first["kinds"][k] for k in KINDS if k != "OTHER"},
            "timeline": {k: at_last["kinds"][k] - first["kinds"][k] for k in KINDS if k != "OTHER"},
            "totals_by_round": [u["total"] for u in small["requests"]["upserts"]],
            "large_totals_by_round": [u["total"] for u in big["requests"]["upserts"]],
            "snapshot_read_requests": {"small": small["requests"]["snapshot_reads"][0]["kinds"],
                                       "large": big["requests"]["snapshot_reads"][0]["kinds"]},
        }
    return {"seconds": seconds, "requests_per_upsert": per_upsert, "growth": growth,
            "checks_ok": all(r["checks"]["ok"] for r in runs.values())}


# ---- output -----------------------------------------------------------------------------------------------------
def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Seconds local vs S3; requests per upsert by kind at both sizes and timeline lengths; requests by round."""
    plt = pyplot()
    if plt is None:
        return False
    summ, p = doc["summary"], doc["parameters"]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5.2))
    labels = [f"{SHORT[tt].upper()} {what}" for tt in TABLE_TYPES for what in ("upsert", "snapshot read")]
    for offset, storage in ((-0.2, "local"), (0.2, "s3")):
        vals = [summ["seconds"][tt][storage][key] for tt in TABLE_TYPES
                for key in ("upsert_median", "snapshot_read_median")]
        bars = ax1.bar([i + offset for i in range(len(labels))], vals, 0.4,
                       label="local disk" if storage == "local" else "S3 (moto)")
        ax1.bar_label(bars, fmt="%.2f")
    ax1.set_xticks(range(len(labels)), labels, fontsize=8)
    ax1.set_ylabel("seconds (median)")
    ax1.set_title(f"{p['rows']:,} rows, {p['days']} days: local disk vs S3")
    ax1.legend()

    names = [(tt, label) for tt in TABLE_TYPES for label in summ["requests_per_upsert"][tt]]
    bottom = [0] * len(names)
    for kind in KINDS[:-1]:
        vals = [summ["requests_per_upsert"][tt][label][kind] for tt, label in names]
        ax2.bar(range(len(names)), vals, 0.6, bottom=bottom, label=kind)
        bottom = [a + v for a, v in zip(bottom, vals, strict=True)]
    for i, total in enumerate(bottom):
        ax2.text(i, total, str(total), ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(range(len(names)), [f"{SHORT[tt].upper()}\n{label.replace(', ', chr(10))}" for tt, label in names],
                   fontsize=7)
    ax2.set_ylabel("requests")
    ax2.set_title(f"S3 requests per upsert by kind ({p['updates_in_newest_days']} partitions touched)")
    ax2.set_ylim(0, max(bottom) * 1.3)
    ax2.legend(fontsize=8, ncol=3, loc="upper center")

    for shift, tt in ((-0.08, TABLE_TYPES[0]), (0.08, TABLE_TYPES[1])):  # shifted: equal totals stay visible
        g = summ["growth"][tt]
        line = ax3.plot([r + shift for r in range(1, len(g["totals_by_round"]) + 1)], g["totals_by_round"],
                        marker="o", label=f"{SHORT[tt].upper()}, {p['days']} days")
        ax3.plot([r + shift for r in range(1, len(g["large_totals_by_round"]) + 1)], g["large_totals_by_round"],
                 marker="s", markersize=9, linestyle="none", color=line[0].get_color(),
                 label=f"{SHORT[tt].upper()}, {p['large_days']} days")
    ax3.set_xticks(range(1, p["upserts"] + 1))
    ax3.set_xlabel("upsert number (completed writes before it)")
    ax3.set_ylabel("requests")
    ax3.set_ylim(bottom=0)
    ax3.set_title("S3 requests per upsert, by upsert number")
    ax3.legend(fontsize=8)
    fig.suptitle(f"tablecore on S3 (moto) vs local disk: batches of {p['batch']:,} ({doc['date'][:10]}, "
                 f"{doc['machine']['nproc']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """A readable table of the results."""
    s = doc["summary"]
    lines = [f"{'seconds':<16}{'':>8}{'bulk insert':>13}{'upsert 1':>10}{'upsert med':>12}{'read med':>10}"]
    for tt in TABLE_TYPES:
        for storage in ("local", "s3"):
            v = s["seconds"][tt][storage]
            lines.append(f"{tt:<16}{storage:>8}{v['bulk_insert']:>13.2f}{v['upsert_first']:>10.2f}"
                         f"{v['upsert_median']:>12.2f}{v['snapshot_read_median']:>10.2f}")
    lines += ["", f"{'requests per upsert':<40}" + "".join(f"{k:>7}" for k in (*KINDS[:-1], "total"))]
    for tt in TABLE_TYPES:
        for label, v in s["requests_per_upsert"][tt].items():
            lines.append(f"{tt + ', ' + label:<40}" + "".join(f"{v[k]:>7}" for k in (*KINDS[:-1], "total")))
    for tt in TABLE_TYPES:
        g = s["growth"][tt]
        lines.append(f"{tt}: larger table {g['table_size']}; longer timeline {g['timeline']}; "
                     f"totals by round {g['totals_by_round']}")
    lines.append("verification: " + ("row counts, upsert counts and local = S3 rows as expected" if s["checks_ok"]
                                     else "FAILED (see runs.*.checks)"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the JSON and the chart, print a summary; exit 1 if a check failed."""
    t0 = time.perf_counter()
    args = parse_args(argv)
    doc = run(args)
    write_results(doc, args.out, write_chart, summary, t0)
    return 0 if doc["summary"]["checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
