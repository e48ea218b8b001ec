"""Property tests: the reasons walk and the memoized verdict agree with the Apache Avro checker on generated schema
pairs, and the compatibility laws hold (reflexivity, adding a defaulted field is BACKWARD, removing one breaks
FORWARD)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from schema_registry.avro import parse_schema
from schema_registry.compatibility import VersionedSchema, can_read, check_level, explain, reads
from schema_registry.model import CompatibilityLevel

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
SYMBOLS = ["A", "B", "C"]

leaf = st.one_of(
    st.sampled_from(PRIMITIVES),
    st.lists(st.sampled_from(SYMBOLS), min_size=1, max_size=3, unique=True).flatmap(
        lambda syms: st.sampled_from([None, *syms]).map(
            lambda d: {"type": "enum", "name": "E", "symbols": syms, **({"default": d} if d else {})})),
    st.sampled_from([2, 4]).map(lambda n: {"type": "fixed", "name": "F", "size": n}),
)


def _types(depth: int) -> st.SearchStrategy[Any]:
    if depth == 0:
        return leaf
    inner = _types(depth - 1)
    return st.one_of(
        leaf,
        inner.map(lambda t: {"type": "array", "items": t}),
        inner.map(lambda t: {"type": "map", "values": t}),
        st.lists(st.sampled_from(["null", "int", "long", "string", "bytes", "double"]), min_size=1, max_size=3,
                 unique=True),
    )


field_strategy = st.tuples(st.sampled_from(["a", "b", "c", "d"]), _types(2), st.booleans(),
                           st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=1))
def _named_after(field_name: str, t: Any) -> Any:
    """Give a field's named types (at most one per field here) a name of their own, so a record stays valid."""
    if isinstance(t, dict):
        out = {k: _named_after(field_name, v) for k, v in t.items()}
        if t.get("type") in ("enum", "fixed"):
            out["name"] = f"{t['name']}_{field_name}"
        return out
    return t


records = st.lists(field_strategy, max_size=4, unique_by=lambda f: f[0]).map(lambda fields: {
    "type": "record", "name": "R", "fields": [
        {"name": n, "type": _named_after(n, t), **({"default": None} if d else {}),
         **({"aliases": al} if al else {})}
        for n, t, d, al in fields]})


def _parse(schema: Any) -> Any:
    return parse_schema(json.dumps(schema), validate_defaults=False).avro


@settings(max_examples=300, deadline=None)
@given(records, records)
def test_reasons_agree_with_reference_checker(reader: Any, writer: Any) -> None:
    r, w = _parse(reader), _parse(writer)
    assert (not explain(r, w)) is can_read(r, w)


@settings(max_examples=300, deadline=None)
@given(st.lists(records, min_size=2, max_size=5))
def test_memoized_verdict_agrees_with_reference_checker(schemas: list[Any]) -> None:
    """``reads`` remembers field-type verdicts across pairs and calls: every pair still gets the checker's verdict."""
    parsed = [VersionedSchema(_parse(s), i + 1).with_shape() for i, s in enumerate(schemas)]
    for reader in parsed:
        for writer in parsed:
            assert reads(reader, writer) is can_read(reader.schema, writer.schema)


@settings(max_examples=60, deadline=None)
@given(records)
def test_every_schema_is_compatible_with_itself(schema: Any) -> None:
    s = _parse(schema)
    for level in CompatibilityLevel:
        assert check_level(VersionedSchema(s), [VersionedSchema(s, 1)], level).is_compatible


@settings(max_examples=60, deadline=None)
@given(records)
def test_adding_a_defaulted_field_is_backward_and_removing_it_breaks_forward(schema: Any) -> None:
    extra = {"name": "zz_added", "type": ["null", "string"], "default": None}
    old, new = _parse(schema), _parse({**schema, "fields": [*schema["fields"], extra]})
    assert check_level(VersionedSchema(new), [VersionedSchema(old, 1)], CompatibilityLevel.BACKWARD).is_compatible
    assert check_level(VersionedSchema(new), [VersionedSchema(old, 1)], CompatibilityLevel.FULL).is_compatible
    without_default = {**extra}
    del without_default["default"]
    newer = _parse({**schema, "fields": [*schema["fields"], without_default]})
    assert not check_level(VersionedSchema(newer), [VersionedSchema(old, 1)],
                           CompatibilityLevel.BACKWARD).is_compatible
    # removing a field that has no default: old readers cannot read the new data
    assert not check_level(VersionedSchema(old), [VersionedSchema(newer, 1)],
                           CompatibilityLevel.FORWARD).is_compatible
