"""Schema text handling: canonical (stored) text, normalized text, identity, reference resolution."""

from __future__ import annotations

import json

import pytest

from schema_registry.avro import canonical_text, fingerprint, normalized_text, parse_schema
from schema_registry.errors import InvalidSchemaError
from schema_registry.model import SchemaReference


def test_canonical_text_is_compact_and_keeps_everything() -> None:
    text = json.dumps({"type": "record", "name": "R", "doc": "d", "semanticType": "x", "fields": [
        {"name": "a", "type": {"type": "int"}, "default": 1, "aliases": ["b"]},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "l", "type": {"type": "array", "items": {"type": "string"}}}]}, indent=2)
    assert canonical_text(json.loads(text)) == (
        '{"type":"record","name":"R","doc":"d","semanticType":"x","fields":[{"name":"a","type":"int","default":1,'
        '"aliases":["b"]},{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},'
        '{"name":"l","type":{"type":"array","items":"string"}}]}')
    assert parse_schema(text).text == canonical_text(json.loads(text))
    assert canonical_text({"type": "string"}) == '"string"'


def test_normalized_text_uses_full_names_and_a_fixed_key_order() -> None:
    a = {"namespace": "com.x", "type": "record", "name": "R", "fields": [
        {"type": {"type": "enum", "name": "E", "symbols": ["A"]}, "name": "e", "zeta": 1, "alpha": 2},
        {"name": "again", "type": "E"}]}
    b = {"type": "record", "name": "com.x.R", "fields": [
        {"name": "e", "alpha": 2, "type": {"name": "com.x.E", "symbols": ["A"], "type": "enum"}, "zeta": 1},
        {"type": "com.x.E", "name": "again"}]}
    assert normalized_text(json.dumps(a)) == normalized_text(json.dumps(b))
    out = json.loads(normalized_text(json.dumps(a)))
    assert out["name"] == "com.x.R" and out["fields"][1]["type"] == "com.x.E"
    assert list(out["fields"][0]) == ["name", "type", "alpha", "zeta"]
    # normalization never changes meaning: the normalized text parses to the same schema
    assert parse_schema(normalized_text(json.dumps(a))).avro == parse_schema(json.dumps(a)).avro


def test_fingerprint_covers_references_metadata_and_rules() -> None:
    base = fingerprint("AVRO", '"string"', [], None, None)
    assert base == fingerprint("AVRO", '"string"', [], {}, {})  # empty means absent
    assert base != fingerprint("AVRO", '"string"', [SchemaReference(name="n", subject="s", version=1)], None, None)
    assert base != fingerprint("AVRO", '"string"', [], {"properties": {"a": "b"}}, None)
    assert base != fingerprint("AVRO", '"string"', [], None, {"domainRules": []})


def test_references_make_named_types_visible() -> None:
    address = '{"type": "record", "name": "Address", "namespace": "geo", "fields": [{"name": "c", "type": "string"}]}'
    person = '{"type": "record", "name": "Person", "fields": [{"name": "home", "type": "geo.Address"}]}'
    parsed = parse_schema(person, [address])
    assert parsed.avro.fields[0].type.fullname == "geo.Address"
    with pytest.raises(InvalidSchemaError, match=r"geo\.Address"):
        parse_schema(person)
