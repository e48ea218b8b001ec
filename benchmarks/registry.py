"""Schema registry benchmark: schema lookups by id and registrations checked under BACKWARD_TRANSITIVE.

The real server (``lakegate registry serve``: uvicorn, one process) runs in a subprocess on 127.0.0.1 with a fresh
store: SQLite in a temporary directory by default, or a fresh schema of the PostgreSQL database given by
``--store``. Seeded, deterministic data: ``--clients`` subjects (one per client), each with ``--versions`` versions
of a ``--fields``-field record. Each version keeps the same ``fields - 1`` stable fields (mixed primitive, logical,
nullable, array and map types, drawn from ``--seed``) plus one optional ``["null", "string"]`` field with a null
default whose name changes with the version, so every version can read every earlier one. The versions are seeded
under NONE (no checks, only to build the history fast); then each subject is set to BACKWARD_TRANSITIVE and one
verbose compatibility test per subject checks the history really is transitively compatible (it also parses the
stored versions into the server's cache, as on any server that has been up for a while). Measured, with
``--clients`` client processes, each with its own keep-alive connection (``http.client``, see
:func:`run_concurrently`):

* ``lookup``: ``GET /schemas/ids/{id}`` for ``--lookups`` requests in all, ids drawn at random among the seeded ones;
* ``register``: ``POST /subjects/{s}/versions`` of ``--registers`` new versions in all, each client on its own subject,
  so each one runs the full transitive check against every earlier version (``--versions`` + the client's earlier
  registrations). ``--shared-subject`` makes every client register into one subject instead.

For each: p50 / p95 / p99 / max latency (ms) and throughput (requests/s over the phase's wall time). Targets: lookup
p99 < 10 ms, register p99 < 100 ms. Results go to ``benchmarks/results/registry.json`` (date, git sha, machine,
parameters, latencies, targets with pass/fail, checks), a chart next to it (``.png``, when matplotlib is installed),
and a summary is printed.

Run from the repository root: ``make bench-registry`` or ``python benchmarks/registry.py [--lookups N ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import http.client
import json
import multiprocessing
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
from common import git_sha, pyplot, total_ram_bytes, write_results

REPO = Path(__file__).resolve().parents[1]
GB = 1024**3
TARGETS_MS: dict[str, float] = {"lookup": 10.0, "register": 100.0}
STABLE_TYPES: list[Any] = [
    "string", "string", "long", "long", "int", "double", "boolean",
    {"type": "long", "logicalType": "timestamp-millis"}, {"type": "int", "logicalType": "date"},
    {"type": "array", "items": "string"}, {"type": "map", "values": "long"},
    ["null", "string"], ["null", "long"], ["null", "double"],
]
SUBJECT_PREFIX = "bench-trips"


# ---- arguments ------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--clients", type=int, default=8, help="concurrent clients (processes, one connection each)")
    p.add_argument("--fields", type=int, default=50, help="fields of every schema version")
    p.add_argument("--versions", type=int, default=100, help="versions seeded per subject before measuring")
    p.add_argument("--lookups", type=int, default=8000, help="GET /schemas/ids/{id} requests in all")
    p.add_argument("--registers", type=int, default=200, help="registrations of new versions in all")
    p.add_argument("--warmup", type=int, default=200, help="untimed lookups first (connections, caches)")
    p.add_argument("--shared-subject", action="store_true",
                   help="every client registers into one subject (default: one subject per client)")
    p.add_argument("--store", default=None,
                   help="a PostgreSQL URL (postgresql+psycopg://user@host/db): the run uses a fresh schema there, "
                        "dropped afterwards; default: SQLite in a temporary directory")
    p.add_argument("--seed", type=int, default=42, help="seed of the schemas and of the id draws")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "registry.json",
                   help="JSON results; the chart is written next to it with a .png suffix")
    args = p.parse_args(argv)
    if args.clients < 1 or args.fields < 2 or args.versions < 1 or args.lookups < 1 or args.registers < 1:
        p.error("need --clients >= 1, --fields >= 2, --versions >= 1, --lookups >= 1, --registers >= 1")
    if args.store is not None and not args.store.startswith(("postgresql", "postgres://")):
        p.error("--store takes a PostgreSQL URL; the default store is SQLite in a temporary directory")
    return args


# ---- deterministic schemas ------------------------------------------------------------------------------------------
def stable_fields(count: int, seed: int) -> list[dict[str, Any]]:
    """The fields every version shares (types drawn from ``seed``; nullable ones default to null)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        t = rng.choice(STABLE_TYPES)
        f: dict[str, Any] = {"name": f"f{i:03d}", "type": t, "doc": f"stable field {i}"}
        if isinstance(t, list):
            f["default"] = None
        out.append(f)
    return out


def schema_version(stable: list[dict[str, Any]], version: int) -> str:
    """The text of one version: the stable fields plus ``note_v<version>``, optional with a null default."""
    fields = [*stable, {"name": f"note_v{version}", "type": ["null", "string"], "default": None}]
    return json.dumps({"type": "record", "name": "Trip", "namespace": "lakegate.bench", "fields": fields})


# ---- the server -----------------------------------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Store:
    """The store of one run: a SQLite file in a temporary directory, or a fresh PostgreSQL schema."""

    url: str
    kind: str


@contextlib.contextmanager
def fresh_store(pg_url: str | None) -> Iterator[Store]:
    """A fresh, empty store, removed afterwards."""
    if pg_url is None:
        tmp = Path(tempfile.mkdtemp(prefix="lakegate-bench-registry-"))
        try:
            yield Store(f"sqlite:///{tmp / 'registry.db'}", "sqlite")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    import psycopg

    base = "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    dsn = "postgresql://" + pg_url.split("://", 1)[1]
    name = f"lakegate_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    sep = "&" if "?" in base else "?"
    try:
        yield Store(f"{base}{sep}options=-csearch_path%3D{name}", "postgresql")
    finally:
        drop()


class Server:
    """``lakegate registry serve`` in a subprocess (stopped by its own PID)."""

    def __init__(self, store_url: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "governance.cli", "registry", "serve", "--host", "127.0.0.1",
             "--port", str(self.port), "--store", store_url],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the registry server exited with {self.proc.returncode}; see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the registry server did not start within 60 s; see {log}")
            time.sleep(0.1)

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server so far, its child processes included (None without psutil)."""
        try:
            import psutil
        except ImportError:
            return None
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(self.proc.pid)
            total = 0.0
            for p in (proc, *proc.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    t = p.cpu_times()
                    total += t.user + t.system
            return total
        return None

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 15 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self._log.close()


# ---- measurement ----------------------------------------------------------------------------------------------------
@dataclass
class Phase:
    """Latencies of one measured phase."""

    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float | None = None


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between closest ranks."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(phase: Phase) -> dict[str, Any]:
    """p50/p95/p99/max/mean in ms and throughput in requests/s."""
    values = sorted(phase.latencies_s)
    n = len(values)
    ms = {f"p{q}": round(percentile(values, q) * 1000, 3) for q in (50, 95, 99)}
    return {
        "requests": n, "errors": len(phase.errors), "error_samples": phase.errors[:5], **{f"{k}_ms": v for k, v in
                                                                                          ms.items()},
        "max_ms": round(values[-1] * 1000, 3) if values else None,
        "mean_ms": round(sum(values) / n * 1000, 3) if n else None,
        "wall_s": round(phase.wall_s, 3),
        "throughput_rps": round(n / phase.wall_s, 1) if phase.wall_s > 0 else None,
        "server_cpu_s": round(phase.server_cpu_s, 3) if phase.server_cpu_s is not None else None,
    }


@dataclass(frozen=True)
class Job:
    """One timed request: method, path and JSON body (bytes, or None)."""

    method: str
    path: str
    body: bytes | None = None


def _client_main(port: int, jobs: list[Job], start: Any, results: Any) -> None:
    """One client process: open a keep-alive connection, wait for the start, run the jobs, report the latencies."""
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json",
               "Accept": "application/vnd.schemaregistry.v1+json"}
    local: list[float] = []
    errors: list[str] = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/")  # open the keep-alive connection before the clock starts
    conn.getresponse().read()
    start.wait()
    for job in jobs:
        t0 = time.perf_counter()
        try:
            conn.request(job.method, job.path, body=job.body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            ok, detail = r.status == 200, f"{r.status} {data[:200]!r}"
        except (OSError, http.client.HTTPException) as e:
            ok, detail = False, repr(e)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        local.append(time.perf_counter() - t0)
        if not ok:
            errors.append(detail)
    conn.close()
    results.put((local, errors))


def run_concurrently(server: Server, clients: int, work: list[list[Job]]) -> Phase:
    """Run each client's jobs in its own process on its own keep-alive connection; all start together.

    Clients are separate processes, as real clients are separate services: client threads in one process would
    share one GIL, and a request's client-side work (~0.16 ms with ``http.client``) would queue behind the other
    clients' and be measured as server latency. The clients use the standard library's ``http.client`` (real
    HTTP/1.1 over loopback), which costs about a third of httpx's client CPU per request.
    """
    ctx = multiprocessing.get_context("fork") if sys.platform == "linux" else multiprocessing.get_context("spawn")
    start = ctx.Barrier(clients + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_client_main, args=(server.port, jobs, start, results), name=f"bench-client-{i}")
             for i, jobs in enumerate(work)]
    for p in procs:
        p.start()
    phase = Phase()
    cpu0 = server.cpu_seconds()
    start.wait(timeout=120)
    t0 = time.perf_counter()
    for _ in procs:
        local, errors = results.get(timeout=3600)
        phase.latencies_s.extend(local)
        phase.errors.extend(errors)
    phase.wall_s = time.perf_counter() - t0
    cpu1 = server.cpu_seconds()
    for p in procs:
        p.join(timeout=60)
    phase.server_cpu_s = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return phase


def split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal counts."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


# ---- environment ----------------------------------------------------------------------------------------------------
def git_dirty() -> bool | None:
    """Whether ``schema_registry/`` or this script differ from the commit (results of uncommitted code)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "schema_registry", "benchmarks/registry.py"],
                             cwd=REPO, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip())


def machine() -> dict[str, Any]:
    """Cores, memory, load and versions of the machine the benchmark ran on."""
    total = total_ram_bytes()
    versions = {}
    for package in ("fastapi", "starlette", "uvicorn", "httptools", "uvloop", "sqlalchemy", "avro", "psycopg"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {"nproc": os.cpu_count(), "total_ram_bytes": total,
            "total_ram_gb": round(total / GB, 1) if total else None,
            "load_avg_1m_at_start": round(os.getloadavg()[0], 2), "platform": platform.platform(),
            "python": platform.python_version(), **versions}


# ---- the run --------------------------------------------------------------------------------------------------------
def _check_ok(r: httpx.Response, what: str) -> dict[str, Any]:
    if r.status_code != 200:
        raise SystemExit(f"{what} failed: {r.status_code} {r.text[:500]}")
    data: dict[str, Any] = r.json()
    return data


def seed(server: Server, args: argparse.Namespace, stable: list[dict[str, Any]]) -> tuple[list[str], list[int]]:
    """Register the history of every subject (level NONE while seeding), then switch to BACKWARD_TRANSITIVE and
    verify with a verbose compatibility test that the next version is compatible with the whole history."""
    subjects = [SUBJECT_PREFIX] if args.shared_subject else [f"{SUBJECT_PREFIX}-{i}" for i in range(args.clients)]
    ids: list[int] = []
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for s in subjects:
            _check_ok(http.put(f"/config/{s}", json={"compatibility": "NONE"}), "PUT /config")
            # every subject has the same history, so the ids are shared: the lookups draw from them all the same
            for v in range(1, args.versions + 1):
                reg = _check_ok(http.post(f"/subjects/{s}/versions", json={"schema": schema_version(stable, v)}),
                                "seeding")
                if reg["version"] != v:
                    raise SystemExit(f"seeding {s}: expected version {v}, got {reg}")
                ids.append(reg["id"])
            _check_ok(http.put(f"/config/{s}", json={"compatibility": "BACKWARD_TRANSITIVE"}), "PUT /config")
            probe = _check_ok(http.post(f"/compatibility/subjects/{s}/versions?verbose=true",
                                        json={"schema": schema_version(stable, args.versions + 10_000)}),
                              "compatibility test")
            if probe.get("is_compatible") is not True:
                raise SystemExit(f"the seeded history of {s} is not BACKWARD_TRANSITIVE-compatible: {probe}")
    return subjects, sorted(set(ids))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, seed, measure both phases, and return the results document."""
    started = dt.datetime.now(dt.UTC)
    stable = stable_fields(args.fields - 1, args.seed)
    rng = random.Random(args.seed)
    with fresh_store(args.store) as store, tempfile.TemporaryDirectory(prefix="lakegate-bench-log-") as logdir:
        server = Server(store.url, Path(logdir) / "server.log")
        try:
            t0 = time.perf_counter()
            subjects, ids = seed(server, args, stable)
            seed_s = time.perf_counter() - t0
            print(f"seeded {len(subjects)} subject(s) x {args.versions} versions of {args.fields} fields "
                  f"({len(ids)} distinct ids) in {seed_s:.1f}s on {store.kind}")

            def lookup() -> Job:
                return Job("GET", f"/schemas/ids/{rng.choice(ids)}")

            run_concurrently(server, args.clients, [[lookup() for _ in range(n)]
                                                    for n in split(args.warmup, args.clients)])
            lookups = run_concurrently(server, args.clients, [[lookup() for _ in range(n)]
                                                              for n in split(args.lookups, args.clients)])
            print(f"lookups: {len(lookups.latencies_s)} in {lookups.wall_s:.1f}s")

            counts = split(args.registers, args.clients)
            next_version = iter(range(args.versions + 1, args.versions + 1 + args.registers))
            work = []
            for i, n in enumerate(counts):
                subject = subjects[0] if args.shared_subject else subjects[i]
                work.append([Job("POST", f"/subjects/{subject}/versions",
                                 json.dumps({"schema": schema_version(stable, next(next_version))}).encode())
                             for _ in range(n)])
            registers = run_concurrently(server, args.clients, work)
            print(f"registrations: {len(registers.latencies_s)} in {registers.wall_s:.1f}s")

            with httpx.Client(base_url=server.url, timeout=60) as http:
                versions = {s: len(http.get(f"/subjects/{s}/versions").json()) for s in subjects}
        finally:
            server.stop()

    expected_versions = args.versions * len(subjects) + args.registers
    checks = {
        "lookup_errors": len(lookups.errors), "register_errors": len(registers.errors),
        "versions_per_subject": versions, "versions_total": sum(versions.values()),
        "versions_expected": expected_versions,
    }
    checks["ok"] = not lookups.errors and not registers.errors and checks["versions_total"] == expected_versions
    results = {"lookup": summarize(lookups), "register": summarize(registers)}
    return {
        "benchmark": "registry",
        "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
        "uncommitted_changes": git_dirty(),
        "machine": machine(),
        "parameters": {"clients": args.clients, "fields": args.fields, "versions": args.versions,
                       "lookups": args.lookups, "registers": args.registers, "warmup": args.warmup,
                       "shared_subject": args.shared_subject, "store": store.kind, "seed": args.seed,
                       "distinct_ids": len(ids), "seconds_seeding": round(seed_s, 1)},
        "results": results,
        "targets": {f"{name}_p99_ms": {"op": "<", "target": limit, "measured": results[name]["p99_ms"],
                                       "pass": results[name]["p99_ms"] < limit}
                    for name, limit in TARGETS_MS.items()},
        "checks": checks,
    }


# ---- output ---------------------------------------------------------------------------------------------------------
def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Latency percentiles per operation against its target; False (and a note) without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    titles = {"lookup": "GET /schemas/ids/{id}", "register": "register, BACKWARD_TRANSITIVE check"}
    for ax, name in zip(axes, ("lookup", "register"), strict=True):
        r = doc["results"][name]
        labels = ["p50", "p95", "p99", "max"]
        values = [r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"]]
        bars = ax.bar(labels, values, color=["#4c72b0", "#4c72b0", "#dd8452", "#999999"])
        ax.bar_label(bars, fmt="%.1f")
        ax.axhline(TARGETS_MS[name], color="red", linestyle="--", label=f"p99 target {TARGETS_MS[name]:.0f} ms")
        ax.set_ylabel("ms")
        ax.set_title(f"{titles[name]}\n{r['throughput_rps']:.0f} req/s, {r['requests']} requests")
        ax.legend()
    p = doc["parameters"]
    fig.suptitle(f"schema registry: {p['clients']} clients, {p['fields']} fields, {p['versions']} prior versions, "
                 f"{p['store']} ({doc['date'][:10]}, {doc['machine']['nproc']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """A readable table of the results."""
    lines = [f"{'operation':<10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}{'req/s':>9}{'errors':>8}",
             "-" * 63]
    for name, r in doc["results"].items():
        lines.append(f"{name:<10}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['max_ms']:>9.2f}"
                     f"{r['throughput_rps']:>9.1f}{r['errors']:>8}")
    lines.append("")
    for name, t in doc["targets"].items():
        lines.append(f"{name:<18}{t['measured']:>9.2f} < {t['target']:.0f}  {'PASS' if t['pass'] else 'MISS'}")
    lines.append(f"checks ok: {doc['checks']['ok']} (versions {doc['checks']['versions_total']} of "
                 f"{doc['checks']['versions_expected']} expected)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the JSON (and chart), print a summary; exit 1 if a target or a check fails."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    doc = run(args)
    write_results(doc, args.out, write_chart, summary, t0)
    return 0 if all(t["pass"] for t in doc["targets"].values()) and doc["checks"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
