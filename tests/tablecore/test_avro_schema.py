"""Tests of tablecore.format.avro_schema (pure, no Spark)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablecore.exceptions import SchemaEvolutionError
from tablecore.format.avro_schema import (
    META_FIELDS,
    arrow_to_avro,
    avro_to_arrow,
    canonical_json,
    meta_arrow_fields,
    with_meta_fields,
)
from tablecore.format.schema_evolution import evolve
from tests.tablecore.data import ARROW_ALL_TYPES

# ---------------------------------------------------------------------------------------------------------------------
# literals copied from the Hudi 0.14 fixture cow_complexkeygen_hivestyle (commit 20240418173235694)
# ---------------------------------------------------------------------------------------------------------------------

TABLE = "v6_complexkeygen_hivestyle"

# `extraMetadata.schema` of .hoodie/20240418173235694.commit, byte for byte.
FIXTURE_SCHEMA_JSON = (
    '{"type":"record","name":"v6_complexkeygen_hivestyle_record","namespace":"hoodie.v6_complexkeygen_hivestyle",'
    '"fields":[{"name":"id","type":["null","int"],"default":null},{"name":"name","type":["null","string"],'
    '"default":null},{"name":"isActive","type":["null","boolean"],"default":null},{"name":"intField","type":["null",'
    '"int"],"default":null},{"name":"longField","type":["null","long"],"default":null},{"name":"floatField","type":'
    '["null","float"],"default":null},{"name":"doubleField","type":["null","double"],"default":null},{"name":'
    '"decimalField","type":["null",{"type":"fixed","name":"fixed","namespace":"hoodie.v6_complexkeygen_hivestyle.'
    'v6_complexkeygen_hivestyle_record.decimalField","size":5,"logicalType":"decimal","precision":10,"scale":5}],'
    '"default":null},{"name":"dateField","type":["null",{"type":"int","logicalType":"date"}],"default":null},{"name":'
    '"timestampField","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},{"name":'
    '"binaryField","type":["null","bytes"],"default":null},{"name":"arrayField","type":["null",{"type":"array",'
    '"items":["null",{"type":"record","name":"arrayField","namespace":"hoodie.v6_complexkeygen_hivestyle.'
    'v6_complexkeygen_hivestyle_record","fields":[{"name":"arr_struct_f1","type":["null","string"],"default":null},'
    '{"name":"arr_struct_f2","type":["null","int"],"default":null}]}]}],"default":null},{"name":"mapField","type":'
    '["null",{"type":"map","values":["null",{"type":"record","name":"mapField","namespace":"hoodie.'
    'v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record","fields":[{"name":"map_field_value_struct_f1",'
    '"type":["null","double"],"default":null},{"name":"map_field_value_struct_f2","type":["null","boolean"],'
    '"default":null}]}]}],"default":null},{"name":"structField","type":["null",{"type":"record","name":"structField",'
    '"namespace":"hoodie.v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record","fields":[{"name":"field1",'
    '"type":["null","string"],"default":null},{"name":"field2","type":["null","int"],"default":null},{"name":'
    '"child_struct","type":["null",{"type":"record","name":"child_struct","namespace":"hoodie.'
    'v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record.structField","fields":[{"name":"child_field1",'
    '"type":["null","double"],"default":null},{"name":"child_field2","type":["null","boolean"],"default":null}]}],'
    '"default":null}]}],"default":null},{"name":"byteField","type":["null","int"],"default":null},{"name":'
    '"shortField","type":["null","int"],"default":null}]}'
)

# The five meta fields as they open `parquet.avro.schema` of the fixture's base files.
FIXTURE_META_FIELDS_JSON = (
    '{"name":"_hoodie_commit_time","type":["null","string"],"doc":"","default":null},'
    '{"name":"_hoodie_commit_seqno","type":["null","string"],"doc":"","default":null},'
    '{"name":"_hoodie_record_key","type":["null","string"],"doc":"","default":null},'
    '{"name":"_hoodie_partition_path","type":["null","string"],"doc":"","default":null},'
    '{"name":"_hoodie_file_name","type":["null","string"],"doc":"","default":null}'
)

# `hoodie.table.create.schema` of hoodie.properties (Spark SQL style: [T,"null"], no defaults), unescaped.
FIXTURE_CREATE_SCHEMA_JSON = (
    '{"type":"record","name":"v6_complexkeygen_hivestyle_record","namespace":"hoodie.v6_complexkeygen_hivestyle",'
    '"fields":[{"name":"id","type":["int","null"]},{"name":"name","type":["string","null"]},{"name":"isActive",'
    '"type":["boolean","null"]},{"name":"intField","type":["int","null"]},{"name":"longField","type":["long","null"]},'
    '{"name":"floatField","type":["float","null"]},{"name":"doubleField","type":["double","null"]},{"name":'
    '"decimalField","type":[{"type":"fixed","name":"fixed","namespace":"hoodie.v6_complexkeygen_hivestyle.'
    'v6_complexkeygen_hivestyle_record.decimalField","size":5,"logicalType":"decimal","precision":10,"scale":5},'
    '"null"]},{"name":"dateField","type":[{"type":"int","logicalType":"date"},"null"]},{"name":"timestampField",'
    '"type":[{"type":"long","logicalType":"timestamp-micros"},"null"]},{"name":"binaryField","type":["bytes","null"]},'
    '{"name":"arrayField","type":[{"type":"array","items":[{"type":"record","name":"arrayField","namespace":"hoodie.'
    'v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record","fields":[{"name":"arr_struct_f1","type":['
    '"string","null"]},{"name":"arr_struct_f2","type":["int","null"]}]},"null"]},"null"]},{"name":"mapField","type":'
    '[{"type":"map","values":[{"type":"record","name":"mapField","namespace":"hoodie.v6_complexkeygen_hivestyle.'
    'v6_complexkeygen_hivestyle_record","fields":[{"name":"map_field_value_struct_f1","type":["double","null"]},'
    '{"name":"map_field_value_struct_f2","type":["boolean","null"]}]},"null"]},"null"]},{"name":"structField","type":'
    '[{"type":"record","name":"structField","namespace":"hoodie.v6_complexkeygen_hivestyle.'
    'v6_complexkeygen_hivestyle_record","fields":[{"name":"field1","type":["string","null"]},{"name":"field2","type":'
    '["int","null"]},{"name":"child_struct","type":[{"type":"record","name":"child_struct","namespace":"hoodie.'
    'v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record.structField","fields":[{"name":"child_field1",'
    '"type":["double","null"]},{"name":"child_field2","type":["boolean","null"]}]},"null"]}]},"null"]},{"name":'
    '"byteField","type":["int","null"]},{"name":"shortField","type":["int","null"]}]}'
)

ARR_STRUCT = pa.struct([("arr_struct_f1", pa.string()), ("arr_struct_f2", pa.int32())])
MAP_STRUCT = pa.struct([("map_field_value_struct_f1", pa.float64()), ("map_field_value_struct_f2", pa.bool_())])
CHILD_STRUCT = pa.struct([("child_field1", pa.float64()), ("child_field2", pa.bool_())])
STRUCT_FIELD = pa.struct([("field1", pa.string()), ("field2", pa.int32()), ("child_struct", CHILD_STRUCT)])


def fixture_parquet_data_schema() -> pa.Schema:
    """The data columns of the fixture's base file schema (pq.read_schema minus meta columns), rebuilt by hand.

    The Parquet list is a 2-level list whose item field is named "array" and is not nullable.
    """
    return pa.schema([
        ("id", pa.int32()),
        ("name", pa.string()),
        ("isActive", pa.bool_()),
        ("intField", pa.int32()),
        ("longField", pa.int64()),
        ("floatField", pa.float32()),
        ("doubleField", pa.float64()),
        ("decimalField", pa.decimal128(10, 5)),
        ("dateField", pa.date32()),
        ("timestampField", pa.timestamp("us", tz="UTC")),
        ("binaryField", pa.binary()),
        ("arrayField", pa.list_(pa.field("array", ARR_STRUCT, nullable=False))),
        ("mapField", pa.map_(pa.string(), MAP_STRUCT)),
        ("structField", STRUCT_FIELD),
        ("byteField", pa.int32()),
        ("shortField", pa.int32()),
    ])


def fixture_schema() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(FIXTURE_SCHEMA_JSON)
    return result


def strip_list_names(t: pa.DataType) -> pa.DataType:
    """``t`` with every list item field renamed to "item" and made nullable (for comparisons ignoring them)."""
    if pa.types.is_list(t):
        return pa.list_(strip_list_names(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(strip_list_names(t.key_type), strip_list_names(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, strip_list_names(f.type), f.nullable) for f in t])
    return t


def strip_schema(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, strip_list_names(f.type)) for f in schema]


def avro_field(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    """The field at ``path`` (nested record fields; lists/maps are stepped through)."""
    node: Any = schema
    field: dict[str, Any] = {}
    for name in path:
        while True:
            if isinstance(node, list):
                node = next(b for b in node if b != "null")
            elif node.get("type") == "array":
                node = node["items"]
            elif node.get("type") == "map":
                node = node["values"]
            else:
                break
        field = next(f for f in node["fields"] if f["name"] == name)
        node = field["type"]
    return field


def inner(field: dict[str, Any]) -> Any:
    """The non-null branch of a field type."""
    t = field["type"]
    return next(b for b in t if b != "null") if isinstance(t, list) else t


def parse(schema: dict[str, Any]) -> None:
    """Validate a schema with fastavro (raises on invalid Avro, e.g. redefined names)."""
    fastavro.parse_schema(copy.deepcopy(schema), _force=True)


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
# evolve
# ---------------------------------------------------------------------------------------------------------------------


def avro_of(*fields: tuple[str, pa.DataType], table: str = "t") -> dict[str, Any]:
    return arrow_to_avro(pa.schema(list(fields)), table)


def test_evolve_new_table_returns_incoming() -> None:
    incoming = fixture_schema()
    result = evolve(None, incoming)
    assert result == incoming
    assert result is not incoming


def test_evolve_same_schema_is_unchanged() -> None:
    table = fixture_schema()
    assert evolve(table, fixture_schema()) == table
    assert evolve(table, arrow_to_avro(fixture_parquet_data_schema(), TABLE)) == table
    assert table == fixture_schema()  # not modified


def test_evolve_spark_sql_create_schema_keeps_its_form() -> None:
    table = json.loads(FIXTURE_CREATE_SCHEMA_JSON)
    assert evolve(table, fixture_schema()) == table


@pytest.mark.parametrize(
    ("missing", "column"),
    [
        ("name", "name"),
        ("structField.field1", "structField.field1"),
        ("structField.child_struct.child_field2", "structField.child_struct.child_field2"),
        ("arrayField.arr_struct_f2", "arrayField.element.arr_struct_f2"),
        ("mapField.map_field_value_struct_f1", "mapField.value.map_field_value_struct_f1"),
    ],
)
def test_evolve_rejects_dropped_column(missing: str, column: str) -> None:
    incoming = fixture_schema()
    *parents, leaf = missing.split(".")
    record: Any = avro_field(incoming, *parents) if parents else incoming
    if parents:
        record = inner(record)
        while record["type"] in ("array", "map"):
            record = record["items" if record["type"] == "array" else "values"][1]
    record["fields"] = [f for f in record["fields"] if f["name"] != leaf]
    message = f"column '{column}' is missing from the input; dropping columns is not supported"
    with pytest.raises(SchemaEvolutionError, match=re.escape(message)):
        evolve(fixture_schema(), incoming)


def test_evolve_appends_new_top_level_column() -> None:
    table = avro_of(("a", pa.int32()), ("b", pa.string()))
    incoming = avro_of(("new", pa.decimal128(6, 2)), ("b", pa.string()), ("a", pa.int32()))
    result = evolve(table, incoming)
    assert [f["name"] for f in result["fields"]] == ["a", "b", "new"]
    assert result["fields"][:2] == table["fields"]
    assert result["fields"][2] == incoming["fields"][0]
    assert result["fields"][2]["default"] is None
    parse(result)


def test_evolve_appends_new_nested_columns() -> None:
    item = pa.struct([("x", pa.int32())])
    table = avro_of(
        ("s", pa.struct([("a", pa.int32())])), ("l", pa.list_(item)), ("m", pa.map_(pa.string(), item)),
    )
    item2 = pa.struct([("x", pa.int32()), ("y", pa.string())])
    incoming = avro_of(
        ("s", pa.struct([("a", pa.int32()), ("deep", pa.struct([("d", pa.decimal128(4, 2))]))])),
        ("l", pa.list_(item2)),
        ("m", pa.map_(pa.string(), item2)),
    )
    result = evolve(table, incoming)
    assert result == incoming  # same table name: appending yields exactly what arrow_to_avro would write
    assert [f["name"] for f in inner(avro_field(result, "s"))["fields"]] == ["a", "deep"]
    assert [f["name"] for f in inner(avro_field(result, "l"))["items"][1]["fields"]] == ["x", "y"]
    assert [f["name"] for f in inner(avro_field(result, "m"))["values"][1]["fields"]] == ["x", "y"]
    parse(result)


def test_evolve_keeps_table_names_and_reroots_new_types() -> None:
    table = avro_of(("s", pa.struct([("a", pa.int32())])), ("p", pa.decimal128(5, 2)), table="old_name")
    incoming = avro_of(
        ("s", pa.struct([("a", pa.int32()), ("n", pa.struct([("d", pa.decimal128(4, 2))]))])),
        ("p", pa.decimal128(9, 2)),
        ("extra", pa.decimal128(3, 1)),
        table="new_name",
    )
    result = evolve(table, incoming)
    assert (result["name"], result["namespace"]) == ("old_name_record", "hoodie.old_name")
    s = inner(avro_field(result, "s"))
    assert (s["name"], s["namespace"]) == ("s", "hoodie.old_name.old_name_record")
    n = inner(avro_field(result, "s", "n"))
    assert (n["name"], n["namespace"]) == ("n", "hoodie.old_name.old_name_record.s")
    assert inner(avro_field(result, "s", "n", "d"))["namespace"] == "hoodie.old_name.old_name_record.s.n.d"
    p = inner(avro_field(result, "p"))
    assert (p["namespace"], p["precision"], p["size"]) == ("hoodie.old_name.old_name_record.p", 9, 4)
    assert inner(avro_field(result, "extra"))["namespace"] == "hoodie.old_name.old_name_record.extra"
    assert result == arrow_to_avro(avro_to_arrow(result), "old_name")
    parse(result)


@pytest.mark.parametrize(
    ("table_type", "incoming_type", "expected"),
    [
        (pa.int32(), pa.int64(), "long"),
        (pa.int32(), pa.float32(), "float"),
        (pa.int32(), pa.float64(), "double"),
        (pa.int64(), pa.float32(), "float"),
        (pa.int64(), pa.float64(), "double"),
        (pa.float32(), pa.float64(), "double"),
        (pa.string(), pa.binary(), "bytes"),
        (pa.binary(), pa.string(), "string"),
    ],
)
def test_evolve_widens_on_promotion(table_type: pa.DataType, incoming_type: pa.DataType, expected: str) -> None:
    table = avro_of(("k", pa.string()), ("c", table_type))
    result = evolve(table, avro_of(("k", pa.string()), ("c", incoming_type)))
    assert result["fields"][1] == {"name": "c", "type": ["null", expected], "default": None}


@pytest.mark.parametrize(
    ("table_type", "incoming_type"),
    [
        (pa.int64(), pa.int32()),
        (pa.int64(), pa.int8()),
        (pa.float32(), pa.int32()),
        (pa.float32(), pa.int64()),
        (pa.float64(), pa.int32()),
        (pa.float64(), pa.int64()),
        (pa.float64(), pa.float32()),
        (pa.decimal128(10, 2), pa.decimal128(8, 2)),
        (pa.decimal128(10, 2), pa.decimal128(10, 2)),
        (pa.timestamp("us", tz="UTC"), pa.timestamp("ms", tz="Asia/Tokyo")),
        (pa.date32(), pa.date32()),
        (pa.list_(pa.int64()), pa.list_(pa.int32())),
        (pa.map_(pa.string(), pa.float64()), pa.map_(pa.string(), pa.int32())),
    ],
)
def test_evolve_keeps_wider_table_type(table_type: pa.DataType, incoming_type: pa.DataType) -> None:
    table = avro_of(("c", table_type))
    assert evolve(table, avro_of(("c", incoming_type))) == table


def test_evolve_widens_decimal_precision() -> None:
    table = avro_of(("d", pa.decimal128(10, 2)))
    result = evolve(table, avro_of(("d", pa.decimal128(20, 2))))
    assert inner(result["fields"][0]) == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.t.t_record.d",
        "size": 9,
        "logicalType": "decimal",
        "precision": 20,
        "scale": 2,
    }
    parse(result)


@pytest.mark.parametrize(
    ("table_type", "incoming_type"),
    [
        (pa.decimal128(10, 2), pa.decimal128(10, 3)),
        (pa.decimal128(10, 2), pa.decimal128(12, 4)),
        (pa.decimal128(10, 2), pa.decimal128(8, 1)),
    ],
)
def test_evolve_rejects_decimal_scale_change(table_type: pa.DataType, incoming_type: pa.DataType) -> None:
    with pytest.raises(SchemaEvolutionError, match="column 'd': cannot change decimal scale"):
        evolve(avro_of(("d", table_type)), avro_of(("d", incoming_type)))


@pytest.mark.parametrize(
    ("table_type", "incoming_type", "message"),
    [
        (pa.string(), pa.int32(), "cannot change type from string to int"),
        (pa.int32(), pa.string(), "cannot change type from int to string"),
        (pa.int64(), pa.bool_(), "cannot change type from long to boolean"),
        (pa.float64(), pa.decimal128(10, 2), "cannot change type from double to decimal(10,2)"),
        (pa.decimal128(10, 2), pa.float64(), "cannot change type from decimal(10,2) to double"),
        (pa.date32(), pa.int64(), "cannot change type from date to long"),
        (pa.int32(), pa.date32(), "cannot change type from int to date"),
        (
            pa.timestamp("us", tz="UTC"),
            pa.timestamp("us"),
            "cannot change type from timestamp-micros to local-timestamp-micros",
        ),
        (pa.timestamp("us", tz="UTC"), pa.int64(), "cannot change type from timestamp-micros to long"),
        (pa.struct([("a", pa.int32())]), pa.int32(), "cannot change type from record to int"),
        (pa.int32(), pa.struct([("a", pa.int32())]), "cannot change type from int to record"),
        (pa.list_(pa.int32()), pa.int32(), "cannot change type from array to int"),
        (pa.list_(pa.int32()), pa.map_(pa.string(), pa.int32()), "cannot change type from array to map"),
        (pa.binary(), pa.int32(), "cannot change type from bytes to int"),
    ],
)
def test_evolve_rejects_incompatible_change(table_type: pa.DataType, incoming_type: pa.DataType, message: str) -> None:
    with pytest.raises(SchemaEvolutionError, match=re.escape(f"column 'c': {message}")):
        evolve(avro_of(("k", pa.int32()), ("c", table_type)), avro_of(("k", pa.int32()), ("c", incoming_type)))


def test_evolve_error_names_nested_column_path() -> None:
    table = fixture_schema()
    incoming_arrow = fixture_parquet_data_schema()
    narrowed = pa.struct([("field1", pa.string()), ("field2", pa.string()), ("child_struct", CHILD_STRUCT)])
    incoming = arrow_to_avro(incoming_arrow.set(incoming_arrow.get_field_index("structField"),
                                                pa.field("structField", narrowed)), TABLE)
    message = "column 'structField.field2': cannot change type from int to string"
    with pytest.raises(SchemaEvolutionError, match=re.escape(message)):
        evolve(table, incoming)


def test_evolve_error_path_through_arrays_and_maps() -> None:
    table = avro_of(("l", pa.list_(pa.struct([("x", pa.date32())]))), ("m", pa.map_(pa.string(), pa.int32())))
    bad_list = avro_of(("l", pa.list_(pa.struct([("x", pa.int64())]))), ("m", pa.map_(pa.string(), pa.int32())))
    message = "column 'l.element.x': cannot change type from date to long"
    with pytest.raises(SchemaEvolutionError, match=re.escape(message)):
        evolve(table, bad_list)
    bad_map = avro_of(("l", pa.list_(pa.struct([("x", pa.date32())]))), ("m", pa.map_(pa.string(), pa.string())))
    message = "column 'm.value': cannot change type from int to string"
    with pytest.raises(SchemaEvolutionError, match=re.escape(message)):
        evolve(table, bad_map)


def test_evolve_recurses_into_arrays_maps_and_records() -> None:
    table = avro_of(
        ("l", pa.list_(pa.int32())),
        ("m", pa.map_(pa.string(), pa.float32())),
        ("s", pa.struct([("a", pa.int32()), ("d", pa.decimal128(5, 1))])),
        ("ll", pa.list_(pa.list_(pa.struct([("z", pa.int32())])))),
    )
    incoming = avro_of(
        ("l", pa.list_(pa.int64())),
        ("m", pa.map_(pa.string(), pa.float64())),
        ("s", pa.struct([("a", pa.int64()), ("d", pa.decimal128(7, 1))])),
        ("ll", pa.list_(pa.list_(pa.struct([("z", pa.float64())])))),
    )
    result = evolve(table, incoming)
    assert result == incoming
    assert avro_to_arrow(result).equals(avro_to_arrow(incoming))
    parse(result)


def test_evolve_mixed_widen_keep_and_append() -> None:
    table = avro_of(("a", pa.int32()), ("b", pa.int64()), ("c", pa.string()))
    incoming = avro_of(("c", pa.string()), ("b", pa.int32()), ("a", pa.int64()), ("d", pa.bool_()))
    result = evolve(table, incoming)
    assert [(f["name"], f["type"]) for f in result["fields"]] == [
        ("a", ["null", "long"]),
        ("b", ["null", "long"]),
        ("c", ["null", "string"]),
        ("d", ["null", "boolean"]),
    ]


def test_evolve_table_union_order_and_non_nullable_columns() -> None:
    table = {
        "type": "record",
        "name": "x_record",
        "namespace": "hoodie.x",
        "fields": [
            {"name": "a", "type": ["int", "null"]},
            {"name": "b", "type": "int"},
            {"name": "c", "type": "int", "default": 7},
            {"name": "d", "type": "string", "doc": "kept"},
        ],
    }
    incoming = avro_of(("a", pa.int64()), ("b", pa.int64()), ("c", pa.int32()), ("d", pa.string()), table="x")
    result = evolve(table, incoming)
    assert result["fields"] == [
        {"name": "a", "type": ["long", "null"]},
        {"name": "b", "type": ["null", "long"], "default": None},
        {"name": "c", "type": ["int", "null"], "default": 7},
        {"name": "d", "type": ["null", "string"], "doc": "kept", "default": None},
    ]
    parse(result)


def test_evolve_external_table_types() -> None:
    """Types written by other engines: enums, uuid strings, millisecond timestamps, bytes decimals, references."""
    table = {
        "type": "record",
        "name": "ext",
        "namespace": "com.acme",
        "fields": [
            {"name": "color", "type": ["null", {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}]},
            {"name": "id", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
            {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
            {"name": "amt", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}]},
            {"name": "p1", "type": ["null", {"type": "record", "name": "P", "fields": [
                {"name": "x", "type": ["null", "int"], "default": None}]}]},
            {"name": "p2", "type": ["null", "P"]},
        ],
    }
    point = pa.struct([("x", pa.int32())])
    incoming = avro_of(
        ("color", pa.string()), ("id", pa.string()), ("ts", pa.timestamp("us", tz="UTC")),
        ("amt", pa.decimal128(9, 2)), ("p1", point), ("p2", point), table="ext",
    )
    with pytest.raises(SchemaEvolutionError, match="column 'color': cannot change type from enum to string"):
        evolve(table, incoming)
    table["fields"] = table["fields"][1:]
    incoming["fields"] = incoming["fields"][1:]
    assert evolve(table, incoming) == table

    wider = copy.deepcopy(incoming)
    wider["fields"][2] = avro_of(("amt", pa.decimal128(12, 2)), table="ext")["fields"][0]
    result = evolve(table, wider)
    assert inner(result["fields"][2]) == {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}

    evolved_ref = avro_of(("p1", point), ("p2", pa.struct([("x", pa.int64())])), table="ext")
    table["fields"] = table["fields"][3:]
    with pytest.raises(SchemaEvolutionError, match=r"column 'p2'.*named reference"):
        evolve(table, evolved_ref)


def test_evolve_result_is_readable_and_does_not_alias_inputs() -> None:
    table = fixture_schema()
    incoming = arrow_to_avro(fixture_parquet_data_schema().append(pa.field("extra", pa.int64())), TABLE)
    result = evolve(table, incoming)
    assert result["fields"][-1] == {"name": "extra", "type": ["null", "long"], "default": None}
    result["fields"][0]["name"] = "changed"
    result["fields"][-1]["name"] = "changed"
    assert table == fixture_schema()
    assert incoming["fields"][-1]["name"] == "extra"
    assert avro_to_arrow(canonical_json(evolve(table, incoming))).names[-1] == "extra"


def test_evolve_rejects_non_record_schemas() -> None:
    with pytest.raises(SchemaEvolutionError, match="not an Avro record"):
        evolve({"type": "array", "items": "int"}, avro_of(("a", pa.int32())))


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
