"""One store suite, run on SQLite and on PostgreSQL (acceptance 4): durability, concurrency, atomicity."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from schema_registry.errors import InvalidSchemaError, InvalidVersionError, StoreError
from schema_registry.model import Mode, RegisterRequest, SemanticTypeSpec
from schema_registry.registry import Registry
from schema_registry.store import SqlStore, open_store
from tests.schema_registry.conftest import field, record

BASE = field("id", "string")


def schema_with(extra: str | None) -> str:
    fields = [BASE] + ([field(extra, ["null", "string"], default=None)] if extra else [])
    return record("Event", *fields)


@pytest.fixture
def registry(store_url: str) -> Iterator[Registry]:
    store = open_store(store_url)
    yield Registry(store)
    store.close()


def req(schema: str, **kw: object) -> RegisterRequest:
    return RegisterRequest.model_validate({"schema": schema, **kw})


def test_store_register_assigns_versions_and_content_ids(registry: Registry) -> None:
    v1, s1 = registry.register("a", req(schema_with(None)))
    v2, s2 = registry.register("a", req(schema_with("x")))
    again, s_again = registry.register("a", req(schema_with(None)))
    other, s_other = registry.register("b", req(schema_with("x")))
    assert (v1.version, v2.version, again.version, other.version) == (1, 2, 1, 1)
    assert s1.id != s2.id and s_again.id == s1.id and s_other.id == s2.id
    assert registry.subjects() == ["a", "b"]
    assert registry.versions("a") == [1, 2]
    assert {(u.subject, u.version) for u in registry.schema_usages(s2.id)} == {("a", 2), ("b", 1)}


def test_store_version_numbers_follow_confluent_delete_rules(registry: Registry) -> None:
    registry.register("s", req(schema_with(None)))
    registry.register("s", req(schema_with("x")))
    registry.delete_version("s", "2")
    v3, _ = registry.register("s", req(schema_with("y")))
    assert v3.version == 3  # soft-deleted versions still count
    assert registry.versions("s", deleted=True) == [1, 2, 3]
    assert registry.versions("s", deleted_as_negative=True, deleted=True) == [1, -2, 3]
    # RestApiTest testDeleteSchemaVersionPermanent: hard-deleted numbers are reused, content keeps its id
    registry.delete_version("s", "3")
    registry.delete_version("s", "3", permanent=True)
    registry.delete_version("s", "2", permanent=True)
    registry.delete_version("s", "1")
    row, stored = registry.register("s", req(schema_with(None)))
    assert (row.version, stored.id) == (2, 1)
    assert registry.versions("s", deleted=True) == [2]  # the soft-deleted v1 of the same content is tombstoned


def test_store_survives_reopen(store_url: str) -> None:
    store = open_store(store_url)
    reg = Registry(store)
    reg.register("durable", req(schema_with(None)))
    reg.configs.update("durable", {"compatibility": "FULL"})
    reg.configs.update_mode("durable", Mode.READONLY)
    reg.semantic.put("fare", {"base_type": "double", "constraints": {"minimum": 0}})
    store.close()

    reopened = open_store(store_url)  # also re-runs migrations: a no-op on an up-to-date store
    reg = Registry(reopened)
    try:
        row, stored = reg.version("durable", "latest")
        assert row.version == 1 and json.loads(stored.schema_text) == json.loads(schema_with(None))
        assert reg.configs.get("durable")["compatibilityLevel"] == "FULL"
        assert reg.configs.mode("durable") is Mode.READONLY
        assert reg.semantic.get("fare").spec.constraints.minimum == 0
    finally:
        reopened.close()


def test_store_eight_writers_get_consecutive_versions(store_url: str) -> None:
    """8 threads, each with its own store (own connection pool, as separate processes would have)."""
    open_store(store_url).close()  # migrate once up front
    stores = [open_store(store_url) for _ in range(8)]
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        try:
            barrier.wait()
            row, stored = Registry(stores[i]).register("hot", req(schema_with(f"f{i}")))
            results.append((row.version, stored.id))
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert sorted(v for v, _ in results) == list(range(1, 9))
        assert len({i for _, i in results}) == 8
        reg = Registry(stores[0])
        assert reg.versions("hot") == list(range(1, 9))
        assert len({reg.version("hot", str(v))[1].id for v in range(1, 9)}) == 8
    finally:
        for s in stores:
            s.close()


def test_store_concurrent_same_content_registers_once(store_url: str) -> None:
    open_store(store_url).close()
    stores = [open_store(store_url) for _ in range(8)]
    results: list[tuple[int, int]] = []
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        barrier.wait()
        row, stored = Registry(stores[i]).register(f"subject-{i % 2}", req(schema_with("same")))
        results.append((row.version, stored.id))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(results) == 8
        assert {v for v, _ in results} == {1} and len({i for _, i in results}) == 1
        reg = Registry(stores[0])
        assert reg.versions("subject-0") == [1] and reg.versions("subject-1") == [1]
    finally:
        for s in stores:
            s.close()


def test_store_failed_registration_leaves_nothing(registry: Registry) -> None:
    registry.configs.update_mode(None, Mode.IMPORT)
    registry.register("imp", req(schema_with(None), id=10, version=1))
    # the content is new, so the transaction inserts it before finding version 1 taken: all must roll back
    with pytest.raises(InvalidVersionError):
        registry.register("imp", req(schema_with("late"), id=11, version=1))
    assert registry.store.run(lambda s: s.schema(11), write=False) is None
    assert registry.versions("imp") == [1]
    with pytest.raises(InvalidSchemaError):
        registry.register("imp", req('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}'))
    assert registry.counts() == (1, 1)


def test_store_semantic_types_are_versioned(registry: Registry) -> None:
    spec = {"base_type": "int", "constraints": {"minimum": 0, "maximum": 10}}
    first, created = registry.semantic.put("score", spec)
    same, created_again = registry.semantic.put("score", spec)
    second, created_second = registry.semantic.put("score", {**spec, "constraints": {"minimum": 0}})
    assert (first.version, created, same.version, created_again, second.version, created_second) == (
        1, True, 1, False, 2, True)
    assert registry.semantic.versions("score") == [1, 2]
    assert registry.semantic.get("score", "1").spec == SemanticTypeSpec.model_validate(spec)


def test_store_rejects_unsupported_urls(tmp_path: object) -> None:
    with pytest.raises(StoreError, match="unsupported store URL"):
        SqlStore("mysql://localhost/x")
    with pytest.raises(StoreError, match="not durable"):
        SqlStore("sqlite://")
