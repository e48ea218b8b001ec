"""``lakegate demo``: the whole write path on an embedded default, end to end, in about a minute.

1. starts the schema registry in this process (SQLite, a free port of 127.0.0.1) and registers ``trips-value`` with
   semantic types (rider_age ``age_years``, fare/tip ``non_negative_amount``, currency ``iso_currency``,
   pickup_lat/pickup_lon ``latitude``/``longitude``);
2. writes ``trips.yaml`` (the pipeline), ``trips_suite.yaml`` (its checks) and six JSON-lines files under
   ``landing/`` into the demo folder, so they can be read and rerun with ``lakegate pipeline run``;
3. runs the pipeline: it creates the merge-on-read table ``tables/trips`` and sends every file through the
   write-audit-publish gate — inserts, late-arriving tips on an older day, deletes flagged ``_hoodie_is_deleted``,
   a bad batch whose rows with an age of 900 or a negative fare are quarantined while the rest is published, and a
   batch from a clock-skewed producer (trips dated 2062) that a SQL check blocks, which stops the pipeline;
4. prints a summary: per batch the decision and counts, the timeline, an incremental pull showing the late tips,
   the quarantine counts, the verdicts read back from the commits' metadata and the HTML audit reports.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.panel import Panel
from rich.table import Table as RichTable
from rich.text import Text

if TYPE_CHECKING:
    from governance.audit import AuditRecord
    from tablecore import Table

logger = logging.getLogger(__name__)

SUBJECT = "trips-value"
DAYS = ("2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21")
FUTURE_DAY = "2062-11-21"

TRIPS_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Trip", "namespace": "com.example.rides",
    "doc": "A finished ride, as the ride app reports it.",
    "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "driver", "type": "string"},
        {"name": "dt", "type": "string", "doc": "day of the pickup (UTC), the partition"},
        {"name": "ts", "type": "long", "doc": "event time, ms since the epoch; the latest version of a trip wins"},
        {"name": "rider_age", "type": ["null", "int"], "default": None, "semanticType": "age_years"},
        {"name": "fare", "type": "double", "semanticType": "non_negative_amount"},
        {"name": "tip", "type": "double", "default": 0.0, "semanticType": "non_negative_amount"},
        {"name": "currency", "type": "string", "semanticType": "iso_currency"},
        {"name": "pickup_lat", "type": "double", "semanticType": "latitude"},
        {"name": "pickup_lon", "type": "double", "semanticType": "longitude"},
    ],
}

PIPELINE_YAML = """\
# The demo's pipeline: JSON-lines files landing in landing/ -> the write-audit-publish gate -> a merge-on-read
# table. Rerun it yourself (from this folder) against a registry holding trips-value:
#   lakegate registry serve --port 8081 --store sqlite:///registry.db &
#   LAKEGATE_REGISTRY_URL=http://127.0.0.1:8081 lakegate pipeline run trips.yaml
# (the demo ran it with an embedded registry; a rerun continues after the last committed file)
name: trips-ingest
description: Finished rides from the ride app, one JSON-lines file per batch.
source: {kind: files, path: landing, format: json, pattern: "trips-*.json"}
target:
  path: tables/trips
  name: trips
  record_key: [uuid]
  ordering_field: ts
  partition_fields: [dt]
  table_type: MERGE_ON_READ
  operation: upsert           # rows flagged _hoodie_is_deleted: true are deletes
registry: {url: "${LAKEGATE_REGISTRY_URL}", subject: trips-value}
gate:
  evolution: refuse           # a batch whose columns differ from trips-value is refused
  schema_check: block         # structure of every row against the registered schema
  semantic_check: quarantine  # rows breaking a semantic type (age 900, negative fare) go to the quarantine table
  on_block: abort             # a blocked batch publishes nothing and stops the pipeline (exit 5)
validators: trips_suite.yaml
"""

SUITE_YAML = """\
# Checks of the demo's pipeline, on top of the two the gate adds from the registry:
#   registry.schema   - every row conforms to the latest trips-value
#   registry.semantic - every semanticType of trips-value (age_years, non_negative_amount, iso_currency, latitude,
#                       longitude); its policy is the pipeline's gate.semantic_check (quarantine)
name: trips_quality
sample_size: 5
checks:
  - name: no_future_trips
    kind: sql
    form: zero_rows
    description: a producer with a broken clock must not write trips dated years ahead
    query: SELECT uuid, dt, ts FROM {changes} WHERE dt > '2030-01-01'
    policy: block
  - name: tips_below_fare
    kind: sql
    form: zero_rows
    description: a tip larger than the fare is unusual; worth a look, not a reason to stop
    query: SELECT uuid, fare, tip FROM {changes} WHERE tip > fare
    policy: warn
"""


@dataclass
class _Step:
    """One landing file of the demo and what it stands for."""

    file: str
    story: str
    rows: list[dict[str, Any]] = field(default_factory=list)


def _ms(day: str, seconds: int) -> int:
    return int(dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp() * 1000) + seconds * 1000


def _trip(rng: random.Random, i: int, day: str) -> dict[str, Any]:
    fare = round(rng.uniform(6, 60), 2)
    return {"uuid": f"trip-{i:06d}", "driver": f"driver-{rng.randint(1, 25):03d}", "dt": day,
            "ts": _ms(day, rng.randint(6 * 3600, 23 * 3600)), "rider_age": rng.randint(18, 80), "fare": fare,
            "tip": 0.0, "currency": rng.choice(("USD", "USD", "USD", "EUR")),
            "pickup_lat": round(rng.uniform(37.70, 37.81), 5), "pickup_lon": round(rng.uniform(-122.51, -122.38), 5)}


def _tipped(row: dict[str, Any], rng: random.Random, later_day: str) -> dict[str, Any]:
    """A late-arriving version of ``row`` with a tip (event time on a later day: it wins)."""
    return {**row, "ts": _ms(later_day, rng.randint(0, 3600)), "tip": round(row["fare"] * rng.uniform(0.1, 0.25), 2)}


def build_batches(seed: int = 7) -> list[_Step]:
    """The six landing files: inserts, late tips, a bad batch, deletes, more inserts, a clock-skewed batch."""
    rng = random.Random(seed)
    d1, d2, d3, d4 = DAYS
    day1 = [_trip(rng, i, d1) for i in range(400)]
    day2 = [_trip(rng, i, d2) for i in range(400, 800)]
    day3 = [_trip(rng, i, d3) for i in range(800, 1100)]
    day4 = [_trip(rng, i, d4) for i in range(1100, 1300)]
    bad_age = set(range(800, 1100, 50))  # 6 rows
    bad_fare = {815, 842, 977, 1033}  # 4 rows
    for r in day3:
        n = int(r["uuid"][5:])
        if n in bad_age:
            r["rider_age"] = 900
        if n in bad_fare:
            r["fare"] = -round(r["fare"], 2)
    steps = [
        _Step("trips-0001.json", f"{len(day1)} new trips on {d1}", day1),
        _Step("trips-0002.json", f"{len(day2)} new trips on {d2} + 60 late tips for {d1}",
              day2 + [_tipped(r, rng, d2) for r in day1[:60]]),
        _Step("trips-0003.json", f"{len(day3)} new trips on {d3}, 10 of them bad (age 900, negative fare)", day3),
        _Step("trips-0004.json", f"25 cancelled trips of {d2} deleted + 40 late tips for {d2}",
              [{**r, "ts": _ms(d3, 7200), "_hoodie_is_deleted": True} for r in day2[100:125]]
              + [_tipped(r, rng, d3) for r in day2[:40]]),
        _Step("trips-0005.json", f"{len(day4)} new trips on {d4} + 30 late tips for {d3}",
              day4 + [_tipped(r, rng, d4) for r in day3[101:131]]),
        _Step("trips-0006.json", f"a producer with a broken clock: 50 trips dated {FUTURE_DAY}",
              [{**_trip(rng, i, FUTURE_DAY)} for i in range(1300, 1350)]),
    ]
    return steps


def write_demo_files(root: Path, data_root: str | None = None) -> list[_Step]:
    """Write the schema, the pipeline, the suite and the landing files into ``root`` (old demo output removed).

    With ``data_root`` (an object-store URI such as ``s3://bucket/demo``), the landing files and the tables go there
    instead, through tablecore's FileIO, and the pipeline names them by URI; ``root`` keeps the local files (the
    pipeline, the suite, the schema and the registry's SQLite database)."""
    from tablecore.io import file_io_for

    for name in ("tables", "landing"):
        shutil.rmtree(root / name, ignore_errors=True)
    for name in ("registry.db", "trips.avsc", "trips.yaml", "trips_suite.yaml"):
        (root / name).unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    pipeline = PIPELINE_YAML
    if data_root is not None:
        pipeline = (pipeline.replace("path: landing,", f"path: {data_root}/landing,")
                    .replace("path: tables/trips", f"path: {data_root}/tables/trips"))
    (root / "trips.avsc").write_text(json.dumps(TRIPS_SCHEMA, indent=2) + "\n", encoding="utf-8")
    (root / "trips.yaml").write_text(pipeline, encoding="utf-8")
    (root / "trips_suite.yaml").write_text(SUITE_YAML, encoding="utf-8")
    steps = build_batches()
    texts = {step.file: "".join(json.dumps(r) + "\n" for r in step.rows).encode("utf-8") for step in steps}
    if data_root is None:
        landing = root / "landing"
        landing.mkdir()
        for name, data in texts.items():
            (landing / name).write_bytes(data)
        return steps
    store = file_io_for(data_root)
    for name in ("tables", "landing"):
        store.delete_dir(store.join(name))
    for name, data in texts.items():
        store.write_bytes(store.join("landing", name), data)
    return steps


def _console(out: TextIO) -> Console:
    terminal = hasattr(out, "isatty") and out.isatty()
    return Console(file=out, width=None if terminal else 120, highlight=False, soft_wrap=False)


_STYLES = {"published": "green", "quarantined": "yellow", "blocked": "bold red", "kept": "magenta",
           "skipped": "yellow", "refused": "bold red"}


def _decision(value: str) -> Text:
    return Text(value, style=_STYLES.get(value, ""))


def run_demo(out: TextIO, base_dir: str | None = None) -> str:
    """Run the demo, printing to ``out``; returns the target table's path (see the module docstring).

    ``base_dir``: a local folder, or an object-store URI (``s3://bucket/demo``: the tables and the landing files go
    there, the pipeline file and the registry's database into a new local temporary folder)."""
    from governance.embedded_registry import EmbeddedRegistry
    from schema_registry import RegistryClient
    from tablecore.io import LocalFileIO, file_io_for

    t0 = time.monotonic()
    console = _console(out)
    data_root: str | None = None
    if base_dir is not None and not isinstance(file_io_for(base_dir), LocalFileIO):
        data_root = base_dir.rstrip("/")
    local = None if data_root is not None else base_dir
    root = Path(local or tempfile.mkdtemp(prefix="lakegate-demo-")).resolve()
    console.print(Text("lakegate demo", style="bold")
                  + Text(f" — governed writes to a Hudi table, in {data_root or root}"))
    if data_root is not None:
        console.print(Text(f"  tables and landing files in {data_root}; the pipeline, its checks and the registry's "
                           f"database in {root}", style="dim"), soft_wrap=True)
    steps = write_demo_files(root, data_root)
    with EmbeddedRegistry(f"sqlite:///{root / 'registry.db'}") as server, RegistryClient(server.url) as client:
        reg = client.register(SUBJECT, json.dumps(TRIPS_SCHEMA))
        bound = ", ".join(f"{f['name']} {f['semanticType']}" for f in TRIPS_SCHEMA["fields"] if "semanticType" in f)
        console.print(f"schema registry (in-process, SQLite) on {server.url}: registered {SUBJECT} "
                      f"v{reg.version} (id {reg.id})")
        console.print(Text(f"  semantic types: {bound}", style="dim"), soft_wrap=True)
        console.print(f"pipeline {root / 'trips.yaml'}, checks {root / 'trips_suite.yaml'}, "
                      f"{len(steps)} files in {data_root or root}/landing", soft_wrap=True)
        path = _run(console, root, steps, client, t0)
    console.print(Text(f"\ndone in {time.monotonic() - t0:.0f}s", style="bold"))
    return path


def _run(console: Console, root: Path, steps: list[_Step], client: Any, t0: float) -> str:
    from governance.errors import BatchBlockedError
    from governance.pipeline import PipelineRunner, load_pipeline
    from tablecore.spark.session import session_from_env

    stories = {s.file: s.story for s in steps}
    spark = session_from_env("lakegate-demo")
    console.print(Text(f"Spark {spark.version} started ({time.monotonic() - t0:.0f}s)", style="dim"))
    spec = load_pipeline(root / "trips.yaml")
    runner = PipelineRunner(spec, spark, registry=client)
    table = runner.table
    console.print(f"created table {table.name!r} ({table.config.table_type}, Hudi v6) at {table.path}\n")
    records: list[AuditRecord] = []
    files: list[str] = []

    def on_batch(batch: Any, record: AuditRecord) -> None:
        name = str((batch.position or {}).get("last_file", batch.description))
        records.append(record)
        files.append(name)
        c = record.conservation
        console.print(Text.assemble((f"{name}  ", "bold"), (stories.get(name, ""), "italic")))
        console.print(Text.assemble(
            " " * (len(name) + 2), (f"{record.decision.value:<12}", _STYLES.get(record.decision.value, "")),
            f"{c.rows_in} in, {c.published} published, {c.quarantined} quarantined, {c.rejected} rejected  ",
            (f"({record.durations_ms.get('total', 0) / 1000:.1f}s)", "dim")))

    blocked: BatchBlockedError | None = None
    try:
        runner.run_once(on_batch=on_batch)
    except BatchBlockedError as e:
        blocked = e
    if blocked is not None and records:
        failed = ", ".join(c.name for c in records[-1].checks if c.status == "fail") or "the schema gate"
        console.print(Text(f"{files[-1]} blocked by {failed}: the pipeline stopped "
                           "(`lakegate pipeline run` exits 5 here)", style="red"))
        console.print(Text("  nothing of that batch was written; its checkpoint stays before it, so a rerun reads "
                           "it again once the producer is fixed", style="dim"), soft_wrap=True)
    _summary(console, root, runner, records, files)
    return table.path


def _summary(console: Console, root: Path, runner: Any, records: list[AuditRecord], files: list[str]) -> None:
    from pyspark.sql import functions as F

    from governance.audit import AUDIT_KEY, AuditRecord

    table: Table = runner.table
    by_instant = dict(zip((r.instant for r in records), files, strict=True))

    # per batch
    t = RichTable(title=Text("batches through the gate", style="bold"), title_justify="left")
    for name in ("batch", "decision", "rows in", "published", "quarantined", "deduplicated", "rejected", "instant"):
        t.add_column(name, justify="right" if name in ("rows in", "published", "quarantined", "deduplicated",
                                                       "rejected") else "left")
    for name, r in zip(files, records, strict=True):
        c = r.conservation
        t.add_row(name, _decision(r.decision.value), *(str(v) for v in (c.rows_in, c.published, c.quarantined,
                                                                       c.deduplicated, c.rejected)),
                  r.instant or "-")
    console.print()
    console.print(t)

    # the timeline
    t = RichTable(title=Text("timeline (.hoodie)", style="bold"), title_justify="left")
    for name in ("instant", "action", "state", "operation", "batch"):
        t.add_column(name)
    for i in table.timeline():
        t.add_row(i.instant, i.action, i.state, i.operation or "-", by_instant.get(i.instant, ""))
    console.print(t)

    # the incremental pull: what batch 2 changed, late tips included
    if len(records) >= 2 and records[0].instant and records[1].instant:
        start, end = records[0].instant, records[1].instant
        changes = table.read_changes(start=start, end=end)
        counts = {r["dt"]: r["count"] for r in changes.groupBy("dt").count().collect()}
        console.print(Text(f"incremental pull ({start}, {end}]", style="bold")
                      + Text(f" — what {files[1]} changed: "
                             + ", ".join(f"{n} rows of {d}" for d, n in sorted(counts.items()))), soft_wrap=True)
        late = (changes.where((F.col("dt") == DAYS[0]) & (F.col("tip") > 0)).orderBy("uuid")
                .select("uuid", "dt", "fare", "tip", "_hoodie_commit_time").limit(3).collect())
        t = RichTable(caption=Text(f"late tips on {DAYS[0]}, written by a later commit (first 3)"),
                      caption_justify="left")
        for name in ("uuid", "dt", "fare", "tip", "_hoodie_commit_time"):
            t.add_column(name)
        for row in late:
            t.add_row(*(str(row[c]) for c in ("uuid", "dt", "fare", "tip", "_hoodie_commit_time")))
        console.print(t)

    snapshot = table.read()
    totals = snapshot.agg(F.count(F.lit(1)).alias("trips"), F.sum(F.when(F.col("tip") > 0, 1).otherwise(0))
                          .alias("tipped")).collect()[0]
    console.print(Text("snapshot: ", style="bold") + Text(f"{totals['trips']} trips, {totals['tipped']} with tips"))

    # the quarantine table
    gate = runner.gate()
    q = gate.quarantine.read(target=table.name)
    counts_q = q.groupBy("status", "check_name").count().orderBy("status", "check_name").collect()
    reasons = [r["reason"] for r in q.groupBy("reason").count().orderBy("reason").limit(2).collect()]
    console.print(Text("quarantine table", style="bold") + Text(f" {gate.quarantine.path}"))
    t = RichTable()
    for name in ("status", "check", "rows"):
        t.add_column(name, justify="right" if name == "rows" else "left")
    for r in counts_q:
        t.add_row(r["status"], r["check_name"], str(r["count"]))
    console.print(t)
    for reason in reasons:
        console.print(Text(f"  e.g. {reason}", style="dim"))

    # verdicts read back from the commits
    t = RichTable(title=Text(f"verdicts stored in each commit (extraMetadata[{AUDIT_KEY!r}])", style="bold"),
                  title_justify="left")
    for name in ("instant", "decision", "verdict", "checks"):
        t.add_column(name, overflow="fold")
    for instant, metadata in reversed(list(table.commit_history())):
        text = metadata.extra_metadata.get(AUDIT_KEY)
        if not text:
            continue
        stored = AuditRecord.from_metadata(text)
        checks = Text()
        for v in stored.checks:
            style = {"pass": "green", "warn": "yellow", "fail": "red"}.get(v.status, "")
            failing = f" {v.failing_rows}" if v.failing_rows else ""
            checks.append(f"{v.name}:", style="")
            checks.append(f"{v.status}{failing}", style=style)
            checks.append("  ")
        t.add_row(instant, _decision(stored.decision.value), stored.verdict, checks)
    console.print(t)

    # the reports
    console.print(Text("HTML audit reports", style="bold") + Text(f" (all {len(records)} in "
                                                                    f"{gate.audit_log.folder}/reports)"))
    for name, r in zip(files, records, strict=True):
        if r.decision.value != "published" and r.report:
            console.print(Text.assemble("  ", (f"{r.decision.value:<12}", _STYLES.get(r.decision.value, "")),
                                        f"{name}  ", r.report), soft_wrap=True)
    console.print(Panel(Text("\n".join(_next_steps(root, table.path, gate.quarantine.path))),
                        title="explore", title_align="left", expand=False))


def _next_steps(root: Path, table_path: str, quarantine_path: str) -> Iterator[str]:
    yield f"lakegate table history {table_path}"
    yield f"lakegate table read {table_path} --where \"dt = '{DAYS[0]}' AND tip > 0\" --limit 5"
    yield f"lakegate audit list {table_path}"
    yield f"lakegate quarantine list {table_path}"
    yield f"lakegate pipeline validate {root / 'trips.yaml'}"
