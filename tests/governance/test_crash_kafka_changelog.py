"""Acceptance: a changelog pipeline SIGKILLed at 20 random moments (``LAKEGATE_CRASH_TRIALS``) while the producer
keeps sending.

The broker (Tansu, in this process's session) and the registry live on; only the pipeline's process is killed, with
its JVM and Python workers; each new process recovers what the last one left. After every fifth kill this process
recovers the tables itself and checks that the history table holds every event up to the committed offsets exactly
once and the merged table equals the model of those events. A last run drains the topic once the producer stops:
every event ever produced is in the history table once, and the merged table (read by lakegate and by hudi-rs) equals
the model of the whole changelog.
"""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.pipeline import PipelineRunner, PipelineSpec, load_pipeline
from schema_registry import RegistryClient
from tablecore import Table
from tests.governance.changelog_model import (
    MERGED_COLUMNS,
    ChangeEvent,
    ChangelogProducer,
    EventStream,
    model_merged,
)
from tests.governance.kill_trials import KillTrials
from tests.governance.test_kafka_changelog import merged_rows, write_pipeline
from tests.kafka_broker import TansuBroker
from tests.tablecore.oracle import hudi_snapshot

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.crash_trials, pytest.mark.trial_seconds(1100)]

TRIALS = int(os.environ.get("LAKEGATE_CRASH_TRIALS", "20"))
SEED = int(os.environ.get("LAKEGATE_CRASH_SEED", "20261126"))
TOPIC = "rides-crash"
CHECK_EVERY = 5
"""After every fifth kill this process recovers the tables and checks them against the model (each pipeline
process recovers at its start too)."""
MAX_BATCHES = 5
"""Batches a pipeline process runs before it ends on its own: more than the kill window covers (about one and a
third of its first batch), so that a process is killed rather than ending by itself. When a process ended with its
first run (once it had caught up with the producer) and reported its batches only then, 6 of 26 trials ended by
themselves, with 2 batches as with 5 (2026-11-28 and 2026-11-29): a whole process's start and recovery for no
kill."""

Placed = tuple[ChangeEvent, tuple[str, int, int]]


class _Producer(threading.Thread):
    """Keeps sending changelog events (``per_round`` every ``pause`` seconds: a little slower than the pipeline
    takes them, so that a pipeline process nearly always finds a batch) until stopped, through one producer; records
    every event with its coordinates."""

    def __init__(self, bootstrap: str, registry_url: str, *, per_round: int = 30, pause: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.per_round, self.pause = per_round, pause
        self.producer = ChangelogProducer(bootstrap, TOPIC, registry_url, f"{TOPIC}-value")
        self.stream = EventStream(SEED, n_keys=400)
        self.placed: list[Placed] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def send(self, n: int) -> None:
        events = self.stream.next_events(n)
        coords = self.producer.send(events)
        with self.lock:
            self.placed.extend((e, (TOPIC, p, o)) for e, (p, o) in zip(events, coords, strict=True))

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.send(self.per_round)
                self.stopping.wait(self.pause)
        except BaseException as e:  # reported by the test
            self.error = e

    def upto(self, offsets: dict[str, int]) -> list[Placed]:
        """The events below the committed next offsets."""
        with self.lock:
            return [(e, c) for e, c in self.placed if c[2] < offsets.get(str(c[1]), 0)]


def _left_work(spec: PipelineSpec, spark: SparkSession) -> bool:
    """Whether a kill left work for the recovery: a staged instant in either table, or a history table a batch
    ahead of the merged table (read from the timeline and commit metadata; no Spark job)."""
    from governance.changelog import BATCH_KEY

    runner = PipelineRunner(spec, spark)
    with runner:
        writer = runner.changelog
        assert writer is not None
        if runner.table.staged() or writer.history.staged():
            return True

        def newest(table: Table) -> str | None:
            return next((m.extra_metadata[BATCH_KEY] for _, m in table.commit_history()
                         if m.extra_metadata.get(BATCH_KEY)), None)

        return newest(writer.history) != newest(runner.table)


def _check(runner: PipelineRunner, producer: _Producer, what: str) -> int:
    """After recovery: history = the events up to the checkpoint, each once; merged = their model. Returns how many
    events the tables hold."""
    checkpoint = runner.checkpoint()
    offsets: dict[str, int] = checkpoint["offsets"].get(TOPIC, {}) if checkpoint else {}
    expected = producer.upto(offsets)
    writer = runner.changelog
    assert writer is not None
    held = [] if writer.history.schema() is None else [
        (r[0], r[1], r[2]) for r in writer.history.read()
        .select("_kafka_topic", "_kafka_partition", "_kafka_offset").collect()]
    assert len(held) == len(set(held)), f"{what}: an event is twice in the history table"
    assert set(held) == {c for _, c in expected}, f"{what}: the history table does not match the checkpoint"
    merged = merged_rows(runner.table) if runner.table.schema() is not None else {}
    assert merged == model_merged(expected), f"{what}: the merged table does not match the model"
    return len(held)


def test_sigkilled_changelog_pipeline_keeps_every_event_exactly_once(
        spark: SparkSession, tmp_path: Path, registry: RegistryClient, kafka_broker: TansuBroker) -> None:
    rng = random.Random(SEED)
    kafka_broker.create_topic(TOPIC, 3)
    producer = _Producer(kafka_broker.bootstrap, registry.url)
    producer.send(400)  # every key inserted before the first run
    producer.start()
    spec_path = write_pipeline(tmp_path, bootstrap=kafka_broker.bootstrap, registry_url=registry.url, topic=TOPIC,
                               max_records=1_500)
    spec = load_pipeline(spec_path)
    left_work = 0
    progress: list[int] = []
    try:
        with KillTrials(spec_path, MAX_BATCHES, rng, window=30.0, slack=1.3, patience=2, longest=120.0) as trials:
            while trials.kills < TRIALS:
                trials.once()
                assert producer.error is None, f"the producer failed: {producer.error!r}"
                left_work += _left_work(spec, spark)
                if trials.kills % CHECK_EVERY == 0:  # recover here and check the tables (the next process recovers too)
                    with PipelineRunner(spec, spark) as runner:
                        runner.recover()
                        progress.append(_check(runner, producer, f"kill {trials.kills}"))
    finally:
        producer.stopping.set()
        producer.join(timeout=60)
    assert producer.error is None, f"the producer failed: {producer.error!r}"
    # the last run recovers what the last kill left and drains what the producer sent, in larger batches
    drain = tmp_path / "drain"
    drain.mkdir()
    final_spec = load_pipeline(write_pipeline(drain, bootstrap=kafka_broker.bootstrap, registry_url=registry.url,
                                              topic=TOPIC, max_records=100_000))
    final_spec = final_spec.model_copy(update={"base_dir": tmp_path})  # the same tables
    with PipelineRunner(final_spec, spark) as final:
        final.run_once()
        total = _check(final, producer, "the final run")
        assert total == len(producer.placed)
        writer = final.changelog
        assert writer is not None and final.table.staged() == [] and writer.history.staged() == []
        theirs = {r["ride_id"]: {c: r[c] for c in MERGED_COLUMNS} for r in hudi_snapshot(final.table.uri)}
        assert theirs == model_merged(producer.placed)
    assert progress == sorted(progress), "the tables went backwards"
    assert progress[-1] > 0, (f"no batch was published between the kills (events held: {progress}; per trial "
                              f"(seconds: trial-logs/trials.jsonl): {trials.history})")
    assert left_work >= 1, (f"no kill fell inside a batch's commits (events held at the checks: {progress}; per "
                            f"trial: {trials.history})")
    print(f"kafka crash trials: {trials.kills} kills, {len(producer.placed)} events, held at the checks {progress}, "
          f"{left_work} kills inside a batch's commits; per trial (seconds: trial-logs/trials.jsonl): "
          f"{trials.history}")
