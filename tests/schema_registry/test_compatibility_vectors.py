"""The Avro/Confluent compatibility vectors, checked on the pure layer (checker, explanations, levels)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schema_registry.avro import parse_schema
from schema_registry.compatibility import VersionedSchema, can_read, check_level, explain, reads
from schema_registry.model import CompatibilityLevel
from tests.schema_registry.conftest import load_vectors

PAIRS = load_vectors("pairs.json")
LEVELS = load_vectors("levels.json")


def _parse(schema: Any) -> Any:
    return parse_schema(json.dumps(schema), validate_defaults=False).avro


@pytest.mark.parametrize("vector", PAIRS, ids=[v["name"][:90] for v in PAIRS])
def test_pair_verdict_and_reasons_match_the_vector(vector: dict[str, Any]) -> None:
    reader, writer = _parse(vector["reader"]), _parse(vector["writer"])
    expected = vector["reader_can_read_writer"]
    assert can_read(reader, writer) is expected
    reasons = explain(reader, writer)
    # our explanation walk agrees with the reference checker on every vector
    assert (not reasons) is expected, reasons
    # and so does the memoized record-level verdict the level checks use (asked twice: cold, then remembered)
    assert reads(VersionedSchema(reader), VersionedSchema(writer)) is expected
    assert reads(VersionedSchema(reader).with_shape(), VersionedSchema(writer).with_shape()) is expected


def test_pair_reasons_name_the_location_and_field() -> None:
    reader = _parse({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "string"}, {"name": "c", "type": "long"}]})
    writer = _parse({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "c", "type": "long"}]})
    reasons = {(r.error_type, r.location, r.detail) for r in explain(reader, writer)}
    assert reasons == {
        ("TYPE_MISMATCH", "/fields/0/type", "reader type: INT not compatible with writer type: STRING"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "b"),
    }


@pytest.mark.parametrize("vector", LEVELS, ids=[f"{i}-{v['level']}-{v.get('notes', '')[:50]}"
                                                for i, v in enumerate(LEVELS)])
def test_level_vector(vector: dict[str, Any]) -> None:
    previous = [VersionedSchema(_parse(s), i + 1) for i, s in enumerate(vector["existing"])]
    result = check_level(VersionedSchema(_parse(vector["new"])), previous, CompatibilityLevel(vector["level"]))
    assert result.is_compatible is vector["compatible"], result.messages
    if not result.is_compatible:
        assert result.messages[-1] == f"{{compatibility: '{vector['level']}'}}"
        assert any("errorType:" in m for m in result.messages)


def test_every_schema_is_compatible_with_itself_under_every_level() -> None:
    for vector in PAIRS:
        schema = _parse(vector["writer"])
        for level in CompatibilityLevel:
            assert check_level(VersionedSchema(schema), [VersionedSchema(schema, 1)], level).is_compatible
