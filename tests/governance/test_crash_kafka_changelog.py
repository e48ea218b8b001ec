"""Acceptance: a changelog pipeline SIGKILLed at 20 random moments while the producer keeps sending.

The broker (Tansu, in this process's session) and the registry live on; only the pipeline's process is killed, with
its JVM and Python workers. After every kill the next run's recovery (here, in this process) leaves the history
table holding every event up to the committed offsets exactly once, and the merged table equal to the model of
those events. A last run drains the topic once the producer stops: every event ever produced is in the history table
once, and the merged table (read by lakegate and by hudi-rs) equals the model of the whole changelog.
"""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.pipeline import PipelineRunner, load_pipeline
from schema_registry import RegistryClient
from tests.governance.changelog_model import MERGED_COLUMNS, ChangeEvent, EventStream, model_merged, produce
from tests.governance.kill_trials import KillTrials
from tests.governance.test_kafka_changelog import merged_rows, write_pipeline
from tests.kafka_broker import TansuBroker
from tests.tablecore.oracle import hudi_snapshot

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.crash_trials]

TRIALS = int(os.environ.get("LAKEGATE_CRASH_TRIALS", "20"))
SEED = int(os.environ.get("LAKEGATE_CRASH_SEED", "20261126"))
TOPIC = "rides-crash"

Placed = tuple[ChangeEvent, tuple[str, int, int]]


class _Producer(threading.Thread):
    """Keeps sending changelog events (``per_round`` every ``pause`` seconds) until stopped; records every event
    with its coordinates."""

    def __init__(self, bootstrap: str, registry_url: str, *, per_round: int = 60, pause: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.registry_url, self.per_round, self.pause = bootstrap, registry_url, per_round, pause
        self.stream = EventStream(SEED, n_keys=400)
        self.placed: list[Placed] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def send(self, n: int) -> None:
        events = self.stream.next_events(n)
        coords = produce(self.bootstrap, TOPIC, events, self.registry_url, f"{TOPIC}-value")
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
                               max_records=600)
    spec = load_pipeline(spec_path)
    trials = KillTrials(spec_path, 3, rng, window=45.0, slack=1.3, patience=2)
    recovered = 0
    progress: list[int] = []
    try:
        while trials.kills < TRIALS:
            trials.once()
            assert producer.error is None, f"the producer failed: {producer.error}"
            with PipelineRunner(spec, spark) as runner:
                recovered += bool(runner.recover())
                progress.append(_check(runner, producer, f"kill {trials.kills}"))
    finally:
        producer.stopping.set()
        producer.join(timeout=60)
    assert producer.error is None, f"the producer failed: {producer.error}"
    # the last run drains what the producer sent
    with PipelineRunner(spec, spark) as final:
        final.run_once()
        total = _check(final, producer, "the final run")
        assert total == len(producer.placed)
        writer = final.changelog
        assert writer is not None and final.table.staged() == [] and writer.history.staged() == []
        theirs = {r["ride_id"]: {c: r[c] for c in MERGED_COLUMNS} for r in hudi_snapshot(final.table.uri)}
        assert theirs == model_merged(producer.placed)
    assert progress == sorted(progress), "the tables went backwards"
    assert len(set(progress)) >= min(TRIALS, 5) // 2, f"too few kills fell after a published batch: {progress}"
    assert recovered >= 1, f"no kill left work for the recovery (events held after each kill: {progress})"
    print(f"kafka crash trials: {trials.kills} kills, {len(producer.placed)} events, held after each kill {progress}, "
          f"{recovered} recoveries")
