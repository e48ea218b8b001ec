"""Tests of tablecore.format.avro_schema (pure, no Spark)."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablecore.format.avro_schema import (
    META_FIELDS,
    arrow_to_avro,
    avro_to_arrow,
    canonical_json,
    meta_arrow_fields,
    with_meta_fields,
)
from tablecore.format.schema_evolution import evolve
from tests.tablecore.avro_literals import (
    ARR_STRUCT,
    FIXTURE_CREATE_SCHEMA_JSON,
    FIXTURE_META_FIELDS_JSON,
    FIXTURE_SCHEMA_JSON,
    MAP_STRUCT,
    STRUCT_FIELD,
    TABLE,
    avro_field,
    fixture_parquet_data_schema,
    fixture_schema,
    inner,
    parse,
    strip_schema,
)
from tests.tablecore.data import ARROW_ALL_TYPES

# ---------------------------------------------------------------------------------------------------------------------
# constants, meta fields, JSON
# ---------------------------------------------------------------------------------------------------------------------


def test_meta_fields_constant() -> None:
    assert META_FIELDS == (
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    )


def test_meta_arrow_fields() -> None:
    fields = meta_arrow_fields()
    assert [f.name for f in fields] == list(META_FIELDS)
    assert all(f.type == pa.string() and f.nullable for f in fields)
    fields.pop()
    assert len(meta_arrow_fields()) == 5  # a fresh list every time


def test_canonical_json_matches_fixture_bytes() -> None:
    assert canonical_json(fixture_schema()) == FIXTURE_SCHEMA_JSON


def test_canonical_json_keeps_non_ascii() -> None:
    assert canonical_json({"doc": "café"}) == '{"doc":"café"}'


def test_with_meta_fields_matches_parquet_avro_schema() -> None:
    schema = fixture_schema()
    expected = FIXTURE_SCHEMA_JSON.replace('"fields":[', '"fields":[' + FIXTURE_META_FIELDS_JSON + ",", 1)
    result = with_meta_fields(schema)
    assert canonical_json(result) == expected
    assert schema == fixture_schema()  # input untouched
    assert with_meta_fields(result) == result  # idempotent, like Hudi's addMetadataFields
    parse(result)


# ---------------------------------------------------------------------------------------------------------------------
# arrow_to_avro
# ---------------------------------------------------------------------------------------------------------------------


def test_arrow_to_avro_equals_fixture_schema() -> None:
    assert arrow_to_avro(fixture_parquet_data_schema(), TABLE) == fixture_schema()


def test_arrow_to_avro_spark_arrow_schema_equals_fixture_schema() -> None:
    """What Spark's to_arrow_schema gives for the same table (byte/short, "element" items) maps identically."""
    spark_like = pa.schema([
        *[(f.name, f.type) for f in fixture_parquet_data_schema()][:11],
        ("arrayField", pa.list_(pa.field("element", ARR_STRUCT))),
        ("mapField", pa.map_(pa.string(), MAP_STRUCT)),
        ("structField", STRUCT_FIELD),
        ("byteField", pa.int8()),
        ("shortField", pa.int16()),
    ])
    assert arrow_to_avro(spark_like, TABLE) == fixture_schema()


def test_arrow_to_avro_primitive_mapping() -> None:
    cases: list[tuple[pa.DataType, Any]] = [
        (pa.int8(), "int"),
        (pa.int16(), "int"),
        (pa.int32(), "int"),
        (pa.int64(), "long"),
        (pa.float32(), "float"),
        (pa.float64(), "double"),
        (pa.bool_(), "boolean"),
        (pa.string(), "string"),
        (pa.large_string(), "string"),
        (pa.binary(), "bytes"),
        (pa.large_binary(), "bytes"),
        (pa.date32(), {"type": "int", "logicalType": "date"}),
        (pa.timestamp("s", tz="UTC"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("ms", tz="Europe/Paris"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("us", tz="+02:00"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("ns", tz="UTC"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("us"), {"type": "long", "logicalType": "local-timestamp-micros"}),
        (pa.timestamp("ns"), {"type": "long", "logicalType": "local-timestamp-micros"}),
        (pa.list_(pa.int64()), {"type": "array", "items": ["null", "long"]}),
        (pa.large_list(pa.string()), {"type": "array", "items": ["null", "string"]}),
        (pa.map_(pa.string(), pa.float64()), {"type": "map", "values": ["null", "double"]}),
        (pa.map_(pa.large_string(), pa.bool_()), {"type": "map", "values": ["null", "boolean"]}),
    ]
    for arrow_type, expected in cases:
        schema = arrow_to_avro(pa.schema([pa.field("c", arrow_type, nullable=False)]), "t")
        assert schema["fields"] == [{"name": "c", "type": ["null", expected], "default": None}], arrow_type


@pytest.mark.parametrize(
    ("precision", "size"),
    [(1, 1), (2, 1), (3, 2), (4, 2), (9, 4), (10, 5), (18, 8), (19, 9), (28, 12), (38, 16)],
)
def test_arrow_to_avro_decimal_fixed_size(precision: int, size: int) -> None:
    schema = arrow_to_avro(pa.schema([("d", pa.decimal128(precision, 0))]), "t")
    assert inner(schema["fields"][0]) == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.t.t_record.d",
        "size": size,
        "logicalType": "decimal",
        "precision": precision,
        "scale": 0,
    }


def test_arrow_to_avro_nested_namespaces() -> None:
    deep = pa.struct([("amount", pa.decimal128(12, 2)), ("leaf", pa.struct([("x", pa.int32())]))])
    schema = arrow_to_avro(
        pa.schema([
            ("outer", pa.struct([("mid", deep), ("price", pa.decimal128(5, 1))])),
            ("items", pa.list_(pa.struct([("d", pa.decimal128(4, 2))]))),
            ("nested", pa.list_(pa.list_(pa.struct([("y", pa.int64())])))),
            ("lookup", pa.map_(pa.string(), pa.list_(pa.decimal128(7, 3)))),
            ("bymap", pa.map_(pa.string(), pa.struct([("z", pa.string())]))),
        ]),
        "tbl",
    )
    ns, rec = "hoodie.tbl", "tbl_record"
    assert (schema["name"], schema["namespace"]) == (rec, ns)

    outer = inner(avro_field(schema, "outer"))
    assert (outer["name"], outer["namespace"]) == ("outer", f"{ns}.{rec}")
    mid = inner(avro_field(schema, "outer", "mid"))
    assert (mid["name"], mid["namespace"]) == ("mid", f"{ns}.{rec}.outer")
    amount = inner(avro_field(schema, "outer", "mid", "amount"))
    assert (amount["name"], amount["namespace"], amount["size"]) == ("fixed", f"{ns}.{rec}.outer.mid.amount", 6)
    leaf = inner(avro_field(schema, "outer", "mid", "leaf"))
    assert (leaf["name"], leaf["namespace"]) == ("leaf", f"{ns}.{rec}.outer.mid")
    price = inner(avro_field(schema, "outer", "price"))
    assert price["namespace"] == f"{ns}.{rec}.outer.price"

    items = inner(avro_field(schema, "items"))["items"][1]
    assert (items["name"], items["namespace"]) == ("items", f"{ns}.{rec}")
    assert inner(items["fields"][0])["namespace"] == f"{ns}.{rec}.items.d"

    nested = inner(avro_field(schema, "nested"))["items"][1]["items"][1]
    assert (nested["type"], nested["name"], nested["namespace"]) == ("record", "nested", f"{ns}.{rec}")

    lookup = inner(avro_field(schema, "lookup"))["values"][1]["items"][1]
    assert (lookup["name"], lookup["namespace"], lookup["precision"]) == ("fixed", f"{ns}.{rec}.lookup", 7)

    bymap = inner(avro_field(schema, "bymap"))["values"][1]
    assert (bymap["name"], bymap["namespace"]) == ("bymap", f"{ns}.{rec}")
    parse(schema)


@pytest.mark.parametrize(
    ("arrow_type", "column"),
    [
        (pa.null(), "c"),
        (pa.uint32(), "c"),
        (pa.uint64(), "c"),
        (pa.float16(), "c"),
        (pa.duration("us"), "c"),
        (pa.date64(), "c"),
        (pa.time64("us"), "c"),
        (pa.dictionary(pa.int32(), pa.string()), "c"),
        (pa.struct([("inner", pa.null())]), "c.inner"),
        (pa.list_(pa.struct([("bad", pa.uint8())])), "c.element.bad"),
        (pa.map_(pa.string(), pa.null()), "c.value"),
    ],
)
def test_arrow_to_avro_unsupported_type_names_column(arrow_type: pa.DataType, column: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"column '{column}'")):
        arrow_to_avro(pa.schema([("ok", pa.int32()), ("c", arrow_type)]), "t")


def test_arrow_to_avro_rejects_non_string_map_keys() -> None:
    with pytest.raises(ValueError, match=r"column 'm'.*map keys must be strings"):
        arrow_to_avro(pa.schema([("m", pa.map_(pa.int32(), pa.string()))]), "t")


def test_arrow_to_avro_rejects_invalid_names() -> None:
    with pytest.raises(ValueError, match="column 'my-col'"):
        arrow_to_avro(pa.schema([("my-col", pa.int32())]), "t")
    with pytest.raises(ValueError, match=re.escape("column 's.1x'")):
        arrow_to_avro(pa.schema([("s", pa.struct([("1x", pa.int32())]))]), "t")
    with pytest.raises(ValueError, match="table name"):
        arrow_to_avro(pa.schema([("a", pa.int32())]), "my table")
    with pytest.raises(ValueError, match="column 'a' appears more than once"):
        arrow_to_avro(pa.schema([("a", pa.int32()), ("a", pa.int64())]), "t")


def test_arrow_to_avro_output_is_valid_avro() -> None:
    parse(arrow_to_avro(fixture_parquet_data_schema(), TABLE))
    parse(with_meta_fields(arrow_to_avro(fixture_parquet_data_schema(), TABLE)))


# ---------------------------------------------------------------------------------------------------------------------
# avro_to_arrow
# ---------------------------------------------------------------------------------------------------------------------

# the same as the Parquet data schema, but Avro-derived lists name their (nullable) item "element"
EXPECTED_FIXTURE_ARROW = fixture_parquet_data_schema().set(
    fixture_parquet_data_schema().get_field_index("arrayField"),
    pa.field("arrayField", pa.list_(pa.field("element", ARR_STRUCT))),
)


def test_avro_to_arrow_fixture_schema() -> None:
    result = avro_to_arrow(fixture_schema())
    assert result.equals(EXPECTED_FIXTURE_ARROW)
    assert result.field("arrayField").type.value_field.name == "element"
    assert all(f.nullable for f in result)
    # same types as the fixture's Parquet file, ignoring the list item field name ("array", not null there)
    assert strip_schema(result) == strip_schema(fixture_parquet_data_schema())


def test_avro_to_arrow_accepts_json_string_and_create_schema_style() -> None:
    assert avro_to_arrow(FIXTURE_SCHEMA_JSON).equals(EXPECTED_FIXTURE_ARROW)
    assert avro_to_arrow(FIXTURE_CREATE_SCHEMA_JSON).equals(EXPECTED_FIXTURE_ARROW)


def test_avro_to_arrow_all_fields_nullable() -> None:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "a", "type": "int"},
            {"name": "s", "type": {"type": "record", "name": "s", "fields": [{"name": "x", "type": "string"}]}},
            {"name": "l", "type": {"type": "array", "items": "long"}},
        ],
    }
    result = avro_to_arrow(schema)
    assert all(f.nullable for f in result)
    assert result.field("s").type.field("x").nullable
    assert result.field("l").type.value_field.nullable


def test_avro_to_arrow_type_mapping() -> None:
    types: list[tuple[Any, pa.DataType]] = [
        ("int", pa.int32()),
        ("long", pa.int64()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("string", pa.string()),
        ("bytes", pa.binary()),
        ({"type": "string"}, pa.string()),
        ({"type": "enum", "name": "color", "symbols": ["RED", "GREEN"]}, pa.string()),
        ({"type": "fixed", "name": "md5", "size": 16}, pa.binary()),
        ({"type": "fixed", "name": "dec", "size": 9, "logicalType": "decimal", "precision": 20, "scale": 4},
         pa.decimal128(20, 4)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 7, "scale": 2}, pa.decimal128(7, 2)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 6}, pa.decimal128(6, 0)),
        ({"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 2}, pa.decimal256(50, 2)),
        ({"type": "int", "logicalType": "date"}, pa.date32()),
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
        ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("us", tz="UTC")),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("us")),
        ({"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
        ({"type": "int", "logicalType": "time-millis"}, pa.time32("ms")),
        ({"type": "string", "logicalType": "uuid"}, pa.string()),
        ({"type": "long", "logicalType": "no-such-logical-type"}, pa.int64()),
        ({"type": "string", "logicalType": "date"}, pa.string()),  # logical type on the wrong base: ignored
        ({"type": "bytes", "logicalType": "decimal"}, pa.binary()),  # invalid decimal: ignored
        ({"type": "array", "items": ["null", "int"]}, pa.list_(pa.field("element", pa.int32()))),
        ({"type": "array", "items": "string"}, pa.list_(pa.field("element", pa.string()))),
        ({"type": "map", "values": ["double", "null"]}, pa.map_(pa.string(), pa.float64())),
        ({"type": "record", "name": "inner", "fields": [{"name": "x", "type": ["null", "long"]}]},
         pa.struct([("x", pa.int64())])),
        ("null", pa.null()),
    ]
    for i, (avro_type, expected) in enumerate(types):
        for wrapped in (avro_type, ["null", avro_type], [avro_type, "null"]):
            schema = {"type": "record", "name": "r", "namespace": "ns", "fields": [{"name": f"c{i}", "type": wrapped}]}
            result = avro_to_arrow(schema)
            assert result.field(0).type == expected, (avro_type, result.field(0).type)
            assert result.field(0).name == f"c{i}"


def test_avro_to_arrow_named_references() -> None:
    schema = {
        "type": "record",
        "name": "top",
        "namespace": "org.example",
        "fields": [
            {"name": "a", "type": {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}},
            {"name": "b", "type": ["null", "Point"]},  # short name, resolved in the enclosing namespace
            {"name": "c", "type": "org.example.Point"},  # full name
            {"name": "d", "type": {"type": "fixed", "name": "Hash", "namespace": "other", "size": 4}},
            {"name": "e", "type": {"type": "array", "items": "other.Hash"}},
            {"name": "f", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "g", "type": {"type": "map", "values": "Kind"}},
            {
                "name": "h",
                "type": {
                    "type": "record",
                    "name": "Holder",
                    "namespace": "deep.ns",
                    "fields": [
                        {"name": "m", "type": {"type": "fixed", "name": "Money", "size": 8, "logicalType": "decimal",
                                               "precision": 18, "scale": 2}},
                        {"name": "n", "type": "Money"},  # resolved in deep.ns, the namespace of Holder
                        {"name": "p", "type": "org.example.Point"},
                    ],
                },
            },
            {"name": "i", "type": "deep.ns.Money"},
        ],
    }
    point = pa.struct([("x", pa.int32())])
    money = pa.decimal128(18, 2)
    expected = pa.schema([
        ("a", point),
        ("b", point),
        ("c", point),
        ("d", pa.binary()),
        ("e", pa.list_(pa.field("element", pa.binary()))),
        ("f", pa.string()),
        ("g", pa.map_(pa.string(), pa.string())),
        ("h", pa.struct([("m", money), ("n", money), ("p", point)])),
        ("i", money),
    ])
    assert avro_to_arrow(schema).equals(expected)
    assert avro_to_arrow(json.dumps(schema)).equals(expected)


def test_avro_to_arrow_preserves_field_order() -> None:
    names = ["z", "a", "m", "b"]
    schema = {"type": "record", "name": "r", "fields": [{"name": n, "type": "int"} for n in names]}
    assert avro_to_arrow(schema).names == names


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "string"]}]}, "column 'u'"),
        ({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["null", "int", "string"]}]}, "column 'u'"),
        ({"type": "record", "name": "r", "fields": [{"name": "x", "type": "Missing"}]}, "unknown Avro type"),
        (
            {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
            "recursive",
        ),
        ({"type": "array", "items": "int"}, "must be a record"),
        ("\"int\"", "must be a record"),
    ],
)
def test_avro_to_arrow_errors(schema: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        avro_to_arrow(schema)


# ---------------------------------------------------------------------------------------------------------------------
# round trip
# ---------------------------------------------------------------------------------------------------------------------


def test_round_trip_all_types() -> None:
    source = ARROW_ALL_TYPES
    # every column reads back as its own type, except these (Avro has no narrower ints, large types, zoned or
    # non-micro timestamps, and names list items "element")
    read_back = {
        "i8": pa.int32(),
        "i16": pa.int32(),
        "ls": pa.string(),
        "lb": pa.binary(),
        "ts_ns_paris": pa.timestamp("us", tz="UTC"),
        "ts_local_ms": pa.timestamp("us"),
        "ints": pa.list_(pa.field("element", pa.int32())),
        "big_list": pa.list_(pa.field("element", pa.string())),
        "nested_list": pa.list_(pa.field("element", pa.list_(pa.field("element", pa.decimal128(4, 1))))),
        "m_struct": pa.map_(pa.string(), pa.struct([
            ("v", pa.float64()), ("w", pa.list_(pa.field("element", pa.bool_())))])),
        "st": pa.struct([
            ("a", pa.int32()),
            ("inner", pa.struct([("dd", pa.decimal128(20, 2)), ("t", pa.timestamp("us", tz="UTC"))])),
            ("arr", pa.list_(pa.field("element", pa.struct([("k", pa.string())])))),
        ]),
    }
    expected = pa.schema([(f.name, read_back.get(f.name, f.type)) for f in source])
    avro = arrow_to_avro(source, "all_types")
    parse(avro)
    back = avro_to_arrow(avro)
    assert back.equals(expected)
    # a normalised schema is a fixed point of the round trip, through JSON text as well
    assert avro_to_arrow(canonical_json(arrow_to_avro(back, "all_types"))).equals(back)
    assert arrow_to_avro(back, "all_types") == avro


def test_round_trip_fixture() -> None:
    assert arrow_to_avro(avro_to_arrow(FIXTURE_SCHEMA_JSON), TABLE) == fixture_schema()
    assert arrow_to_avro(avro_to_arrow(FIXTURE_CREATE_SCHEMA_JSON), TABLE) == fixture_schema()


# ---------------------------------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------------------------------

_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_LEAVES = st.sampled_from([
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.bool_(), pa.string(),
    pa.large_string(), pa.binary(), pa.date32(), pa.timestamp("us", tz="UTC"), pa.timestamp("ms"),
    pa.decimal128(10, 5), pa.decimal128(38, 0), pa.decimal128(1, 1),
])


def _struct_of(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    return st.lists(st.tuples(_NAMES, children), min_size=1, max_size=4, unique_by=lambda f: f[0]).map(pa.struct)


_TYPES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        children.map(pa.list_),
        children.map(lambda t: pa.map_(pa.string(), t)),
        _struct_of(children),
    ),
    max_leaves=8,
)
_SCHEMAS = st.lists(st.tuples(_NAMES, _TYPES), min_size=1, max_size=5, unique_by=lambda f: f[0]).map(pa.schema)


@settings(max_examples=60, deadline=None)
@given(_SCHEMAS)
def test_property_round_trip_and_self_evolution(schema: pa.Schema) -> None:
    avro = arrow_to_avro(schema, "prop")
    parse(avro)
    back = avro_to_arrow(canonical_json(avro))
    assert back.names == schema.names
    assert arrow_to_avro(back, "prop") == avro
    assert avro_to_arrow(arrow_to_avro(back, "prop")).equals(back)
    assert evolve(avro, avro) == avro
    assert evolve(avro, arrow_to_avro(back, "prop")) == avro
