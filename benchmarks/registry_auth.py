"""Schema registry auth under abuse: wrong-password timing of known and unknown users, and authenticated reads during
a 16-thread wrong-password flood.

The real server (``lakegate registry serve --auth-config``: uvicorn, one process) runs in a subprocess on 127.0.0.1
with a fresh SQLite store and an auth file of real hashes (PBKDF2-SHA256, 600,000 iterations) and the *default*
``[limits]``. Clients bind their sockets to other loopback addresses (all of 127.0.0.0/8 is this machine) to be
different clients: that is how the timing and the first flood stay under the per-client lockout while every request
is hashed. Phases, one after the other:

* ``timing``: ``--samples`` pairs of wrong-password logins, a known user then an unknown one (a fresh random name),
  each from a fresh client address, on an idle server; the time of each request on an open connection;
* ``reads``: authenticated reads for ``--seconds`` (Basic, the reader's correct password, verified once before) by
  one client process on a keep-alive connection, alternating ``GET /subjects/{s}/versions/latest`` (a framework
  route) and ``GET /schemas/ids/1`` (the fast path), no flood: the baseline;
* ``flood``: the same reads while ``--threads`` threads of another process send wrong passwords for known and
  unknown users as fast as they are answered, each request from another client address (as a distributed attack
  would: no client reaches a lockout, so every one of them is hashed);
* ``flood_one_client``: the same reads while the threads all send from one client address (one attacker): it is
  locked out after 20 failures and answered 429 without hashing.

Targets: the median wrong-password time of unknown users within 10 % of known users'; read p99 < 50 ms during the
floods. Results go to ``benchmarks/results/registry_auth.json`` (date, git sha, machine, parameters, latencies,
statuses, server CPU, targets with pass/fail) and a chart next to it (``.png``, when matplotlib is installed).

Run from the repository root: ``python benchmarks/registry_auth.py [--samples N --seconds S --threads N]``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import http.client
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from common import git_sha, pyplot, write_results
from registry import free_port, machine, percentile

from schema_registry.server.auth import hash_password

REPO = Path(__file__).resolve().parents[1]
READER, READER_PASSWORD = "reader", "reader-secret-0123"
KNOWN = "victim"
TIMING_TARGET = 0.10
READ_P99_TARGET_MS = 50.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--samples", type=int, default=30, help="pairs of wrong-password logins (known, unknown user)")
    p.add_argument("--seconds", type=float, default=20.0, help="length of each read phase (closed-loop reads)")
    p.add_argument("--threads", type=int, default=16, help="threads of the wrong-password flood")
    p.add_argument("--seed", type=int, default=42, help="seed of the unknown user names and passwords")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "registry_auth.json",
                   help="JSON results; the chart is written next to it with a .png suffix")
    args = p.parse_args(argv)
    if args.samples < 3 or args.seconds < 1 or args.threads < 1:
        p.error("need --samples >= 3, --seconds >= 1, --threads >= 1")
    return args


def basic(user: str, password: str) -> str:
    """An ``Authorization`` header value."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Server:
    """``lakegate registry serve --auth-config`` in a subprocess (stopped by its own PID)."""

    def __init__(self, store_url: str, auth_config: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "governance.cli", "registry", "serve", "--host", "127.0.0.1", "--port",
             str(self.port), "--store", store_url, "--auth-config", str(auth_config)],
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

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server so far."""
        import psutil

        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)

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


def timed_request(port: int, source: str, authorization: str, path: str = "/subjects") -> tuple[int, float]:
    """One GET from client address ``source`` on a fresh connection; the time from sending to the whole answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(source, 0))
    try:
        conn.connect()
        t0 = time.perf_counter()
        conn.request("GET", path, headers={"Authorization": authorization})
        r = conn.getresponse()
        r.read()
        return r.status, time.perf_counter() - t0
    finally:
        conn.close()


def timing(port: int, samples: int, rng: random.Random) -> dict[str, Any]:
    """Wrong-password logins of a known and an unknown user, alternating, each from a fresh client address."""
    known: list[float] = []
    unknown: list[float] = []
    statuses: Counter[int] = Counter()
    for i in range(samples):
        for user, into in ((KNOWN, known), (f"nobody-{rng.randrange(10**9)}", unknown)):
            source = f"127.0.{2 + (len(known) + len(unknown)) // 250}.{1 + (len(known) + len(unknown)) % 250}"
            status, seconds = timed_request(port, source, basic(user, f"wrong-{i}-{rng.randrange(10**9)}"))
            statuses[status] += 1
            into.append(seconds)
    med_k, med_u = statistics.median(known), statistics.median(unknown)
    return {"samples": samples, "statuses": dict(statuses),
            "known_ms": {"median": round(med_k * 1000, 2), "mean": round(statistics.fmean(known) * 1000, 2),
                         "min": round(min(known) * 1000, 2), "max": round(max(known) * 1000, 2)},
            "unknown_ms": {"median": round(med_u * 1000, 2), "mean": round(statistics.fmean(unknown) * 1000, 2),
                           "min": round(min(unknown) * 1000, 2), "max": round(max(unknown) * 1000, 2)},
            "median_difference": round(abs(med_u - med_k) / med_k, 4)}


def _reader(port: int, seconds: float, start: Any, out: Any) -> None:
    """One client process: authenticated reads for ``seconds`` on one keep-alive connection, alternating a framework
    route and the fast path."""
    headers = {"Authorization": basic(READER, READER_PASSWORD)}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", "/subjects", headers=headers)  # the password is verified here, once
    conn.getresponse().read()
    start.wait()
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    deadline = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < deadline:
        i += 1
        path = "/subjects/bench/versions/latest" if i % 2 else "/schemas/ids/1"
        t0 = time.perf_counter()
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        latencies.append(time.perf_counter() - t0)
        statuses[r.status] += 1
    conn.close()
    out.put((latencies, dict(statuses)))


def _flood(port: int, threads: int, one_client: bool, stop: Any, out: Any, seed: int) -> None:
    """One process, ``threads`` threads of wrong-password logins until ``stop`` is set."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(seed + n)
        conn = None
        count = 0
        while not stop.is_set():
            # a distributed flood: every request from another address; one attacker: one address, kept alive
            source = "127.0.1.1" if one_client else f"127.{10 + n}.{count // 250 % 250}.{1 + count % 250}"
            if conn is None or not one_client:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(source, 0))
            user = KNOWN if count % 2 else f"nobody-{rng.randrange(10**9)}"
            try:
                conn.request("GET", "/subjects", headers={"Authorization": basic(user, f"x{rng.randrange(10**9)}")})
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException):
                status = -1
                conn.close()
                conn = None
            if not one_client and conn is not None:
                conn.close()
            count += 1
            with lock:
                statuses[status] += 1
        if conn is not None:
            conn.close()

    pool = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=180)
    out.put(dict(statuses))


def read_phase(server: Server, seconds: float, threads: int, flood: str | None, seed: int) -> dict[str, Any]:
    """Reads by one client process, with a flood process running meanwhile (``distributed``, ``one_client``) or
    none."""
    ctx = multiprocessing.get_context("fork")
    start, stop, out, flood_out = ctx.Barrier(2), ctx.Event(), ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=_reader, args=(server.port, seconds, start, out))
    reader.start()
    flooder = None
    if flood is not None:
        flooder = ctx.Process(target=_flood, args=(server.port, threads, flood == "one_client", stop, flood_out,
                                                   seed))
        flooder.start()
        time.sleep(2.0)  # let the flood fill the verification pool first
    cpu0, t0 = server.cpu_seconds(), time.perf_counter()
    start.wait(timeout=120)
    latencies, statuses = out.get(timeout=3600)
    wall, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
    reader.join(timeout=60)
    flood_statuses: dict[int, int] = {}
    if flooder is not None:
        stop.set()
        flood_statuses = flood_out.get(timeout=300)
        flooder.join(timeout=60)
    values = sorted(latencies)
    return {"reads": len(values), "statuses": statuses,
            **{f"p{q}_ms": round(percentile(values, q) * 1000, 3) for q in (50, 95, 99)},
            "max_ms": round(values[-1] * 1000, 3), "wall_s": round(wall, 2),
            "server_cpu_s": round(cpu, 2), "flood": flood, "flood_statuses": flood_statuses}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, run the phases, and return the results document."""
    started = dt.datetime.now(dt.UTC)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="lakegate-bench-auth-") as tmp:
        auth = Path(tmp) / "auth.toml"
        auth.write_text("\n".join(
            f'[[users]]\nname = "{name}"\npassword_hash = "{hash_password(password)}"\nrole = "{role}"\n'
            for name, password, role in ((READER, READER_PASSWORD, "read"),
                                         (KNOWN, "victim-secret-4567", "write"))))
        server = Server(f"sqlite:///{tmp}/registry.db", auth, Path(tmp) / "server.log")
        try:
            with httpx.Client(base_url=server.url, timeout=60, auth=(KNOWN, "victim-secret-4567")) as http:
                r = http.post("/subjects/bench/versions", json={"schema": '{"type":"record","name":"R","fields":'
                                                                          '[{"name":"a","type":"string"}]}'})
                r.raise_for_status()
            results = {"timing": timing(server.port, args.samples, rng)}
            print(f"timing: {results['timing']}")
            for name, flood in (("reads", None), ("flood", "distributed"), ("flood_one_client", "one_client")):
                results[name] = read_phase(server, args.seconds, args.threads, flood, args.seed)
                print(f"{name}: {results[name]}")
        finally:
            server.stop()
    t = results["timing"]
    targets = {
        "unknown_vs_known_median": {"op": "<=", "target": TIMING_TARGET, "measured": t["median_difference"],
                                    "pass": t["median_difference"] <= TIMING_TARGET},
        **{f"{name}_read_p99_ms": {"op": "<", "target": READ_P99_TARGET_MS, "measured": results[name]["p99_ms"],
                                   "pass": results[name]["p99_ms"] < READ_P99_TARGET_MS}
           for name in ("flood", "flood_one_client")},
    }
    return {"benchmark": "registry_auth", "date": started.isoformat(timespec="seconds"),
            "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "git_sha": git_sha(),
            "machine": machine(),
            "parameters": {"samples": args.samples, "seconds": args.seconds, "threads": args.threads,
                           "seed": args.seed, "pbkdf2_iterations": 600_000, "limits": "defaults"},
            "results": results, "targets": targets,
            "checks": {"ok": all(r["statuses"] == {200: r["reads"]} for k, r in results.items() if k != "timing")
                       and set(t["statuses"]) == {401}}}


def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Wrong-password times (known vs unknown) and read percentiles per phase; False without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    t = doc["results"]["timing"]
    bars = left.bar(["known user", "unknown user"], [t["known_ms"]["median"], t["unknown_ms"]["median"]],
                    color=["#4c72b0", "#dd8452"])
    left.bar_label(bars, fmt="%.0f")
    left.set_ylabel("ms (median)")
    left.set_title(f"wrong password, {t['samples']} each: difference {t['median_difference']:.1%}")
    phases = ["reads", "flood", "flood_one_client"]
    labels = ["no flood", f"{doc['parameters']['threads']}-thread flood,\nmany clients",
              f"{doc['parameters']['threads']}-thread flood,\none client"]
    for offset, q, color in ((-0.2, "p50", "#4c72b0"), (0.2, "p99", "#dd8452")):
        bars = right.bar([i + offset for i in range(3)], [doc["results"][p][f"{q}_ms"] for p in phases], width=0.4,
                         label=q, color=color)
        right.bar_label(bars, fmt="%.1f")
    right.axhline(READ_P99_TARGET_MS, color="red", linestyle="--", label=f"p99 target {READ_P99_TARGET_MS:.0f} ms")
    right.set_xticks(range(3), labels)
    right.set_ylabel("ms")
    right.set_title("authenticated reads")
    right.legend()
    fig.suptitle(f"schema registry auth (PBKDF2 600k, default limits; {doc['date'][:10]}, "
                 f"{doc['machine']['nproc']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """A readable table of the results."""
    t = doc["results"]["timing"]
    lines = [f"wrong password, median ms: known {t['known_ms']['median']}, unknown {t['unknown_ms']['median']} "
             f"(difference {t['median_difference']:.1%})", "",
             f"{'phase':<18}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}  flood statuses", "-" * 72]
    for name in ("reads", "flood", "flood_one_client"):
        r = doc["results"][name]
        lines.append(f"{name:<18}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['max_ms']:>9.2f}  "
                     f"{r['flood_statuses']}")
    lines.append("")
    for name, tg in doc["targets"].items():
        lines.append(f"{name:<28}{tg['measured']:>9} {tg['op']} {tg['target']}  {'PASS' if tg['pass'] else 'MISS'}")
    lines.append(f"checks ok: {doc['checks']['ok']}")
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
