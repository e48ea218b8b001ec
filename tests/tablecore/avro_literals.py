"""Avro schema literals of a Hudi-written table (the fixture cow_complexkeygen_hivestyle) and helpers, shared by the
tests of tablecore.format.avro_schema and tablecore.format.schema_evolution."""

from __future__ import annotations

import copy
import json
from typing import Any

import fastavro
import pyarrow as pa

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


