"""Test helper for the Kafka changelog ingestion: a seeded generator of ``rides`` change events, a producer of them
in the Confluent Avro wire format, and an independent pure-Python model of the tables the feature must produce.

The events (:class:`ChangeEvent`): every key is first inserted (a full row, with the key's one fixed ``dt``); then
come partial updates (1-3 changed fields), deletes (about 5%, the key, version and op only), re-inserts after a
delete (full rows, the same ``dt``), exact duplicates of earlier events (about 3%) and out-of-order versions (about
5%: two new versions of a key sent swapped). A key's versions are unique but for duplicates.

The model: a key's events sorted by ``(version, topic, partition, offset)``; the events after the last delete are
its live run (none: the key is absent); the merged row takes, per column, the last non-null value along the live
run; a row whose folded ``dt`` is null is absent (it waits for an event that gives it its partition). The history
table holds every event once. No Spark here.
"""

from __future__ import annotations

import datetime as _dt
import functools
import io
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import fastavro
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

RIDES_CHANGELOG_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "RideChange", "namespace": "com.example.rides",
    "fields": [
        {"name": "ride_id", "type": "string"},
        {"name": "version", "type": "long"},
        {"name": "op", "type": "string"},
        {"name": "dt", "type": ["null", "string"], "default": None},
        {"name": "city", "type": ["null", "string"], "default": None},
        {"name": "driver", "type": ["null", "string"], "default": None},
        {"name": "fare", "type": ["null", "double"], "default": None, "semanticType": "non_negative_amount"},
        {"name": "status", "type": ["null", "string"], "default": None},
        {"name": "distance_km", "type": ["null", "double"], "default": None},
    ],
}
"""The Avro value schema of the ``rides`` changelog: key ``ride_id``, ordering field ``version``, ``op`` (``i``
insert, ``u`` update, ``d`` delete) and nullable row fields; ``fare`` carries the ``non_negative_amount`` type."""

KEY_FIELDS = ("ride_id", "version", "op")
ROW_FIELDS = ("dt", "city", "driver", "fare", "status", "distance_km")
"""The nullable row fields; ``dt`` is the date partition."""
UPDATABLE_FIELDS = ("city", "driver", "fare", "status", "distance_km")
"""The fields a partial update may change (a key's ``dt`` never changes)."""
HEADER_NAMES = ("event_ts", "row_key", "version", "datacenter", "host")
"""The Kafka headers on every event (UTF-8 text)."""
HEADER_COLUMNS = {"event_ts": "_event_ts", "row_key": "_row_key", "version": "_version",
                  "datacenter": "_datacenter", "host": "_host"}
"""Header name -> table column; ``_event_ts`` and ``_version`` are integers, the rest strings."""
MERGED_COLUMNS = ("ride_id", "version", *ROW_FIELDS, *HEADER_COLUMNS.values())
"""The columns of the merged table (``op`` is not one)."""
COORDINATE_COLUMNS = ("_kafka_topic", "_kafka_partition", "_kafka_offset")
HISTORY_COLUMNS = (*KEY_FIELDS, *ROW_FIELDS, *HEADER_COLUMNS.values(), *COORDINATE_COLUMNS)
"""The columns of the history table: every event once."""

INSERT, UPDATE, DELETE = "i", "u", "d"

Coordinates = tuple[str, int, int]
"""A message's Kafka coordinates: (topic, partition, offset)."""

_CITIES = ("sf", "nyc", "austin", "chicago", "seattle", "denver", "miami", "boston")
_STATUSES = ("requested", "accepted", "en_route", "completed", "cancelled")
_DATACENTERS = ("dca1", "phx2")
_DAYS = tuple((_dt.date(2026, 11, 1) + _dt.timedelta(days=d)).isoformat() for d in range(7))
_EPOCH_MS = 1_793_491_200_000  # 2026-11-01T00:00:00Z


@dataclass(frozen=True)
class ChangeEvent:
    """One change of a ride. ``fields`` holds only the fields the event carries (``ride_id``, ``version``, ``op``
    and, for an insert, every row field; for an update 1-3 changed fields; for a delete none), never a null;
    ``headers`` holds the Kafka headers as text. ``partition`` set: the event goes to that partition, else the
    producer's partitioner picks it from the key (so all events of a key share a partition)."""

    ride_id: str
    version: int
    op: str
    fields: dict[str, Any]
    headers: dict[str, str]
    partition: int | None = None

    def avro_record(self) -> dict[str, Any]:
        """The Avro value record: the carried fields, null where not carried."""
        return {"ride_id": self.ride_id, "version": self.version, "op": self.op,
                **{name: self.fields.get(name) for name in ROW_FIELDS}}

    def kafka_headers(self) -> list[tuple[str, bytes]]:
        """The Kafka headers (UTF-8 bytes), in :data:`HEADER_NAMES` order."""
        return [(name, self.headers[name].encode()) for name in HEADER_NAMES]


@dataclass
class _KeyState:
    dt: str
    version: int = 0
    alive: bool = False


@dataclass
class EventStream:
    """A seeded, endless source of change events of ``n_keys`` rides: the first ``n_keys`` events insert every key
    (in a shuffled order), later ones follow the mix of the module docstring. Each :meth:`next_events` call
    continues where the last one stopped, so a producer thread can keep producing new events of the same
    semantics (for crash trials)."""

    seed: int
    n_keys: int = 1_000
    delete_rate: float = 0.06
    duplicate_rate: float = 0.034
    out_of_order_rate: float = 0.06
    _rng: random.Random = field(init=False, repr=False)
    _keys: list[str] = field(init=False, repr=False)
    _state: dict[str, _KeyState] = field(init=False, repr=False)
    _to_insert: list[str] = field(init=False, repr=False)
    _sent: list[ChangeEvent] = field(init=False, repr=False)
    _pending: list[ChangeEvent] = field(init=False, repr=False)
    _clock_ms: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Draw every key's fixed ``dt``."""
        if self.n_keys < 1:
            raise ValueError("n_keys must be at least 1")
        self._rng = random.Random(self.seed)
        self._keys = [f"ride-{i:06d}" for i in range(self.n_keys)]
        self._state = {k: _KeyState(dt=self._rng.choice(_DAYS)) for k in self._keys}
        self._to_insert = list(self._keys)
        self._rng.shuffle(self._to_insert)
        self._to_insert.reverse()  # popped from the end
        self._sent = []
        self._pending = []
        self._clock_ms = _EPOCH_MS

    def next_events(self, k: int) -> list[ChangeEvent]:
        """The next ``k`` events, in the order they are to be sent."""
        out: list[ChangeEvent] = []
        while len(out) < k:
            if self._pending:
                out.append(self._pending.pop())
            elif self._to_insert:
                out.append(self._new_event(self._to_insert.pop()))
            else:
                draw = self._rng.random()
                if draw < self.duplicate_rate:
                    out.append(self._rng.choice(self._sent))
                elif draw < self.duplicate_rate + self.out_of_order_rate:
                    key = self._rng.choice(self._keys)
                    first, second = self._new_event(key), self._new_event(key)
                    out.append(second)  # the higher version first, the lower one next (or in the next call)
                    self._pending.append(first)
                else:
                    out.append(self._new_event(self._rng.choice(self._keys)))
            self._sent.append(out[-1])
        return out

    def _new_event(self, key: str) -> ChangeEvent:
        """A new version of ``key``: an insert when the key is not alive, else a delete or a partial update."""
        rng, state = self._rng, self._state[key]
        state.version += rng.randint(1, 2)
        self._clock_ms += rng.randint(1, 500)
        if not state.alive:
            op, row = INSERT, self._full_row(state.dt)
            state.alive = True
        elif rng.random() < self.delete_rate:
            op, row = DELETE, {}
            state.alive = False
        else:
            op, full = UPDATE, self._full_row(state.dt)
            row = {name: full[name] for name in rng.sample(UPDATABLE_FIELDS, rng.randint(1, 3))}
        headers = {"event_ts": str(self._clock_ms), "row_key": key, "version": str(state.version),
                   "datacenter": rng.choice(_DATACENTERS), "host": f"svc-{rng.randint(1, 40):02d}"}
        return ChangeEvent(key, state.version, op, {"ride_id": key, "version": state.version, "op": op, **row},
                           headers)

    def _full_row(self, dt: str) -> dict[str, Any]:
        rng = self._rng
        return {"dt": dt, "city": rng.choice(_CITIES), "driver": f"driver-{rng.randint(0, 499):03d}",
                "fare": round(rng.uniform(2.5, 90.0), 2), "status": rng.choice(_STATUSES),
                "distance_km": round(rng.uniform(0.3, 45.0), 3)}


def generate_events(n_events: int = 10_000, n_keys: int = 1_000, seed: int = 20261101) -> list[ChangeEvent]:
    """``n_events`` events of ``n_keys`` rides in sending order (see :class:`EventStream`); ``n_events`` must be at
    least ``n_keys`` (every key is inserted first)."""
    if n_events < n_keys:
        raise ValueError(f"n_events ({n_events}) must be at least n_keys ({n_keys}): every key is inserted first")
    return EventStream(seed, n_keys).next_events(n_events)


def with_bad_fares(events: Sequence[ChangeEvent], n: int, seed: int = 7) -> list[ChangeEvent]:
    """A copy of ``events`` in which ``n`` insert or update events carry a negative fare (added where the event did
    not carry one). Only events without a duplicate in ``events`` are picked, so that duplicates stay exact."""
    counts: dict[tuple[str, int], int] = {}
    for e in events:
        counts[(e.ride_id, e.version)] = counts.get((e.ride_id, e.version), 0) + 1
    candidates = [i for i, e in enumerate(events) if e.op != DELETE and counts[(e.ride_id, e.version)] == 1]
    if n > len(candidates):
        raise ValueError(f"only {len(candidates)} events can take a bad fare, {n} asked")
    rng = random.Random(seed)
    out = list(events)
    for i in rng.sample(candidates, n):
        out[i] = replace(out[i], fields={**out[i].fields, "fare": -round(rng.uniform(0.01, 50.0), 2)})
    return out


def key_partition(events: Iterable[ChangeEvent]) -> dict[str, str]:
    """Each key's fixed ``dt`` (from the events that carry one); a key given two ``dt`` values is an error."""
    out: dict[str, str] = {}
    for e in events:
        dt = e.fields.get("dt")
        if dt is None:
            continue
        if out.setdefault(e.ride_id, dt) != dt:
            raise ValueError(f"{e.ride_id} has two partitions: {out[e.ride_id]} and {dt}")
    return out


# -- producing ------------------------------------------------------------------------------------------------------

_PRODUCER_CONF: dict[str, Any] = {
    "enable.idempotence": True,  # each event exactly once in the log, in send order per partition
    "linger.ms": 0,
    "batch.num.messages": 1,  # one message per record batch: Tansu's high watermark is then exact
}


def produce(bootstrap: str, topic: str, events: Sequence[ChangeEvent], registry_url: str,
            subject: str) -> list[tuple[int, int]]:
    """Produce ``events`` to ``topic`` in order, values in the Confluent Avro wire format (the schema
    auto-registered under ``subject`` at the Confluent-compatible registry ``registry_url``), keys the ride ids, the
    headers as UTF-8; flush. Returns each event's (partition, offset) from the delivery reports."""
    return ChangelogProducer(bootstrap, topic, registry_url, subject).send(events)


def produce_raw(bootstrap: str, topic: str, events: Sequence[ChangeEvent], schema_id: int) -> list[tuple[int, int]]:
    """:func:`produce` without a registry: the Confluent framing written here (magic byte 0, ``schema_id`` as 4
    big-endian bytes, the fastavro binary of the record under :data:`RIDES_CHANGELOG_SCHEMA`)."""
    return _produce(bootstrap, topic, events, functools.partial(encode_value, schema_id=schema_id))


@functools.cache
def _parsed_schema() -> Any:
    return fastavro.parse_schema(RIDES_CHANGELOG_SCHEMA)


def encode_value(event: ChangeEvent, schema_id: int) -> bytes:
    """``event``'s value in the Confluent wire format under ``schema_id``."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, _parsed_schema(), event.avro_record())
    return b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()


def decode_value(value: bytes) -> tuple[int, dict[str, Any]]:
    """A Confluent wire-format value of :data:`RIDES_CHANGELOG_SCHEMA`: (schema id, record)."""
    if len(value) < 5 or value[0] != 0:
        raise ValueError("not a Confluent wire-format value (magic byte 0, 4-byte schema id)")
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), _parsed_schema(), None)
    if not isinstance(record, dict):
        raise ValueError(f"not a {RIDES_CHANGELOG_SCHEMA['name']} record: {record!r}")
    return int.from_bytes(value[1:5], "big"), record


class ChangelogProducer:
    """:func:`produce` for many sends: one idempotent producer and one serializer (its registry client caches the
    schema id), as a service that keeps producing would have; :meth:`send` returns each event's coordinates."""

    def __init__(self, bootstrap: str, topic: str, registry_url: str, subject: str) -> None:
        client = SchemaRegistryClient({"url": registry_url})
        serializer = AvroSerializer(client, json.dumps(RIDES_CHANGELOG_SCHEMA),
                                    conf={"auto.register.schemas": True,
                                          "subject.name.strategy": lambda _c, _r: subject})
        context = SerializationContext(topic, MessageField.VALUE)
        self.topic = topic
        self._encode: Callable[[ChangeEvent], bytes] = lambda e: bytes(serializer(e.avro_record(), context))
        self._producer = Producer({"bootstrap.servers": bootstrap, **_PRODUCER_CONF})

    def send(self, events: Sequence[ChangeEvent]) -> list[tuple[int, int]]:
        """Send ``events`` in order and wait for their delivery; their (partition, offset)."""
        return _send(self._producer, self.topic, events, self._encode)


def _produce(bootstrap: str, topic: str, events: Sequence[ChangeEvent],
             encode: Callable[[ChangeEvent], bytes], timeout_s: float = 60.0) -> list[tuple[int, int]]:
    """Send ``events`` (values by ``encode``) with a producer of their own and return their coordinates."""
    return _send(Producer({"bootstrap.servers": bootstrap, **_PRODUCER_CONF}), topic, events, encode, timeout_s)


def _send(producer: Producer, topic: str, events: Sequence[ChangeEvent], encode: Callable[[ChangeEvent], bytes],
          timeout_s: float = 60.0) -> list[tuple[int, int]]:
    """Send ``events`` through ``producer`` and return their coordinates, or raise the first delivery error."""
    coords: list[tuple[int, int] | None] = [None] * len(events)
    errors: list[KafkaError] = []

    def delivered(i: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None, "a delivered message has coordinates"
            coords[i] = (partition, offset)

    for i, e in enumerate(events):
        kwargs: dict[str, Any] = {} if e.partition is None else {"partition": e.partition}
        headers: list[tuple[str, str | bytes | None]] = [*e.kafka_headers()]
        while True:
            try:
                producer.produce(topic, key=e.ride_id.encode(), value=encode(e), headers=headers,
                                 on_delivery=functools.partial(delivered, i), **kwargs)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)
        if errors:
            break
    remaining = producer.flush(timeout_s)
    if errors:
        raise RuntimeError(f"Kafka delivery to {topic} failed: {errors[0]}")
    if remaining:
        raise RuntimeError(f"{remaining} messages to {topic} undelivered after {timeout_s}s")
    missing = [i for i, c in enumerate(coords) if c is None]
    if missing:
        raise RuntimeError(f"{len(missing)} events without a delivery report (first: #{missing[0]})")
    return [c for c in coords if c is not None]


def with_coordinates(events: Sequence[ChangeEvent], topic: str,
                     coords: Sequence[tuple[int, int]]) -> list[tuple[ChangeEvent, Coordinates]]:
    """Pair each event with its (topic, partition, offset), as the model functions take them."""
    if len(events) != len(coords):
        raise ValueError(f"{len(events)} events, {len(coords)} coordinates")
    return [(e, (topic, p, o)) for e, (p, o) in zip(events, coords, strict=True)]


# -- the model --------------------------------------------------------------------------------------------------------

def _header_values(event: ChangeEvent) -> dict[str, Any]:
    h = event.headers
    return {"_event_ts": int(h["event_ts"]), "_row_key": h["row_key"], "_version": int(h["version"]),
            "_datacenter": h["datacenter"], "_host": h["host"]}


def live_run(events: Iterable[tuple[ChangeEvent, Coordinates]]) -> list[ChangeEvent]:
    """One key's live run: its events sorted by (version, topic, partition, offset), those after the last delete."""
    ordered = sorted(events, key=lambda ec: (ec[0].version, *ec[1]))
    last_delete = max((i for i, (e, _) in enumerate(ordered) if e.op == DELETE), default=-1)
    return [e for e, _ in ordered[last_delete + 1:]]


def fold(run: Sequence[ChangeEvent]) -> dict[str, Any]:
    """The partial-row fold of a live run: per merged column, the last non-null value (null if none)."""
    row: dict[str, Any] = dict.fromkeys(MERGED_COLUMNS)
    for e in run:
        values = {"ride_id": e.ride_id, "version": e.version, **e.fields, **_header_values(e)}
        for column in MERGED_COLUMNS:
            if values.get(column) is not None:
                row[column] = values[column]
    return row


def model_merged(events_with_coords: Iterable[tuple[ChangeEvent, Coordinates]]) -> dict[str, dict[str, Any]]:
    """The merged table the feature must produce, as ride_id -> row (:data:`MERGED_COLUMNS`): a key whose live run
    is empty (deleted last) or whose folded ``dt`` is null is absent."""
    by_key: dict[str, list[tuple[ChangeEvent, Coordinates]]] = {}
    for e, c in events_with_coords:
        by_key.setdefault(e.ride_id, []).append((e, c))
    out: dict[str, dict[str, Any]] = {}
    for key, events in by_key.items():
        run = live_run(events)
        if not run:
            continue
        row = fold(run)
        if row["dt"] is not None:
            out[key] = row
    return out


def model_history(events_with_coords: Iterable[tuple[ChangeEvent, Coordinates]]) -> dict[Coordinates, dict[str, Any]]:
    """The history table: every event once, keyed by its coordinates, as a row of :data:`HISTORY_COLUMNS`."""
    out: dict[Coordinates, dict[str, Any]] = {}
    for e, (topic, partition, offset) in events_with_coords:
        if (topic, partition, offset) in out:
            raise ValueError(f"two events at {topic}/{partition}@{offset}")
        out[(topic, partition, offset)] = {
            **e.avro_record(), **_header_values(e),
            "_kafka_topic": topic, "_kafka_partition": partition, "_kafka_offset": offset}
    return out

