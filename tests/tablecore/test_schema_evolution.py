"""Tests of tablecore.format.schema_evolution (pure, no Spark)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pyarrow as pa
import pytest

from tablecore.exceptions import SchemaEvolutionError
from tablecore.format.avro_schema import (
    arrow_to_avro,
    avro_to_arrow,
    canonical_json,
)
from tablecore.format.schema_evolution import evolve
from tests.tablecore.avro_literals import (
    CHILD_STRUCT,
    FIXTURE_CREATE_SCHEMA_JSON,
    TABLE,
    avro_field,
    fixture_parquet_data_schema,
    fixture_schema,
    inner,
    parse,
)

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


