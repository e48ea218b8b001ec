"""The history index proves exactly the versions the Apache checker accepts (bar the cases it leaves to the
one-by-one check), extending an index equals building it whole, and a registry's BACKWARD_TRANSITIVE check with the
index reports what the plain walk over every version reports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import avro.schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schema_registry.avro import parse_schema
from schema_registry.compatibility import VersionedSchema, can_read, check_level, record_shape
from schema_registry.history import HistoryIndex
from schema_registry.model import CompatibilityLevel, RegisterRequest
from schema_registry.registry import Registry
from schema_registry.store import open_store
from tests.schema_registry.test_compatibility_properties import records

# records named R or S, sometimes with a record alias; now and then a version that is no record at all
named_records = st.tuples(records, st.sampled_from(["R", "S"]), st.sampled_from([None, ["R"], ["S"]])).map(
    lambda t: {**t[0], "name": t[1], **({"aliases": t[2]} if t[2] else {})})
versions = st.one_of(named_records, named_records, named_records, st.sampled_from(["string", "int"]))


def _parse(schema: Any) -> avro.schema.Schema:
    return parse_schema(json.dumps(schema), validate_defaults=False).avro


def _left_to_the_walk(reader: avro.schema.Schema) -> bool:
    """Whether the index may leave versions undecided for this reader (field aliases, the enum-default corner)."""
    assert isinstance(reader, avro.schema.RecordSchema)
    return any(f.props.get("aliases") or (isinstance(f.type, avro.schema.EnumSchema) and f.type.props.get("default"))
               for f in reader.fields)


@settings(max_examples=400, deadline=None)
@given(st.lists(versions, min_size=1, max_size=6), named_records)
def test_index_proves_what_the_checker_accepts(history: list[Any], new: Any) -> None:
    parsed = [_parse(v) for v in history]
    reader = _parse(new)
    shape = record_shape(reader)
    assert shape is not None
    proven = HistoryIndex.build([record_shape(p) for p in parsed]).readable(shape)
    assert proven >> len(history) == 0
    exact = not _left_to_the_walk(reader)
    for position, writer in enumerate(parsed):
        verdict = can_read(reader, writer)
        if proven >> position & 1:
            assert verdict, (position, new, history[position])
        elif exact and isinstance(writer, avro.schema.RecordSchema) and writer.type == "record":
            assert not verdict, (position, new, history[position])


@settings(max_examples=200, deadline=None)
@given(st.lists(versions, min_size=2, max_size=6), named_records, st.integers(min_value=0, max_value=6))
def test_extending_an_index_equals_building_it_whole(history: list[Any], new: Any, cut: int) -> None:
    shapes = [record_shape(_parse(v)) for v in history]
    cut = min(cut, len(shapes))
    reader = record_shape(_parse(new))
    assert reader is not None
    whole = HistoryIndex.build(shapes)
    base = HistoryIndex.build(shapes[:cut])
    extended = base.extend(shapes[cut:])
    assert extended.size == whole.size == len(shapes)
    assert extended.readable(reader) == whole.readable(reader)
    assert base.readable(reader) == HistoryIndex.build(shapes[:cut]).readable(reader)  # the base is left as it was


def _record(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Trip", "fields": list(fields)})


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry(open_store(f"sqlite:///{tmp_path / 'registry.db'}"))
    yield reg
    reg.store.close()


def test_registry_check_with_the_index_reports_what_the_walk_reports(registry: Registry) -> None:
    """A history where some versions break the candidates: the same verdict and messages, in the same order, as
    ``check_level`` over every version; again after each registration extends the cached index."""
    history = [
        _record({"name": "a", "type": "int"}),
        _record({"name": "a", "type": "long"}, {"name": "b", "type": "string"}),
        _record({"name": "a", "type": "int"}, {"name": "c", "type": ["null", "int"], "default": None}),
        _record({"name": "a", "type": "string"}),
        _record({"name": "a", "type": "long"}, {"name": "d", "type": {"type": "array", "items": "int"}}),
    ]
    registry.configs.update("s", {"compatibility": "NONE"})
    for text in history:
        registry.register("s", RegisterRequest(schema=text))
    registry.configs.update("s", {"compatibility": "BACKWARD_TRANSITIVE"})
    candidates = [
        _record({"name": "a", "type": "long"}),
        _record({"name": "a", "type": "double"}, {"name": "b", "type": "string", "default": "x"}),
        _record({"name": "a", "type": ["null", "long", "string"], "default": None}),
        _record({"name": "a", "type": "long"}, {"name": "e", "type": "int"}),
        _record({"name": "z", "type": "int", "default": 0}),
    ]
    for round_ in range(3):
        for text in candidates:
            got = registry.test_compatibility("s", RegisterRequest(schema=text), None)
            old = [VersionedSchema(_parse(json.loads(t)), v + 1) for v, t in enumerate(history)]
            want = check_level(VersionedSchema(_parse(json.loads(text))), old, CompatibilityLevel.BACKWARD_TRANSITIVE)
            assert got == want, (round_, text)
        compatible = _record({"name": "a", "type": ["null", "long", "string"], "default": None},
                             {"name": f"n{round_}", "type": "int", "default": 0})
        registry.register("s", RegisterRequest(schema=compatible))  # checked: extends the cached index
        history.append(compatible)
