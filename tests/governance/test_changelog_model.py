"""The changelog test helper itself: the model of the merged and history tables on hand-made event lists, the
generator's mix, and a round trip of produced events through a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition

from tests.governance.changelog_model import (
    DELETE,
    HISTORY_COLUMNS,
    INSERT,
    MERGED_COLUMNS,
    UPDATE,
    ChangeEvent,
    Coordinates,
    EventStream,
    decode_value,
    generate_events,
    key_partition,
    model_history,
    model_merged,
    produce_raw,
    with_bad_fares,
    with_coordinates,
)
from tests.kafka_broker import TansuBroker

FULL = {"dt": "2026-11-02", "city": "sf", "driver": "driver-001", "fare": 10.0, "status": "requested",
        "distance_km": 3.5}


def ev(key: str, version: int, op: str, *, ts: int | None = None, **fields: Any) -> ChangeEvent:
    """A hand-made event of ``key`` carrying ``fields`` (an insert: the full row ``FULL`` updated by ``fields``)."""
    row = {**FULL, **fields} if op == INSERT else fields
    headers = {"event_ts": str(ts if ts is not None else 1_000 * version), "row_key": key, "version": str(version),
               "datacenter": "dca1", "host": f"svc-{version:02d}"}
    return ChangeEvent(key, version, op, {"ride_id": key, "version": version, "op": op, **row}, headers)


def at(*events: ChangeEvent, topic: str = "rides", partition: int = 0) -> list[tuple[ChangeEvent, Coordinates]]:
    """``events`` at consecutive offsets of one partition, in the order given (the order they were sent)."""
    return [(e, (topic, partition, offset)) for offset, e in enumerate(events)]


def test_out_of_order_versions_fold_in_version_order() -> None:
    merged = model_merged(at(ev("r1", 1, INSERT), ev("r1", 3, UPDATE, city="nyc"), ev("r1", 2, UPDATE, city="la")))
    row = merged["r1"]
    assert (row["version"], row["city"], row["_version"], row["_host"]) == (3, "nyc", 3, "svc-03")


def test_partial_updates_fold_the_last_non_null_value_per_column() -> None:
    merged = model_merged(at(ev("r1", 1, INSERT), ev("r1", 2, UPDATE, fare=12.5),
                             ev("r1", 4, UPDATE, city="nyc", status="completed", ts=99)))
    assert merged["r1"] == {
        "ride_id": "r1", "version": 4, "dt": "2026-11-02", "city": "nyc", "driver": "driver-001", "fare": 12.5,
        "status": "completed", "distance_km": 3.5, "_event_ts": 99, "_row_key": "r1", "_version": 4,
        "_datacenter": "dca1", "_host": "svc-04"}
    assert tuple(merged["r1"]) == MERGED_COLUMNS


def test_delete_then_a_late_older_update_leaves_the_key_absent() -> None:
    events = at(ev("r1", 1, INSERT), ev("r1", 3, DELETE), ev("r1", 2, UPDATE, city="nyc"), ev("r2", 1, INSERT))
    assert set(model_merged(events)) == {"r2"}


def test_delete_then_reinsert_starts_a_new_row() -> None:
    merged = model_merged(at(ev("r1", 1, INSERT, city="la"), ev("r1", 2, UPDATE, status="accepted"),
                             ev("r1", 3, DELETE), ev("r1", 4, INSERT, city="nyc")))
    assert (merged["r1"]["version"], merged["r1"]["city"], merged["r1"]["status"]) == (4, "nyc", "requested")


def test_a_live_run_without_dt_waits_for_its_partition() -> None:
    before = [ev("r1", 1, INSERT), ev("r1", 2, DELETE), ev("r1", 4, UPDATE, city="nyc")]
    assert model_merged(at(*before)) == {}  # the update after the delete carries no dt; the older row is gone
    merged = model_merged(at(*before, ev("r1", 3, INSERT, city="la")))  # the re-insert arrives late
    assert (merged["r1"]["version"], merged["r1"]["city"], merged["r1"]["dt"]) == (4, "nyc", "2026-11-02")


def test_exact_duplicates_change_nothing_but_the_history() -> None:
    events = [ev("r1", 1, INSERT), ev("r1", 2, UPDATE, fare=3.0), ev("r1", 3, DELETE), ev("r2", 1, INSERT)]
    with_dups = [*events, events[1], events[2], events[3]]
    assert model_merged(at(*with_dups)) == model_merged(at(*events))
    history = model_history(at(*with_dups))
    assert len(history) == 7
    assert history[("rides", 0, 4)] == {**history[("rides", 0, 1)], "_kafka_offset": 4}


def test_the_tie_break_is_topic_partition_offset() -> None:
    a, b = ev("r1", 2, UPDATE, city="a"), ev("r1", 2, UPDATE, city="b")  # never generated, but ordered all the same
    events = [(ev("r1", 1, INSERT), ("t", 0, 0)), (b, ("t", 1, 0)), (a, ("t", 0, 5))]
    assert model_merged(events)["r1"]["city"] == "b"


def test_history_rows_carry_every_column_with_nulls_where_not_carried() -> None:
    history = model_history(at(ev("r1", 1, INSERT), ev("r1", 2, DELETE), topic="t", partition=2))
    row = history[("t", 2, 1)]
    assert tuple(row) == HISTORY_COLUMNS
    assert row == {"ride_id": "r1", "version": 2, "op": "d", **dict.fromkeys(FULL), "_event_ts": 2000,
                   "_row_key": "r1", "_version": 2, "_datacenter": "dca1", "_host": "svc-02",
                   "_kafka_topic": "t", "_kafka_partition": 2, "_kafka_offset": 1}


def test_generator_mix() -> None:
    events = generate_events(10_000, 1_000, seed=3)
    assert events == generate_events(10_000, 1_000, seed=3)
    stream = EventStream(3, 1_000)
    assert stream.next_events(2_500) + stream.next_events(7_500) == events
    first: dict[str, ChangeEvent] = {}
    newest: dict[str, int] = {}
    copies = Counter((e.ride_id, e.version) for e in events)
    distinct: dict[tuple[str, int], ChangeEvent] = {}
    out_of_order = duplicates = 0
    for e in events:
        first.setdefault(e.ride_id, e)
        if (e.ride_id, e.version) in distinct:
            assert distinct[(e.ride_id, e.version)] == e  # a repeated version is an exact duplicate
            duplicates += 1
            continue
        distinct[(e.ride_id, e.version)] = e
        out_of_order += e.version < newest.get(e.ride_id, 0)
        newest[e.ride_id] = max(newest.get(e.ride_id, 0), e.version)
        assert e.headers["row_key"] == e.ride_id and int(e.headers["version"]) == e.version
        assert all(v is not None for v in e.fields.values())
        assert e.fields.get("fare", 0) >= 0
        carried = set(e.fields) - {"ride_id", "version", "op"}
        if e.op == INSERT:
            assert carried == set(FULL)
        elif e.op == UPDATE:
            assert 1 <= len(carried) <= 3 and "dt" not in carried
        else:
            assert carried == set()
    assert len(first) == 1_000 and all(e.op == INSERT for e in first.values())
    assert len(key_partition(events)) == 1_000  # one dt per key (key_partition raises on a second one)
    ops = Counter(e.op for e in distinct.values())
    assert 350 <= ops[DELETE] <= 650 and 200 <= duplicates <= 400 and 350 <= out_of_order <= 700
    assert duplicates == sum(n - 1 for n in copies.values())
    bad = with_bad_fares(events, 25, seed=1)
    assert sum(e.fields.get("fare", 0) < 0 for e in bad) == 25 and len(bad) == len(events)


def test_produced_events_round_trip_through_kafka(kafka_broker: TansuBroker) -> None:
    topic = f"rides-changelog-{uuid.uuid4().hex[:12]}"
    kafka_broker.create_topic(topic, 3)
    events = generate_events(300, 60, seed=11)
    coords = produce_raw(kafka_broker.bootstrap, topic, events, schema_id=42)
    assert len(set(coords)) == 300
    partition_of: dict[str, int] = {}
    for e, (p, _) in zip(events, coords, strict=True):
        assert partition_of.setdefault(e.ride_id, p) == p  # a key's events share a partition
    expected = {c: e for e, c in zip(events, coords, strict=True)}

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False})
    try:
        for p in range(3):  # one message per record batch: Tansu's watermarks are exact
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            assert (low, high) == (0, sum(1 for q, _ in coords if q == p))
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got: dict[tuple[int, int], Message] = {}
        deadline = time.monotonic() + 30
        while len(got) < len(events) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                partition, offset = msg.partition(), msg.offset()
                assert msg.error() is None and partition is not None and offset is not None, msg.error()
                got[(partition, offset)] = msg
    finally:
        consumer.close()
    assert set(got) == set(expected)
    for c, msg in got.items():
        e = expected[c]
        assert msg.key() == e.ride_id.encode()
        assert msg.headers() == [(k, v.encode()) for k, v in e.headers.items()]
        assert decode_value(msg.value() or b"") == (42, e.avro_record())
    history = model_history(with_coordinates(events, topic, coords))
    assert len(history) == 300 and {(p, o) for _, p, o in history} == set(coords)
